"""Slow and idle clients against a real server: everyone else is still answered, and they are cut off.

The server runs on the default settings (the gevent worker: a greenlet per
connection, read deadlines). Connections are the server's, not the store's, so
these run in the SQLite pass only (``store_independent``). Under ``[server]
worker_class = gthread`` (2 workers of 8 threads) the first test fails: 16
connections that sent a part of a request take every thread with no time limit.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Store
from tests.e2e.harness import ApiSession, RunningServer

pytestmark = [pytest.mark.slow, pytest.mark.store_independent]

#: connections of each kind held open: idle ones and ones sending their headers slowly
HOSTILE_PER_KIND = 100
HEADER_TIMEOUT = 3
BODY_TIMEOUT = 3
#: a generous bound on an answer: not a speed measurement, a check that the server answers at all
ANSWER_WITHIN = 10
#: how long after the deadlines every hostile connection must have been closed
CLOSED_WITHIN = HEADER_TIMEOUT + BODY_TIMEOUT + 15


@pytest.fixture
def server(start_server_for_test: Callable[..., RunningServer], store: Store,
           tmp_path: Path) -> RunningServer:
    """A server on the default settings."""
    return start_server_for_test(store.uri(tmp_path))


@pytest.fixture
def quick_server(start_server_for_test: Callable[..., RunningServer], store: Store,
                 tmp_path: Path) -> RunningServer:
    """A server on the default settings but short read deadlines, so the test sees them at work."""
    config = tmp_path / "zaqar-lite.conf"
    config.write_text(f"[server]\nheader_timeout = {HEADER_TIMEOUT}\nbody_timeout = {BODY_TIMEOUT}\n")
    return start_server_for_test(store.uri(tmp_path), extra_args=["--config", str(config)])


def connect(server: RunningServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=ANSWER_WITHIN)


def read_until_closed(sock: socket.socket, deadline: float) -> bytes | None:
    """Everything the server sends until it closes the connection; None if still open at the deadline."""
    received = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        sock.settimeout(remaining)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            return None
        except ConnectionResetError:
            return received
        if not data:
            return received
        received += data


class Trickle:
    """Sends one more header line on each slow connection every half second, until stopped."""

    def __init__(self, socks: list[socket.socket]) -> None:
        self.socks = socks
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(0.5):
            for sock in self.socks:
                try:
                    sock.send(f"X-Slow-{uuid.uuid4().hex[:8]}: 1\r\n".encode())
                except OSError:
                    pass  # closed by the server: what the test wants

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


@contextlib.contextmanager
def hostile_connections(server: RunningServer) -> Iterator[dict[str, list[socket.socket]]]:
    """Idle, slow-header and stalled-body connections open on the server."""
    idle = [connect(server) for _ in range(HOSTILE_PER_KIND)]
    slow = []
    for _ in range(HOSTILE_PER_KIND):
        sock = connect(server)
        sock.sendall(b"GET /v2/ping HTTP/1.1\r\nHost: slow\r\n")
        slow.append(sock)
    stalled = connect(server)
    stalled.sendall(b"POST /v2/queues/stalled/messages HTTP/1.1\r\nHost: slow\r\n"
                    b"Client-ID: " + str(uuid.uuid4()).encode() + b"\r\nX-Project-ID: e2e\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n"
                    b'{"messages": [{"body": "')
    trickle = Trickle(slow)
    try:
        yield {"idle": idle, "slow header": slow, "stalled body": [stalled]}
    finally:
        trickle.stop()
        for sock in [*idle, *slow, stalled]:
            sock.close()


def test_ping_and_post_answer_while_slow_and_idle_connections_are_open(
        server: RunningServer, queue_name: str) -> None:
    with hostile_connections(server), ApiSession(server.url) as api:
        ping = api.get("/v2/ping", timeout=ANSWER_WITHIN)
        posted = api.post(f"/v2/queues/{queue_name}/messages", json={"messages": [{"body": "still here"}]},
                          timeout=ANSWER_WITHIN)

    assert ping.status_code == 204
    assert posted.status_code == 201, posted.text


def test_slow_idle_and_stalled_connections_are_closed_by_the_read_deadlines(
        quick_server: RunningServer) -> None:
    with hostile_connections(quick_server) as hostile:
        deadline = time.monotonic() + CLOSED_WITHIN
        received = {kind: [read_until_closed(sock, deadline) for sock in socks]
                    for kind, socks in hostile.items()}

    for kind in ("idle", "slow header"):
        still_open = sum(data is None for data in received[kind])
        assert still_open == 0, f"{still_open} {kind} connections still open after {CLOSED_WITHIN} s"
        assert set(received[kind]) == {b""}, f"{kind} connections were sent something"
    [answer] = received["stalled body"]
    assert answer is not None, f"the stalled body's connection is still open after {CLOSED_WITHIN} s"
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert answer.endswith(b'{"title": "Request timeout", '
                           b'"description": "The request body did not arrive in time."}'), answer


#: seconds the test holds SQLite's write lock from another process
LOCK_HELD = 4.0


def test_a_write_waiting_for_the_sqlite_lock_does_not_stop_the_worker(
        start_server_for_test: Callable[..., RunningServer], store: Store, tmp_path: Path,
        queue_name: str) -> None:
    """SQLite's calls block in C (a wait for another process's write lock lasts up to 30 s):
    under gevent they run on a thread of the pool, so the one worker keeps answering meanwhile."""
    if store.name != "sqlite":
        pytest.skip("SQLite's write lock: the other stores' clients yield on their sockets")
    import sqlite3

    server = start_server_for_test(store.uri(tmp_path), workers=1)
    holder = sqlite3.connect(store.uri(tmp_path).removeprefix("sqlite:///"), isolation_level=None,
                             check_same_thread=False)
    with ApiSession(server.url) as api, ApiSession(server.url) as other:
        assert api.put(f"/v2/queues/{queue_name}").status_code == 201
        holder.execute("BEGIN IMMEDIATE")  # the write lock, released LOCK_HELD s later
        release = threading.Timer(LOCK_HELD, lambda: (holder.execute("ROLLBACK"), holder.close()))
        release.start()
        posted: list[int] = []
        poster = threading.Thread(target=lambda: posted.append(api.post(
            f"/v2/queues/{queue_name}/messages", json={"messages": [{"body": 1}]}, timeout=30).status_code))
        poster.start()
        time.sleep(0.5)  # the post is now waiting for the lock
        started = time.monotonic()
        ping = other.get("/v2/ping", timeout=LOCK_HELD * 2)
        answered_in = time.monotonic() - started
        still_waiting = poster.is_alive()
        release.join()
        poster.join()

    assert answered_in < LOCK_HELD / 2, f"the ping waited {answered_in:.1f} s behind the locked write"
    assert still_waiting, "the post did not wait for the lock: the test proves nothing"
    assert ping.status_code == 204
    assert posted == [201]
