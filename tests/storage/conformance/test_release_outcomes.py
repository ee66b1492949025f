"""Release outcomes on every driver: retry counts, postpone does not, reject dead-letters at once.

Through :class:`~zaqar_lite.service.Messaging` with a manual clock, as the
conformance suite; expected values are literals of docs/api.rst, "Release one
message (zaqar-lite extension)".
"""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from tests.storage.conformance.conftest import DLQ, P, Q, claim, listed, post, with_dlq
from zaqar_lite import errors

TIMEOUT = {"error": "rate limited by the payment API", "error_type": "RateLimited"}


def stored(messaging, message_id, queue=Q):
    """Return the message as stored in ``queue``, or None."""
    found, _ = messaging.get_messages(P, queue, [message_id])
    return found[0] if found else None


def test_a_release_without_an_outcome_is_a_retry_that_counts(messaging, clock):
    with_dlq(messaging, max_claims=2)
    message, = post(messaging, "job")
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, message, claim_id, None)
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, message, claim_id, TIMEOUT, None, "retry")
    assert stored(messaging, message).claim_count == 2
    assert claim(messaging)[1] == []  # its two claims are used up: moved on the way
    assert listed(messaging, queue=DLQ) == [message]


def test_a_postponed_claim_does_not_count_and_the_message_waits_its_delay(messaging, clock):
    with_dlq(messaging, max_claims=2)
    message, = post(messaging, "job")
    for _ in range(5):  # postponed five times: never nearer its dead-letter queue
        claim_id, claimed = claim(messaging)
        assert claimed == [message]
        messaging.release_message(P, Q, message, claim_id, None, 30, "postpone")
        assert stored(messaging, message).claim_count == 0
        assert claim(messaging)[1] == []
        assert listed(messaging, include_delayed=True) == [message]
        clock.advance(29.9)
        assert claim(messaging)[1] == []
        clock.advance(0.1)
    claim_id, claimed = claim(messaging)
    assert claimed == [message]
    assert stored(messaging, message).claim_count == 1
    assert listed(messaging, queue=DLQ) == []


def test_each_postpone_is_in_the_failure_history_with_a_running_count(messaging, clock):
    with_dlq(messaging, max_claims=3)
    message, = post(messaging, "job")
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, message, claim_id, TIMEOUT, 10, "postpone")
    clock.advance(10)
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, message, claim_id, None, 0, "postpone")
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, message, claim_id, {"error": "boom", "error_type": "Crash"})
    failures = stored(messaging, message).failures
    assert failures == [
        {"at": "2100-01-01T00:00:00Z", "claim_count": 0, "error_type": "RateLimited",
         "error": "rate limited by the payment API", "outcome": "postpone", "postponed": 1},
        {"at": "2100-01-01T00:00:10Z", "claim_count": 0, "error_type": None, "error": None,
         "outcome": "postpone", "postponed": 2},
        {"at": "2100-01-01T00:00:10Z", "claim_count": 1, "error_type": "Crash", "error": "boom",
         "postponed": 2},
    ]


def test_the_running_postpone_count_outlives_the_bounded_history(messaging, clock):
    with_dlq(messaging, max_claims=3)
    message, = post(messaging, "job")
    for _ in range(12):  # the history keeps the last 10 entries
        claim_id, _ = claim(messaging)
        messaging.release_message(P, Q, message, claim_id, None, 0, "postpone")
    failures = stored(messaging, message).failures
    assert len(failures) == 10
    assert failures[-1]["postponed"] == 12


def test_a_rejected_message_is_dead_lettered_at_once_whatever_its_count(messaging, clock):
    with_dlq(messaging, max_claims=5)
    poison, fine = post(messaging, "poison", "fine")
    claim_id, claimed = claim(messaging, limit=2)
    assert claimed == [poison, fine]
    clock.advance(3)
    messaging.release_message(P, Q, poison, claim_id, {"error": "cannot parse", "error_type": "ValueError"},
                              None, "reject")
    assert stored(messaging, poison) is None
    moved = stored(messaging, poison, DLQ)
    assert moved.body == "poison"
    assert moved.claim_count == 1
    assert moved.is_claimed(clock()) is False
    assert moved.dead_letter["reason"] == "rejected"
    assert moved.dead_letter["source_queue"] == Q
    assert moved.dead_letter["dead_lettered_at"] == clock()
    assert moved.dead_letter["last_claim_id"] == claim_id
    assert moved.failures == [{"at": "2100-01-01T00:00:03Z", "claim_count": 1, "error_type": "ValueError",
                               "error": "cannot parse", "outcome": "reject"}]
    assert claim(messaging, queue=DLQ)[1] == [poison]
    # the claim keeps its other message; the rejected one is no longer held by it
    _, held, _ = messaging.get_claim(P, Q, claim_id)
    assert [m.id for m in held] == [fine]


