"""What the gevent worker does once per process, connection or second instead of once per request.

Each part runs for real: gunicorn's own ``Config`` and logger, gevent's event
loop and timers, a TCP connection on the loopback, the system clock.
"""

from __future__ import annotations

import datetime
import logging
import socket
import time
from email.utils import formatdate
from pathlib import Path
from typing import Any

import gevent
import pytest
from gunicorn.config import Config

from zaqar_lite.server.gevent_worker import CountingSocket, HeadWait, HttpDate, settle
from zaqar_lite.server.gunicorn import ACCESS_LOG_FORMAT, AccessLogger


def test_the_date_text_is_made_once_a_second_and_is_gunicorns() -> None:
    http_date = HttpDate()
    while True:  # not across a second's turn
        before = formatdate(time.time(), localtime=False, usegmt=True)
        first, second = http_date(), http_date()
        if formatdate(time.time(), localtime=False, usegmt=True) == before:
            break
    assert first == before
    assert second is first  # kept, not made again
    assert http_date(0) == "Thu, 01 Jan 1970 00:00:00 GMT"
    assert http_date(1_700_000_000.9) == formatdate(1_700_000_000.9, localtime=False, usegmt=True)


def test_the_date_text_follows_the_clock() -> None:
    http_date = HttpDate()
    first = http_date()
    deadline = time.time() + 3
    while http_date() == first and time.time() < deadline:
        time.sleep(0.05)
    later = http_date()
    assert later != first
    assert later == formatdate(time.time(), localtime=False, usegmt=True) or \
        later == formatdate(time.time() - 1, localtime=False, usegmt=True)


def test_a_settled_config_answers_without_its_getattr(monkeypatch: pytest.MonkeyPatch) -> None:
    config = Config()
    config.set("keepalive", 7)
    config.set("forwarded_allow_ips", "10.0.0.1,::1")
    config.set("workers", 3)
    expected = {name: setting.get() for name, setting in config.settings.items()}
    settle(config)

    def refused(self: Config, name: str) -> Any:
        raise AssertionError(f"{name} read through Config.__getattr__")

    monkeypatch.setattr(Config, "__getattr__", refused)
    assert config.keepalive == 7
    assert config.forwarded_allow_ips == ["10.0.0.1", "::1"]
    assert config.pre_request is expected["pre_request"]
    for name, value in expected.items():
        if not hasattr(Config, name):
            assert getattr(config, name) == value, name
    # a property of the class stays the property
    assert config.worker_class_str == "sync"
    config.set("bind", "127.0.0.1:9")
    assert config.address == [("127.0.0.1", 9)]  # computed from the setting as it is now


def test_each_wait_of_a_connection_for_a_head_gets_its_whole_deadline() -> None:
    waiting: dict[Any, HeadWait] = {}
    took: list[float] = []

    def connection() -> None:
        wait = HeadWait(0.05, None, gevent.getcurrent(), waiting)
        for _ in range(3):  # heads that arrive in time
            with wait:
                assert waiting == {gevent.getcurrent(): wait}
                gevent.sleep(0.01)
            assert waiting == {}
        for _ in range(3):  # nothing arrives: each wait ends quietly at its deadline, not earlier
            started = time.monotonic()
            with wait:
                gevent.sleep(2)
            took.append(time.monotonic() - started)
            assert waiting == {}

    gevent.spawn(connection).get(timeout=5)
    assert len(took) == 3
    assert all(0.045 <= seconds < 1 for seconds in took), took


def test_a_stopping_worker_ends_an_idle_wait_with_its_deadline() -> None:
    waiting: dict[Any, HeadWait] = {}
    outcome: list[str] = []

    def connection() -> None:
        wait = HeadWait(30, None, gevent.getcurrent(), waiting)
        with wait:
            gevent.sleep(30)
        outcome.append("ended quietly")

    greenlet = gevent.spawn(connection)
    gevent.sleep(0.01)
    [(waiter, wait)] = waiting.items()
    waiter.kill(wait.deadline, block=False)  # as Worker._close_idle_connections does
    greenlet.join(timeout=5)
    assert outcome == ["ended quietly"] and waiting == {}


def test_the_send_buffer_size_is_asked_once_a_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
    plain = socket.socket(fileno=accepted.fileno())  # the same descriptor, asked directly
    server = CountingSocket(accepted.family, accepted.type, accepted.proto, fileno=accepted.detach())
    try:
        server.sendall(b"x" * 10)
        kept = server._send_buffer
        assert kept == plain.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        server.sendall(b"y" * 10)
        assert server.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == kept
        server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32768)
        assert server._send_buffer is None  # asked again after a change
        assert server.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == \
            plain.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) != kept
        assert server.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == \
            plain.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
        assert client.recv(100) == b"x" * 10 + b"y" * 10
    finally:
        plain.detach()
        server.close()
        client.close()


class Answer:
    """What gunicorn hands its logger of an answer."""

    status = "201 Created"
    headers: list[tuple[str, str]] = []


ENVIRON = {"REQUEST_METHOD": "POST", "RAW_URI": "/v2/queues/q/messages", "SERVER_PROTOCOL": "HTTP/1.1",
           "REMOTE_ADDR": "127.0.0.1", "zaqar_lite.project": "p"}
LINE = '127.0.0.1 "POST /v2/queues/q/messages HTTP/1.1" 201 4 ms project=p'


def logger_to(path: Path) -> AccessLogger:
    """An access logger writing to ``path`` as ``accesslog = path`` sets it up."""
    config = Config()
    config.set("accesslog", str(path))
    config.set("access_log_format", ACCESS_LOG_FORMAT)
    return AccessLogger(config)


def test_a_plain_access_log_line_is_written_without_a_log_record(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # as in a worker, the access log's one handler is the one gunicorn sets up (the test
    # runner may have left handlers of its own on the logger: they take the other path)
    access = logging.getLogger("gunicorn.access")
    monkeypatch.setattr(access, "handlers", [])
    logger = logger_to(tmp_path / "access.log")
    took = datetime.timedelta(milliseconds=4)

    def no_record(*args: object, **kwargs: object) -> logging.LogRecord:
        raise AssertionError("a LogRecord made for a plain access log line")

    monkeypatch.setattr(logging.Logger, "makeRecord", no_record)
    try:
        logger.access(Answer(), None, dict(ENVIRON), took)
        # written and flushed at once, as the handler's emit does
        assert (tmp_path / "access.log").read_text() == LINE + "\n"
        logger.access(Answer(), None, dict(ENVIRON), took)
        assert (tmp_path / "access.log").read_text() == (LINE + "\n") * 2
    finally:
        for handler in logger.access_log.handlers:
            handler.close()


def test_an_access_log_set_up_otherwise_keeps_its_records(tmp_path: Path) -> None:
    logger = logger_to(tmp_path / "access.log")
    seen: list[logging.LogRecord] = []

    class Seen(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            seen.append(record)
            return "skip" not in record.getMessage()

    log = logger.access_log
    log.addFilter(Seen())
    try:
        logger.access(Answer(), None, dict(ENVIRON), datetime.timedelta(milliseconds=4))
        logger.access(Answer(), None, dict(ENVIRON, RAW_URI="/skip"), datetime.timedelta(milliseconds=4))
        assert [record.getMessage() for record in seen][0] == LINE
        assert len(seen) == 2
        assert (tmp_path / "access.log").read_text() == LINE + "\n"
    finally:
        log.filters.clear()
        for handler in log.handlers:
            handler.close()
