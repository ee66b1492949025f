"""A burst of long polls: pings from another client while 2,000 waiting claims arrive within a second.

It starts ``zaqar-lite serve`` (2 workers, the default gevent worker, SQLite),
pings it every 20 ms from a thread (a new connection each time) for 2 s, then
opens ``--long-polls`` claims ``POST /v2/queues/idle-N/claims?wait=20`` on
empty queues as fast as it can (each on its own connection, kept open), and
pings on for ``--seconds``. It prints the pings' p50, p99 and max latency
before and during the burst, how long the listen backlog took to drain (``ss``),
and the server's CPU meanwhile.

``--code DIR`` runs the zaqar-lite of another checkout (``git archive`` of an
older commit), for figures before and after on one machine::

    git archive <commit> | tar -x -C /tmp/before
    .venv/bin/python benchmarks/long_poll_burst.py --code /tmp/before
    .venv/bin/python benchmarks/long_poll_burst.py
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_load import SESSIONS, cpu_seconds, serving  # noqa: E402

CLIENT = "3b4a4c6e-1b2e-4a5c-9d3e-0e7b7c1f2a3d"


def request(method: str, path: str, body: bytes = b"") -> bytes:
    """Return an HTTP/1.1 request with the headers every /v2 request needs."""
    return (f"{method} {path} HTTP/1.1\r\nHost: bench\r\nClient-ID: {CLIENT}\r\nX-Project-ID: burst\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def backlog(port: int) -> int | None:
    """Return the connections waiting in the listen backlog of a port (``ss``), or None."""
    listing = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    fields = listing.stdout.split()
    return int(fields[1]) if len(fields) > 1 else None


def quantile(values: list[float], share: float) -> float | None:
    """Return a quantile of latencies in ms (rounded), or None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(int(len(ordered) * share), len(ordered) - 1)] * 1000, 1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the server, ping, open the burst, measure; return the figures."""
    code = Path(args.code).resolve() if args.code else HERE.parent
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < args.long_polls + 200 <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.long_polls + 200, hard))
    with tempfile.TemporaryDirectory(prefix="long-poll-burst-") as directory:
        argv = [sys.executable, "-m", "zaqar_lite", "serve", "--workers", "2",
                "--storage", f"sqlite:///{directory}/zaqar.db"]
        with serving(argv, Path(directory) / "server", env={"PYTHONPATH": str(code)}, cwd=code) as url:
            host, port = url.split("//")[1].split(":")
            address = (host, int(port))
            pings: list[tuple[float, float]] = []
            stop = threading.Event()

            def ping() -> None:
                while not stop.is_set():
                    with socket.create_connection(address, timeout=60) as conn:
                        started = time.monotonic()
                        conn.sendall(request("GET", "/v2/ping"))
                        conn.recv(64)
                        pings.append((started, time.monotonic() - started))
                    time.sleep(0.02)

            pinger = threading.Thread(target=ping, daemon=True)
            pinger.start()
            time.sleep(2)
            cpu = cpu_seconds({SESSIONS[url]})
            burst = time.monotonic()
            held = []
            body = json.dumps({"ttl": 60, "grace": 60}).encode()
            for n in range(args.long_polls):
                conn = socket.create_connection(address)
                conn.sendall(request("POST", f"/v2/queues/idle-{n % 50}/claims?limit=1&wait=20", body))
                held.append(conn)
            sent = time.monotonic()
            drained = None
            while time.monotonic() < burst + args.seconds:
                if drained is None and backlog(address[1]) == 0:
                    drained = time.monotonic() - burst
                time.sleep(0.05)
            cpu = cpu_seconds({SESSIONS[url]}) - cpu
            stop.set()
            pinger.join()
            for conn in held:
                conn.close()
    before = [latency for started, latency in pings if started < burst]
    during = [latency for started, latency in pings if started >= burst]
    return {"code": str(code), "long_polls": args.long_polls, "sent_in_s": round(sent - burst, 2),
            "backlog_drained_in_s": round(drained, 2) if drained is not None else None,
            "server_cpu_s": round(cpu, 2), "pings_before": len(before),
            "before_p50_ms": quantile(before, 0.5), "before_p99_ms": quantile(before, 0.99),
            "pings_during": len(during), "during_p50_ms": quantile(during, 0.5),
            "during_p99_ms": quantile(during, 0.99), "during_max_ms": quantile(during, 1.0)}


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run once, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long-polls", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to ping from the burst on")
    parser.add_argument("--code", help="the zaqar-lite checkout to run (default: this one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = run(args)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:24} {value}")


if __name__ == "__main__":
    main()
