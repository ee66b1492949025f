"""Redis for the suites: a throwaway redis-server on 127.0.0.1, started once per session.

Provides ``redis_server`` (session), ``redis_store_uri`` (an emptied database
per test) and ``redis_restartable_store`` (a server of the test's own that
appends every write to its file before answering, so a kill -9 loses nothing
acknowledged). A missing ``redis-server`` skips the tests that need it, or fails
them under CI (``tests/install_servers.sh`` installs it from Debian).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.conftest import free_port, missing_server

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


def _alive(pid: int) -> bool:
    """Return whether a process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" not in status


class RedisServer:
    """One redis-server process whose files live in ``directory``.

    ``options`` are extra command-line options, e.g. ``("--appendonly", "yes")``;
    by default nothing is persisted. ``password`` adds ``--requirepass``.
    """

    def __init__(self, directory: Path, *options: str, port: int | None = None,
                 password: str | None = None) -> None:
        self.directory = Path(directory)
        self.options = options or ("--save", "", "--appendonly", "no")
        self.port = port or free_port()
        self.password = password
        self.pid: int | None = None

    @property
    def pidfile(self) -> Path:
        return self.directory / "redis.pid"

    def uri(self, db: int = 0) -> str:
        """Return the URI of a database on this server."""
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self) -> redis.Redis:
        """Return a plain client for the test's own checks."""
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=5,
                           decode_responses=True)

    def start(self, attempts: int = 5) -> None:
        """Start the server (on a new free port if the chosen one was taken) and wait until it answers."""
        auth = ("--requirepass", self.password) if self.password else ()
        for attempt in range(attempts):
            self.pidfile.unlink(missing_ok=True)
            subprocess.run(
                ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), *self.options, *auth,
                 "--daemonize", "yes", "--pidfile", str(self.pidfile),
                 "--logfile", str(self.directory / "redis.log"), "--dir", str(self.directory)],
                check=True, timeout=START_TIMEOUT, stdout=subprocess.DEVNULL)
            if self._wait_until_ready():
                return
            self.stop(signal.SIGKILL)
            if attempt + 1 < attempts:
                self.port = free_port()
        log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}:\n{log}")

    def _wait_until_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        with self.client() as probe:
            while time.monotonic() < deadline:
                try:
                    if self.pid is None and self.pidfile.exists():
                        self.pid = int(self.pidfile.read_text().strip())
                    if self.pid is not None and probe.ping():
                        return True
                except (redis.exceptions.ConnectionError, ValueError):
                    pass  # not listening yet, still loading its data, or pidfile half written
                time.sleep(0.05)
        return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server by its PID (SIGKILL with ``sig=signal.SIGKILL``) and wait until it is gone."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT
        while _alive(pid):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + STOP_TIMEOUT
            time.sleep(0.02)

    def flushall(self) -> None:
        """Empty every database."""
        with self.client() as c:
            c.flushall()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One throwaway redis-server for the whole session, stopped by its PID at the end."""
    if shutil.which("redis-server") is None:
        missing_server("redis-server")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_store_uri(redis_server) -> str:
    """The URI of an emptied database on the session's redis-server."""
    redis_server.flushall()
    return redis_server.uri()


class RestartableRedis:
    """A redis-server of one test that fsyncs every write before answering; see ``RestartableStore``."""

    OPTIONS = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")

    def __init__(self, directory: Path) -> None:
        self.server = RedisServer(directory, *self.OPTIONS)
        self.server.start()
        self.uri = self.server.uri()

    def stop(self) -> None:
        self.server.stop(signal.SIGKILL)

    def start(self) -> None:
        self.server.start(attempts=1)


@pytest.fixture
def redis_restartable_store(tmp_path):
    """A redis-server the test may kill and restart; stopped at the end."""
    if shutil.which("redis-server") is None:
        missing_server("redis-server")
    store = RestartableRedis(tmp_path)
    yield store
    store.server.stop()
