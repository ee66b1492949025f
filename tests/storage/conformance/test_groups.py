"""Ordered message groups on every driver: a group's messages out with one claim at a time, in post order."""

from __future__ import annotations

import threading

from zaqar_lite import errors
from zaqar_lite.claims import policy

P, Q, DLQ = "project-a", "orders", "orders-dlq"
CLIENT = "5f0cbf39-7d2c-4b1f-8f0e-2a4a7fd1b3a1"


def post(messaging, *items, **fields):
    """Post ``(body, group)`` pairs with the given optional fields; return their ids by body."""
    messages = [{"body": body, "ttl": fields.get("ttl"), "delay": fields.get("delay"), "dlq_eligible": True,
                 "group": group} for body, group in items]
    return dict(zip([b for b, _ in items], messaging.post(P, Q, CLIENT, messages, 10), strict=True))


def claim(messaging, limit=10, ttl=60):
    """Claim; return (claim id, claimed bodies)."""
    claim_id, claimed, _ = messaging.claim(P, Q, limit, ttl, 60)
    return claim_id, [m.body for m in claimed]


def test_a_claim_takes_several_messages_of_a_group_in_order_group_by_group(messaging):
    post(messaging, ("a1", "a"), ("b1", "b"), ("a2", "a"), ("n1", None), ("b2", "b"), ("a3", "a"))
    assert claim(messaging)[1] == ["a1", "a2", "a3", "b1", "b2", "n1"]
    assert claim(messaging)[1] == []


def test_a_claim_fills_up_from_one_group_before_the_next(messaging):
    post(messaging, ("a1", "a"), ("b1", "b"), ("a2", "a"), ("a3", "a"), ("b2", "b"))
    assert claim(messaging, limit=2)[1] == ["a1", "a2"]
    assert claim(messaging, limit=2)[1] == ["b1", "b2"]  # a is held by its a1 and a2
    assert claim(messaging, limit=2)[1] == []


def test_a_group_stays_held_while_any_of_its_messages_is_claimed(messaging):
    ids = post(messaging, ("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"))
    claim_id, bodies = claim(messaging, limit=2)
    assert bodies == ["a1", "a2"]
    messaging.delete_message(P, Q, ids["a1"], claim_id)
    assert claim(messaging)[1] == ["b1"]  # a2 is still claimed: a3 waits
    messaging.delete_message(P, Q, ids["a2"], claim_id)
    assert claim(messaging)[1] == ["a3"]


def test_a_first_message_released_from_a_batch_is_handed_out_again_alone(messaging):
    ids = post(messaging, ("a1", "a"), ("a2", "a"), ("a3", "a"))
    first_claim, bodies = claim(messaging)
    assert bodies == ["a1", "a2", "a3"]
    messaging.release_message(P, Q, ids["a3"], first_claim, None, 0)
    assert claim(messaging)[1] == []  # a1 and a2 are still claimed: a3 waits for them
    messaging.release_message(P, Q, ids["a1"], first_claim, None, 0)
    second_claim, claimed, _ = messaging.claim(P, Q, 10, 60, 60)
    assert [(m.body, m.claim_count) for m in claimed] == [("a1", 2)]  # back: its group is available again
    messaging.delete_message(P, Q, ids["a2"], first_claim)
    assert claim(messaging)[1] == []  # a1 is claimed again
    messaging.release_message(P, Q, ids["a1"], second_claim, None, 0)
    _, claimed, _ = messaging.claim(P, Q, 10, 60, 60)
    assert [(m.body, m.claim_count) for m in claimed] == [("a1", 3), ("a3", 2)]


def test_a_group_handed_back_comes_after_a_group_waiting_since_earlier(messaging, clock):
    post(messaging, ("a1", "a"), ("b1", "b"), ("a2", "a"))
    assert claim(messaging, limit=1, ttl=10)[1] == ["a1"]
    clock.advance(11)  # a1 is back since its claim ended; b1 has waited since it was posted
    assert claim(messaging)[1] == ["b1", "a1", "a2"]


