"""Long polling: 1,000 waiting claims on one server, the posts beside them, and the wake-up delay.

For each store (SQLite, the default, and Redis) it starts ``zaqar-lite serve``
(2 workers, the default gevent worker) and, from this process (gevent, one
greenlet and one keep-alive connection per client):

1. posts ``--posts`` messages one after the other to a queue ``posts`` and
   notes each post's latency, with no claim waiting (the baseline);
2. opens ``--waiting`` claims ``POST /v2/queues/idle/claims?wait=20`` on a
   queue nobody posts to, each on its own connection (a claim that answers
   204 after its 20 s is sent again at once), their first sends spread over
   ``--ramp`` seconds (by default the wait: then some 50 claims a second end
   and start again, the steady state of 1,000 long-polling consumers), and
   waits until every one is sent;
3. posts ``--posts`` messages again, while they wait;
4. ``--wakeups`` times: opens one more waiting claim on a queue ``wake``,
   lets it wait ``--settle`` s, posts one message there from another
   connection and measures the time from sending the post to the claim's
   answer (which must be 201 with that message).

It prints the posts' p50 and p99 latency without and with the waiting
claims, the wake-up delay's p50 and p99, and the load average.

Usage::

    .venv/bin/python benchmarks/long_poll.py                       # SQLite and Redis, about 3 minutes
    .venv/bin/python benchmarks/long_poll.py --stores sqlite --waiting 1000 --posts 500
"""

from gevent import monkey

monkey.patch_all()

# ruff: noqa: E402 - the standard library must be patched before anything imports it
import argparse
import contextlib
import json
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import gevent

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_load import serving, store_server

PROJECT = "bench"
#: the longest wait the server allows by default
WAIT = 20
CLAIM_BODY = {"ttl": 60, "grace": 60}


class Connection:
    """One keep-alive HTTP/1.1 connection speaking JSON to the server."""

    def __init__(self, host: str, port: int) -> None:
        self.host = f"{host}:{port}"
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")
        self.client_id = str(uuid.uuid4())

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send a request and return its status and decoded JSON body (None when empty)."""
        payload = json.dumps(body).encode() if body is not None else b""
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nClient-ID: {self.client_id}\r\n"
                f"X-Project-ID: {PROJECT}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n")
        self.sock.sendall(head.encode() + payload)
        status = int(self.reader.readline().split()[1])
        length = 0
        while True:
            line = self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        data = self.reader.read(length) if length else b""
        return status, json.loads(data) if data else None

    def close(self) -> None:
        """Close the connection."""
        self.reader.close()
        self.sock.close()


def percentile(values: list[float], fraction: float) -> float:
    """Return the value below which ``fraction`` of ``values`` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def post_latencies(connection: Connection, count: int) -> list[float]:
    """Post ``count`` messages one after the other; return each post's seconds."""
    took = []
    for n in range(count):
        started = time.perf_counter()
        status, _ = connection.request("POST", "/v2/queues/posts/messages",
                                       {"messages": [{"body": {"n": n}, "ttl": 300}]})
        took.append(time.perf_counter() - started)
        if status != 201:
            raise RuntimeError(f"post answered {status}")
    return took


class Waiters:
    """Claims waiting on a queue nobody posts to, each sent again when its wait ends."""

    def __init__(self, host: str, port: int, count: int, ramp: float) -> None:
        self.host, self.port, self.count, self.ramp = host, port, count, ramp
        self.sent = 0
        self.answered = 0
        self.answered_early = 0
        self.stopped = False
        self.greenlets: list[gevent.Greenlet] = []

    def start(self) -> None:
        """Open every connection and send its first claim."""
        self.greenlets = [gevent.spawn_later(self.ramp * n / self.count, self._wait_again_and_again)
                          for n in range(self.count)]

    def _wait_again_and_again(self) -> None:
        connection = Connection(self.host, self.port)
        try:
            while not self.stopped:
                self.sent += 1
                started = time.monotonic()
                status, _ = connection.request("POST", f"/v2/queues/idle/claims?limit=1&wait={WAIT}",
                                               CLAIM_BODY)
                self.answered += 1
                if status != 204 or time.monotonic() - started < WAIT - 1:
                    self.answered_early += 1
                    gevent.sleep(1.0)  # an error: do not hammer the server with it
        finally:
            connection.close()

    def stop(self) -> None:
        """Stop sending claims and drop the connections."""
        self.stopped = True
        gevent.killall(self.greenlets, block=True, timeout=5)


