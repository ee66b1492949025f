"""The idle sweeper: what a server with many queues and nothing due costs, and whether it answers.

It makes a SQLite file holding ``--queues`` queues (20,000 by default, one
project, no message), starts ``zaqar-lite serve`` on it (``--workers``, 1 by
default: the worker that answers is the one that sweeps). For ``--seconds`` it
sends nothing and takes the server's CPU (its processes' user + system seconds,
as a share of one core): what the idle sweeper costs. Then for ``--seconds``
it opens one new connection after another to ``GET /v2/ping``, each waited
for ``--timeout`` seconds at most, and counts the pings answered and not
answered, with their latency (p50, p99, max).

``--code DIR`` runs the zaqar-lite of another checkout (an older commit unpacked
with ``git archive``), so that one machine gives the figures before and after::

    git archive <commit> | tar -x -C /tmp/before
    .venv/bin/python benchmarks/idle_sweeper.py --code /tmp/before
    .venv/bin/python benchmarks/idle_sweeper.py
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_load import SESSIONS, cpu_seconds, serving  # noqa: E402

PING = (b"GET /v2/ping HTTP/1.1\r\nHost: bench\r\nClient-ID: 3b4a4c6e-1b2e-4a5c-9d3e-0e7b7c1f2a3d\r\n"
        b"X-Project-ID: bench\r\nConnection: close\r\n\r\n")
#: made by the zaqar-lite under test (its own layout), queues inserted in one transaction
MAKE_QUEUES = """
import sys
from zaqar_lite.storage import open_storage
store = open_storage(sys.argv[1])
with store.transaction() as db:
    db.executemany("INSERT INTO queues (project, name, metadata, created) VALUES (?, ?, '{}', 0)",
                   [("tenant", f"queue-{n}") for n in range(int(sys.argv[2]))])
store.close()
"""


def pings(url: str, seconds: float, timeout: float) -> dict[str, Any]:
    """Open a new connection per ping for ``seconds``; return answered, unanswered and latencies."""
    host, port = url.split("//")[1].split(":")
    latencies: list[float] = []
    unanswered = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.create_connection((host, int(port))) as conn:
            conn.settimeout(timeout)
            started = time.monotonic()
            conn.sendall(PING)
            try:
                if conn.recv(64).startswith(b"HTTP/1.1 204"):
                    latencies.append(time.monotonic() - started)
                else:
                    unanswered += 1
            except TimeoutError:
                unanswered += 1
    latencies.sort()

    def at(share: float) -> float:
        return round(latencies[min(int(len(latencies) * share), len(latencies) - 1)] * 1000, 1)
    return {"answered": len(latencies), "unanswered": unanswered,
            "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": round(latencies[-1] * 1000, 1)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Make the queues, start the server, measure; return the figures."""
    code = Path(args.code).resolve() if args.code else HERE.parent
    env = {"PYTHONPATH": str(code), "ZAQAR_LITE_SERVER_SWEEP_INTERVAL": str(args.interval)}
    with tempfile.TemporaryDirectory(prefix="idle-sweeper-") as directory:
        uri = f"sqlite:///{directory}/zaqar.db"
        subprocess.run([sys.executable, "-c", MAKE_QUEUES, uri, str(args.queues)], check=True,
                       env=dict(os.environ, **env), cwd=code)
        argv = [sys.executable, "-m", "zaqar_lite", "serve", "--workers", str(args.workers), "--storage", uri]
        with serving(argv, Path(directory) / "server", env=env, cwd=code) as url:
            time.sleep(args.warm_up)
            session = {SESSIONS[url]}
            cpu_before, started = cpu_seconds(session), time.monotonic()
            time.sleep(args.seconds)
            idle_cpu = (cpu_seconds(session) - cpu_before) / (time.monotonic() - started)
            figures = pings(url, args.seconds, args.timeout)
    return {"code": str(code), "queues": args.queues, "workers": args.workers,
            "idle_server_cpu_percent_of_a_core": round(idle_cpu * 100, 1), **figures}


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run once, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warm-up", type=float, default=5.0, help="seconds between start and measure")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds a ping is waited for")
    parser.add_argument("--interval", type=float, default=1.0, help="the server's sweep_interval")
    parser.add_argument("--code", help="the zaqar-lite checkout to run (default: this one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = run(args)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
