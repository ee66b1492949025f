"""Deduplicated posts on every driver: the window, duplicates in one post, and two posts racing."""

from __future__ import annotations

import threading

from zaqar_lite.models import Message

P, Q = "project-a", "orders"
CLIENT = "5f0cbf39-7d2c-4b1f-8f0e-2a4a7fd1b3a1"


def post(messaging, *items, queue=Q):
    """Post ``(body, dedup_id)`` pairs; return the ids they are acknowledged with."""
    messages = [{"body": body, "ttl": None, "delay": None, "dlq_eligible": True, "dedup_id": dedup_id}
                for body, dedup_id in items]
    return messaging.post(P, queue, CLIENT, messages, 10)


def bodies(messaging, queue=Q):
    """Return the bodies of a queue's messages, in post order."""
    found, _ = messaging.list_messages(P, queue, client_id=CLIENT, marker=None, limit=20, echo=True,
                                       include_claimed=True, include_delayed=True)
    return [m.body for m in found]


def test_a_second_post_of_an_id_is_answered_with_the_first_message_and_stores_nothing(messaging, clock):
    first, = post(messaging, ("a", "order-1"))
    clock.advance(299)
    again, other = post(messaging, ("b", "order-1"), ("c", "order-2"))
    assert again == first
    assert other != first
    assert bodies(messaging) == ["a", "c"]


def test_the_id_is_forgotten_when_the_default_window_of_300_seconds_ends(messaging, clock):
    first, = post(messaging, ("a", "order-1"))
    clock.advance(300)
    second, = post(messaging, ("b", "order-1"))
    assert second != first
    assert bodies(messaging) == ["a", "b"]
    clock.advance(299)
    assert post(messaging, ("c", "order-1")) == [second]


def test_the_queue_sets_its_window_with_dedup_window(messaging, clock):
    messaging.create_queue(P, Q, {"_dedup_window": 10})
    first, = post(messaging, ("a", "x"))
    clock.advance(9.5)
    assert post(messaging, ("b", "x")) == [first]
    clock.advance(0.5)
    assert post(messaging, ("c", "x")) != [first]
    assert bodies(messaging) == ["a", "c"]


def test_an_id_whose_message_was_deleted_is_still_deduplicated_within_its_window(messaging):
    first, = post(messaging, ("a", "order-1"))
    messaging.delete_message(P, Q, first, None)
    assert post(messaging, ("b", "order-1")) == [first]
    assert bodies(messaging) == []


def test_a_post_repeating_an_id_stores_its_first_message_only(messaging):
    ids = post(messaging, ("a", "x"), ("b", None), ("c", "x"), ("d", None))
    assert ids[2] == ids[0]
    assert len(set(ids)) == 3
    assert bodies(messaging) == ["a", "b", "d"]


def test_ids_are_remembered_per_queue_and_forgotten_with_the_queue(messaging):
    first, = post(messaging, ("a", "x"))
    assert post(messaging, ("b", "x"), queue="other") != [first]
    messaging.delete_queue(P, Q)
    assert post(messaging, ("c", "x")) != [first]
    assert bodies(messaging) == ["c"]


def test_the_message_keeps_its_dedup_id_and_a_message_without_one_has_none(messaging):
    with_id, without = post(messaging, ("a", "order-1"), ("b", None))
    found, _ = messaging.get_messages(P, Q, [with_id, without])
    assert {m.id: m.dedup_id for m in found} == {with_id: "order-1", without: None}


def test_of_two_concurrent_posts_of_one_id_exactly_one_stores(messaging, other_worker):
    for round_ in range(5):
        start, answers = threading.Barrier(2), {}

        def send(service, name, round_=round_, start=start, answers=answers):
            start.wait()
            answers[name] = post(service, (f"{name}-{round_}", f"id-{round_}"))[0]

        threads = [threading.Thread(target=send, args=(s, n))
                   for s, n in ((messaging, "mine"), (other_worker, "theirs"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert answers["mine"] == answers["theirs"]
    stored = bodies(messaging)
    assert len(stored) == 5
    assert sorted(b.rsplit("-", 1)[1] for b in stored) == ["0", "1", "2", "3", "4"]


def test_a_message_posted_without_dedup_fields_is_stored_as_before(driver, clock):
    message = Message(id="m-1", body={"k": 1}, created=clock.now, expires=clock.now + 60)
    assert driver.post_messages(P, Q, [message], clock.now) == ["m-1"]
    assert driver.post_messages(P, Q, [], clock.now) == []