def test_a_rejected_message_takes_the_dead_letter_ttl(messaging, clock):
    with_dlq(messaging, max_claims=5, _dead_letter_queue_messages_ttl=7200)
    poison, = post(messaging, "poison", ttl=600)
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, poison, claim_id, None, None, "reject")
    assert stored(messaging, poison, DLQ).expires == clock() + 7200


def test_a_queue_with_a_dead_letter_queue_and_no_max_claim_count_takes_rejects_too(messaging, clock):
    messaging.create_queue(P, DLQ, {})
    messaging.create_queue(P, Q, {"_dead_letter_queue": DLQ})
    poison, = post(messaging, "poison")
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, poison, claim_id, None, None, "reject")
    assert listed(messaging, queue=DLQ) == [poison]


def test_a_rejected_message_is_discarded_without_a_dead_letter_queue(messaging, clock):
    poison, fine = post(messaging, "poison", "fine")
    claim_id, _ = claim(messaging, limit=1)
    before = REGISTRY.get_sample_value("zaqar_lite_messages_discarded_total") or 0.0
    messaging.release_message(P, Q, poison, claim_id, TIMEOUT, None, "reject")
    assert stored(messaging, poison) is None
    assert listed(messaging, include_claimed=True, include_delayed=True) == [fine]
    assert REGISTRY.get_sample_value("zaqar_lite_messages_discarded_total") - before == 1


def test_a_rejected_message_not_eligible_for_the_dead_letter_queue_is_discarded(messaging, clock):
    with_dlq(messaging, max_claims=5)
    poison, = post(messaging, "poison", dlq_eligible=False)
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, poison, claim_id, None, None, "reject")
    assert stored(messaging, poison) is None
    assert listed(messaging, queue=DLQ) == []


def test_a_reject_counts_an_arrival_labelled_with_both_queues(messaging, clock):
    with_dlq(messaging, max_claims=5)
    poison, = post(messaging, "poison")
    claim_id, _ = claim(messaging)
    labels = {"reason": "rejected", "project": P, "queue": Q, "dead_letter_queue": DLQ}
    before = REGISTRY.get_sample_value("zaqar_lite_messages_dead_lettered_total", labels) or 0.0
    messaging.release_message(P, Q, poison, claim_id, None, None, "reject")
    assert REGISTRY.get_sample_value("zaqar_lite_messages_dead_lettered_total", labels) - before == 1


def test_outcomes_keep_the_claim_rules(messaging, clock):
    with_dlq(messaging, max_claims=5)
    first, second = post(messaging, "a", "b")
    claim_id, _ = claim(messaging, limit=1)
    for outcome, delay in (("postpone", 10), ("reject", None)):
        with pytest.raises(errors.MessageNotClaimed):
            messaging.release_message(P, Q, second, claim_id, None, delay, outcome)
        with pytest.raises(errors.InvalidClaim):
            messaging.release_message(P, Q, first, "no-such-claim", None, delay, outcome)
        with pytest.raises(errors.MessageDoesNotExist):
            messaging.release_message(P, Q, "absent", claim_id, None, delay, outcome)
    assert stored(messaging, first).claim_count == 1
    assert listed(messaging, queue=DLQ) == []


def test_the_dead_letter_block_counts_the_outcomes(messaging, clock):
    from zaqar_lite.claims.policy import provenance

    with_dlq(messaging, max_claims=5)
    poison, = post(messaging, "poison")
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, poison, claim_id, None, 0, "postpone")
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, poison, claim_id, None)
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, poison, claim_id, None, None, "reject")
    block = provenance(stored(messaging, poison, DLQ))
    assert block["claim_count"] == 2
    assert block["outcomes"] == {"retry": 1, "postpone": 1, "reject": 1}


def test_a_claim_released_with_an_outcome_applies_it_to_each_message_it_holds(messaging, clock):
    with_dlq(messaging, max_claims=5)
    first, second, third = post(messaging, "a", "b", "c")
    claim_id, _ = claim(messaging, limit=2)
    messaging.release_claim(P, Q, claim_id, "postpone", 60)
    assert [stored(messaging, m).claim_count for m in (first, second)] == [0, 0]
    assert claim(messaging, limit=5, ttl=300)[1] == [third]
    clock.advance(60)
    claim_id, claimed = claim(messaging, limit=5)
    assert claimed == [first, second]
    messaging.release_claim(P, Q, claim_id, "reject")
    assert listed(messaging, queue=DLQ) == [first, second]
    with pytest.raises(errors.ClaimDoesNotExist):
        messaging.get_claim(P, Q, claim_id)
    messaging.release_claim(P, Q, "no-such-claim", "reject")  # as ever, an absent claim is fine
