"""Every driver under several processes and through crashes: exclusive claims, no lost acknowledged write.

Part of the conformance suite, through the public service and storage
interfaces only. The racing claimers and the writer killed mid-write run on
every store (``driver_uri``); the server outage on every store that has a
server to lose (``restartable_store``: Redis, MongoDB, Swift; embedded SQLite has
none, its crash is its writer's: the last test). Each process opens a driver of
its own on the same store, as the workers of ``zaqar-lite serve`` do.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from tests.storage.conformance.conftest import CLIENT, DLQ, P, Q
from tests.storage.conftest import open_test_storage
from zaqar_lite import errors
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.service import Messaging

SETTINGS = load_settings(None, storage_uri="sqlite:///unused.db")
NOW = ManualClock().now
#: claimers racing in each round, rounds, and messages posted per round
CLAIMERS, ROUNDS, PER_ROUND = 4, 6, 2
#: how long a test waits for another process or a restarted server
PATIENCE = 60.0
FORK = multiprocessing.get_context("fork")


def service(uri: str, clock=lambda: NOW) -> Messaging:
    return Messaging(open_test_storage(uri), SETTINGS, clock)


def post(messaging: Messaging, *bodies, queue: str = Q, **fields) -> list[str]:
    items = [{"body": body, "ttl": fields.get("ttl"), "delay": fields.get("delay"), "dlq_eligible": True}
             for body in bodies]
    return messaging.post(P, queue, CLIENT, items, 10)


# -- several processes claiming one queue (docs/api.rst, "Claims": claims are exclusive) ----

def _claim_each_round(uri: str, start, results) -> None:
    """Claim one message per round, all claimers at the same instant; report (claim id, ids) per round."""
    messaging = service(uri)
    for _ in range(ROUNDS):
        start.wait(timeout=PATIENCE)
        claim_id, claimed, _ = messaging.claim(P, Q, 1, 600, 60)
        results.put((claim_id, [m.id for m in claimed]))
    messaging.storage.close()


def test_processes_claiming_at_once_never_share_a_message(driver_uri):
    start = FORK.Barrier(CLAIMERS + 1)
    results = FORK.Queue()
    claimers = [FORK.Process(target=_claim_each_round, args=(driver_uri, start, results))
                for _ in range(CLAIMERS)]
    for claimer in claimers:
        claimer.start()
    messaging = service(driver_uri)
    posted: list[str] = []
    handed_out: list[tuple[str, str]] = []
    claims_made: set[str] = set()
    try:
        for round_ in range(ROUNDS):
            posted += post(messaging, *[f"r{round_}-{i}" for i in range(PER_ROUND)])
            start.wait(timeout=PATIENCE)  # every claimer claims now, for the same few messages
            for _ in range(CLAIMERS):
                claim_id, ids = results.get(timeout=PATIENCE)
                claims_made.add(claim_id)
                handed_out += [(message_id, claim_id) for message_id in ids]
        for claimer in claimers:
            claimer.join(timeout=PATIENCE)
        assert [claimer.exitcode for claimer in claimers] == [0] * CLAIMERS
        assert handed_out, "no claimer won any round"
        # what the races left (a store may let both racers lose a round) is claimed now, alone
        while True:
            claim_id, claimed, _ = messaging.claim(P, Q, 10, 600, 60)
            if not claimed:
                break
            handed_out += [(m.id, claim_id) for m in claimed]

        ids = [message_id for message_id, _ in handed_out]
        twice = {(m, c) for m, c in handed_out if ids.count(m) > 1}
        assert not twice, f"messages handed out by two claims: {sorted(twice)}"
        stored = {m.id: m for m in messaging.get_messages(P, Q, posted)[0]}
        held = {m: (stored[m].claim_id, stored[m].claim_count) for m, _ in handed_out}
        assert held == {m: (claim_id, 1) for m, claim_id in handed_out}
        # A Swift claimer whose read-to-write outlasted the settle time gives its message up
        # and leaves it hidden by its claim until the claim's ttl (storage/swift/driver.py:
        # "a given-up write"); every other store hands every message out.
        given_up = sorted(set(posted) - set(ids))
        if driver_uri.startswith("swift://"):
            assert all(stored[m].claim_id in claims_made and stored[m].is_claimed(NOW) for m in given_up)
        else:
            assert given_up == [], "messages neither handed out nor claimable"
    finally:
        start.abort()
        for claimer in claimers:
            claimer.join(timeout=5)
            if claimer.exitcode is None:
                claimer.kill()
        messaging.storage.close()


# -- a server outage (the server killed -9, then started again) -------------------------------

#: seconds within which a call to an unreachable store fails (README.rst, "Storage backends")
FAILS_WITHIN = 10.0


def _raises_unavailable(action) -> None:
    started = time.monotonic()
    with pytest.raises(errors.StorageUnavailable):
        action()
    assert time.monotonic() - started < FAILS_WITHIN


def test_an_outage_loses_no_acknowledged_write_and_the_same_service_recovers(restartable_store):
    clock = ManualClock()
    messaging = service(restartable_store.uri, clock)
    messaging.create_queue(P, DLQ, {})
    messaging.create_queue(P, Q, {"_max_claim_count": 1, "_dead_letter_queue": DLQ})
    ids = post(messaging, *range(6)) + post(messaging, "later", delay=300)
    first, claimed, _ = messaging.claim(P, Q, 3, 60, 60)
    assert [m.id for m in claimed] == ids[:3]
    messaging.release_message(P, Q, ids[1], first, {"error": "boom", "error_type": "E"})
    clock.advance(61)
    second, claimed, _ = messaging.claim(P, Q, 2, 60, 60)  # moves the three exhausted ones first
    assert [m.id for m in claimed] == ids[3:5]
    before = {queue: messaging.get_messages(P, queue, ids)[0] for queue in (Q, DLQ)}
    assert [m.id for m in before[DLQ]] == ids[:3]
    assert [m.id for m in before[Q]] == ids[3:]

    restartable_store.stop()
    assert messaging.ping() is False
    _raises_unavailable(lambda: post(messaging, "lost"))
    _raises_unavailable(lambda: messaging.claim(P, Q, 1, 60, 60))
    _raises_unavailable(lambda: messaging.get_messages(P, Q, ids))

    restartable_store.start()
    deadline = time.monotonic() + PATIENCE
    while not messaging.ping():
        assert time.monotonic() < deadline, f"the service did not reconnect within {PATIENCE} s"
        time.sleep(0.2)
    fresh = service(restartable_store.uri, clock)
    for reader in (messaging, fresh):
        assert {queue: reader.get_messages(P, queue, ids)[0] for queue in (Q, DLQ)} == before
        held = reader.get_claim(P, Q, second)
        assert ([m.id for m in held[1]], held[0].expires) == (ids[3:5], clock.now + 60)
        assert [m.body for m in reader.list_messages(
            P, Q, client_id=CLIENT, marker=None, limit=20, echo=True, include_claimed=True,
            include_delayed=True)[0]] == [3, 4, 5, "later"]
    fresh.storage.close()
    clock.advance(1)
    assert [m.id for m in messaging.claim(P, Q, 5, 60, 60)[1]] == [ids[5]]
    assert [m.id for m in messaging.claim(P, DLQ, 5, 60, 60)[1]] == ids[:3]
    messaging.storage.close()


# -- a process killed -9 in the middle of its writes ------------------------------------------

#: a writer's posts at most, its clock's step, and the ttl that outlives them all
WRITES, STEP, LONG_TTL = 10_000, 61, 1_209_600


def _post_and_claim_until_killed(uri: str, acknowledged) -> None:
    """Post one message and claim one (moving the one before to the DLQ), on and on; report each post."""
    clock = ManualClock(NOW)
    messaging = service(uri, clock)
    for n in range(WRITES):
        message_id, = post(messaging, n, ttl=LONG_TTL)
        acknowledged.put(message_id)
        clock.advance(STEP)
        messaging.claim(P, Q, 1, 60, 60)


def test_a_process_killed_mid_write_leaves_every_acknowledged_message_in_exactly_one_queue(driver_uri):
    messaging = service(driver_uri)
    messaging.create_queue(P, DLQ, {})
    messaging.create_queue(P, Q, {"_max_claim_count": 1, "_dead_letter_queue": DLQ})
    acknowledged = FORK.Queue()
    writer = FORK.Process(target=_post_and_claim_until_killed, args=(driver_uri, acknowledged))
    writer.start()
    ids: list[str] = []
    try:
        while len(ids) < 6:
            ids.append(acknowledged.get(timeout=PATIENCE))
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(timeout=PATIENCE)
    assert writer.exitcode == -signal.SIGKILL
    while not acknowledged.empty():
        ids.append(acknowledged.get(timeout=1))

    # past every claim the writer could have made, before any expiry: the sweep moves every
    # exhausted message and completes a move cut short (Swift may leave a copy in both:
    # docs/api.rst, "The move")
    messaging = service(driver_uri, lambda: NOW + STEP * (WRITES + 2))
    messaging.sweep()
    found = {queue: [m.id for m in messaging.get_messages(P, queue, ids)[0]] for queue in (Q, DLQ)}
    assert sorted(found[Q] + found[DLQ]) == sorted(ids), "an acknowledged message was lost or duplicated"
    assert found[Q] in ([], ids[-1:]), "only a message killed before its claim may stay in the queue"
    messaging.storage.close()
