"""Pausing and the dead-letter breaker on every driver: a paused claim changes nothing, counts add up.

docs/api.rst, "Pausing a queue" and "Dead-letter circuit breaker".
"""

from __future__ import annotations

from tests.storage.conformance.conftest import DLQ, P, Q, claim, listed, post, with_dlq
from zaqar_lite.claims.pause import Breaker, counted
from zaqar_lite.models import Message


def test_a_claim_on_a_paused_queue_takes_nothing_and_counts_nothing(messaging):
    ids = post(messaging, 1, 2)
    messaging.update_queue(P, Q, [("add", "_paused", True)])
    assert claim(messaging)[1] == []
    stored, _ = messaging.get_messages(P, Q, ids)
    assert [(m.claim_count, m.claim_id) for m in stored] == [(0, None), (0, None)]
    messaging.update_queue(P, Q, [("remove", "_paused", None)])
    _, claimed, _ = messaging.claim(P, Q, 10, 60, 60)
    assert [(m.id, m.claim_count) for m in claimed] == [(ids[0], 1), (ids[1], 1)]


def test_a_pause_made_by_another_process_is_seen_by_the_next_claim(messaging, other_worker):
    first, second = post(messaging, 1, 2)
    assert claim(messaging, limit=1)[1] == [first]  # this process has read the queue's metadata
    other_worker.update_queue(P, Q, [("add", "_paused", True)])
    assert claim(messaging)[1] == []
    other_worker.update_queue(P, Q, [("remove", "_paused", None)])
    assert claim(messaging)[1] == [second]


def test_a_message_posted_under_a_claim_of_its_own_is_listed_and_never_claimed(messaging, clock):
    now = clock()
    (plain,) = post(messaging, 1)
    messaging.storage.post_messages(P, Q, [Message(
        id="0b9c8f1e-1f4e-4c57-9a55-000000000001", body={"event": "queue_paused"}, created=now,
        expires=now + 300, client_id="zaqar-lite", claim_id="queue-paused-1", claim_expires=now + 300,
        dlq_eligible=False)], now)
    assert claim(messaging)[1] == [plain]
    assert listed(messaging, include_claimed=True) == [plain, "0b9c8f1e-1f4e-4c57-9a55-000000000001"]
    clock.advance(301)
    messaging.sweep()
    assert listed(messaging, include_claimed=True) == [plain]  # the notice expired and was discarded


def test_breaker_counts_of_two_processes_add_up_and_one_trips(messaging, other_worker, clock):
    with_dlq(messaging, max_claims=1)
    breaker = Breaker(seconds=60, max_dead_letters=2)
    now = clock()

    def count(service):
        return service.breaker_windows.count(P, Q, lambda found: counted(found, breaker, now, 1, 0))[1]

    assert [count(messaging), count(other_worker), count(messaging), count(other_worker)] == \
        [False, False, True, False]
    window = other_worker.breaker_windows.get(P, Q)
    assert (window.dead_letters, window.tripped) == (4, True)
    messaging.delete_queue(P, Q)
    assert messaging.breaker_windows.get(P, Q) is None
    assert messaging.storage.get_queue_metadata(P, DLQ) == {}  # its DLQ stays
