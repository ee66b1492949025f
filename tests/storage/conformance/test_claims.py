"""Claims on every driver: FIFO and exclusive, counted, lapsing, renewed and released."""

from __future__ import annotations

import pytest

from tests.storage.conformance.conftest import P, Q, claim, post
from zaqar_lite import errors


def test_claims_hand_out_messages_fifo_and_exclusively(messaging):
    ids = post(messaging, *range(5))
    _, first = claim(messaging, limit=3)
    _, second = claim(messaging, limit=3)
    assert first == ids[:3]
    assert second == ids[3:]
    assert claim(messaging)[1] == []


def test_each_claim_increments_the_claim_count(messaging, clock):
    ids = post(messaging, 1)
    for expected in (1, 2, 3):
        _, claimed, _ = messaging.claim(P, Q, 1, 60, 60)
        assert claimed[0].claim_count == expected
        clock.advance(61)
    assert messaging.get_messages(P, Q, ids)[0][0].claim_count == 3


def test_lapsed_claim_makes_its_messages_claimable_again(messaging, clock):
    ids = post(messaging, 1)
    claim(messaging, ttl=60)
    clock.advance(59)
    assert claim(messaging)[1] == []
    clock.advance(2)
    assert claim(messaging)[1] == ids


def test_claim_extends_message_expiry_to_claim_end_plus_grace(messaging, clock):
    ids = post(messaging, 1, ttl=60)
    start = clock()
    messaging.claim(P, Q, 1, 300, 100)
    message = messaging.get_messages(P, Q, ids)[0][0]
    assert message.expires == start + 400


def test_get_claim_returns_its_messages_until_it_expires(messaging, clock):
    ids = post(messaging, 1, 2)
    claim_id, _ = claim(messaging, ttl=60)
    found, held, _ = messaging.get_claim(P, Q, claim_id)
    assert (found.ttl, [m.id for m in held]) == (60, ids)
    clock.advance(61)
    with pytest.raises(errors.ClaimDoesNotExist):
        messaging.get_claim(P, Q, claim_id)


def test_renewing_a_claim_restarts_its_ttl_from_now(messaging, clock):
    post(messaging, 1)
    claim_id, _ = claim(messaging, ttl=60)
    clock.advance(50)
    messaging.renew_claim(P, Q, claim_id, 120, 60)
    clock.advance(100)
    assert claim(messaging)[1] == []
    assert messaging.get_claim(P, Q, claim_id)[0].ttl == 120


def test_a_renewed_claims_age_counts_from_the_renewal(messaging, clock):
    post(messaging, 1)
    claim_id, _ = claim(messaging, ttl=300)
    clock.advance(40)
    assert messaging.get_claim(P, Q, claim_id)[0].age(clock()) == 40
    messaging.renew_claim(P, Q, claim_id, 300, 60)
    clock.advance(7)
    found, _, now = messaging.get_claim(P, Q, claim_id)
    assert (found.age(now), found.ttl, found.expires) == (7, 300, now - 7 + 300)


def test_renewing_an_unknown_claim_raises(messaging):
    with pytest.raises(errors.ClaimDoesNotExist):
        messaging.renew_claim(P, Q, "nope", 60, 60)


def test_releasing_a_claim_makes_messages_claimable_at_once(messaging):
    ids = post(messaging, 1)
    claim_id, _ = claim(messaging)
    messaging.release_claim(P, Q, claim_id)
    assert claim(messaging)[1] == ids
    with pytest.raises(errors.ClaimDoesNotExist):
        messaging.get_claim(P, Q, claim_id)


def test_release_with_reason_appends_to_bounded_failure_history(messaging):
    ids = post(messaging, 1)
    for attempt in range(12):
        claim_id, _ = claim(messaging)
        messaging.release_message(P, Q, ids[0], claim_id,
                                  {"error": f"timeout after {attempt} s", "error_type": "Timeout"})
    message = messaging.get_messages(P, Q, ids)[0][0]
    assert len(message.failures) == 10
    assert message.failures[-1]["error"] == "timeout after 11 s"
    assert message.failures[-1]["claim_count"] == 12
    assert message.failures[0]["error"] == "timeout after 2 s"
    assert message.claim_count == 12


def test_release_of_one_message_requires_its_live_claim(messaging):
    first, second = post(messaging, 1, 2)
    claim_id, _ = claim(messaging, limit=1)
    with pytest.raises(errors.MessageNotClaimed):
        messaging.release_message(P, Q, second, claim_id, None)
    with pytest.raises(errors.InvalidClaim):
        messaging.release_message(P, Q, first, "nope", None)
    with pytest.raises(errors.MessageDoesNotExist):
        messaging.release_message(P, Q, "absent", claim_id, None)
    messaging.release_message(P, Q, first, claim_id, None)
    assert claim(messaging, limit=1)[1] == [first]
