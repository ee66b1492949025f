"""Retry backoff on every driver: the queue's ``_retry_backoff`` and the release delay.

Through :class:`~zaqar_lite.service.Messaging` with a manual clock, as the
conformance suite. A claim of a queue with ``_retry_backoff`` fixes the
message's wait after it (stored as its delay-expiry ``d``); expected times are
worked out by hand from the documented rule (``docs/api.rst``, "Retry backoff").
"""

from __future__ import annotations

from tests.storage.conformance.conftest import DLQ, P, Q, claim, listed, post

DOUBLING = {"base": 10, "factor": 2, "max": 300}


def backoff_queue(messaging, policy=None, **extra):
    """Create Q with a ``_retry_backoff`` (10 s, doubling, at most 300 s unless given)."""
    assert messaging.create_queue(P, Q, {"_retry_backoff": policy or DOUBLING, **extra}) is True


def test_a_lapsed_claim_leaves_the_message_delayed_for_the_wait(messaging, clock):
    backoff_queue(messaging)
    ids = post(messaging, "job")
    claim(messaging, ttl=60)
    clock.advance(65)  # the claim ended at +60: the 1st retry waits 10 s, to +70
    assert claim(messaging)[1] == []
    assert listed(messaging) == []
    assert listed(messaging, include_delayed=True) == ids
    stats, _ = messaging.queue_stats(P, Q)
    assert (stats.claimed, stats.delayed, stats.free) == (0, 1, 0)
    clock.advance(4.9)
    assert claim(messaging)[1] == []
    clock.advance(0.1)
    assert claim(messaging, ttl=60)[1] == ids


def test_the_nth_retry_waits_base_times_factor_to_the_n_minus_one(messaging, clock):
    backoff_queue(messaging)
    ids = post(messaging, "job")
    claim(messaging, ttl=60)
    clock.advance(70)  # 1st claim ended at +60, waited 10 s
    assert claim(messaging, ttl=60)[1] == ids
    clock.advance(60 + 19.5)  # 2nd claim ended; the 2nd retry waits 20 s
    assert claim(messaging)[1] == []
    clock.advance(0.5)
    found = messaging.get_messages(P, Q, ids)[0][0]
    assert claim(messaging)[1] == ids
    assert found.claim_count == 2


def test_a_claimed_message_is_listed_as_claimed_not_delayed(messaging):
    backoff_queue(messaging)
    ids = post(messaging, "job")
    claim(messaging, ttl=60)
    assert listed(messaging, include_claimed=True) == ids
    assert listed(messaging) == []
    stats, _ = messaging.queue_stats(P, Q)
    assert (stats.claimed, stats.delayed, stats.free) == (1, 0, 0)


def test_a_release_starts_the_wait_at_the_release(messaging, clock):
    backoff_queue(messaging)
    ids = post(messaging, "job")
    claim_id, _ = claim(messaging, ttl=60)
    clock.advance(5)
    messaging.release_message(P, Q, ids[0], claim_id, {"error": "boom", "error_type": "Crash"})
    clock.advance(9.5)
    assert claim(messaging)[1] == []
    assert listed(messaging, include_delayed=True) == ids
    clock.advance(0.5)
    assert claim(messaging)[1] == ids


def test_a_released_claim_starts_each_messages_wait_now(messaging, clock):
    backoff_queue(messaging)
    ids = post(messaging, "a", "b")
    claim_id, _ = claim(messaging, ttl=60)
    clock.advance(20)
    messaging.release_claim(P, Q, claim_id)
    clock.advance(9)
    assert claim(messaging)[1] == []
    clock.advance(1)
    assert claim(messaging)[1] == ids


def test_a_renewal_moves_the_wait_with_the_claim(messaging, clock):
    backoff_queue(messaging)
    ids = post(messaging, "job")
    claim_id, _ = claim(messaging, ttl=60)
    clock.advance(50)
    messaging.renew_claim(P, Q, claim_id, 120, 60)  # ends at +170; the wait to +180
    clock.advance(129)
    assert claim(messaging)[1] == []
    clock.advance(1)
    assert claim(messaging)[1] == ids


def test_a_release_delay_holds_the_message_back_on_any_queue(messaging, clock):
    ids = post(messaging, "job")
    claim_id, _ = claim(messaging, ttl=60)
    messaging.release_message(P, Q, ids[0], claim_id, None, 30)
    clock.advance(29)
    assert claim(messaging)[1] == []
    stats, _ = messaging.queue_stats(P, Q)
    assert (stats.claimed, stats.delayed, stats.free) == (0, 1, 0)
    clock.advance(1)
    assert claim(messaging)[1] == ids


def test_a_release_delay_replaces_the_queues_wait(messaging, clock):
    backoff_queue(messaging, {"base": 100})
    first, second = post(messaging, "a", "b")
    claim_id, _ = claim(messaging, ttl=60)
    messaging.release_message(P, Q, first, claim_id, None, 0)
    messaging.release_message(P, Q, second, claim_id, None, 5)
    assert claim(messaging, limit=1)[1] == [first]
    clock.advance(5)
    assert claim(messaging)[1] == [second]


def test_jitter_shortens_the_wait_by_the_drawn_fraction(messaging, clock):
    backoff_queue(messaging, {"base": 10, "jitter": 0.5})
    messaging.draw = lambda: 0.5  # the wait is 10 s less a quarter: 7.5 s
    ids = post(messaging, "job")
    claim(messaging, ttl=60)
    clock.advance(67.4)
    assert claim(messaging)[1] == []
    clock.advance(0.1)
    assert claim(messaging)[1] == ids


def test_the_claim_that_exhausts_the_count_leaves_no_wait_and_the_message_goes_to_the_dlq(messaging, clock):
    messaging.create_queue(P, DLQ, {})
    backoff_queue(messaging, {"base": 100}, _max_claim_count=2, _dead_letter_queue=DLQ)
    ids = post(messaging, "job")
    claim(messaging, ttl=60)
    clock.advance(160)  # 1st claim ended at +60, waited 100 s
    assert claim(messaging, ttl=60)[1] == ids
    clock.advance(60)  # the 2nd claim, the last one allowed, ends: no wait, on to the DLQ
    assert claim(messaging)[1] == []
    assert listed(messaging, queue=DLQ) == ids
    assert listed(messaging, include_delayed=True) == []


def test_the_sweep_moves_an_exhausted_message_whose_claim_lapsed(messaging, clock):
    messaging.create_queue(P, DLQ, {})
    backoff_queue(messaging, {"base": 100}, _max_claim_count=1, _dead_letter_queue=DLQ)
    ids = post(messaging, "job")
    claim(messaging, ttl=60)
    clock.advance(60)
    assert messaging.sweep().dead_lettered == 1
    assert listed(messaging, queue=DLQ) == ids


def test_a_queue_without_the_policy_stores_no_wait(messaging, clock):
    ids = post(messaging, "job")
    claim(messaging, ttl=60)
    assert messaging.get_messages(P, Q, ids)[0][0].delay_until == 0.0
    clock.advance(60)
    assert claim(messaging)[1] == ids


def test_stats_count_a_lapsed_claims_message_as_delayed_before_any_claim_looks(messaging, clock):
    backoff_queue(messaging)
    ids = post(messaging, "job", "other")
    claim(messaging, limit=1, ttl=60)
    clock.advance(61)  # no claim or pop runs between the lapse and the stats
    stats, _ = messaging.queue_stats(P, Q)
    assert (stats.claimed, stats.delayed, stats.free) == (0, 1, 1)
    assert listed(messaging) == ids[1:]
    assert listed(messaging, include_delayed=True) == ids
