"""What pools cost: post and claim+delete on one Redis against a two-pool deployment, and the lookup's share.

Two throwaway redis-servers are started with the suites' harness
(``tests/servers/redis.py``). The same app (``create_app``) is driven in this
process through falcon's test client, so the figures are the server's own CPU
per request without a network or an HTTP parser in front:

* ``one redis``: ``[pools]`` off, the store is Redis server A;
* ``two pools``: ``[pools] enabled``, the default store and catalog are a
  database of server A, and the queues are spread over two pools, one on each
  server (by weight, 1:1).

Each load (``post``: one message per POST over ``--queues`` queues;
``claim+delete``: claim ``limit=1`` and delete the message with its claim id)
runs ``--rounds`` rounds in which the two deployments take turns; the figures
are medians over rounds, and the ratio is two pools / one redis.

The queues are created before the loads (the common case: a request for a
queue that exists; the first request for a new queue also writes its
placement). The lookup's share: during the two-pool loads every call of the
router's placement lookup (``PooledStorage._existing_home``: the process's
cache, then the catalog) is timed, and its total is given as a share of the
process CPU the load took (the goal is under 5%).

Usage: ``python benchmarks/bench_pools.py [--requests 2000] [--rounds 3] [--queues 50] [--json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import falcon.testing

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.servers is not installed: it lives in the repository

from tests.servers.redis import RedisServer  # noqa: E402
from zaqar_lite.api.app import create_app  # noqa: E402
from zaqar_lite.config import PoolSettings, load_settings  # noqa: E402
from zaqar_lite.storage import open_deployment  # noqa: E402
from zaqar_lite.storage.pools.router import PooledStorage  # noqa: E402


@contextmanager
def redis_servers(directory: Path, count: int) -> Iterator[list[RedisServer]]:
    """Start ``count`` redis-servers (no persistence) and stop them on the way out."""
    servers = []
    try:
        for index in range(count):
            (directory / f"redis-{index}").mkdir()
            server = RedisServer(directory / f"redis-{index}", "--save", "", "--appendonly", "no")
            server.start()
            servers.append(server)
        yield servers
    finally:
        for server in servers:
            server.stop()


def client_for(storage: Any, settings: Any) -> falcon.testing.TestClient:
    """Return a test client of the app around ``storage``, in project ``bench``."""
    return falcon.testing.TestClient(create_app(settings, storage=storage),
                                     headers={"Client-ID": str(uuid.uuid4()), "X-Project-ID": "bench"})


def post_load(client: falcon.testing.TestClient, queues: list[str], requests: int) -> int:
    """Post one message per request, round-robin over the queues; return the messages posted."""
    for index in range(requests):
        result = client.simulate_post(f"/v2/queues/{queues[index % len(queues)]}/messages",
                                      json={"messages": [{"body": index, "ttl": 3600}]})
        assert result.status_code == 201, result.text
    return requests


def claim_delete_load(client: falcon.testing.TestClient, queues: list[str], requests: int) -> int:
    """Claim one message and delete it with its claim id, round-robin; return the messages deleted."""
    done = 0
    for index in range(requests):
        queue = queues[index % len(queues)]
        claimed = client.simulate_post(f"/v2/queues/{queue}/claims", params={"limit": "1"},
                                       json={"ttl": 300, "grace": 60})
        if claimed.status_code != 201:
            continue
        href = claimed.json["messages"][0]["href"]
        assert client.simulate_delete(href).status_code == 204
        done += 1
    return done


class LookupTimer:
    """Times every placement lookup of a router (its cache, then the catalog)."""

    def __init__(self, router: PooledStorage) -> None:
        self.seconds = 0.0
        self.calls = 0
        original = router._existing_home

        def timed(project: str, queue: str) -> str | None:
            started = time.perf_counter()
            try:
                return original(project, queue)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1
        router._existing_home = timed  # type: ignore[method-assign]


Load = Callable[[falcon.testing.TestClient, list[str], int], int]


def measure(load: Load, client: falcon.testing.TestClient, queues: list[str], requests: int,
            timer: LookupTimer | None) -> dict[str, float]:
    """Run one load; return its messages a second, the process CPU it took and the lookups' share."""
    before_lookup = timer.seconds if timer else 0.0
    wall, cpu = time.perf_counter(), time.process_time()
    messages = load(client, queues, requests)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    figures = {"messages_per_s": messages / wall, "cpu_ms_per_message": 1000 * cpu / max(messages, 1)}
    if timer is not None:
        figures["lookup_share"] = (timer.seconds - before_lookup) / cpu
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every load on both deployments, ``args.rounds`` times in alternating order."""
    with tempfile.TemporaryDirectory(prefix="zaqar-lite-bench-pools-") as tmp, \
            redis_servers(Path(tmp), 2) as (first, second):
        one = load_settings(None, storage_uri=first.uri(0))
        hosts = tuple(f"127.0.0.1:{server.port}" for server in (first, second))
        pooled = one.replace(storage_uri=first.uri(1), noauth_admin_routes=True,
                             pools=PoolSettings(enabled=True, allowed_hosts=hosts))
        single = client_for(open_deployment(one), one)
        router = open_deployment(pooled)
        assert isinstance(router, PooledStorage)
        two = client_for(router, pooled)
        for name, server in (("a", first), ("b", second)):
            result = two.simulate_put(f"/v2/pools/{name}", json={"uri": server.uri(2), "weight": 1})
            assert result.status_code == 201, result.text
        queues = [f"bench-{index}" for index in range(args.queues)]
        for client in (single, two):  # the common case: queues that exist (a first post places its queue)
            for queue in queues:
                assert client.simulate_put(f"/v2/queues/{queue}", json={}).status_code == 201
        timer = LookupTimer(router)
        results: dict[str, dict[str, list[dict[str, float]]]] = {}
        for round_number in range(args.rounds):
            order = [("one redis", single, None), ("two pools", two, timer)]
            if round_number % 2:
                order.reverse()
            for load_name, load in (("post", post_load), ("claim+delete", claim_delete_load)):
                for deployment, client, lookups in order:
                    results.setdefault(load_name, {}).setdefault(deployment, []).append(
                        measure(load, client, queues, args.requests, lookups))
        placed = {name: sum(1 for q in queues if router.placement("bench", q) == name) for name in ("a", "b")}
    summary: dict[str, Any] = {"requests": args.requests, "rounds": args.rounds, "queues": args.queues,
                               "queues_per_pool": placed, "loads": {}}
    for load_name, by_deployment in results.items():
        medians = {deployment: {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
                   for deployment, rounds in by_deployment.items()}
        medians["ratio two pools / one redis"] = {
            "messages_per_s": medians["two pools"]["messages_per_s"] / medians["one redis"]["messages_per_s"]}
        summary["loads"][load_name] = medians
    return summary


def table(summary: dict[str, Any]) -> str:
    """Format the figures as a plain table."""
    lines = [f"{summary['requests']} requests per load, {summary['rounds']} rounds, "
             f"{summary['queues']} queues (per pool: {summary['queues_per_pool']})",
             f"{'load':<14}{'deployment':<14}{'messages/s':>12}{'CPU ms/msg':>12}{'lookup share':>14}"]
    for load_name, medians in summary["loads"].items():
        for deployment in ("one redis", "two pools"):
            row = medians[deployment]
            share = f"{100 * row['lookup_share']:.2f}%" if "lookup_share" in row else "-"
            lines.append(f"{load_name:<14}{deployment:<14}{row['messages_per_s']:>12.0f}"
                         f"{row['cpu_ms_per_message']:>12.3f}{share:>14}")
        ratio = medians["ratio two pools / one redis"]["messages_per_s"]
        lines.append(f"{load_name:<14}{'ratio':<14}{ratio:>12.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per load and round (2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, deployments alternating (3)")
    parser.add_argument("--queues", type=int, default=50, help="queues the loads go round (50)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    summary = run(args)
    print(json.dumps(summary, indent=2) if args.json else table(summary))


if __name__ == "__main__":
    main()
