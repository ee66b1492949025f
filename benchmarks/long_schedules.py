"""What a claim costs with many messages scheduled far ahead, against a queue with none, per store.

Each size ``N`` of ``--sizes`` gets a queue holding ``N`` messages scheduled
six days ahead (posted with ``deliver_at``, 100 a post, through the service
layer the API calls, on a deployment whose ``max_message_delay`` is 7 days)
and one ready message; ``N = 0`` is the queue without them. In each of
``--rounds`` rounds every queue gets one turn, in an order that alternates
between rounds: ``--claims`` cycles of a claim of its ready message, a read
of the claim and its release. A turn's figure is its mean cycle time, wall
clock and CPU (of this process, and of the redis-server for Redis); the
figures given are the medians over the rounds, and each size's ratio to
``N = 0``. docs/api.rst, "Long schedules": the goal is a ratio near 1 on every
store where a claim reads no scheduled message.

Stores: ``sqlite`` (a file in a temporary directory), ``redis`` (a throwaway
redis-server, ``bench_stores.py``), or ``--uri`` naming any store (MongoDB,
Swift, a Redis Cluster) whose contents the run may change; it uses queues
named ``bench-long-N`` and deletes them after.

Usage: ``python benchmarks/long_schedules.py [--stores sqlite,redis] [--uri URI]
[--sizes 0,1000,10000] [--rounds 7] [--claims 30] [--json]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_stores import stores  # noqa: E402
from zaqar_lite.clock import ManualClock  # noqa: E402
from zaqar_lite.config import load_settings  # noqa: E402
from zaqar_lite.service import Messaging  # noqa: E402
from zaqar_lite.storage import open_storage  # noqa: E402

PROJECT, CLIENT = "bench", "0f1e2d3c-4b5a-4968-8776-655443322110"
WEEK = 604800


def _service(uri: str, clock: ManualClock) -> Messaging:
    settings = load_settings(None, storage_uri=uri)
    limits = dataclasses.replace(settings.limits, max_message_delay=WEEK)
    return Messaging(open_storage(uri), settings.replace(limits=limits), clock)


def _stock(messaging: Messaging, queue: str, scheduled: int, clock: ManualClock) -> None:
    far = clock.now + 6 * 86400
    for start in range(0, scheduled, 100):
        items = [{"body": n, "ttl": None, "delay": None, "dlq_eligible": True, "deliver_at": far}
                 for n in range(start, min(start + 100, scheduled))]
        messaging.post(PROJECT, queue, CLIENT, items, 10)
    messaging.post(PROJECT, queue, CLIENT, [{"body": "ready", "ttl": None, "delay": None,
                                             "dlq_eligible": True}], 10)


def _turn(messaging: Messaging, queue: str, claims: int,
          server_cpu: Callable[[], float]) -> tuple[float, float]:
    """Return the mean wall and CPU seconds of ``claims`` claims of the ready message, read and released."""
    wall = cpu = 0.0
    for _ in range(claims):
        started, started_cpu, started_server = time.perf_counter(), time.process_time(), server_cpu()
        claim_id, claimed, _ = messaging.claim(PROJECT, queue, 1, 60, 60)
        messaging.get_claim(PROJECT, queue, claim_id)
        messaging.release_claim(PROJECT, queue, claim_id)
        wall += time.perf_counter() - started
        cpu += time.process_time() - started_cpu + server_cpu() - started_server
        assert len(claimed) == 1, f"{queue}: the ready message was not claimed"
    return wall / claims, cpu / claims


def measure(uri: str, sizes: list[int], rounds: int, claims: int,
            server_cpu: Callable[[], float] = lambda: 0.0) -> list[dict[str, float]]:
    """Return, per size, the median cycle wall and CPU microseconds and their ratios to the first size."""
    clock = ManualClock(time.time())
    messaging = _service(uri, clock)
    queues = {size: f"bench-long-{size}" for size in sizes}
    for size, queue in queues.items():
        messaging.delete_queue(PROJECT, queue)
        _stock(messaging, queue, size, clock)
        _turn(messaging, queue, 3, server_cpu)  # warm its metadata and statements up
    figures: dict[int, list[tuple[float, float]]] = {size: [] for size in sizes}
    for round_number in range(rounds):
        order = sizes if round_number % 2 == 0 else sizes[::-1]
        for size in order:
            figures[size].append(_turn(messaging, queues[size], claims, server_cpu))
    for queue in queues.values():
        messaging.delete_queue(PROJECT, queue)
    base_wall = statistics.median(w for w, _ in figures[sizes[0]])
    base_cpu = statistics.median(c for _, c in figures[sizes[0]])
    rows = []
    for size in sizes:
        wall = statistics.median(w for w, _ in figures[size])
        cpu = statistics.median(c for _, c in figures[size])
        rows.append({"scheduled": size, "cycle_us": round(wall * 1e6, 1), "cycle_cpu_us": round(cpu * 1e6, 1),
                     "wall_ratio": round(wall / base_wall, 3), "cpu_ratio": round(cpu / base_cpu, 3)})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the comparison on each store asked for and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,redis")
    parser.add_argument("--uri", help="measure this store instead of --stores")
    parser.add_argument("--sizes", default="0,1000,10000")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--claims", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    results: dict[str, list[dict[str, float]]] = {}
    if args.uri:
        results[args.uri.split(":", 1)[0]] = measure(args.uri, sizes, args.rounds, args.claims)
    else:
        for kind in args.stores.split(","):
            with tempfile.TemporaryDirectory() as directory, \
                    stores(kind, Path(directory), "normal") as handed:
                results[kind] = measure(handed.uri("long"), sizes, args.rounds, args.claims,
                                        handed.cpu_seconds)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for kind, rows in results.items():
        print(f"{kind}:  scheduled   cycle us   cycle CPU us   wall ratio   CPU ratio")
        for row in rows:
            print(f"{'':>6}{row['scheduled']:>11}{row['cycle_us']:>11}{row['cycle_cpu_us']:>15}"
                  f"{row['wall_ratio']:>13}{row['cpu_ratio']:>12}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
