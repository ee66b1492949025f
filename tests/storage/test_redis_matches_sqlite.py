"""The Redis scripts against the reference driver: random operation sequences, same outcomes.

Each seed drives the same operations (posts with ttl/delay/eligibility, groups and dedup ids,
claims, edits of delayed messages, releases with reasons, renewals, deletes, pops, purges,
sweeps, redrives, clock jumps) on
a SQLite and a Redis store in lockstep, and compares every result and error and
a full view of both queues after each step. Markers are left out: SQLite's are
global, Redis's per queue; both are FIFO.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

from zaqar_lite import errors
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.models import RedriveFilter, RedriveRequest
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage

P, Q, DLQ, REPLAY = "p", "q", "q-dlq", "q-replay"
SEEDS = range(8)
STEPS = 60


def _comparable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k != "marker"}
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    return value


class Twins:
    """Two messaging services, SQLite and Redis, with clocks and id generators in lockstep."""

    def __init__(self, sqlite_uri: str, redis_uri: str) -> None:
        self.clock = ManualClock()
        settings = load_settings(None, storage_uri="sqlite:///unused.db")
        self.services = []
        for uri in (sqlite_uri, redis_uri):
            counter = itertools.count()
            jitter = random.Random(1234)  # the same draws for both, in lockstep
            self.services.append(Messaging(open_storage(uri), settings, self.clock,
                                           ids=lambda c=counter: f"id{next(c):05d}", draw=jitter.random))

    def both(self, method: str, *args: Any, pick: Callable[[Any], Any] = lambda r: r, **kwargs: Any) -> Any:
        """Call ``method`` on both services; assert the same result (through ``pick``) or error."""
        outcomes = []
        for service in self.services:
            try:
                outcomes.append(("ok", _comparable(pick(getattr(service, method)(*args, **kwargs)))))
            except errors.ZaqarLiteError as exc:
                outcomes.append(("error", type(exc).__name__))
        assert outcomes[0] == outcomes[1], f"{method}{args}: sqlite {outcomes[0]} != redis {outcomes[1]}"
        return outcomes[0]

    def observe(self, ids: list[str]) -> None:
        """Compare listings (three flag sets), stats and reads of both queues, and the queue list."""
        first = lambda result: result[0]  # noqa: E731 - (value, now) pairs: compare the value
        for queue in (Q, DLQ, REPLAY):
            for claimed, delayed, echo in ((False, False, True), (True, True, True), (True, False, False)):
                self.both("list_messages", P, queue, client_id="c2", marker=None, limit=20, echo=echo,
                          include_claimed=claimed, include_delayed=delayed, pick=first)
            self.both("queue_stats", P, queue, pick=first)
            self.both("get_messages", P, queue, ids, pick=first)
        self.both("list_queues", P, marker=None, limit=10, name=None, filters={})


#: the W3C trace context some posts carry
TRACE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "rojo=1"}


class Walk:
    """One random walk over both stores: a step draws a queue, a known claim and message, and an operation."""

    def __init__(self, twins: Twins, rnd: random.Random, backoff: bool = False) -> None:
        self.twins, self.rnd = twins, rnd
        #: the queue has a _retry_backoff and releases may carry a delay
        self.backoff = backoff
        self.ids: list[str] = []
        self.claims: list[tuple[str, str]] = []
        self.queue = Q
        self.known_claim = (Q, "no-claim")
        self.message_id = "no-message"

    def setup(self) -> None:
        """Most walks start with a dead-letter queue and random reserved metadata."""
        rnd, twins = self.rnd, self.twins
        if rnd.random() < 0.75:
            twins.both("create_queue", P, DLQ, {})
            metadata: dict[str, Any] = {"_max_claim_count": rnd.randint(1, 3), "_dead_letter_queue": DLQ,
                                        "_dead_letter_on_expiry": rnd.random() < 0.5}
            if rnd.random() < 0.4:
                metadata["_dead_letter_queue_messages_ttl"] = rnd.choice([60, 600])
            if rnd.random() < 0.3:
                metadata["_default_message_delay"] = 30
            twins.both("create_queue", P, Q, {**metadata, **self.backoff_metadata()})
        elif self.backoff:
            twins.both("create_queue", P, Q, self.backoff_metadata())

    def backoff_metadata(self) -> dict[str, Any]:
        """A random ``_retry_backoff`` for a walk with backoff, else nothing."""
        if not self.backoff:
            return {}
        rnd = self.rnd
        return {"_retry_backoff": {"base": rnd.choice([1, 7.5, 20]), "factor": rnd.choice([1, 1.5, 3]),
                                   "max": 200, "jitter": rnd.choice([0, 0.3, 0.9])}}

    def step(self) -> None:
        """Draw and run one operation on both stores, then compare their queues."""
        rnd = self.rnd
        self.queue = Q if rnd.random() < 0.85 else DLQ
        self.known_claim = rnd.choice(self.claims) if self.claims else (self.queue, "no-claim")
        self.message_id = rnd.choice(self.ids + ["no-message"]) if self.ids else "no-message"
        op = rnd.random()
        next(action for bound, action in OPERATIONS if op < bound)(self)
        self.twins.observe(self.ids)

    def post(self) -> None:
        rnd = self.rnd
        items = [{"body": {"n": len(self.ids) + i}, "ttl": rnd.choice([None, 60, 120, 600]),
                  "delay": rnd.choice([None, None, 0, 30, 120]), "dlq_eligible": rnd.random() < 0.8,
                  "group": rnd.choice([None, None, "ga", "gb"]),
                  "dedup_id": rnd.choice([None, None, "d1", "d2"])}
                 for i in range(rnd.randint(1, 3))]
        trace = rnd.choice([None, None, TRACE])
        outcome = self.twins.both("post", P, self.queue, rnd.choice(["c1", "c2"]), items, 10, trace)
        self.ids.extend(outcome[1])

    def claim(self) -> None:
        rnd = self.rnd
        limit, ttl, grace = rnd.randint(1, 4), rnd.choice([60, 90]), rnd.choice([0, 30, 60])
        outcome = self.twins.both("claim", P, self.queue, limit, ttl, grace, pick=lambda r: r[:2])
        if outcome[1][1]:
            self.claims.append((self.queue, outcome[1][0]))

    def advance(self) -> None:
        self.twins.clock.advance(self.rnd.choice([1, 10, 31, 61, 130]))

    def sweep(self) -> None:
        self.twins.both("sweep")

    def delete_message(self) -> None:
        claim_id = self.rnd.choice([None, "no-claim", self.known_claim[1]])
        self.twins.both("delete_message", P, self.queue, self.message_id, claim_id)

    def delete_messages(self) -> None:
        chosen = self.rnd.sample(self.ids, min(len(self.ids), 3))
        claim_ids = self.rnd.choice([None, [c for _, c in self.claims[-2:]]])
        self.twins.both("delete_messages", P, self.queue, chosen, claim_ids)

    def pop(self) -> None:
        self.twins.both("pop", P, self.queue, self.rnd.randint(1, 3), pick=lambda r: r[0])

    def release_claim(self) -> None:
        self.twins.both("release_claim", P, *self.known_claim)

    def release_message(self) -> None:
        reason = self.rnd.choice([None, {"error": "timeout 30s", "error_type": "Timeout"}])
        queue, claim_id = self.known_claim
        delay = self.rnd.choice([None, None, 0, 45]) if self.backoff else None
        outcome = self.rnd.choice(["retry", "retry", "postpone", "reject"])
        if outcome != "retry":
            delay = self.rnd.choice([0, 30]) if outcome == "postpone" else None
        self.twins.both("release_message", P, queue, self.message_id, claim_id, reason, delay, outcome)

    def renew_claim(self) -> None:
        self.twins.both("renew_claim", P, *self.known_claim, self.rnd.choice([60, 120]), 30)

    def get_claim(self) -> None:
        self.twins.both("get_claim", P, *self.known_claim, pick=lambda r: r[:2])

    def edit(self) -> None:
        rnd = self.rnd
        keys = rnd.sample(["body", "ttl", "delay"], rnd.randint(1, 3))
        values = {"body": {"edited": len(self.ids)}, "ttl": rnd.choice([60, 600]),
                  "delay": rnd.choice([0, 30])}
        # the latest posts are the likeliest to be still delayed
        message_id = rnd.choice(self.ids[-3:]) if self.ids else self.message_id
        self.twins.both("edit_delayed_message", P, self.queue, message_id,
                        {k: values[k] for k in keys}, 10, pick=lambda r: r[0])

    def purge(self) -> None:
        self.twins.both("purge", P, self.queue, ["messages"])

    def delete_queue(self) -> None:
        self.twins.both("delete_queue", P, self.queue)

    def redrive(self) -> None:
        rnd = self.rnd
        request = RedriveRequest(limit=rnd.randint(1, 4), destination=rnd.choice([None, None, REPLAY]),
                                 dry_run=rnd.random() < 0.2,
                                 filter=RedriveFilter(error_type=rnd.choice([None, None, "Timeout"])))
        self.twins.both("redrive", P, DLQ, request, pick=lambda r: r[0])


#: (upper bound of the draw, operation): a step runs the first whose bound its draw is under
OPERATIONS: list[tuple[float, Callable[[Walk], None]]] = [
    (0.22, Walk.post), (0.35, Walk.claim), (0.42, Walk.edit), (0.5, Walk.advance), (0.55, Walk.sweep),
    (0.62, Walk.delete_message), (0.66, Walk.delete_messages), (0.7, Walk.pop),
    (0.76, Walk.release_claim), (0.83, Walk.release_message), (0.88, Walk.renew_claim),
    (0.93, Walk.get_claim), (0.95, Walk.purge), (0.96, Walk.delete_queue), (1.0, Walk.redrive),
]


@pytest.mark.parametrize("seed", SEEDS)
def test_random_operation_sequences_match_the_sqlite_reference(seed, tmp_path, redis_store_uri):
    twins = Twins(f"sqlite:///{tmp_path}/reference.db?synchronous=normal", redis_store_uri)
    walk = Walk(twins, random.Random(seed))
    walk.setup()
    for _ in range(STEPS):
        walk.step()


@pytest.mark.parametrize("seed", range(100, 106))
def test_random_sequences_with_retry_backoff_match_the_sqlite_reference(seed, tmp_path, redis_store_uri):
    twins = Twins(f"sqlite:///{tmp_path}/reference.db?synchronous=normal", redis_store_uri)
    walk = Walk(twins, random.Random(seed), backoff=True)
    walk.setup()
    for _ in range(STEPS):
        walk.step()


def test_redrives_match_the_sqlite_reference(tmp_path, redis_store_uri):
    twins = Twins(f"sqlite:///{tmp_path}/reference.db?synchronous=normal", redis_store_uri)
    twins.both("create_queue", P, DLQ, {})
    twins.both("create_queue", P, Q, {"_max_claim_count": 1, "_dead_letter_queue": DLQ})
    ids = twins.both("post", P, Q, "c1", [{"body": n, "ttl": None, "delay": None, "dlq_eligible": True}
                                         for n in range(6)], 10)[1]
    claim_id = twins.both("claim", P, Q, 6, 60, 60, pick=lambda r: r[0])[1]
    reason = {"error": "timeout 30s", "error_type": "Timeout"}
    for message_id in ids[:3]:
        twins.both("release_message", P, Q, message_id, claim_id, reason)
    twins.clock.advance(61)
    twins.both("sweep")
    twins.observe(ids)
    timeouts_but_the_first = RedriveFilter(error_type="Timeout", ids=frozenset(ids[1:]))
    for request in (RedriveRequest(limit=10, dry_run=True),
                    RedriveRequest(limit=10, filter=timeouts_but_the_first),
                    RedriveRequest(limit=1, destination=REPLAY),
                    RedriveRequest(limit=10)):
        twins.clock.advance(1)
        twins.both("redrive", P, DLQ, request, pick=lambda r: r[0])
        twins.observe(ids)
    twins.both("claim", P, Q, 6, 60, 60, pick=lambda r: r[1])
