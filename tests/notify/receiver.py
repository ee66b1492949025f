"""A webhook receiver under test: records every delivery, fails on demand, notices overlap.

It listens on a free 127.0.0.1 port in a thread of the test process. Each
subscription gets its own path (``receiver.url("a")`` is ``http://.../a``),
and each path has its own behaviour (:class:`Behaviour`) and its own record of
the requests it received, in arrival order (:class:`Delivery`). Two requests to
one path being handled at the same time is recorded as an overlap.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import random
import threading
import time
from typing import Any

from tests.conftest import free_port


@dataclasses.dataclass
class Behaviour:
    """How one path answers.

    ``fail_first`` requests get ``fail_status``; after that each request fails
    with probability ``fail_rate``, half of those failures with ``fail_status``
    and half by closing the connection without an answer. ``always_fail`` makes
    every request fail with ``fail_status``. ``delay`` is slept inside every
    request (it widens the window in which overlap would show).
    """

    fail_first: int = 0
    fail_rate: float = 0.0
    fail_status: int = 500
    always_fail: bool = False
    delay: float = 0.0


@dataclasses.dataclass(frozen=True)
class Delivery:
    """One request as received: its JSON body, headers, raw bytes and whether it was answered 2xx."""

    body: Any
    headers: dict[str, str]
    raw: bytes
    acknowledged: bool
    started: float
    ended: float


class Receiver:
    """The receiver; use as a context manager or call :meth:`start` and :meth:`stop`."""

    def __init__(self, seed: int = 7) -> None:
        self.port = free_port()
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self._behaviours: dict[str, Behaviour] = {}
        self._deliveries: dict[str, list[Delivery]] = {}
        self._in_flight: dict[str, int] = {}
        self._received: dict[str, int] = {}
        self.overlaps: list[str] = []
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> Receiver:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start serving."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def url(self, name: str) -> str:
        """Return the URL of one path."""
        return f"http://127.0.0.1:{self.port}/{name}"

    def behave(self, name: str, **fields: Any) -> None:
        """Set how a path answers from now on (fields of :class:`Behaviour`)."""
        with self._lock:
            self._behaviours[name] = Behaviour(**fields)

    def deliveries(self, name: str) -> list[Delivery]:
        """Return every request a path received so far, in arrival order."""
        with self._lock:
            return list(self._deliveries.get(name, []))

    def acknowledged(self, name: str) -> list[Delivery]:
        """Return the requests of a path that were answered 2xx, in order."""
        return [d for d in self.deliveries(name) if d.acknowledged]

    def _decide(self, name: str) -> str:
        """Return "ok", "status" or "drop" for the next request of a path."""
        with self._lock:
            behaviour = self._behaviours.get(name, Behaviour())
            count = self._received[name] = self._received.get(name, 0) + 1
            if behaviour.always_fail or count <= behaviour.fail_first:
                return "status"
            if behaviour.fail_rate and self._random.random() < behaviour.fail_rate:
                return "status" if self._random.random() < 0.5 else "drop"
            return "ok"

    def _handler_class(self) -> type[http.server.BaseHTTPRequestHandler]:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server naming
                name = self.path.strip("/")
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                started = time.monotonic()
                with receiver._lock:
                    receiver._in_flight[name] = receiver._in_flight.get(name, 0) + 1
                    if receiver._in_flight[name] > 1:
                        receiver.overlaps.append(name)
                    behaviour = receiver._behaviours.get(name, Behaviour())
                # A request is "in flight" from its arrival until just before it is answered: the
                # sender cannot send its next request before it has the answer, so one sender never
                # overlaps itself, whatever the thread scheduling here.
                try:
                    time.sleep(behaviour.delay)
                    outcome = receiver._decide(name)
                    acknowledged = outcome == "ok"
                    delivery = Delivery(body=json.loads(raw), headers=dict(self.headers), raw=raw,
                                        acknowledged=acknowledged, started=started, ended=time.monotonic())
                    with receiver._lock:
                        receiver._deliveries.setdefault(name, []).append(delivery)
                finally:
                    with receiver._lock:
                        receiver._in_flight[name] -= 1
                if outcome == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send_response(204 if acknowledged else behaviour.fail_status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler
