"""Dead-letter queues on every driver: a message handed out ``_max_claim_count`` times moves on its claim."""

from __future__ import annotations

from prometheus_client import REGISTRY

from tests.storage.conformance.conftest import DLQ, P, Q, claim, exhaust, listed, post, with_dlq


def test_message_is_handed_out_exactly_max_claim_count_times_then_moves(messaging, clock):
    with_dlq(messaging, max_claims=3)
    posted_at = clock()
    doomed, healthy = post(messaging, "poison", "fine")
    exhaust(messaging, clock, doomed, 3)
    clock.advance(5)
    claim_id, claimed = claim(messaging, limit=5)
    assert claimed == [healthy]
    assert listed(messaging, include_claimed=True) == [healthy]
    found, _ = messaging.get_messages(P, DLQ, [doomed])
    assert [m.id for m in found] == [doomed]
    moved = found[0]
    assert moved.body == "poison"
    assert moved.claim_count == 3
    assert moved.is_claimed(clock()) is False
    assert moved.dead_letter["source_queue"] == Q
    assert moved.dead_letter["reason"] == "max_claims"
    assert moved.dead_letter["dead_lettered_at"] == clock()
    assert moved.dead_letter["claim_count"] == 3
    assert moved.created == posted_at
    assert [f["error_type"] for f in moved.failures] == ["TimeoutError"]


def test_a_message_the_sweeper_moves_keeps_its_failure_history(messaging, clock):
    with_dlq(messaging, max_claims=1)
    doomed, = post(messaging, "poison")
    claim_id, _ = claim(messaging)
    messaging.release_message(P, Q, doomed, claim_id,
                              {"error": "db timeout 30s", "error_type": "TimeoutError"})
    messaging.sweep()
    moved = messaging.get_messages(P, DLQ, [doomed])[0][0]
    assert [(f["error_type"], f["error"]) for f in moved.failures] == [("TimeoutError", "db timeout 30s")]


def test_moved_message_is_claimable_at_once_in_the_dlq(messaging, clock):
    with_dlq(messaging, max_claims=1)
    doomed, = post(messaging, "poison")
    exhaust(messaging, clock, doomed, 1)
    assert claim(messaging)[1] == []
    assert claim(messaging, queue=DLQ)[1] == [doomed]


def test_claim_keeps_filling_from_later_messages_after_moves(messaging, clock):
    with_dlq(messaging, max_claims=1)
    ids = post(messaging, *range(4))
    _, first = claim(messaging, limit=2)
    clock.advance(61)
    newest, = post(messaging, "new")
    _, claimed = claim(messaging, limit=3)
    assert claimed == ids[2:] + [newest]
    assert listed(messaging, queue=DLQ) == first
    assert listed(messaging, include_claimed=True) == claimed


def test_dead_letter_ttl_resets_the_expiry_of_moved_messages(messaging, clock):
    with_dlq(messaging, max_claims=1, _dead_letter_queue_messages_ttl=7200)
    doomed, = post(messaging, "poison", ttl=600)
    exhaust(messaging, clock, doomed, 1)
    claim(messaging)
    moved = messaging.get_messages(P, DLQ, [doomed])[0][0]
    assert moved.expires == clock() + 7200
    # its one claim lapsed after 61 s, then the DLQ gave it 7200 s: the ttl counts from the post
    assert (moved.ttl(), moved.age(clock())) == (7261, 61)


def test_without_dead_letter_ttl_the_moved_message_keeps_its_expiry(messaging, clock):
    with_dlq(messaging, max_claims=1)
    doomed, = post(messaging, "poison", ttl=600)
    expires = messaging.get_messages(P, Q, [doomed])[0][0].expires
    claim(messaging, ttl=60, grace=60)
    clock.advance(61)
    claim(messaging)
    assert messaging.get_messages(P, DLQ, [doomed])[0][0].expires == expires


def test_move_recreates_a_deleted_dead_letter_queue(messaging, clock):
    with_dlq(messaging, max_claims=1)
    doomed, = post(messaging, "poison")
    exhaust(messaging, clock, doomed, 1)
    messaging.delete_queue(P, DLQ)
    claim(messaging)
    assert messaging.storage.get_queue_metadata(P, DLQ) == {}
    assert listed(messaging, queue=DLQ) == [doomed]


def test_message_not_eligible_for_dlq_is_deleted_instead(messaging, clock):
    with_dlq(messaging, max_claims=1)
    doomed, = post(messaging, "poison", dlq_eligible=False)
    exhaust(messaging, clock, doomed, 1)
    claim(messaging)
    assert listed(messaging, include_claimed=True) == []
    assert listed(messaging, queue=DLQ) == []


def counted(name: str, **labels: str) -> float:
    """Return a counter of this process's metrics registry (0 before it is first counted)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_claim_counts_the_exhausted_messages_it_moves_and_deletes_on_its_way(messaging, clock):
    with_dlq(messaging, max_claims=1, _dead_letter_on_expiry=True)
    first, = post(messaging, "poison")
    unwanted, = post(messaging, "unwanted", dlq_eligible=False)
    third, fourth = post(messaging, "poison too", "fine")
    assert claim(messaging, limit=3)[1] == [first, unwanted, third]
    clock.advance(61)
    arrivals = {"project": P, "queue": Q, "dead_letter_queue": DLQ}
    moves_before = counted("zaqar_lite_messages_dead_lettered_total", reason="max_claims", **arrivals)
    sweep_moves_before = counted("zaqar_lite_messages_dead_lettered_total", reason="expired_or_max_claims",
                                 **arrivals)
    discarded_before = counted("zaqar_lite_messages_discarded_total")
    claimed_before = counted("zaqar_lite_messages_claimed_total")
    assert claim(messaging, limit=5)[1] == [fourth]
    assert listed(messaging, queue=DLQ) == [first, third]
    assert counted("zaqar_lite_messages_dead_lettered_total", reason="max_claims", **arrivals) \
        - moves_before == 2
    assert counted("zaqar_lite_messages_dead_lettered_total", reason="expired_or_max_claims", **arrivals) \
        - sweep_moves_before == 0
    assert counted("zaqar_lite_messages_discarded_total") - discarded_before == 1
    assert counted("zaqar_lite_messages_claimed_total") - claimed_before == 1
    assert claim(messaging, limit=5)[1] == []  # nothing left to move: nothing more counted
    assert counted("zaqar_lite_messages_dead_lettered_total", reason="max_claims", **arrivals) \
        - moves_before == 2


def test_queue_without_dlq_never_moves_messages(messaging, clock):
    ids = post(messaging, "again")
    for _ in range(5):
        assert claim(messaging)[1] == ids
        clock.advance(61)
