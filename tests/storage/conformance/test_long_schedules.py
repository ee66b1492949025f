"""Long schedules on every driver: delays of days and deliver_at stored as the delay end, cancelled by delete.

And a claim (its read and its release too) does not pass over messages scheduled far ahead: with
thousands of them in a queue it costs about what it costs without them (docs/api.rst, "Long schedules").
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from tests.storage.conformance.conftest import CLIENT, P, Q, claim, listed
from zaqar_lite.config import load_settings
from zaqar_lite.service import Messaging

WEEK = 604800


@pytest.fixture
def weekly(driver, clock):
    """The messaging service of a deployment whose max_message_delay is 7 days."""
    settings = load_settings(None, storage_uri="sqlite:///unused.db")
    limits = dataclasses.replace(settings.limits, max_message_delay=WEEK)
    return Messaging(driver, settings.replace(limits=limits), clock)


def schedule(messaging, *bodies, queue=Q, **fields):
    """Post one message per body with ``delay`` or ``deliver_at`` (and ``ttl``) as given; return their ids."""
    items = [{"body": b, "ttl": fields.get("ttl"), "delay": fields.get("delay"), "dlq_eligible": True,
              **({"deliver_at": fields["deliver_at"]} if "deliver_at" in fields else {})} for b in bodies]
    return messaging.post(P, queue, CLIENT, items, 10)


def test_a_week_of_delay_and_a_deliver_at_are_stored_as_the_delay_end(weekly, clock):
    start = clock.now
    week, = schedule(weekly, "a week", delay=WEEK)
    days, = schedule(weekly, "three days", deliver_at=start + 3 * 86400 + 0.5)
    ready, = schedule(weekly, "now")
    found = {m.id: m for m in weekly.get_messages(P, Q, [week, days])[0]}
    assert (found[week].delay_until, found[days].delay_until) == (start + WEEK, start + 3 * 86400 + 0.5)
    assert (found[week].ttl(), found[days].ttl()) == (WEEK + 3600, 3 * 86400 + 1 + 3600)
    assert listed(weekly, include_delayed=True) == [week, days, ready]
    assert claim(weekly, ttl=43200)[1] == [ready]
    clock.advance(3 * 86400)
    assert claim(weekly)[1] == []
    clock.advance(0.5)
    assert claim(weekly)[1] == [days]
    clock.advance(WEEK - 3 * 86400 - 0.5)
    assert claim(weekly)[1] == [week]


def test_deleting_a_scheduled_message_cancels_it_and_its_neighbours_stay(weekly, clock):
    first, cancelled, last = schedule(weekly, "first", "cancelled", "last", deliver_at=clock.now + 86400)
    weekly.delete_message(P, Q, cancelled, None)
    assert listed(weekly, include_delayed=True) == [first, last]
    clock.advance(86400)
    assert claim(weekly)[1] == [first, last]


def test_a_deliver_at_just_past_is_delivered_at_once(weekly, clock):
    late, = schedule(weekly, "a little late", deliver_at=clock.now - 30)
    assert listed(weekly) == [late]
    assert weekly.get_messages(P, Q, [late])[0][0].delay_until == 0.0


#: far-future messages a claim must not pass over, and claims timed on each queue
SCHEDULED, ROUNDS = 10_000, 15


def _fastest_claim(messaging, queue: str) -> float:
    """Return the shortest of ROUNDS claims of a queue's one ready message, each read back and released."""
    fastest = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        claim_id, claimed, _ = messaging.claim(P, queue, 1, 60, 60)
        held = messaging.get_claim(P, queue, claim_id)[1]
        messaging.release_claim(P, queue, claim_id)
        fastest = min(fastest, time.perf_counter() - started)
        assert (len(claimed), len(held)) == (1, 1)
    return fastest


def test_claims_cost_the_same_with_10k_messages_scheduled_ahead(weekly, clock, driver_uri):
    if driver_uri.startswith("swift"):
        pytest.xfail("Swift's claims read the queue's listing, delayed messages' rows included "
                     "(docs/api.rst, Long schedules)")
    if driver_uri.startswith("mongodb"):
        pytest.skip("the MongoDB emulator of the suite stores 10^4 messages in minutes; the index a claim "
                    "reads is counted by explain in tests/storage/test_mongodb_specific.py")
    far = clock.now + 6 * 86400
    for start in range(0, SCHEDULED, 100):
        schedule(weekly, *range(start, start + 100), queue="crowded", deliver_at=far)
    schedule(weekly, "ready", queue="crowded")
    schedule(weekly, "ready", queue="alone")
    _fastest_claim(weekly, "alone")  # warm both queues' metadata and statements up
    _fastest_claim(weekly, "crowded")
    crowded, alone = _fastest_claim(weekly, "crowded"), _fastest_claim(weekly, "alone")
    # a claim passing over 10^4 messages takes milliseconds more; the margin absorbs a busy machine
    assert crowded < 2 * alone + 0.005, f"{crowded * 1000:.2f} ms with them, {alone * 1000:.2f} ms without"
