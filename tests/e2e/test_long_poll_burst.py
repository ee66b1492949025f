"""2,000 long polls opened within a second: every other client is still answered while they arrive.

The server runs on its defaults (2 gevent workers, SQLite). Before, a ping sent
among them waited about 30 s: each worker held at most gunicorn's default 1,000
connections, which the waiting claims filled, and the accept balance let a worker
accept only one connection a step once it held one more than the other, so the
burst itself took seconds to be accepted. The bound below is generous (a check
that pings are answered long before the claims' 20 s wait ends, not a speed
measurement: ``benchmarks/long_poll_burst.py`` gives the latencies).
Connections are the server's, not the store's (``store_independent``).
"""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Store
from tests.e2e.harness import RunningServer

pytestmark = [pytest.mark.slow, pytest.mark.store_independent]

LONG_POLLS = 2000
WAIT = 20
#: a generous bound, far below WAIT: the ping is answered while the claims still wait
ANSWER_WITHIN = 8.0
CLIENT = "3b4a4c6e-1b2e-4a5c-9d3e-0e7b7c1f2a3d"


def request(method: str, path: str, body: bytes = b"") -> bytes:
    """Return an HTTP/1.1 request with the headers every /v2 request needs."""
    return (f"{method} {path} HTTP/1.1\r\nHost: e2e\r\nClient-ID: {CLIENT}\r\nX-Project-ID: burst\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def test_pings_are_answered_while_2000_long_polls_arrive_and_wait(
        start_server_for_test: Callable[..., RunningServer], store: Store, tmp_path: Path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < LONG_POLLS + 200 <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (LONG_POLLS + 200, hard))
    server = start_server_for_test(store.uri(tmp_path))
    host, port = server.url.split("//")[1].split(":")
    address = (host, int(port))
    latencies: list[float] = []
    stop = threading.Event()

    def ping_meanwhile() -> None:
        while not stop.is_set():
            with socket.create_connection(address, timeout=WAIT + 15) as conn:
                started = time.monotonic()
                conn.sendall(request("GET", "/v2/ping"))
                assert conn.recv(64).startswith(b"HTTP/1.1 204")
                latencies.append(time.monotonic() - started)
            time.sleep(0.05)

    pinger = threading.Thread(target=ping_meanwhile, daemon=True)
    body = json.dumps({"ttl": 60, "grace": 60}).encode()
    with contextlib.ExitStack() as held:
        pinger.start()
        for n in range(LONG_POLLS):
            conn = held.enter_context(socket.create_connection(address))
            conn.sendall(request("POST", f"/v2/queues/idle-{n % 50}/claims?limit=1&wait={WAIT}", body))
        time.sleep(ANSWER_WITHIN + 2)
        stop.set()
        pinger.join(timeout=WAIT + 20)

    assert not pinger.is_alive()
    assert max(latencies) < ANSWER_WITHIN, sorted(latencies)[-5:]
    assert len(latencies) >= 5
