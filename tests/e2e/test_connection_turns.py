"""Connections of one worker take turns: one whose requests are all ready does not keep the worker to itself.

A greenlet runs until it waits. A kept-alive connection with many requests in
its buffer never waits for its next one, so without turns its worker would
answer all of them before looking at any other connection (see
``server/gevent_worker.py``, "turns between connections"). The order of the
answers is read from the access log, which a worker writes as it answers: no
timing is measured. Connections are the server's, not the store's: SQLite pass
only (``store_independent``).
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Store
from tests.e2e.harness import RunningServer

pytestmark = [pytest.mark.store_independent]

#: requests sent at once on the busy connection: a worker answers them for a second or so
PIPELINED = 2000
#: seconds a test waits for any answer: a bound on a hang, not a speed measurement
ANSWER_WITHIN = 60


CLIENT_ID = str(uuid.uuid4())


def home_request(tag: str) -> bytes:
    """A request of the home document, which no store is asked for: the worker never waits on its behalf."""
    return (f"GET /v2?{tag} HTTP/1.1\r\nHost: 127.0.0.1\r\nClient-ID: {CLIENT_ID}\r\n"
            "X-Project-ID: turns\r\n\r\n").encode()


def connect(server: RunningServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=ANSWER_WITHIN)


def read_answers(sock: socket.socket, count: int, first: threading.Event | None = None) -> list[int]:
    """Read ``count`` answers (each with a Content-Length), set ``first`` at the first; return statuses."""
    buffer, statuses = b"", []
    while len(statuses) < count:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            head = buffer[:end].decode("latin-1").split("\r\n")
            length = next(int(line.split(":", 1)[1]) for line in head
                          if line.lower().startswith("content-length:"))
            if len(buffer) >= end + 4 + length:
                statuses.append(int(head[0].split()[1]))
                buffer = buffer[end + 4 + length:]
                if first is not None:
                    first.set()
                continue
        data = sock.recv(65536)
        if not data:
            break
        buffer += data
    return statuses


def logged_requests(server: RunningServer) -> list[str]:
    """The tags of the home document requests in the access log, in the order they were answered."""
    return [line.split("GET /v2?", 1)[1].split(" ", 1)[0]
            for line in server.log().splitlines() if "GET /v2?" in line]


def test_a_connection_with_requests_queued_up_leaves_its_worker_to_another_between_two(
        start_server_for_test: Callable[..., RunningServer], store: Store, tmp_path: Path) -> None:
    server = start_server_for_test(store.uri(tmp_path), workers=1)
    with connect(server) as busy, connect(server) as other:
        other.sendall(home_request("warm"))
        assert read_answers(other, 1) == [200]  # its greenlet waits for its next request from now on
        started = threading.Event()
        answered: list[list[int]] = []
        # the busy connection's answers are read as they come, so that its sends never wait
        reader = threading.Thread(
            target=lambda: answered.append(read_answers(busy, PIPELINED, started)), daemon=True)
        reader.start()
        busy.sendall(b"".join(home_request(f"busy-{n}") for n in range(PIPELINED)))
        assert started.wait(ANSWER_WITHIN), "the busy connection got no answer"
        other.sendall(home_request("other"))
        assert read_answers(other, 1) == [200]
        reader.join(ANSWER_WITHIN)
        assert answered == [[200] * PIPELINED]

    deadline = time.monotonic() + ANSWER_WITHIN
    while len(requests := logged_requests(server)) < PIPELINED + 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # a worker logs an answer just after sending it
    assert len(requests) == PIPELINED + 2, server.log_tail()
    busy_before_other = requests.index("other") - 1  # the warm-up came first
    # Without turns the busy connection's requests were all answered first: PIPELINED of them.
    assert busy_before_other < PIPELINED // 2, (
        f"{busy_before_other} of the busy connection's {PIPELINED} requests were answered before "
        "the other connection's one")
