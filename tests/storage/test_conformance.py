"""The storage conformance suite: every driver, the same behaviour.

Tests go through :class:`~zaqar_lite.service.Messaging` with a manual
clock, so the policy inputs reach each driver exactly as in production and
no test sleeps. Expected values are literals from the spec.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid

import pytest
from prometheus_client import REGISTRY

from zaqar_lite import errors
from zaqar_lite.config import load_settings
from zaqar_lite.models import Message, Move, RedriveFilter, RedriveRequest
from zaqar_lite.service import Messaging

P, Q, DLQ = "project-a", "orders", "orders-dlq"
CLIENT, OTHER_CLIENT = "5f0cbf39-7d2c-4b1f-8f0e-2a4a7fd1b3a1", "9a7c2b1e-0000-4000-8000-000000000001"


def post(messaging, *bodies, queue=Q, project=P, client=CLIENT, **fields):
    """Post one message per body with the given optional fields; return their ids."""
    items = [{"body": b, "ttl": fields.get("ttl"), "delay": fields.get("delay"),
              "dlq_eligible": fields.get("dlq_eligible", True)} for b in bodies]
    return messaging.post(project, queue, client, items, 10)


def claim(messaging, limit=10, ttl=60, grace=60, queue=Q, project=P):
    """Claim and return (claim_id, [ids])."""
    claim_id, claimed, _ = messaging.claim(project, queue, limit, ttl, grace)
    return claim_id, [m.id for m in claimed]


def listed(messaging, queue=Q, project=P, **flags):
    """Return the ids listed in a queue (echo on, all flags off unless given)."""
    options = {"echo": True, "include_claimed": False, "include_delayed": False, **flags}
    found, _ = messaging.list_messages(project, queue, client_id=CLIENT, marker=None, limit=20, **options)
    return [m.id for m in found]


def with_dlq(messaging, max_claims=2, **extra):
    """Create Q with a DLQ configured, and the DLQ."""
    messaging.create_queue(P, DLQ, {})
    metadata = {"_max_claim_count": max_claims, "_dead_letter_queue": DLQ, **extra}
    assert messaging.create_queue(P, Q, metadata) is True


# -- queues -------------------------------------------------------------------

def test_create_queue_reports_creation_once_and_keeps_first_metadata(messaging):
    assert messaging.create_queue(P, Q, {"a": 1}) is True
    assert messaging.create_queue(P, Q, {"a": 2}) is False
    assert messaging.queue_metadata(P, Q)["a"] == 1


def test_queue_list_is_ordered_paginated_and_filtered_by_name(messaging):
    for name in ("c", "a", "b-x", "d-x"):
        messaging.create_queue(P, name, {})
    page = messaging.list_queues(P, marker=None, limit=2, name=None, filters={})
    assert [n for n, _ in page] == ["a", "b-x"]
    page = messaging.list_queues(P, marker="b-x", limit=10, name=None, filters={})
    assert [n for n, _ in page] == ["c", "d-x"]
    named = messaging.list_queues(P, marker=None, limit=10, name="-x", filters={})
    assert [n for n, _ in named] == ["b-x", "d-x"]
    assert messaging.count_queues(P) == 4


def test_queues_and_messages_of_one_project_are_invisible_to_another(messaging):
    post(messaging, "secret")
    assert messaging.list_queues("project-b", marker=None, limit=10, name=None, filters={}) == []
    assert listed(messaging, project="project-b") == []
    assert claim(messaging, project="project-b")[1] == []


def test_deleting_a_queue_deletes_its_messages(messaging):
    post(messaging, 1, 2)
    messaging.delete_queue(P, Q)
    messaging.delete_queue(P, Q)
    assert listed(messaging) == []
    assert messaging.storage.get_queue_metadata(P, Q) is None


def test_setting_metadata_of_missing_queue_raises(driver):
    with pytest.raises(errors.QueueDoesNotExist):
        driver.set_queue_metadata(P, "missing", {})


def test_all_queues_reads_a_page_at_a_time_and_yields_each_queue_once(driver):
    driver.all_queues_page = 3
    for project in ("project-a", "project-b"):
        for i in range(7):
            driver.create_queue(project, f"q{i}", {"n": i}, 0.0)
    walk = driver.all_queues()
    first = next(walk)
    # created after the walk began, past its first page: only a walk that reads as it goes sees it
    driver.create_queue(first[0], "q9", {"n": 9}, 0.0)
    seen = [first, *walk]
    assert len(seen) == 15
    assert sorted((p, q, m["n"]) for p, q, m in seen) == sorted([
        *(("project-a", f"q{i}", i) for i in range(7)), *(("project-b", f"q{i}", i) for i in range(7)),
        (first[0], "q9", 9)])


# -- messages -----------------------------------------------------------------

def test_posted_messages_list_in_post_order_and_create_the_queue(messaging):
    ids = post(messaging, "one", "two", "three")
    assert listed(messaging) == ids
    assert messaging.storage.get_queue_metadata(P, Q) == {}


def test_listing_pages_by_marker(messaging):
    ids = post(messaging, *range(5))
    first, _ = messaging.list_messages(P, Q, client_id=CLIENT, marker=None, limit=2, echo=True,
                                       include_claimed=False, include_delayed=False)
    rest, _ = messaging.list_messages(P, Q, client_id=CLIENT, marker=first[-1].marker, limit=10,
                                      echo=True, include_claimed=False, include_delayed=False)
    assert [m.id for m in first + rest] == ids


def page_markers(messaging, queue, project=P):
    """Return the markers of a queue as a client sees them, one message a page, each page after the last."""
    markers: list[int] = []
    while True:
        after = markers[-1] if markers else None
        found, _ = messaging.list_messages(project, queue, client_id=CLIENT, marker=after, limit=1,
                                           echo=True, include_claimed=False, include_delayed=False)
        if not found:
            return markers
        markers.append(found[0].marker)


def test_markers_of_a_queue_do_not_reveal_the_traffic_of_other_queues_and_projects(messaging):
    post(messaging, "quiet-1", queue="quiet")
    post(messaging, "quiet-2", queue="quiet")
    post(messaging, "a-1")
    for _ in range(5):
        post(messaging, *range(10), project="project-b")
        post(messaging, *range(10), queue="other")
    post(messaging, "a-2")
    quiet, busy = page_markers(messaging, "quiet"), page_markers(messaging, Q)
    assert len(quiet) == len(busy) == 2
    assert busy[1] - busy[0] == quiet[1] - quiet[0], "100 posts elsewhere moved this queue's markers"
    assert len(page_markers(messaging, Q, project="project-b")) == 50


def test_listing_without_echo_hides_own_messages(messaging):
    mine = post(messaging, "mine")
    theirs = post(messaging, "theirs", client=OTHER_CLIENT)
    found, _ = messaging.list_messages(P, Q, client_id=CLIENT, marker=None, limit=10, echo=False,
                                       include_claimed=False, include_delayed=False)
    assert [m.id for m in found] == theirs
    assert mine[0] not in [m.id for m in found]


def test_expired_messages_are_never_returned(messaging, clock):
    ids = post(messaging, "short", ttl=60)
    clock.advance(61)
    assert listed(messaging) == []
    assert messaging.get_messages(P, Q, ids)[0] == []
    assert claim(messaging)[1] == []


def test_pop_takes_visible_messages_fifo_and_deletes_them(messaging):
    ids = post(messaging, 1, 2, 3)
    claim(messaging, limit=1)
    popped, _ = messaging.pop(P, Q, 5)
    assert [m.id for m in popped] == ids[1:]
    assert listed(messaging, include_claimed=True) == ids[:1]


def test_purge_removes_claimed_messages_too(messaging):
    post(messaging, 1, 2)
    claim(messaging, limit=1)
    messaging.purge(P, Q, ["messages"])
    assert listed(messaging, include_claimed=True) == []


def test_stats_count_claimed_free_and_delayed_apart(messaging):
    ids = post(messaging, 1, 2, 3)
    post(messaging, "later", delay=100)
    claim(messaging, limit=1)
    stats, _ = messaging.queue_stats(P, Q)
    assert (stats.claimed, stats.free, stats.delayed, stats.total) == (1, 2, 1, 4)
    assert stats.oldest.id == ids[0]


def test_stats_of_empty_queue_have_no_oldest(messaging):
    stats, _ = messaging.queue_stats(P, "empty")
    assert (stats.total, stats.oldest, stats.newest) == (0, None, None)


# -- delete rules (docs/api.rst, "Claim rules") ------------------------------

def test_deleting_an_absent_message_is_fine(messaging):
    messaging.delete_message(P, Q, "no-such-id", None)
    messaging.delete_message(P, Q, "no-such-id", "no-such-claim")


def test_unclaimed_message_is_deleted_without_claim_id(messaging):
    ids = post(messaging, 1)
    messaging.delete_message(P, Q, ids[0], None)
    assert listed(messaging) == []


def test_claimed_message_cannot_be_deleted_without_claim_id(messaging):
    ids = post(messaging, 1)
    claim(messaging)
    with pytest.raises(errors.MessageIsClaimed):
        messaging.delete_message(P, Q, ids[0], None)


def test_unknown_or_expired_claim_id_is_rejected(messaging, clock):
    ids = post(messaging, 1)
    claim_id, _ = claim(messaging, ttl=60)
    with pytest.raises(errors.InvalidClaim):
        messaging.delete_message(P, Q, ids[0], "not-a-claim")
    clock.advance(61)
    with pytest.raises(errors.InvalidClaim):
        messaging.delete_message(P, Q, ids[0], claim_id)


def test_claim_id_on_unclaimed_message_is_rejected(messaging):
    first, second = post(messaging, 1, 2)
    claim_id, _ = claim(messaging, limit=1)
    with pytest.raises(errors.MessageNotClaimed):
        messaging.delete_message(P, Q, second, claim_id)


def test_message_held_by_another_claim_cannot_be_deleted(messaging):
    first, second = post(messaging, 1, 2)
    claim_a, _ = claim(messaging, limit=1)
    claim(messaging, limit=1)
    with pytest.raises(errors.MessageIsClaimedBy):
        messaging.delete_message(P, Q, second, claim_a)


def test_claimed_message_is_deleted_with_its_claim_id(messaging):
    ids = post(messaging, 1)
    claim_id, _ = claim(messaging)
    messaging.delete_message(P, Q, ids[0], claim_id)
    assert listed(messaging, include_claimed=True) == []


def test_bulk_delete_with_claim_ids_keeps_messages_of_other_claims(messaging):
    first, second, third = post(messaging, 1, 2, 3)
    claim_a, _ = claim(messaging, limit=1)
    claim(messaging, limit=1)
    with pytest.raises(errors.MessageIsClaimedBy):
        messaging.delete_messages(P, Q, [first, second, third], [claim_a])
    assert listed(messaging, include_claimed=True) == [second]


def test_bulk_delete_without_claim_ids_deletes_claimed_messages(messaging):
    ids = post(messaging, 1, 2)
    claim(messaging, limit=1)
    messaging.delete_messages(P, Q, ids, None)
    assert listed(messaging, include_claimed=True) == []


# -- claims -------------------------------------------------------------------

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


# -- dead-letter queues (docs/api.rst, "The move", "Provenance") ---------------

def _exhaust(messaging, clock, message_id, times):
    """Hand a message out ``times`` times: lapsed, released, released with reason, in turn."""
    for attempt in range(times):
        claim_id, claimed, _ = messaging.claim(P, Q, 1, 60, 60)
        assert [m.id for m in claimed] == [message_id]
        if attempt % 3 == 0:
            clock.advance(61)
        elif attempt % 3 == 1:
            messaging.release_claim(P, Q, claim_id)
        else:
            messaging.release_message(P, Q, message_id, claim_id,
                                      {"error": "db timeout 30s", "error_type": "TimeoutError"})


def test_message_is_handed_out_exactly_max_claim_count_times_then_moves(messaging, clock):
    with_dlq(messaging, max_claims=3)
    posted_at = clock()
    doomed, healthy = post(messaging, "poison", "fine")
    _exhaust(messaging, clock, doomed, 3)
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


def test_moved_message_is_claimable_at_once_in_the_dlq(messaging, clock):
    with_dlq(messaging, max_claims=1)
    doomed, = post(messaging, "poison")
    _exhaust(messaging, clock, doomed, 1)
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
    _exhaust(messaging, clock, doomed, 1)
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
    _exhaust(messaging, clock, doomed, 1)
    messaging.delete_queue(P, DLQ)
    claim(messaging)
    assert messaging.storage.get_queue_metadata(P, DLQ) == {}
    assert listed(messaging, queue=DLQ) == [doomed]


def test_message_not_eligible_for_dlq_is_deleted_instead(messaging, clock):
    with_dlq(messaging, max_claims=1)
    doomed, = post(messaging, "poison", dlq_eligible=False)
    _exhaust(messaging, clock, doomed, 1)
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
    moves_before = counted("zaqar_lite_messages_dead_lettered_total", reason="max_claims")
    sweep_moves_before = counted("zaqar_lite_messages_dead_lettered_total", reason="expired_or_max_claims")
    discarded_before = counted("zaqar_lite_messages_discarded_total")
    claimed_before = counted("zaqar_lite_messages_claimed_total")
    assert claim(messaging, limit=5)[1] == [fourth]
    assert listed(messaging, queue=DLQ) == [first, third]
    assert counted("zaqar_lite_messages_dead_lettered_total", reason="max_claims") - moves_before == 2
    assert counted("zaqar_lite_messages_dead_lettered_total", reason="expired_or_max_claims") \
        - sweep_moves_before == 0
    assert counted("zaqar_lite_messages_discarded_total") - discarded_before == 1
    assert counted("zaqar_lite_messages_claimed_total") - claimed_before == 1
    assert claim(messaging, limit=5)[1] == []  # nothing left to move: nothing more counted
    assert counted("zaqar_lite_messages_dead_lettered_total", reason="max_claims") - moves_before == 2


def test_queue_without_dlq_never_moves_messages(messaging, clock):
    ids = post(messaging, "again")
    for _ in range(5):
        assert claim(messaging)[1] == ids
        clock.advance(61)


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


# -- expiry (docs/api.rst, "Expiry", "Dead-lettering on expiry") ---------------

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


# -- delays (docs/api.rst, "Delayed delivery") ---------------------------------

def test_delayed_message_is_invisible_until_its_delay_passes(messaging, clock):
    late, = post(messaging, "late", delay=120)
    now_ready, = post(messaging, "now")
    assert claim(messaging, ttl=600)[1] == [now_ready]
    assert messaging.pop(P, Q, 5)[0] == []
    assert listed(messaging) == []
    assert listed(messaging, include_delayed=True, include_claimed=True) == [late, now_ready]
    clock.advance(120)
    assert claim(messaging)[1] == [late]


def test_queue_default_delay_applies_and_message_delay_overrides_it(messaging, clock):
    messaging.create_queue(P, Q, {"_default_message_delay": 300})
    default_delayed, = post(messaging, "default")
    immediate, = post(messaging, "immediate", delay=0)
    short, = post(messaging, "short", delay=30)
    assert claim(messaging, ttl=600)[1] == [immediate]
    clock.advance(30)
    assert claim(messaging, ttl=600)[1] == [short]
    clock.advance(270)
    assert claim(messaging, ttl=600)[1] == [default_delayed]


def test_posts_follow_a_default_delay_another_worker_set_since(messaging, other_worker, clock):
    messaging.create_queue(P, Q, {})
    before, = post(messaging, "before")  # this worker has read the queue's metadata
    other_worker.update_queue(P, Q, [("add", "_default_message_delay", 60)])
    after, = post(messaging, "after")
    assert listed(messaging) == [before]
    clock.advance(60)
    assert listed(messaging) == [before, after]


def test_a_post_after_another_worker_deleted_the_queue_creates_it_again(messaging, other_worker):
    messaging.create_queue(P, Q, {"_default_message_delay": 60})
    post(messaging, "first")
    other_worker.delete_queue(P, Q)
    second, = post(messaging, "second")
    assert listed(messaging) == [second]
    assert messaging.queue_metadata(P, Q)["_default_message_delay"] == 0
    assert [q for p, q, _ in messaging.storage.all_queues() if p == P] == [Q]


def test_a_post_size_limit_raised_by_another_worker_applies_at_once(messaging, other_worker):
    messaging.create_queue(P, Q, {"_max_messages_post_size": 100})
    item = {"body": "x", "ttl": None, "delay": None, "dlq_eligible": True}
    with pytest.raises(errors.InvalidBody):
        messaging.post(P, Q, CLIENT, [item], 200)
    other_worker.update_queue(P, Q, [("replace", "_max_messages_post_size", 300)])
    stored = messaging.post(P, Q, CLIENT, [item], 200)
    assert listed(messaging) == stored
    other_worker.update_queue(P, Q, [("replace", "_max_messages_post_size", 150)])
    with pytest.raises(errors.InvalidBody):
        messaging.post(P, Q, CLIENT, [item], 200)


def test_claims_follow_a_dead_letter_queue_another_worker_configured(messaging, other_worker, clock):
    messaging.create_queue(P, Q, {})
    messaging.create_queue(P, DLQ, {})
    exhausted, = post(messaging, "fails")
    assert claim(messaging, ttl=60)[1] == [exhausted]  # this worker has read the metadata
    clock.advance(61)
    other_worker.update_queue(P, Q, [("add", "_max_claim_count", 1), ("add", "_dead_letter_queue", DLQ)])
    assert claim(messaging)[1] == []
    assert listed(messaging, queue=DLQ) == [exhausted]


# -- editing a delayed message ------------------------------------------------

def edit(messaging, message_id, queue=Q, **changes):
    """Edit a delayed message; return it as stored after the edit."""
    return messaging.edit_delayed_message(P, queue, message_id, changes, 10)[0]


def test_a_delayed_message_is_edited_and_read_back_as_edited(messaging, clock):
    held, = post(messaging, {"v": 1}, delay=120, ttl=300)
    clock.advance(20)
    result = edit(messaging, held, body={"v": 2}, ttl=600)
    assert (result.body, result.ttl(), result.delay_until) == ({"v": 2}, 620, clock.now - 20 + 120)
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body, stored.ttl(), stored.delay_until, stored.marker) == (
        {"v": 2}, 620, clock.now - 20 + 120, result.marker)
    assert claim(messaging)[1] == []
    clock.advance(100)
    assert claim(messaging)[1] == [held]


def test_a_new_delay_counts_from_the_edit_and_zero_frees_the_message_at_once(messaging, clock):
    first, second = post(messaging, "first", "second", delay=60)
    clock.advance(50)
    edit(messaging, first, delay=30)
    edit(messaging, second, delay=0)
    assert listed(messaging) == [second]
    clock.advance(10)
    assert claim(messaging)[1] == [second]
    clock.advance(20)
    assert claim(messaging)[1] == [first]


def test_a_shortened_ttl_expires_the_delayed_message_then(messaging, clock):
    held, = post(messaging, "x", delay=600, ttl=3600)
    edit(messaging, held, ttl=60)
    clock.advance(60)
    assert messaging.get_messages(P, Q, [held])[0] == []
    with pytest.raises(errors.MessageDoesNotExist):
        edit(messaging, held, body="too late")


def test_an_edit_after_the_delay_matured_is_refused_and_changes_nothing(messaging, clock):
    held, = post(messaging, "original", delay=30)
    clock.advance(30)
    with pytest.raises(errors.MessageNotEditable, match="its delay ended at"):
        edit(messaging, held, body="changed", delay=300)
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body, stored.delay_until) == ("original", clock.now)
    assert claim(messaging)[1] == [held]


def test_a_message_never_delayed_is_not_editable(messaging):
    ready, = post(messaging, "now")
    with pytest.raises(errors.MessageNotEditable, match="never delayed"):
        edit(messaging, ready, body="changed")


def test_a_claimed_message_is_not_editable(messaging, clock):
    held, = post(messaging, "original", delay=30)
    clock.advance(30)
    assert claim(messaging, ttl=600)[1] == [held]
    with pytest.raises(errors.MessageNotEditable, match="it is claimed"):
        edit(messaging, held, delay=300)
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body, stored.is_claimed(clock.now)) == ("original", True)


def test_an_edit_of_an_absent_message_or_in_another_queue_is_not_found(messaging):
    held, = post(messaging, "x", delay=30)
    with pytest.raises(errors.MessageDoesNotExist):
        edit(messaging, "no-such-id", body="y")
    with pytest.raises(errors.MessageDoesNotExist):
        edit(messaging, held, queue="elsewhere", body="y")


def test_an_edit_never_overwrites_a_change_made_between_its_read_and_its_write(
        messaging, other_worker, clock, monkeypatch):
    held, = post(messaging, "original", delay=300, ttl=900)
    storage = messaging.storage
    done = threading.Event()

    def change_meanwhile():
        other_worker.edit_delayed_message(P, Q, held, {"body": "theirs"}, 10)
        done.set()

    if hasattr(storage, "_message_and_claim"):  # the loop of storage.base: read, decide, write
        read = storage._message_and_claim

        def read_then_let_another_worker_edit(*args):
            found = read(*args)
            if not done.is_set() and not worker.is_alive():
                worker.start()
                worker.join(3.0)  # SQLite: it waits for this edit's transaction instead
            return found

        worker = threading.Thread(target=change_meanwhile)
        monkeypatch.setattr(storage, "_message_and_claim", read_then_let_another_worker_edit)
        edit(messaging, held, ttl=60)
        worker.join(30)
    else:  # Redis: read, check and write are one script, so there is no gap to change it in
        change_meanwhile()
        edit(messaging, held, ttl=60)
    assert done.is_set()
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body, stored.expires) == ("theirs", clock.now + 60)


def test_concurrent_edits_both_land_and_a_claim_at_maturity_ends_editing(messaging, other_worker, clock):
    held, = post(messaging, "original", delay=1)
    refused = []

    def edit_body(service, body):
        try:
            service.edit_delayed_message(P, Q, held, {"body": body}, 10)
        except errors.ZaqarLiteError as exc:
            refused.append(exc)

    pairs = ((messaging, "a"), (other_worker, "b"))
    threads = [threading.Thread(target=edit_body, args=pair) for pair in pairs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    stored, = messaging.get_messages(P, Q, [held])[0]
    assert (stored.body in ("a", "b"), refused) == (True, [])
    clock.advance(1)
    assert claim(messaging)[1] == [held]
    with pytest.raises(errors.MessageNotEditable, match="it is claimed"):
        edit(messaging, held, body="late")


def test_matured_delayed_messages_keep_fifo_order_with_ready_ones(messaging, clock):
    first, = post(messaging, "first", delay=10)
    second, = post(messaging, "second")
    clock.advance(10)
    assert claim(messaging, limit=2)[1] == [first, second]


def test_message_whose_ttl_is_shorter_than_its_delay_is_never_seen(messaging, clock):
    post(messaging, "ghost", ttl=60, delay=120)
    clock.advance(121)
    assert claim(messaging)[1] == []
    assert listed(messaging, include_delayed=True) == []


def test_delayed_message_expiring_unseen_is_dead_lettered_on_expiry(messaging, clock):
    with_dlq(messaging, max_claims=5, _dead_letter_on_expiry=True)
    ghost, = post(messaging, "ghost", ttl=60, delay=120)
    clock.advance(61)
    messaging.sweep()
    assert listed(messaging, queue=DLQ) == [ghost]
    assert messaging.get_messages(P, DLQ, [ghost])[0][0].expires == clock() + 60


def test_ready_claims_are_not_blocked_by_many_delayed_messages(messaging, clock):
    delayed = post(messaging, *range(15), delay=600)
    ready = post(messaging, "ready-1", "ready-2")
    assert claim(messaging, limit=5)[1] == ready
    assert len(delayed) == 15


# -- versioned records ----------------------------------------------------------

def test_records_are_written_by_compare_and_set(driver):
    assert driver.put_record(P, "subscription", "s1", {"n": 1}, None) == 1
    with pytest.raises(errors.Conflict):
        driver.put_record(P, "subscription", "s1", {"n": 9}, None)
    assert driver.put_record(P, "subscription", "s1", {"n": 2}, 1) == 2
    with pytest.raises(errors.Conflict):
        driver.put_record(P, "subscription", "s1", {"n": 3}, 1)
    record = driver.get_record(P, "subscription", "s1")
    assert (record.value, record.version) == ({"n": 2}, 2)
    assert driver.get_record("project-b", "subscription", "s1") is None


def test_records_list_by_prefix_and_marker_and_delete_by_version(driver):
    for key in ("q1/b", "q1/a", "q2/c", "q1/c"):
        driver.put_record(P, "subscription", key, {"k": key}, None)
    assert [r.key for r in driver.list_records(P, "subscription", prefix="q1/")] == ["q1/a", "q1/b", "q1/c"]
    after_a = driver.list_records(P, "subscription", prefix="q1/", marker="q1/a", limit=1)
    assert [r.key for r in after_a] == ["q1/b"]
    assert driver.record_projects("subscription") == [P]
    assert driver.delete_record(P, "subscription", "q1/a", expected_version=2) is False
    assert driver.delete_record(P, "subscription", "q1/a", expected_version=1) is True
    assert driver.delete_record(P, "subscription", "q1/a") is False
    assert [r.key for r in driver.list_records(P, "subscription")] == ["q1/b", "q1/c", "q2/c"]


# -- redrive (docs/api.rst, "Redrive (zaqar-lite extension)") ------------------

def stored_dead_letters(messaging, clock, *histories, source=Q, queue=DLQ, ttl=3600):
    """Store dead letters of ``source`` straight into ``queue``, one per failure history; return their ids.

    A history is a list of ``(error_type, error)`` pairs, oldest first.
    """
    now = clock()
    messages = [Message(
        id=str(uuid.uuid4()), body={"n": n}, created=now - 600, expires=now + ttl, client_id=CLIENT,
        claim_count=3, failures=[{"at": "2100-01-01T00:00:00Z", "claim_count": k + 1, "error_type": kind,
                                  "error": text} for k, (kind, text) in enumerate(history)],
        dead_letter={"source_queue": source, "reason": "max_claims", "dead_lettered_at": now - 1,
                     "claim_count": 3, "last_claim_id": None})
        for n, history in enumerate(histories)]
    messaging.storage.post_messages(P, queue, messages, now)
    return [m.id for m in messages]


def redrive(messaging, queue=DLQ, **options):
    """Redrive from ``queue`` with the given request fields; return the result."""
    wanted = RedriveFilter(**options.pop("filter", {}))
    result, _ = messaging.redrive(P, queue, RedriveRequest(limit=options.pop("limit", 1000), filter=wanted,
                                                           **options))
    return result


def test_redrive_moves_a_dead_letter_back_with_its_count_reset_and_its_history_kept(messaging, clock):
    with_dlq(messaging, max_claims=3)
    posted_at = clock()
    doomed, = post(messaging, {"order": 7})
    _exhaust(messaging, clock, doomed, 3)
    claim(messaging)
    assert listed(messaging, queue=DLQ) == [doomed]
    result = redrive(messaging)
    assert (result.matched, result.redriven) == (1, 1)
    assert listed(messaging, queue=DLQ, include_claimed=True, include_delayed=True) == []
    found, _ = messaging.get_messages(P, Q, [doomed])
    back = found[0]
    assert back.body == {"order": 7}
    assert back.claim_count == 0
    assert back.dead_letter is None
    assert back.is_claimed(clock()) is False
    assert back.delay_until <= clock()
    assert back.created == posted_at
    assert [(f["error_type"], f["error"]) for f in back.failures] == [("TimeoutError", "db timeout 30s")]
    assert claim(messaging)[1] == [doomed]


def test_redriven_message_is_dead_lettered_again_after_max_claim_count_claims(messaging, clock):
    with_dlq(messaging, max_claims=2)
    doomed, = stored_dead_letters(messaging, clock, [("KeyError", "missing 'sku'")])
    assert redrive(messaging).redriven == 1
    for expected_count in (1, 2):
        _, claimed, _ = messaging.claim(P, Q, 1, 60, 60)
        assert [(m.id, m.claim_count) for m in claimed] == [(doomed, expected_count)]
        clock.advance(61)
    assert claim(messaging)[1] == []
    again = messaging.get_messages(P, DLQ, [doomed])[0][0]
    assert (again.claim_count, again.dead_letter["source_queue"]) == (2, Q)
    assert [f["error_type"] for f in again.failures] == ["KeyError"]


def test_claimed_dead_letter_is_not_redriven_until_its_claim_lapses(messaging, clock):
    held, free = stored_dead_letters(messaging, clock, [], [])
    assert claim(messaging, queue=DLQ, limit=1, ttl=60)[1] == [held]
    result = redrive(messaging)
    assert (result.matched, result.redriven) == (1, 1)
    assert listed(messaging) == [free]
    assert listed(messaging, queue=DLQ, include_claimed=True) == [held]
    clock.advance(61)
    assert redrive(messaging).redriven == 1
    assert sorted(listed(messaging)) == sorted([free, held])


def test_dry_run_moves_nothing_and_shows_what_would_move_where(messaging, clock):
    ids = stored_dead_letters(messaging, clock, *[[] for _ in range(12)])
    result = redrive(messaging, dry_run=True)
    assert (result.matched, result.redriven) == (12, 0)
    assert [(m.id, target) for m, target in result.sample] == [(i, Q) for i in ids[:10]]
    assert len(listed(messaging, queue=DLQ)) == 12
    assert listed(messaging) == []


def test_redrive_takes_at_most_limit_dead_letters_in_post_order(messaging, clock):
    ids = stored_dead_letters(messaging, clock, [], [], [])
    assert redrive(messaging, limit=2).redriven == 2
    assert sorted(listed(messaging)) == sorted(ids[:2])
    assert listed(messaging, queue=DLQ) == ids[2:]


def test_redrive_filters_by_source_queue(messaging, clock):
    from_orders, = stored_dead_letters(messaging, clock, [])
    from_refunds, = stored_dead_letters(messaging, clock, [], source="refunds")
    assert redrive(messaging, filter={"source_queue": "refunds"}).redriven == 1
    assert listed(messaging, queue="refunds") == [from_refunds]
    assert listed(messaging, queue=DLQ) == [from_orders]


def test_redrive_filters_by_the_error_type_of_the_last_failure(messaging, clock):
    last_timeout, earlier_timeout, no_failure = stored_dead_letters(
        messaging, clock, [("KeyError", "x"), ("TimeoutError", "slow")],
        [("TimeoutError", "slow"), ("KeyError", "x")], [])
    assert redrive(messaging, filter={"error_type": "TimeoutError"}).redriven == 1
    assert listed(messaging) == [last_timeout]
    assert listed(messaging, queue=DLQ) == [earlier_timeout, no_failure]


def test_redrive_filters_by_the_signature_id_of_the_last_failure(messaging, clock):
    # "TimeoutError: db timeout <n> s after <n> ms", as the DLQ report names it
    signature = "34ea5819c882"
    first, second, other, without = stored_dead_letters(
        messaging, clock, [("TimeoutError", "db timeout 30 s after 12 ms")],
        [("KeyError", "x"), ("TimeoutError", "db timeout 5 s after 99 ms")],
        [("TimeoutError", "db timeout 30 s after 12 ms"), ("KeyError", "x")], [])
    assert redrive(messaging, filter={"signature": signature}).redriven == 2
    assert listed(messaging) == [first, second]
    assert listed(messaging, queue=DLQ) == [other, without]


def test_dead_letters_without_failures_have_the_no_reason_signature(messaging, clock):
    with_reason, without = stored_dead_letters(messaging, clock, [("KeyError", "x")], [])
    assert redrive(messaging, filter={"signature": "49471713812f"}).redriven == 1  # "(no reason given)"
    assert listed(messaging) == [without]


def test_redrive_filters_by_message_ids(messaging, clock):
    first, second, third = stored_dead_letters(messaging, clock, [], [], [])
    assert redrive(messaging, filter={"ids": frozenset({third, first, "not-a-message"})}).redriven == 2
    assert listed(messaging) == [first, third]
    assert listed(messaging, queue=DLQ) == [second]


def test_every_filter_given_must_hold(messaging, clock):
    timeout, key_error = stored_dead_letters(messaging, clock, [("TimeoutError", "x")], [("KeyError", "x")])
    for chosen, expected in ((key_error, 0), (timeout, 1)):
        wanted = {"ids": frozenset({chosen}), "error_type": "TimeoutError"}
        assert redrive(messaging, filter=wanted).redriven == expected
    assert listed(messaging) == [timeout]


def test_redrive_to_a_destination_instead_of_the_source_queue(messaging, clock):
    moved, = stored_dead_letters(messaging, clock, [])
    assert redrive(messaging, destination="orders-replay", create_destination=True).redriven == 1
    assert listed(messaging, queue="orders-replay") == [moved]
    assert listed(messaging) == []


def test_redrive_recreates_a_deleted_source_queue(messaging, clock):
    with_dlq(messaging)
    moved, = stored_dead_letters(messaging, clock, [])
    messaging.delete_queue(P, Q)
    assert redrive(messaging).redriven == 1
    assert messaging.storage.get_queue_metadata(P, Q) == {}
    assert listed(messaging) == [moved]


def test_messages_without_provenance_are_not_redriven(messaging, clock):
    plain, = post(messaging, "plain", queue=DLQ)
    result = redrive(messaging, destination="elsewhere", create_destination=True)
    assert (result.matched, result.redriven) == (0, 0)
    assert listed(messaging, queue=DLQ) == [plain]


def test_redrive_of_an_unknown_queue_moves_nothing(messaging):
    assert redrive(messaging, queue="no-such-queue").redriven == 0


def test_redriven_message_lives_at_least_a_minimum_ttl_from_the_redrive(messaging, clock):
    short, = stored_dead_letters(messaging, clock, [], ttl=90)
    long, = stored_dead_letters(messaging, clock, [], ttl=7200)
    clock.advance(60)
    assert redrive(messaging).redriven == 2
    by_id = {m.id: m for m in messaging.get_messages(P, Q, [short, long])[0]}
    assert by_id[short].expires == clock() + 60
    assert by_id[long].expires == clock() - 60 + 7200


def test_move_skips_a_message_changed_since_it_was_read(messaging, clock):
    changed, untouched = stored_dead_letters(messaging, clock, [], [])
    read = {m.id: m for m in messaging.get_messages(P, DLQ, [changed, untouched])[0]}
    claim_id, _ = claim(messaging, queue=DLQ, limit=1)
    messaging.release_claim(P, DLQ, claim_id)
    now = clock()
    moves = [Move(read[i], dataclasses.replace(read[i], claim_count=0, dead_letter=None))
             for i in (changed, untouched)]
    assert messaging.storage.move_messages(P, DLQ, moves, Q, now) == [untouched]
    assert listed(messaging, queue=DLQ) == [changed]
    assert listed(messaging) == [untouched]


def test_throttled_redrive_waits_between_messages_and_stops_at_the_time_budget(driver, clock):
    waits = []

    def sleep(seconds):
        waits.append(seconds)
        clock.advance(seconds)

    settings = load_settings(None, storage_uri="sqlite:///unused.db")
    settings = settings.replace(limits=dataclasses.replace(settings.limits, max_redrive_seconds=2))
    service = Messaging(driver, settings, clock, sleep=sleep)
    ids = stored_dead_letters(service, clock, [], [], [], [], [])
    assert redrive(service, max_per_second=1.0).redriven == 3
    assert waits == [1.0, 1.0]
    assert listed(service) == ids[:3]
