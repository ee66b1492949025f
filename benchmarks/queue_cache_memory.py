"""Worker memory against the number of queues touched, and what a queue cache miss costs, on Redis.

A Redis worker remembers each queue's key names and metadata text
(``zaqar_lite/storage/cache.py``), at most ``[storage] queue_cache_size`` queues
(default 10,000). This benchmark shows that the memory stays flat once more
queues than that were touched, in three parts, all against a throwaway
redis-server started by the suites' harness (``tests/servers/redis.py``):

1. ``http``: a real ``zaqar-lite serve`` (gunicorn, ``--workers`` x 8 threads,
   default settings) on that Redis; ``--clients`` threads post one message to a
   new queue and claim it, queue after queue over keep-alive connections (the
   issue's workload). Printed: the RSS of each worker after 0, 10,000, ...
   queues (``--http-queues``).
2. ``driver``: one process running the real service layer and Redis driver
   (``Messaging`` over ``RedisStorage``) with 8 threads, as one worker does but
   without HTTP, so that 1,000,000 queues take minutes, not an hour on 2 cores:
   each queue gets one post (a metadata read, then the post script). Printed:
   RSS and cache entries after each of ``--driver-queues``, with the default
   bound and with the bound lifted (``queue_cache_size`` = 10^9, what an
   unbounded cache would do) up to ``--unbounded-queues``.
3. ``miss``: the cost of a miss. One driver remembers every queue (hits),
   another has ``queue_cache_size = 0`` (every post reads the metadata first
   and builds the key names again); both post one message at a time to the
   same ``--miss-queues`` queues, in alternating rounds, in one process.
   Printed: median microseconds per post of each and their ratio, and the time
   of one cache lookup.

Usage: ``python benchmarks/queue_cache_memory.py [--parts http,driver,miss] [--json]``
(the default run, with 1,000,000 queues, takes about 30 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import timeit
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_load import SESSIONS, serving, store_server  # noqa: E402

from zaqar_lite.config import QUEUE_CACHE_SIZE, load_settings  # noqa: E402
from zaqar_lite.service import Messaging  # noqa: E402
from zaqar_lite.storage import open_storage  # noqa: E402
from zaqar_lite.storage.cache import LRUCache  # noqa: E402
from zaqar_lite.storage.redis.driver import RedisStorage  # noqa: E402

PROJECT = "bench"
CLIENT = str(uuid.uuid4())
ITEM = {"body": {"event": "touch"}, "ttl": None, "delay": None, "dlq_eligible": True}
UNBOUNDED = 10**9
DRIVER_THREADS = 8
#: queues touched before the first measure (imports, connections, scripts, allocator warmed)
WARM_UP = 2000


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size of a process, in MB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def children(parent: int) -> list[int]:
    """PIDs of the processes whose parent is ``parent`` (gunicorn's workers of its master)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(entry.path, "stat").read_text()
                if int(stat[stat.rindex(")") + 2:].split()[1]) == parent:
                    found.append(int(entry.name))
    return sorted(found)


def checkpoints(text: str) -> list[int]:
    return sorted(int(n.replace("_", "")) for n in text.split(","))


# -- 1. a real server over HTTP ---------------------------------------------------

def http_part(storage_uri: str, workdir: Path, marks: Sequence[int], clients: int,
              workers: int) -> dict[str, Any]:
    """Post and claim once in each of max(marks) queues over HTTP; RSS of the workers at each mark."""
    command = [sys.executable, "-m", "zaqar_lite", "serve", "--storage", storage_uri,
               "--workers", str(workers)]
    rows = []
    with serving(command, workdir) as url:
        host, port = url.removeprefix("http://").split(":")
        master = SESSIONS[url]
        headers = {"Client-ID": CLIENT, "X-Project-ID": PROJECT, "Content-Type": "application/json"}
        body = json.dumps({"messages": [{"body": {"event": "touch"}}]})
        claim = json.dumps({"ttl": 60, "grace": 60})
        failures: list[str] = []

        def touch_range(first: int, last: int) -> None:
            def run(offset: int) -> None:
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                for i in range(first + offset, last, clients):
                    queue = f"q{i:07d}"
                    for method, path, data, ok in (("POST", f"/v2/queues/{queue}/messages", body, 201),
                                                   ("POST", f"/v2/queues/{queue}/claims", claim, 201)):
                        conn.request(method, path, data, headers)
                        response = conn.getresponse()
                        response.read()
                        if response.status != ok:
                            failures.append(f"{method} {path}: {response.status}")
                conn.close()
            threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        touch_range(0, WARM_UP)  # every worker's imports, pools and scripts warmed on new queues
        done, started = WARM_UP, time.perf_counter()
        for mark in [WARM_UP, *marks]:
            touch_range(done, mark)
            done = mark
            pids = children(master)
            rows.append({"queues": mark, "worker_rss_mb": [round(rss_mb(p), 1) for p in pids],
                         "seconds": round(time.perf_counter() - started, 1)})
            print(f"  http   {mark:>9,} queues: workers' RSS {rows[-1]['worker_rss_mb']} MB "
                  f"({rows[-1]['seconds']} s)", file=sys.stderr, flush=True)
    return {"clients": clients, "workers": workers, "rows": rows, "failures": failures[:10],
            "failed_requests": len(failures)}


# -- 2. one process running the driver --------------------------------------------

def driver_part(storage_uri: str, marks: Sequence[int], cache_size: int) -> list[dict[str, Any]]:
    """Post once to each of max(marks) new queues with 8 threads; RSS and cache entries at each mark."""
    storage = open_storage(storage_uri, queue_cache_size=cache_size)
    assert isinstance(storage, RedisStorage)
    messaging = Messaging(storage, load_settings(None, storage_uri=storage_uri))

    def touch_range(low: int, high: int) -> None:
        def run(offset: int) -> None:
            for i in range(low + offset, high, DRIVER_THREADS):
                messaging.post(PROJECT, f"d{i:08d}", CLIENT, [ITEM], 40)
        threads = [threading.Thread(target=run, args=(t,)) for t in range(DRIVER_THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    rows = []
    touch_range(0, WARM_UP)  # connections, scripts, allocator
    done, started = WARM_UP, time.perf_counter()
    gc.collect()
    rows.append({"queues": WARM_UP, "rss_mb": round(rss_mb(), 1), "metadata_entries": len(storage._metadata),
                 "name_entries": len(storage._names), "seconds": 0.0})
    for mark in marks:
        touch_range(done, mark)
        done = mark
        gc.collect()
        rows.append({"queues": mark, "rss_mb": round(rss_mb(), 1),
                     "metadata_entries": len(storage._metadata), "name_entries": len(storage._names),
                     "seconds": round(time.perf_counter() - started, 1)})
        print(f"  driver (cache {cache_size:,}) {mark:>9,} queues: RSS {rows[-1]['rss_mb']} MB, "
              f"entries {rows[-1]['metadata_entries']:,} ({rows[-1]['seconds']} s)",
              file=sys.stderr, flush=True)
    storage.close()
    return rows


def driver_in_child(storage_uri: str, marks: Sequence[int], cache_size: int) -> list[dict[str, Any]]:
    """Run :func:`driver_part` in a fresh child process, so that each measure starts from the same RSS."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child measures and reports through the pipe
        code = 0
        try:
            os.close(read)
            rows = driver_part(storage_uri, marks, cache_size)
            with os.fdopen(write, "w") as out:
                json.dump(rows, out)
        except BaseException:  # noqa: BLE001 - the parent reports a child that failed
            import traceback

            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit("the driver measure failed (see above)")
    rows: list[dict[str, Any]] = json.loads(text)
    return rows


# -- 3. a miss against a hit --------------------------------------------------------

def miss_part(storage_uri: str, queues: int, rounds: int) -> dict[str, Any]:
    """Median microseconds per post when the driver remembers the queue and when it does not."""
    settings = load_settings(None, storage_uri=storage_uri)
    remembering = Messaging(open_storage(storage_uri, queue_cache_size=QUEUE_CACHE_SIZE), settings)
    forgetting = Messaging(open_storage(storage_uri, queue_cache_size=0), settings)
    names = [f"m{i:06d}" for i in range(queues)]
    for name in names:  # the queues exist and the remembering driver knows them all
        remembering.create_queue(PROJECT, name, {"_default_message_ttl": 600})
        remembering.post(PROJECT, name, CLIENT, [ITEM], 40)

    def per_post(messaging: Messaging) -> float:
        started = time.perf_counter()
        for name in names:
            messaging.post(PROJECT, name, CLIENT, [ITEM], 40)
        return (time.perf_counter() - started) / len(names) * 1e6

    hits, misses = [], []
    for round_ in range(rounds):  # alternate which goes first, so neighbours' load hits both alike
        pair: list[tuple[list[float], Messaging]] = [(hits, remembering), (misses, forgetting)]
        for times, messaging in pair if round_ % 2 == 0 else pair[::-1]:
            times.append(per_post(messaging))
    for messaging in (remembering, forgetting):
        messaging.storage.close()
    cache: LRUCache[tuple[str, str], str] = LRUCache(QUEUE_CACHE_SIZE)
    for i in range(QUEUE_CACHE_SIZE):
        cache.put((PROJECT, f"q{i}"), "{}")
    lookup: Callable[[], object] = lambda: cache.get((PROJECT, "q5000"))  # noqa: E731
    lookup_us = min(timeit.repeat(lookup, number=100_000, repeat=5)) / 100_000 * 1e6
    hit, miss = statistics.median(hits), statistics.median(misses)
    return {"queues": queues, "rounds": rounds, "hit_us_per_post": round(hit, 1),
            "miss_us_per_post": round(miss, 1), "miss_over_hit": round(miss / hit, 2),
            "hit_rounds_us": [round(t, 1) for t in hits], "miss_rounds_us": [round(t, 1) for t in misses],
            "cache_lookup_us": round(lookup_us, 3)}


# -- report ------------------------------------------------------------------------

def report(results: dict[str, Any]) -> None:
    if "http" in results:
        h = results["http"]
        print(f"\n1. Real server ({h['workers']} workers x 8 threads, Redis, default queue_cache_size "
              f"{QUEUE_CACHE_SIZE:,}); {h['clients']} clients post and claim once per queue")
        print(f"   {'queues touched':>15}  {'RSS of each worker (MB)':<28}{'seconds':>8}")
        for row in h["rows"]:
            rss = ", ".join(f"{r:.1f}" for r in row["worker_rss_mb"])
            print(f"   {row['queues']:>15,}  {rss:<28}{row['seconds']:>8}")
        if h["failed_requests"]:
            print(f"   {h['failed_requests']} requests failed, e.g. {h['failures'][:3]}")
    for key, title in (("driver", f"default queue_cache_size {QUEUE_CACHE_SIZE:,}"),
                       ("unbounded", f"queue_cache_size {UNBOUNDED:,} (no bound)")):
        if key in results:
            print(f"\n2. One process, Messaging + RedisStorage, {DRIVER_THREADS} threads, "
                  f"one post per queue; {title}")
            print(f"   {'queues touched':>15}  {'RSS (MB)':>9}  {'metadata entries':>16}  "
                  f"{'name entries':>12}  {'seconds':>8}")
            for row in results[key]:
                print(f"   {row['queues']:>15,}  {row['rss_mb']:>9.1f}  {row['metadata_entries']:>16,}  "
                      f"{row['name_entries']:>12,}  {row['seconds']:>8}")
    if "miss" in results:
        m = results["miss"]
        print(f"\n3. A post to a remembered queue (hit) and to a forgotten one (miss), "
              f"{m['queues']:,} queues x {m['rounds']} rounds, medians")
        print(f"   hit  {m['hit_us_per_post']:>8.1f} us/post   (rounds {m['hit_rounds_us']})")
        print(f"   miss {m['miss_us_per_post']:>8.1f} us/post   (rounds {m['miss_rounds_us']})")
        print(f"   miss / hit = {m['miss_over_hit']:.2f}; one cache lookup {m['cache_lookup_us']:.3f} us")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="http,driver,miss")
    parser.add_argument("--http-queues", default="10000,20000,50000,100000")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--driver-queues", default="10000,100000,1000000")
    parser.add_argument("--unbounded-queues", default="10000,100000")
    parser.add_argument("--miss-queues", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="zaqar-lite-cache-") as tmp:
        with store_server("redis", Path(tmp, "redis")) as uri:
            if "http" in parts:
                results["http"] = http_part(uri.removesuffix("/0") + "/1", Path(tmp, "server"),
                                            checkpoints(args.http_queues), args.clients, args.workers)
            if "driver" in parts:
                results["driver"] = driver_in_child(uri.removesuffix("/0") + "/2",
                                                    checkpoints(args.driver_queues), QUEUE_CACHE_SIZE)
                if args.unbounded_queues:
                    results["unbounded"] = driver_in_child(uri.removesuffix("/0") + "/3",
                                                           checkpoints(args.unbounded_queues), UNBOUNDED)
            if "miss" in parts:
                results["miss"] = miss_part(uri.removesuffix("/0") + "/4", args.miss_queues, args.rounds)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        report(results)


if __name__ == "__main__":
    main()
