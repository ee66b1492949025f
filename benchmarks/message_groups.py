"""Claim throughput of a queue whose messages are spread over 1,000 ordered groups against none.

Both queues live in one store and are driven through the service layer the API
calls (``Messaging.claim``, then ``Messaging.delete_message`` of each message
claimed), in one process, on SQLite (a file) and on Redis (a throwaway
redis-server started by the suites' harness, ``tests/servers/redis.py``):

* ``plain``: messages without a group;
* ``groups``: the same number of messages, message ``i`` in group ``g<i mod 1000>``,
  so the first 1,000 messages are heads and each delete lets the next one in.

Each round tops both queues up to ``--depth`` messages (outside the timed part),
then gives each one a turn of ``--seconds`` of claim+delete (``--limit``
messages per claim), back to back, the order alternating between rounds. The
ratio printed is the median of the per-round ratios groups / plain, so both
sides share the machine's load of the moment; ``uptime``'s load is printed too.

Usage: ``python benchmarks/message_groups.py [--stores sqlite,redis] [--rounds 6]
[--seconds 2] [--depth 3000] [--limit 10] [--json]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PROJECT = "bench"
GROUPS = 1000
QUEUES = {"plain": "bench-plain", "groups": "bench-groups"}
POST_BATCH = 20


@contextlib.contextmanager
def store_uri(kind: str, directory: Path) -> Iterator[str]:
    """Yield the URI of an empty store of ``kind``; a Redis server is started and stopped here."""
    if kind == "sqlite":
        yield f"sqlite:///{directory}/bench.db"
        return
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # tests.servers lives in the repository, not in the package
    from tests.servers.redis import RedisServer

    server = RedisServer(directory)
    server.start()
    try:
        yield server.uri()
    finally:
        server.stop()


class Side:
    """One queue of the comparison and its service."""

    def __init__(self, messaging: Any, name: str, grouped: bool) -> None:
        self.messaging = messaging
        self.queue = QUEUES[name]
        self.grouped = grouped
        self.posted = 0
        self.client_id = str(uuid.uuid4())

    def top_up(self, depth: int) -> None:
        """Post messages until the queue holds ``depth`` (each in the next group, when grouped)."""
        stats, _ = self.messaging.queue_stats(PROJECT, self.queue)
        missing = depth - stats.total
        while missing > 0:
            count = min(POST_BATCH, missing)
            items = [{"body": {"n": self.posted + i}, "ttl": None, "delay": None, "dlq_eligible": True,
                      "group": f"g{(self.posted + i) % GROUPS}" if self.grouped else None}
                     for i in range(count)]
            self.messaging.post(PROJECT, self.queue, self.client_id, items, 100)
            self.posted += count
            missing -= count

    def turn(self, seconds: float, limit: int) -> float:
        """Claim and delete for ``seconds``; return messages claimed per second."""
        claimed = 0
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            claim_id, messages, _ = self.messaging.claim(PROJECT, self.queue, limit, 300, 60)
            for message in messages:
                self.messaging.delete_message(PROJECT, self.queue, message.id, claim_id)
            claimed += len(messages)
        return claimed / elapsed


def measure(kind: str, rounds: int, seconds: float, depth: int, limit: int) -> dict[str, Any]:
    """Run the rounds on one store; return each side's rates and the ratios."""
    from zaqar_lite.config import load_settings
    from zaqar_lite.service import Messaging
    from zaqar_lite.storage import open_storage

    with tempfile.TemporaryDirectory(prefix=f"groups-{kind}-") as tmp, store_uri(kind, Path(tmp)) as uri:
        storage = open_storage(uri)
        messaging = Messaging(storage, load_settings(None, storage_uri=uri))
        sides = {"plain": Side(messaging, "plain", False), "groups": Side(messaging, "groups", True)}
        rates: dict[str, list[float]] = {"plain": [], "groups": []}
        for number in range(rounds):
            order = ["plain", "groups"] if number % 2 == 0 else ["groups", "plain"]
            for name in order:
                sides[name].top_up(depth)
                rates[name].append(sides[name].turn(seconds, limit))
        storage.close()
    ratios = [g / p for g, p in zip(rates["groups"], rates["plain"], strict=True)]
    return {"store": kind, "plain_claims_per_s": statistics.median(rates["plain"]),
            "groups_claims_per_s": statistics.median(rates["groups"]), "ratio": statistics.median(ratios),
            "ratios": ratios}


def main() -> None:
    """Parse the options, run, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,redis")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--depth", type=int, default=3000)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    load_before = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    results = [measure(kind, options.rounds, options.seconds, options.depth, options.limit)
               for kind in options.stores.split(",")]
    load_after = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    if options.json:
        print(json.dumps({"results": results, "uptime_before": load_before, "uptime_after": load_after}))
        return
    print(f"claim+delete, {options.limit} per claim, {options.rounds} rounds of {options.seconds} s, "
          f"{options.depth} messages per queue, {GROUPS} groups")
    print(f"{'store':8} {'plain claims/s':>15} {'1000 groups claims/s':>21} {'ratio':>7}")
    for result in results:
        print(f"{result['store']:8} {result['plain_claims_per_s']:15.0f} "
              f"{result['groups_claims_per_s']:21.0f} {result['ratio']:7.3f}")
    print(f"uptime before: {load_before}")
    print(f"uptime after:  {load_after}")


if __name__ == "__main__":
    main()
