"""Claim throughput of a queue whose messages are spread over 1,000 ordered groups against none.

Both queues live in one store and are driven through the service layer the API
calls (``Messaging.claim``, then ``Messaging.delete_message`` of each message
claimed), in one process, on SQLite (a file) and on Redis (a throwaway
redis-server started by the suites' harness, ``tests/servers/redis.py``):

* ``plain``: messages without a group;
* ``groups``: the same number of messages, message ``i`` in group ``g<i mod 1000>``,
  so the first 1,000 messages are heads and each delete lets the next one in.

Each round tops both queues up to ``--depth`` messages (outside the timed part;
a turn that empties its queue ends early and says so), then gives each one a
turn of ``--seconds`` of claim+delete (``--limit``
messages per claim), back to back, the order alternating between rounds. The
ratios printed are the medians of the per-round ratios groups / plain, so both
sides share the machine's load of the moment, per wall-clock second and per
CPU-second (of this process and the store's server together, which moves much
less with the neighbours' load); ``uptime``'s load is printed too.

Usage: ``python benchmarks/message_groups.py [--stores sqlite,redis] [--rounds 6]
[--seconds 2] [--depth 12000] [--limit 10] [--json]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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


def server_cpu_seconds(pid: int | None) -> float:
    """Return the CPU time a store server process has used so far (0 without one; Linux /proc)."""
    if pid is None:
        return 0.0
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


@contextlib.contextmanager
def store_uri(kind: str, directory: Path) -> Iterator[tuple[str, int | None]]:
    """Yield the URI of an empty store of ``kind`` and its server's PID (a Redis server is started here)."""
    if kind == "sqlite":
        yield f"sqlite:///{directory}/bench.db", None
        return
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # tests.servers lives in the repository, not in the package
    from tests.servers.redis import RedisServer

    server = RedisServer(directory)
    server.start()
    try:
        yield server.uri(), server.pid
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

    def turn(self, seconds: float, limit: int, server_pid: int | None) -> tuple[float, float]:
        """Claim and delete for ``seconds`` (or until the queue is empty).

        Returns:
            Messages claimed per wall-clock second, and per CPU-second of this
            process and the store's server together.
        """
        claimed = 0
        cpu_start = time.process_time() + server_cpu_seconds(server_pid)
        start = time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            claim_id, messages, _ = self.messaging.claim(PROJECT, self.queue, limit, 300, 60)
            if not messages:
                print(f"  {self.queue} ran empty after {elapsed:.2f} s: raise --depth", file=sys.stderr)
                break
            for message in messages:
                self.messaging.delete_message(PROJECT, self.queue, message.id, claim_id)
            claimed += len(messages)
        wall = time.perf_counter() - start
        cpu = time.process_time() + server_cpu_seconds(server_pid) - cpu_start
        return claimed / wall, claimed / max(cpu, 1e-9)


def measure(kind: str, rounds: int, seconds: float, depth: int, limit: int) -> dict[str, Any]:
    """Run the rounds on one store; return each side's rates and the ratios."""
    from zaqar_lite.config import load_settings
    from zaqar_lite.service import Messaging
    from zaqar_lite.storage import open_storage

    with tempfile.TemporaryDirectory(prefix=f"groups-{kind}-") as tmp, \
            store_uri(kind, Path(tmp)) as (uri, server_pid):
        storage = open_storage(uri)
        messaging = Messaging(storage, load_settings(None, storage_uri=uri))
        sides = {"plain": Side(messaging, "plain", False), "groups": Side(messaging, "groups", True)}
        rates: dict[str, list[tuple[float, float]]] = {"plain": [], "groups": []}
        for number in range(rounds):
            order = ["plain", "groups"] if number % 2 == 0 else ["groups", "plain"]
            for name in order:
                sides[name].top_up(depth)
                rates[name].append(sides[name].turn(seconds, limit, server_pid))
        storage.close()
    result: dict[str, Any] = {"store": kind}
    for index, unit in enumerate(("s", "cpu_s")):
        plain = [r[index] for r in rates["plain"]]
        grouped = [r[index] for r in rates["groups"]]
        ratios = [g / p for g, p in zip(grouped, plain, strict=True)]
        result.update({f"plain_claims_per_{unit}": statistics.median(plain),
                       f"groups_claims_per_{unit}": statistics.median(grouped),
                       f"ratio_per_{unit}": statistics.median(ratios), f"ratios_per_{unit}": ratios})
    return result


def main() -> None:
    """Parse the options, run, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,redis")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--depth", type=int, default=12000)
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
    print(f"{'store':8} {'rate':14} {'plain':>9} {'1000 groups':>12} {'ratio':>7}")
    for result in results:
        for unit, label in (("s", "claims/s"), ("cpu_s", "claims/CPU-s")):
            print(f"{result['store']:8} {label:14} {result[f'plain_claims_per_{unit}']:9.0f} "
                  f"{result[f'groups_claims_per_{unit}']:12.0f} {result[f'ratio_per_{unit}']:7.3f}")
    print(f"uptime before: {load_before}")
    print(f"uptime after:  {load_after}")


if __name__ == "__main__":
    main()
