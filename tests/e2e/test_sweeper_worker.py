"""The worker that sweeps answers every request while it sweeps thousands of queues.

The server has one worker, so every request goes to the worker whose sweeper
runs (under the gevent worker on SQLite, in a thread of gevent's pool, while
requests are served on the hub). Thousands of queues each hold a message
expiring during the test, so each sweep discards messages in hundreds of
queues. A ping on a new connection is a request the sweeper must never hold
up: before, about one in a thousand was never answered (its greenlet waited
for a lock the sweeper's thread had released, and was never woken).
SQLite only (``store_independent``): the pool thread is the SQLite path.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from tests.e2e.harness import RunningServer
from zaqar_lite.models import Message
from zaqar_lite.storage import open_storage

pytestmark = [pytest.mark.slow, pytest.mark.store_independent]

QUEUES = 6000
#: the messages expire one after another over this many seconds from the pings' start
EXPIRING_OVER = 16.0
PINGS_FOR = 14.0
#: a generous bound: not a speed measurement, a check that every ping is answered at all
ANSWER_WITHIN = 10.0
PING = (b"GET /v2/ping HTTP/1.1\r\nHost: e2e\r\nClient-ID: 3b4a4c6e-1b2e-4a5c-9d3e-0e7b7c1f2a3d\r\n"
        b"X-Project-ID: e2e\r\nConnection: close\r\n\r\n")


def unanswered_pings(url: str, seconds: float) -> tuple[int, int]:
    """Ping on a new connection each time for ``seconds``; return (answered, not answered in time)."""
    host, port = url.split("//")[1].split(":")
    answered = unanswered = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.create_connection((host, int(port)), timeout=ANSWER_WITHIN) as conn:
            conn.sendall(PING)
            try:
                head = conn.recv(64)
            except TimeoutError:
                unanswered += 1
                continue
            assert head.startswith(b"HTTP/1.1 204"), head
            answered += 1
    return answered, unanswered


def discarded(url: str) -> float:
    """Return the server's count of messages the sweep discarded."""
    text = requests.get(f"{url}/metrics", timeout=ANSWER_WITHIN).text
    found = re.search(r"^zaqar_lite_messages_discarded_total (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_every_request_to_the_sweeping_worker_is_answered_while_it_sweeps_many_queues(
        start_server_for_test: Callable[..., RunningServer], tmp_path: Path):
    uri = f"sqlite:///{tmp_path}/zaqar.db?synchronous=normal"
    store = open_storage(uri)
    start = time.time() + 10  # the server is answering by then
    for n in range(QUEUES):
        expires = start + EXPIRING_OVER * n / QUEUES
        store.post_messages("tenant", f"queue-{n}", [Message(
            id=f"m-{n}", body=n, created=start - 60, expires=expires, client_id="c")], start - 60)
    store.close()
    config = tmp_path / "zaqar-lite.conf"
    config.write_text("[server]\nsweep_interval = 0.2\n")
    server = start_server_for_test(uri, workers=1, extra_args=["--config", str(config)])
    time.sleep(max(0.0, start - time.time()))

    answered, unanswered = unanswered_pings(server.url, PINGS_FOR)

    assert unanswered == 0, f"{unanswered} of {answered + unanswered} pings never answered"
    # the sweeper did sweep: most messages have expired and been discarded meanwhile
    assert discarded(server.url) >= QUEUES * PINGS_FOR / EXPIRING_OVER * 0.5