def wake_up_delays(host: str, port: int, count: int, settle: float) -> list[float]:
    """Measure, ``count`` times, the seconds from sending a post to the waiting claim's answer."""
    poster, delays = Connection(host, port), []
    for _ in range(count):
        claimer = Connection(host, port)
        answer: dict[str, Any] = {}

        def wait_for_it(claimer: Connection = claimer, answer: dict[str, Any] = answer) -> None:
            answer["status"], answer["body"] = claimer.request(
                "POST", f"/v2/queues/wake/claims?limit=1&wait={WAIT}", CLAIM_BODY)
            answer["at"] = time.perf_counter()

        waiting = gevent.spawn(wait_for_it)
        gevent.sleep(settle)
        sent = time.perf_counter()
        _, posted = poster.request("POST", "/v2/queues/wake/messages", {"messages": [{"body": "wake"}]})
        waiting.join(WAIT + 5)
        message_id = posted["resources"][0].rsplit("/", 1)[1]
        if answer.get("status") != 201 or answer["body"]["messages"][0]["id"] != message_id:
            raise RuntimeError(f"the waiting claim answered {answer.get('status')}, not the message posted")
        delays.append(answer["at"] - sent)
        claimer.close()
    poster.close()
    return delays


def run_store(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run the four steps against one server and return the figures."""
    host, port = url.removeprefix("http://").split(":")
    poster = Connection(host, int(port))
    post_latencies(poster, 20)  # warm up the connection and the queue
    alone = post_latencies(poster, args.posts)
    waiters = Waiters(host, int(port), args.waiting, args.ramp)
    waiters.start()
    deadline = time.monotonic() + args.ramp + 60
    while waiters.sent < args.waiting and time.monotonic() < deadline:
        gevent.sleep(0.2)
    gevent.sleep(args.settle * 5)  # let the server take each one's first claim attempt
    waiting_at_start = waiters.sent - waiters.answered  # sent and not answered yet: waiting now
    poster.close()  # idle through the ramp, longer than the server keeps a connection
    poster = Connection(host, int(port))
    post_latencies(poster, 20)
    beside = post_latencies(poster, args.posts)
    delays = wake_up_delays(host, int(port), args.wakeups, args.settle)
    early = waiters.answered_early
    waiters.stop()
    poster.close()
    return {
        "waiting": waiting_at_start, "answered_early": early,
        "posts_alone_p50_ms": 1000 * statistics.median(alone),
        "posts_alone_p99_ms": 1000 * percentile(alone, 0.99),
        "posts_waiting_p50_ms": 1000 * statistics.median(beside),
        "posts_waiting_p99_ms": 1000 * percentile(beside, 0.99),
        "wake_up_p50_ms": 1000 * statistics.median(delays),
        "wake_up_p99_ms": 1000 * percentile(delays, 0.99),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,redis", help="comma-separated: sqlite, redis")
    parser.add_argument("--waiting", type=int, default=1000, help="claims waiting at once")
    parser.add_argument("--posts", type=int, default=500, help="posts timed in each of steps 1 and 3")
    parser.add_argument("--wakeups", type=int, default=100, help="wake-up delays measured")
    parser.add_argument("--ramp", type=float, default=WAIT, help="seconds over which the claims start")
    parser.add_argument("--settle", type=float, default=0.2, help="seconds a claim waits before the post")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run every store and print the figures."""
    args = parse_args(argv)
    load_start = os.getloadavg()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="zaqar-lite-long-poll-") as tmp:
        for kind in args.stores.split(","):
            with contextlib.ExitStack() as stack:
                storage = (f"sqlite:///{tmp}/bench.db" if kind == "sqlite"
                           else stack.enter_context(store_server(kind, Path(tmp, kind))))
                command = [sys.executable, "-m", "zaqar_lite", "serve", "--storage", storage,
                           "--workers", "2"]
                url = stack.enter_context(serving(command, Path(tmp, f"server-{kind}")))
                results[kind] = run_store(url, args)
    load_end = os.getloadavg()
    if args.json:
        print(json.dumps({"results": results, "load_start": load_start, "load_end": load_end}, indent=2))
        return
    print(f"zaqar-lite serve, 2 gevent workers; {args.waiting} claims waiting (wait={WAIT}); "
          f"{args.posts} posts timed per column; {args.wakeups} wake-ups")
    print(f"{'store':<8}{'waiting':>8}{'early':>6}{'post p50/p99 ms alone':>24}"
          f"{'post p50/p99 ms waiting':>26}{'wake-up p50/p99 ms':>21}")
    for kind, row in results.items():
        print(f"{kind:<8}{row['waiting']:>8}{row['answered_early']:>6}"
              f"{row['posts_alone_p50_ms']:>13.2f} / {row['posts_alone_p99_ms']:<8.2f}"
              f"{row['posts_waiting_p50_ms']:>15.2f} / {row['posts_waiting_p99_ms']:<8.2f}"
              f"{row['wake_up_p50_ms']:>10.2f} / {row['wake_up_p99_ms']:<8.2f}")
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f} at the start, ".format(*load_start)
          + "{:.2f} {:.2f} {:.2f} at the end".format(*load_end))


if __name__ == "__main__":
    main()