def test_a_lapsed_claim_gives_its_group_back_in_order(messaging, clock):
    post(messaging, ("a1", "a"), ("a2", "a"), ("a3", "a"))
    assert claim(messaging, limit=2, ttl=60)[1] == ["a1", "a2"]
    clock.advance(30)
    assert claim(messaging)[1] == []
    clock.advance(31)
    assert claim(messaging)[1] == ["a1", "a2", "a3"]


def test_a_released_claim_is_handed_out_again_before_the_rest_of_its_group(messaging):
    post(messaging, ("a1", "a"), ("a2", "a"), ("a3", "a"))
    claim_id, bodies = claim(messaging, limit=2)
    assert bodies == ["a1", "a2"]
    messaging.release_claim(P, Q, claim_id)
    _, claimed, _ = messaging.claim(P, Q, 10, 60, 60)
    assert [(m.body, m.claim_count) for m in claimed] == [("a1", 2), ("a2", 2), ("a3", 1)]


def test_a_delayed_message_holds_back_the_rest_of_its_group_until_it_is_due(messaging, clock):
    post(messaging, ("a1", "a"))
    post(messaging, ("a2", "a"), delay=30)
    post(messaging, ("a3", "a"), ("b1", "b"))
    assert claim(messaging)[1] == ["a1", "b1"]
    clock.advance(61)  # a1 and b1 come back; a2 is due
    assert claim(messaging)[1] == ["a1", "a2", "a3", "b1"]


def test_a_delayed_first_message_holds_its_group_back_until_it_is_due(messaging, clock):
    post(messaging, ("a1", "a"), delay=30)
    post(messaging, ("a2", "a"), ("b1", "b"))
    assert claim(messaging)[1] == ["b1"]
    clock.advance(30)
    assert claim(messaging)[1] == ["a1", "a2"]


def test_pop_takes_a_groups_messages_in_order_up_to_its_limit(messaging):
    post(messaging, ("a1", "a"), ("b1", "b"), ("a2", "a"), ("a3", "a"))
    popped, _ = messaging.pop(P, Q, 2)
    assert [m.body for m in popped] == ["a1", "a2"]
    popped, _ = messaging.pop(P, Q, 10)
    assert [m.body for m in popped] == ["b1", "a3"]  # b1 was posted before a3


def test_pop_takes_nothing_of_a_held_group(messaging):
    post(messaging, ("a1", "a"), ("a2", "a"), ("b1", "b"))
    assert claim(messaging, limit=1)[1] == ["a1"]
    popped, _ = messaging.pop(P, Q, 10)
    assert [m.body for m in popped] == ["b1"]


def test_a_failing_message_is_dead_lettered_with_its_group_and_the_group_moves_on(messaging):
    messaging.create_queue(P, DLQ, {})
    messaging.create_queue(P, Q, {"_max_claim_count": 1, "_dead_letter_queue": DLQ})
    post(messaging, ("a1", "a"), ("a2", "a"))
    claim_id, bodies = claim(messaging, limit=1)
    assert bodies == ["a1"]
    messaging.release_claim(P, Q, claim_id)
    assert claim(messaging)[1] == ["a2"]
    moved, _ = messaging.list_messages(P, DLQ, client_id=CLIENT, marker=None, limit=10, echo=True,
                                       include_claimed=True, include_delayed=True)
    assert [(m.body, m.group, m.dead_letter["group"]) for m in moved] == [("a1", None, "a")]


def test_messages_keep_their_group(messaging):
    ids = post(messaging, ("a1", "a"), ("n1", None))
    found, _ = messaging.get_messages(P, Q, list(ids.values()))
    assert {m.body: m.group for m in found} == {"a1": "a", "n1": None}


