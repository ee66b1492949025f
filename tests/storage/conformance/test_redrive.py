"""Redrive on every driver: dead letters back to their queue, filtered, throttled, and guarded."""

from __future__ import annotations

import dataclasses
import uuid

from tests.storage.conformance.conftest import CLIENT, DLQ, P, Q, claim, exhaust, listed, post, with_dlq
from zaqar_lite.config import load_settings
from zaqar_lite.models import Message, Move, RedriveFilter, RedriveRequest
from zaqar_lite.service import Messaging


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
    exhaust(messaging, clock, doomed, 3)
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
    # "TimeoutError: db timeout <*> s after <*> ms", as the DLQ report names it
    signature = "v2-46aeae276b00"
    first, second, other, without = stored_dead_letters(
        messaging, clock, [("TimeoutError", "db timeout 30 s after 12 ms")],
        [("KeyError", "x"), ("TimeoutError", "db timeout 5 s after 99 ms")],
        [("TimeoutError", "db timeout 30 s after 12 ms"), ("KeyError", "x")], [])
    assert redrive(messaging, filter={"signature": signature}).redriven == 2
    assert listed(messaging) == [first, second]
    assert listed(messaging, queue=DLQ) == [other, without]


def test_dead_letters_without_failures_have_the_no_reason_signature(messaging, clock):
    with_reason, without = stored_dead_letters(messaging, clock, [("KeyError", "x")], [])
    assert redrive(messaging, filter={"signature": "v2-49471713812f"}).redriven == 1  # "(no reason given)"
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
