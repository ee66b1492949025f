"""Slowloris: does the server keep answering while many slow or idle connections are open?

For each worker model (``[server] worker_class`` and ``threads``) it starts
``zaqar-lite serve`` (2 workers), opens 0, 50 and 200 hostile connections and
keeps them open (a connection the server closes is opened again), and probes
``GET /v2/ping`` from a new connection every ``--interval`` seconds, each probe
in its own thread with a ``--probe-timeout``. The hostile connections are, in
turn:

``idle``
    connects and sends nothing;
``slow header``
    sends a request line, then one more header line every 2 s, never the end of
    the headers;
``stalled body``
    sends the headers of a message post announcing a 10 MB body, then nothing.

It prints, per model and number of hostile connections, the probes' p50 and
p99 latency (a probe that failed or timed out counts as the timeout) and how
many failed, and how many hostile connections the server closed during the
level (read deadlines at work). All models run in one run, one after the other.

Usage::

    .venv/bin/python benchmarks/slowloris.py                  # SQLite, about 2.5 minutes
    .venv/bin/python benchmarks/slowloris.py --server redis
    .venv/bin/python benchmarks/slowloris.py --levels 0,50,200 --probes 100 --json
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_load import serving, store_server  # noqa: E402

#: name -> environment of the server: the worker models compared (the default: no setting at all)
MODELS: dict[str, dict[str, str]] = {
    "gevent (default)": {},
    "gthread 2x8": {"ZAQAR_LITE_SERVER_WORKER_CLASS": "gthread", "ZAQAR_LITE_SERVER_THREADS": "8"},
    "gthread 2x128": {"ZAQAR_LITE_SERVER_WORKER_CLASS": "gthread", "ZAQAR_LITE_SERVER_THREADS": "128"},
}
KINDS = ("idle", "slow header", "stalled body")
HEADER_LINE_EVERY = 2.0
HEADERS = "Client-ID: 3f0c1a9e-8a1b-4c55-9d8e-2b0f6a1e7c11\r\nX-Project-ID: bench\r\n"


class Hostile:
    """N connections of the three kinds, kept open by a thread until stopped."""

    def __init__(self, host: str, port: int, count: int) -> None:
        self.address = (host, port)
        self.count = count
        self.socks: list[tuple[str, socket.socket]] = []
        self.closed_by_server = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, kind: str) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=5)
        sock.setblocking(False)
        if kind == "slow header":
            sock.send(b"GET /v2/ping HTTP/1.1\r\nHost: bench\r\n")
        elif kind == "stalled body":
            sock.send(("POST /v2/queues/slow/messages HTTP/1.1\r\nHost: bench\r\n" + HEADERS +
                       "Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n").encode())
        return sock

    def start(self) -> None:
        for n in range(self.count):
            kind = KINDS[n % len(KINDS)]
            self.socks.append((kind, self._open(kind)))
        self.thread.start()

    def _closed(self, sock: socket.socket) -> bool:
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    return True
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _run(self) -> None:
        while not self.stopped.wait(HEADER_LINE_EVERY):
            for i, (kind, sock) in enumerate(self.socks):
                if self._closed(sock):
                    self.closed_by_server += 1
                    sock.close()
                    with contextlib.suppress(OSError):
                        self.socks[i] = (kind, self._open(kind))
                    continue
                if kind == "slow header":
                    with contextlib.suppress(OSError):
                        sock.send(f"X-Slow-{uuid.uuid4().hex[:6]}: 1\r\n".encode())

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()
        for _, sock in self.socks:
            sock.close()


def probe(host: str, port: int, timeout: float) -> float | None:
    """One ``GET /v2/ping`` on a new connection; its latency in seconds, or None if it failed."""
    start = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/v2/ping", headers={"Client-ID": str(uuid.uuid4()), "X-Project-ID": "bench"})
        status = conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()
    return time.monotonic() - start if status == 204 else None


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))]


def level(host: str, port: int, count: int, args: argparse.Namespace) -> dict[str, Any]:
    """Open ``count`` hostile connections, probe, and return the figures."""
    hostile = Hostile(host, port, count)
    hostile.start()
    time.sleep(args.settle)
    results: list[float | None] = [None] * args.probes
    threads = []

    def run(i: int) -> None:
        results[i] = probe(host, port, args.probe_timeout)

    for i in range(args.probes):
        thread = threading.Thread(target=run, args=(i,), daemon=True)
        thread.start()
        threads.append(thread)
        time.sleep(args.interval)
    for thread in threads:
        thread.join()
    hostile.stop()
    latencies = [args.probe_timeout if r is None else r for r in results]
    return {"slow_connections": count, "probes": args.probes,
            "failed": sum(r is None for r in results),
            "p50_ms": percentile(latencies, 50) * 1000, "p99_ms": percentile(latencies, 99) * 1000,
            "mean_ms": statistics.fmean(latencies) * 1000, "closed_by_server": hostile.closed_by_server}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="0,50,200", help="hostile connection counts (0,50,200)")
    parser.add_argument("--probes", type=int, default=100, help="probes per level (100)")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between probes (0.1)")
    parser.add_argument("--probe-timeout", type=float, default=5.0, help="seconds a probe waits (5)")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds between opening the hostile connections and probing (3)")
    parser.add_argument("--models", default=",".join(MODELS), help="worker models, comma-separated")
    parser.add_argument("--server", choices=("redis",), help="run on a throwaway Redis instead of SQLite")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run every model at every level and print the table."""
    args = parse_args(argv)
    start_load = os.getloadavg()[0]
    levels = [int(n) for n in args.levels.split(",")]
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="zaqar-lite-slowloris-") as tmp, contextlib.ExitStack() as stack:
        storage = (stack.enter_context(store_server("redis", Path(tmp, "redis"))) if args.server
                   else f"sqlite:///{tmp}/bench.db")
        for n, name in enumerate(args.models.split(",")):
            command = [sys.executable, "-m", "zaqar_lite", "serve", "--storage", storage, "--workers", "2"]
            with serving(command, Path(tmp, f"server{n}"), env=MODELS[name]) as url:
                host, port = url.removeprefix("http://").split(":")
                results[name] = [level(host, int(port), count, args) for count in levels]
    settings = {"storage": "redis" if args.server else "sqlite", "probes": args.probes,
                "interval": args.interval, "probe_timeout": args.probe_timeout, "cpus": os.cpu_count(),
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "load_average_start": start_load, "load_average_end": os.getloadavg()[0]}
    if args.json:
        print(json.dumps({"settings": settings, "models": results}, indent=2))
        return
    print(f"GET /v2/ping from a new connection every {args.interval} s ({args.probes} probes per level, "
          f"timeout {args.probe_timeout} s) while N hostile connections are open; 2 workers, "
          f"{settings['storage']}")
    print(f"{'model':<18}{'N':>5}{'p50 ms':>10}{'p99 ms':>10}{'failed':>8}{'closed by server':>18}")
    for name, rows in results.items():
        for row in rows:
            print(f"{name:<18}{row['slow_connections']:>5}{row['p50_ms']:>10.1f}{row['p99_ms']:>10.1f}"
                  f"{row['failed']:>8}{row['closed_by_server']:>18}")
    print(f"load average {start_load:.2f} at the start, {settings['load_average_end']:.2f} at the end")


if __name__ == "__main__":
    main()
