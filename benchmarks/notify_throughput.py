"""Notifications delivered per second to a local webhook receiver by 1, 2 and 4 notifier processes.

For each process count, on a fresh SQLite store: ``--subscriptions`` queues
each get one subscription (to its own receiver path) and ``--messages``
messages, posted before the notifiers start; then ``zaqar-lite notifier
--workers N`` runs until the receiver has acknowledged every message. The
figure is acknowledged notifications per second between the first and the last
one, so process start-up is not counted. The receiver runs in its own process
and answers 204 at once; it also checks that each subscription's messages
arrived in order.

Usage: ``python benchmarks/notify_throughput.py [--subscriptions 8] [--messages 250]
[--processes 1,2,4] [--synchronous full|normal] [--receiver-delay MS] [--storage URI] [--json]``

``--storage`` runs on another store (e.g. ``redis://127.0.0.1:6379/0``); each
run then uses a project of its own in it.

Each notifier process serves up to ``[notifier] threads`` (4) subscriptions at
once, so with a receiver that takes a while to answer (``--receiver-delay``),
more processes deliver to more subscriptions in parallel.
"""

from __future__ import annotations

import argparse
import http.server
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

TIMEOUT = 300.0
NOTIFIER_ENV = {"ZAQAR_LITE_NOTIFIER_POLL_INTERVAL": "0.05", "ZAQAR_LITE_SERVER_LOG_LEVEL": "WARNING",
                "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def receive(port: int, results: Any, delay: float) -> None:
    """Run the receiver: count deliveries, note first/last times and out-of-order arrivals."""
    last_seen: dict[str, int] = {}
    state = {"count": 0, "first": 0.0, "last": 0.0, "disorder": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - the http.server naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(delay)
            number = body["body"]["n"]
            if number != last_seen.get(self.path, -1) + 1:
                state["disorder"] += 1
            last_seen[self.path] = number
            now = time.monotonic()
            state["first"] = state["first"] or now
            state["last"] = now
            state["count"] += 1
            results.put((state["count"], state["first"], state["last"], state["disorder"]))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def prepare(storage_uri: str, project: str, port: int, subscriptions: int, messages: int) -> None:
    """Create the subscriptions, then post the messages, straight into the store."""
    from zaqar_lite.config import load_settings
    from zaqar_lite.service import Messaging
    from zaqar_lite.service.subscriptions import Subscriptions
    from zaqar_lite.storage import open_storage

    settings = load_settings(None, storage_uri=storage_uri)
    storage = open_storage(storage_uri)
    service = Subscriptions(storage, settings)
    messaging = Messaging(storage, settings)
    for index in range(subscriptions):
        service.create(project, f"q{index}", {"subscriber": f"http://127.0.0.1:{port}/s{index}"})
    for index in range(subscriptions):
        for start in range(0, messages, 20):
            batch = [{"body": {"n": n}, "ttl": None, "delay": None, "dlq_eligible": True}
                     for n in range(start, min(start + 20, messages))]
            messaging.post(project, f"q{index}", "bench-client", batch, 100)
    storage.close()


def run_once(processes: int, subscriptions: int, messages: int, synchronous: str,
             delay: float, storage: str | None) -> dict[str, float]:
    """Measure one process count on a fresh store; return the figures."""
    work = Path(tempfile.mkdtemp(prefix="notify-bench-"))
    storage_uri = storage or f"sqlite:///{work}/zaqar.db?synchronous={synchronous}"
    project = f"bench-{uuid.uuid4().hex[:8]}"
    port = free_port()
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    receiver = context.Process(target=receive, args=(port, results, delay), daemon=True)
    receiver.start()
    prepare(storage_uri, project, port, subscriptions, messages)
    total = subscriptions * messages
    env = {**os.environ, **NOTIFIER_ENV}
    command = [str(Path(sys.executable).with_name("zaqar-lite")), "notifier", "--storage", storage_uri,
               "--workers", str(processes)]
    with open(work / "notifier.log", "wb") as log:
        notifier = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    count, first, last, disorder = 0, 0.0, 0.0, 0
    deadline = time.monotonic() + TIMEOUT
    try:
        while count < total and time.monotonic() < deadline:
            count, first, last, disorder = results.get(timeout=TIMEOUT)
    finally:
        notifier.send_signal(signal.SIGTERM)
        notifier.wait(60)
        receiver.kill()
    if count < total:
        raise SystemExit(f"only {count} of {total} notifications arrived; see {work / 'notifier.log'}")
    seconds = last - first
    return {"processes": processes, "notifications": total, "seconds": round(seconds, 2),
            "per_second": round((total - 1) / seconds, 1) if seconds else float("inf"),
            "out_of_order": disorder}


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print a table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=8)
    parser.add_argument("--messages", type=int, default=250, help="messages per subscription")
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--synchronous", choices=("full", "normal"), default="full")
    parser.add_argument("--receiver-delay", type=float, default=0.0,
                        help="milliseconds the receiver takes to answer (a slower webhook)")
    parser.add_argument("--storage", help="a store URI instead of a fresh SQLite file per run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [run_once(int(n), args.subscriptions, args.messages, args.synchronous, args.receiver_delay / 1000,
                     args.storage) for n in args.processes.split(",")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    store = args.storage or f"SQLite synchronous={args.synchronous}"
    print(f"{args.subscriptions} subscriptions x {args.messages} messages, {store}, "
          f"receiver answers in {args.receiver_delay:g} ms, {os.cpu_count()} CPUs")
    header = ("processes", "notifications", "seconds", "per second", "out of order")
    print("  ".join(f"{title:>{len(title) + 2}}" for title in header))
    for row in rows:
        keys = ("processes", "notifications", "seconds", "per_second", "out_of_order")
        values = [row[key] for key in keys]
        print("  ".join(f"{value:>{len(title) + 2}}" for title, value in zip(header, values, strict=True)))


if __name__ == "__main__":
    main()