def test_concurrent_claimers_take_each_group_in_order_and_one_at_a_time(messaging, other_worker, clock):
    post(messaging, *[(f"{g}{n}", g) for n in range(3) for g in "abcd"])
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def consume(service, name):
        for _ in range(40):
            claim_id, claimed, _ = service.claim(P, Q, 10, 60, 60)
            with lock:
                out = [m.body for m in claimed]
                seen.extend((body, name) for body in out)
            for m in claimed:
                try:
                    service.delete_message(P, Q, m.id, claim_id)
                except errors.ZaqarLiteError:
                    pass
            if len(seen) >= 12:
                return

    threads = [threading.Thread(target=consume, args=(s, n))
               for s, n in ((messaging, "one"), (other_worker, "two"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    clock.advance(61)  # a message a claim wrote but lost its group's race for (Swift) is back in order
    consume(messaging, "after")
    bodies = [body for body, _ in seen]
    assert sorted(bodies) == sorted(f"{g}{n}" for n in range(3) for g in "abcd")
    for group in "abcd":
        assert [b for b in bodies if b[0] == group] == [f"{group}0", f"{group}1", f"{group}2"]


# -- groups with retry backoff, dedup ids and trace context ----------------------

BACKOFF = {"_retry_backoff": {"base": 10, "factor": 2, "max": 300}}
TRACE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "rojo=1"}


def test_a_backoff_wait_after_a_lapsed_claim_holds_its_group(messaging, clock):
    messaging.create_queue(P, Q, BACKOFF)
    post(messaging, ("a1", "a"), ("a2", "a"), ("n1", None))
    assert claim(messaging, limit=1, ttl=60)[1] == ["a1"]
    clock.advance(61)  # the claim ended at +60; the 1st retry of a1 waits 10 s, to +70
    assert claim(messaging)[1] == ["n1"]
    clock.advance(9)
    assert claim(messaging)[1] == ["a1", "a2"]


def test_a_message_released_with_a_delay_holds_its_group_for_the_delay(messaging, clock):
    ids = post(messaging, ("a1", "a"), ("a2", "a"), ("b1", "b"))
    claim_id, bodies = claim(messaging)
    assert bodies == ["a1", "a2", "b1"]
    messaging.release_message(P, Q, ids["a1"], claim_id, None, 30)
    messaging.delete_message(P, Q, ids["a2"], claim_id)
    messaging.delete_message(P, Q, ids["b1"], claim_id)
    assert claim(messaging)[1] == []
    clock.advance(29)
    assert claim(messaging)[1] == []
    clock.advance(1)
    assert claim(messaging)[1] == ["a1"]


def test_a_message_deleted_during_its_backoff_wait_lets_the_next_of_its_group_in(messaging, clock):
    messaging.create_queue(P, Q, BACKOFF)
    ids = post(messaging, ("a1", "a"), ("a2", "a"))
    assert claim(messaging, limit=1, ttl=60)[1] == ["a1"]
    clock.advance(65)  # a1 waits until +70
    messaging.delete_message(P, Q, ids["a1"], None)
    assert claim(messaging)[1] == ["a2"]


def test_a_dead_letter_of_a_traced_group_keeps_the_group_the_trace_and_the_dedup_id(messaging):
    messaging.create_queue(P, DLQ, {})
    messaging.create_queue(P, Q, {"_max_claim_count": 1, "_dead_letter_queue": DLQ, **BACKOFF})
    items = [{"body": body, "ttl": None, "delay": None, "dlq_eligible": True, "group": "a", "dedup_id": body}
             for body in ("a1", "a2")]
    first, _ = messaging.post(P, Q, CLIENT, items, 10, TRACE)
    claim_id, bodies = claim(messaging, limit=1)
    assert bodies == ["a1"]
    messaging.release_claim(P, Q, claim_id)  # the last claim allowed: no wait, moved by the next claim
    assert claim(messaging)[1] == ["a2"]
    moved, _ = messaging.list_messages(P, DLQ, client_id=CLIENT, marker=None, limit=10, echo=True,
                                       include_claimed=True, include_delayed=True)
    assert [(m.id, m.group, m.dedup_id, m.trace) for m in moved] == [(first, None, "a1", TRACE)]
    block = policy.provenance(moved[0])
    assert (block["group"], block["trace"]) == ("a", {
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "rojo=1"})
