"""Worker balance: do a few kept-alive connections spread over the workers, run after run?

For each worker model it starts ``zaqar-lite serve`` (2 workers) on a
throwaway Redis (or, with ``--store sqlite``, a SQLite file of its own) and
runs the ``post`` load of ``wrk/queue_load.lua`` (8 connections, one per wrk
thread, kept alive) ``--runs`` times for ``--seconds`` each, each run a new wrk
process and so new connections, on an emptied queue. Half-way through each run
it counts, with ``ss``, the established connections of each worker process.
It prints each run's messages/s and connection split, and the spread of the
runs (the highest messages/s over the lowest, minus one); then, to tell the
causes of a spread apart, each run's CPU seconds of each worker (from
``/proc``), the workers' CPU per message, how busy the machine's CPUs were, and
the CPU seconds taken meanwhile by processes that are not part of the load
(everything but this script, the server, Redis and wrk: the neighbours).

Models: ``gevent (default)``, zaqar-lite's worker, whose workers balance their
accepts (``zaqar_lite/server/gevent_worker.py``); gunicorn's ``gthread`` as
``worker_class = gthread`` runs it (2 x 8 threads); the same with gunicorn's
``reuse_port`` (each worker binds its own ``SO_REUSEPORT`` socket and the
kernel spreads connections by a hash of their addresses); and, on SQLite,
``gevent SQLite on the hub``: the gevent worker with the store's C calls on
the event loop instead of gevent's thread pool (what ``zaqar_lite.server.gunicorn.OffTheHub``
costs). The last two are variants this script's own server makes
(``--serve``); they are no zaqar-lite settings.

Usage::

    .venv/bin/python benchmarks/worker_balance.py                  # Redis, about 3 minutes
    .venv/bin/python benchmarks/worker_balance.py --store sqlite   # SQLite
    .venv/bin/python benchmarks/worker_balance.py --runs 5 --seconds 5 --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_load import SESSIONS, call, run_wrk, serving, store_server  # noqa: E402

#: name -> (extra serve arguments of this script, environment)
MODELS: dict[str, tuple[list[str], dict[str, str]]] = {
    "gevent (default)": ([], {"ZAQAR_LITE_SERVER_WORKER_CLASS": "gevent"}),
    "gthread 2x8": ([], {"ZAQAR_LITE_SERVER_WORKER_CLASS": "gthread"}),
    "gthread 2x8 reuse_port": (["--reuse-port"], {"ZAQAR_LITE_SERVER_WORKER_CLASS": "gthread"}),
    # SQLite only: gevent with the store's C calls on the event loop, not on gevent's thread pool
    "gevent SQLite on the hub": (["--on-the-hub"], {"ZAQAR_LITE_SERVER_WORKER_CLASS": "gevent"}),
}
DEFAULT_MODELS = {"redis": ("gevent (default)", "gthread 2x8", "gthread 2x8 reuse_port"),
                  "sqlite": ("gevent (default)", "gevent SQLite on the hub", "gthread 2x8")}


def serve(argv: list[str]) -> None:
    """zaqar-lite's server with gunicorn's ``reuse_port`` on or off (the server of the reuse_port model)."""
    from zaqar_lite.config import load_settings
    from zaqar_lite.server.gunicorn import Server, worker_app

    parser = argparse.ArgumentParser()
    parser.add_argument("--storage", required=True)
    parser.add_argument("--bind", required=True)
    parser.add_argument("--reuse-port", action="store_true")
    parser.add_argument("--on-the-hub", action="store_true")
    args = parser.parse_args(argv)

    class VariantServer(Server):
        def load_config(self) -> None:
            super().load_config()
            self.cfg.set("reuse_port", args.reuse_port)

        def load(self) -> Any:
            return worker_app(self.settings, off_the_hub=not args.on_the_hub)

    VariantServer(load_settings(None, storage_uri=args.storage, bind=args.bind, workers=2)).run()


def worker_pids(master: int) -> set[int]:
    """The live children of a gunicorn master."""
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == master:
                children.add(int(stat.parent.name))
    return children


def connections_per_worker(port: int, workers: set[int]) -> list[int]:
    """Established connections to ``port`` held by each worker, highest first."""
    out = subprocess.run(["ss", "-Htnp", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, check=False).stdout
    counts = dict.fromkeys(workers, 0)
    for pid in re.findall(r"pid=(\d+)", out):
        if int(pid) in counts:
            counts[int(pid)] += 1
    return sorted(counts.values(), reverse=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - idle) / hz, sum(ticks) / hz


def listener_pid(uri: str) -> int | None:
    """The process listening on the port of a store URI (Redis daemonizes: it is no child of ours)."""
    port = urllib.parse.urlsplit(uri).port
    if port is None:
        return None
    out = subprocess.run(["ss", "-Hltnp", f"( sport = :{port} )"], capture_output=True, text=True,
                         check=False).stdout
    found = re.search(r"pid=(\d+)", out)
    return int(found.group(1)) if found else None


def descendants_cpu(extra: set[int]) -> float:
    """CPU seconds used so far by this script, every process below it and ``extra``.

    That is the load itself: the server's master and workers, wrk (waited
    children count through ``os.times``), this script, and the store server
    (``extra``).
    """
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    ours, frontier = set(), {os.getpid()}
    while frontier:
        ours |= frontier
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - ours
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    return own + sum(cpu_seconds(pid) for pid in (ours | extra) - {os.getpid()})


def runs(url: str, storage: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the post load ``args.runs`` times and return each run's figures and split."""
    port = int(url.rsplit(":", 1)[1])
    store_pid = listener_pid(storage)
    store = {store_pid} if store_pid else set()
    workers = worker_pids(SESSIONS[url])
    run_wrk(args.wrk, url, "post", args, 2)  # warm-up: every worker has booted and connected to Redis
    results = []
    for _ in range(args.runs):
        # every run (and model) starts on an empty queue: the sweeps of a queue grown by
        # earlier runs would otherwise weigh on the later ones
        call(url, "DELETE", f"/v2/queues/{args.queue}", args.client_id)
        split: list[int] = []
        counter = threading.Timer(args.seconds / 2,
                                  lambda split=split: split.extend(connections_per_worker(port, workers)))
        cpu_before = {pid: cpu_seconds(pid) for pid in workers}
        busy_before, total_before = machine_busy()
        ours_before = descendants_cpu(store)
        counter.start()
        figures = run_wrk(args.wrk, url, "post", args, args.seconds)
        counter.join()
        busy_after, total_after = machine_busy()
        ours = descendants_cpu(store) - ours_before
        cpu = sorted((cpu_seconds(pid) - cpu_before[pid] for pid in workers), reverse=True)
        errors = figures["failures"] + figures["socket_errors"]
        messages = figures["messages_per_s"] * args.seconds
        results.append({"messages_per_s": figures["messages_per_s"], "split": split,
                        "p99_ms": figures["p99_ms"], "errors": errors,
                        # CPU seconds of each worker during the run, highest first, and per message
                        "worker_cpu_s": [round(c, 2) for c in cpu],
                        "worker_cpu_ms_per_msg": round(1000 * sum(cpu) / messages, 3) if messages else None,
                        # share of the machine's CPUs busy during the run (every process, ours or not)
                        "machine_busy": round((busy_after - busy_before) / (total_after - total_before), 3),
                        # CPU seconds used meanwhile by processes that are not part of the load
                        "others_cpu_s": round(max(0.0, busy_after - busy_before - ours), 2),
                        "load_average": os.getloadavg()[0]})
    return results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="wrk runs per model (5)")
    parser.add_argument("--seconds", type=int, default=5, help="seconds per run (5)")
    parser.add_argument("-c", "--concurrency", type=int, default=8, help="wrk connections (8)")
    parser.add_argument("--store", choices=DEFAULT_MODELS, default="redis",
                        help="a throwaway Redis (default) or a SQLite file")
    parser.add_argument("--models", help="models, comma-separated (default: those of the store: "
                        + "; ".join(f"{store}: {', '.join(names)}" for store, names in DEFAULT_MODELS.items())
                        + ")")
    parser.add_argument("--wrk", default="wrk", help="the wrk executable")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    args = parser.parse_args(argv)
    args.queue, args.post_ratio, args.client_id = "bench-balance", 1.0, str(uuid.uuid4())
    args.models = args.models.split(",") if args.models else list(DEFAULT_MODELS[args.store])
    unknown = set(args.models) - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; known: {', '.join(MODELS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    """Run every model and print each run."""
    args = parse_args(argv)
    start_load = os.getloadavg()[0]
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="zaqar-lite-balance-") as tmp, contextlib.ExitStack() as stack:
        if args.store == "redis":
            storage = stack.enter_context(store_server("redis", Path(tmp, "redis")))
        for n, name in enumerate(args.models):
            if args.store == "sqlite":  # a file of its own per model
                storage = f"sqlite:///{Path(tmp, f'zaqar{n}.db')}"
            extra, env = MODELS[name]
            command = [sys.executable, "-m", "zaqar_lite", "serve", "--storage", storage]
            if extra:  # reuse_port and the store on the hub are no zaqar-lite settings: this script's server
                command = [sys.executable, str(Path(__file__).resolve()), "--serve", "--storage", storage,
                           *extra]
            with serving(command, Path(tmp, f"server{n}"), env=env) as url:
                results[name] = runs(url, storage, args)
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "models": results}, indent=2))
        return
    print(f"load average at the start {start_load:.2f}")
    print(f"post load, wrk {args.concurrency} connections kept alive, {args.runs} runs of {args.seconds} s "
          f"per model, 2 workers, {args.store}")
    for name, rows in results.items():
        rates = [row["messages_per_s"] for row in rows]
        cells = "  ".join(f"{row['messages_per_s']:7.0f} ({'/'.join(map(str, row['split']))})"
                          for row in rows)
        errors = sum(row["errors"] for row in rows)
        print(f"{name:<24} {cells}  spread {max(rates) / min(rates) - 1:5.1%}"
              + (f"  errors {errors}" if errors else ""))
    print("msgs/s of each run (connections per worker); spread = highest / lowest - 1")
    print(f"\nper run: CPU s of each worker | worker CPU ms per msg | machine busy | CPU s of "
          f"other processes (of {args.seconds * (os.cpu_count() or 1)} CPU s)")
    for name, rows in results.items():
        cells = "  ".join(f"{'/'.join(f'{c:.1f}' for c in row['worker_cpu_s'])}|"
                          f"{row['worker_cpu_ms_per_msg']:.2f}|{row['machine_busy']:.0%}|{row['others_cpu_s']:.1f}"
                          for row in rows)
        print(f"{name:<24} {cells}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2:])
    else:
        main()
