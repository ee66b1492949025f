"""The access log line of ``zaqar-lite serve``: gunicorn's line, written without gunicorn's atoms."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from zaqar_lite.server.gunicorn import ACCESS_LOG_FORMAT, AccessLogger

HEADERS = [("Content-Type", "application/json"), ("Content-Length", "80")]


class Answer:
    """What gunicorn hands its logger of an answer."""

    def __init__(self, status: str) -> None:
        self.status = status
        self.headers = HEADERS
        self.sent = 80


class Request:
    """What gunicorn hands its logger of a request."""

    headers = [("HOST", "127.0.0.1"), ("CLIENT-ID", "c"), ("X-PROJECT-ID", "p")]


def environ(**changes: object) -> dict[str, object]:
    """Return a request's WSGI environ as the gevent worker builds it (the project set by the API)."""
    env: dict[str, object] = {
        "REQUEST_METHOD": "POST", "RAW_URI": "/v2/queues/q/messages?x=1", "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1", "PATH_INFO": "/v2/queues/q/messages", "QUERY_STRING": "x=1",
        "HTTP_CLIENT_ID": "c", "wsgi.version": (1, 0), "zaqar_lite.project": "project-a",
    }
    env.update(changes)
    return {key: value for key, value in env.items() if value is not None}


def lines(logger_class: type[Logger], path: Path, fmt: str, cases: list[tuple[str, dict[str, object]]],
          took: datetime.timedelta) -> list[str]:
    """Log every case with a logger of ``logger_class`` writing to ``path``; return the lines."""
    config = Config()
    config.set("accesslog", str(path))
    config.set("access_log_format", fmt)
    logger = logger_class(config)
    for status, env in cases:
        logger.access(Answer(status), Request(), env, took)
    for handler in logger.access_log.handlers:
        handler.close()
    return path.read_text().splitlines()


CASES = [
    ("201 Created", environ()),
    ("400 Bad Request", environ(**{"zaqar_lite.project": None})),  # refused before the project was known
    ("404 Not Found", environ(RAW_URI='/v2/queues/a"b/messages', **{"zaqar_lite.project": 'p"q'})),
    ("204 No Content", environ(REMOTE_ADDR="::1", REQUEST_METHOD="DELETE")),
]


@pytest.mark.parametrize("took", [datetime.timedelta(microseconds=900),
                                  datetime.timedelta(seconds=2, microseconds=345678)])
def test_the_access_line_is_gunicorns_to_the_byte(tmp_path: Path, took: datetime.timedelta) -> None:
    ours = lines(AccessLogger, tmp_path / "ours.log", ACCESS_LOG_FORMAT, CASES, took)
    theirs = lines(Logger, tmp_path / "gunicorn.log", ACCESS_LOG_FORMAT, CASES, took)
    assert ours == theirs
    assert len(ours) == len(CASES)
    millis = took.seconds * 1000 + took.microseconds // 1000
    assert ours[0] == f'127.0.0.1 "POST /v2/queues/q/messages?x=1 HTTP/1.1" 201 {millis} ms project=project-a'
    assert ours[1].endswith(" project=-")
    assert '"POST /v2/queues/a\\"b/messages HTTP/1.1" 404' in ours[2] and ours[2].endswith('project=p\\"q')


def test_the_access_line_is_written_without_gunicorns_atoms(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def atoms(*args: object) -> dict[str, object]:
        raise AssertionError("every atom of gunicorn's format built for one line")

    monkeypatch.setattr(Logger, "atoms", atoms)
    written = lines(AccessLogger, tmp_path / "ours.log", ACCESS_LOG_FORMAT, CASES[:1],
                    datetime.timedelta(milliseconds=3))
    assert written == ['127.0.0.1 "POST /v2/queues/q/messages?x=1 HTTP/1.1" 201 3 ms project=project-a']


def test_another_format_is_gunicorns(tmp_path: Path) -> None:
    fmt = '%(h)s %(m)s %(U)s %(s)s %({client-id}i)s'
    took = datetime.timedelta(milliseconds=5)
    ours = lines(AccessLogger, tmp_path / "ours.log", fmt, CASES[:1], took)
    assert ours == lines(Logger, tmp_path / "gunicorn.log", fmt, CASES[:1], took)
    assert ours == ["127.0.0.1 POST /v2/queues/q/messages 201 c"]
