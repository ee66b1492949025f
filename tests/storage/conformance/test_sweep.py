"""The sweep on every driver: exhausted and expired messages, and which queues it visits."""

from __future__ import annotations

import pytest

from tests.storage.conformance.conftest import DLQ, P, Q, claim, listed, post, with_dlq


def test_sweeper_moves_exhausted_messages_whose_claim_lapsed(messaging, clock):
    with_dlq(messaging, max_claims=1)
    doomed, = post(messaging, "poison")
    claim(messaging, ttl=60)
    messaging.sweep()
    assert listed(messaging, queue=DLQ) == []
    clock.advance(61)
    result = messaging.sweep()
    assert result.dead_lettered == 1
    assert listed(messaging, queue=DLQ) == [doomed]
    assert listed(messaging, include_claimed=True) == []


#: drivers that keep each queue's due time (the others' sweep visits every queue)
KEEP_DUE_TIMES = {"sqlite", "redis", "redis_cluster", "mongodb", "pools"}


def swept_queues(messaging, monkeypatch):
    """Count the queues each sweep asks the store to sweep: return the list they are added to."""
    swept = []
    store = messaging.storage
    sweep_queue = store.sweep_queue

    def counted(project, queue, *args):
        swept.append(queue)
        return sweep_queue(project, queue, *args)
    monkeypatch.setattr(store, "sweep_queue", counted)
    return swept


@pytest.fixture
def visited(driver_uri, request):
    """Assert which queues a sweep visited: exactly the due ones on a store that keeps due times,
    at least those on one that does not (Swift: its sweep visits every queue)."""
    exact = request.node.callspec.params["driver_uri"] in KEEP_DUE_TIMES

    def check(swept, due):
        if exact:
            assert sorted(swept) == sorted(due)
        else:
            assert set(due) <= set(swept)
    return check


@pytest.mark.parametrize("idle", [3, 30])
def test_a_sweep_visits_the_queues_with_something_due_whatever_the_idle_queues(
        messaging, clock, monkeypatch, visited, idle):
    for n in range(idle):
        messaging.create_queue(P, f"empty-{n}", {})
        post(messaging, "young", queue=f"busy-{n}", ttl=3600)
    post(messaging, "old", queue="expiring", ttl=60)
    post(messaging, "claimed", queue="claiming", ttl=3600)
    claim(messaging, queue="claiming", ttl=60)
    swept = swept_queues(messaging, monkeypatch)
    messaging.sweep()
    visited(swept, [])
    clock.advance(61)
    swept.clear()
    assert messaging.sweep().discarded == 1
    visited(swept, ["claiming", "expiring"])
    swept.clear()
    messaging.sweep()
    visited(swept, [])
    assert listed(messaging, queue="claiming") != []


def test_a_queue_is_due_at_once_after_a_release_or_a_metadata_change(
        messaging, clock, monkeypatch, visited):
    messaging.create_queue(P, DLQ, {})
    messaging.create_queue(P, Q, {"_dead_letter_queue": DLQ})
    first, second, third = post(messaging, 1, 2, 3, ttl=3600)
    claim_id, _ = claim(messaging, limit=1, ttl=600)
    claim(messaging, limit=1, ttl=600)
    swept = swept_queues(messaging, monkeypatch)
    messaging.sweep()
    visited(swept, [])
    # the first has had its one claim: once released, it is the sweep's at once
    messaging.update_queue(P, Q, [("add", "_max_claim_count", 1)])
    swept.clear()
    messaging.sweep()
    visited(swept, [Q])
    messaging.release_message(P, Q, first, claim_id, None)
    swept.clear()
    assert messaging.sweep().dead_lettered == 1
    visited(swept, [Q])
    assert listed(messaging, queue=DLQ) == [first]
    # the second's claim is still running: nothing to do until it ends
    swept.clear()
    messaging.sweep()
    visited(swept, [])
    clock.advance(601)
    assert messaging.sweep().dead_lettered == 1
    assert listed(messaging, queue=DLQ) == [first, second]
    assert listed(messaging) == [third]


# -- expiry ------------------------------------------------------------------

def test_sweeper_discards_expired_messages_without_dead_letter_on_expiry(messaging, clock):
    with_dlq(messaging, max_claims=5)
    post(messaging, "old", ttl=60)
    clock.advance(61)
    assert messaging.sweep().discarded == 1
    assert listed(messaging, queue=DLQ) == []
    stats, _ = messaging.queue_stats(P, Q)
    assert stats.total == 0


def test_expired_messages_move_to_the_dlq_with_reason_expired(messaging, clock):
    with_dlq(messaging, max_claims=5, _dead_letter_on_expiry=True, _dead_letter_queue_messages_ttl=3600)
    old, = post(messaging, "old", ttl=60)
    keep, = post(messaging, "young", ttl=600)
    clock.advance(61)
    assert messaging.sweep().dead_lettered == 1
    moved = messaging.get_messages(P, DLQ, [old])[0][0]
    assert moved.dead_letter["reason"] == "expired"
    assert moved.expires == clock() + 3600
    assert (moved.ttl(), moved.age(clock())) == (3661, 61)
    assert listed(messaging) == [keep]


def test_an_expired_message_moved_without_dead_letter_ttl_lives_its_own_ttl_again(messaging, clock):
    with_dlq(messaging, max_claims=5, _dead_letter_on_expiry=True)
    old, = post(messaging, "old", ttl=90)
    clock.advance(95)
    assert messaging.sweep().dead_lettered == 1
    moved = messaging.get_messages(P, DLQ, [old])[0][0]
    # the ttl counts from the post, as the age does: never below the age of a live message
    assert (moved.expires, moved.ttl(), moved.age(clock())) == (clock() + 90, 185, 95)


def test_expired_message_not_eligible_is_discarded_even_with_dead_letter_on_expiry(messaging, clock):
    with_dlq(messaging, max_claims=5, _dead_letter_on_expiry=True)
    post(messaging, "old", ttl=60, dlq_eligible=False)
    clock.advance(61)
    assert messaging.sweep().discarded == 1
    assert listed(messaging, queue=DLQ) == []
