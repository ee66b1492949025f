"""Starting and stopping a real ``zaqar-lite serve`` process, and talking to it over loopback.

The end-to-end suites use these through the fixtures of ``tests/e2e/conftest.py``;
they are plain functions so that other suites (and other stores) can reuse them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

from tests.conftest import free_port

HOST = "127.0.0.1"
STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
LOG_TAIL_LINES = 200
PORT_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True)
class Store:
    """A storage backend the end-to-end suites can run a server on."""

    name: str
    #: data directory -> storage URI
    uri: Callable[[Path], str]
    #: data directory -> text the startup log must show to say where the data lives
    location: Callable[[Path], str]


def _sqlite_path(data_dir: Path) -> Path:
    return data_dir.resolve() / "zaqar.db"


SQLITE = Store(
    name="sqlite",
    uri=lambda data_dir: f"sqlite:///{_sqlite_path(data_dir)}",
    location=lambda data_dir: str(_sqlite_path(data_dir)),
)

#: every store the end-to-end suites run on, by name
STORES: dict[str, Store] = {SQLITE.name: SQLITE}


class ServerFailedToStart(RuntimeError):
    """The server process exited or never answered ``/v2/ping`` in time."""


@dataclasses.dataclass
class RunningServer:
    """A ``zaqar-lite serve`` process listening on loopback."""

    url: str
    storage_uri: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        """Return the pid of the gunicorn master."""
        return self.process.pid

    def log(self) -> str:
        """Return everything the server has written to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """Return the last lines of the server log."""
        return "\n".join(self.log().splitlines()[-lines:])

    def worker_pids(self) -> set[int]:
        """Return the pids of the master's live child processes (the gunicorn workers)."""
        workers = set()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            state, parent = fields[0], int(fields[1])
            if parent == self.pid and state != "Z":
                workers.add(int(stat.parent.name))
        return workers


def serve_command() -> list[str]:
    """Return the command that runs ``zaqar-lite``: the console script next to this Python."""
    script = Path(sys.executable).with_name("zaqar-lite")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "zaqar_lite"]


def serve_with_config(text: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """Run ``zaqar-lite serve`` on SQLite with a configuration file of ``text``; return how it ended
    (for a configuration it must refuse, it ends at once)."""
    config = directory / "refused.conf"
    config.write_text(text)
    command = [*serve_command(), "serve", "--bind", f"{HOST}:{free_port()}", "--config", str(config),
               "--storage", f"sqlite:///{directory}/zaqar.db"]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=directory,
                          env=server_environment())


#: the test servers' webhooks go to receivers on loopback, which the default target rule refuses
LOOPBACK_TARGETS = "127.0.0.0/8, ::1"


def server_environment(temp_dir: Path | None = None) -> dict[str, str]:
    """Return the environment of a server: ours, without any zaqar-lite settings that would leak in,
    allowing webhooks to loopback (``LOOPBACK_TARGETS``), and with ``TMPDIR`` set to ``temp_dir``
    when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZAQAR_LITE_")}
    env["ZAQAR_LITE_NOTIFIER_ALLOWED_TARGETS"] = LOOPBACK_TARGETS
    env["PYTHONUNBUFFERED"] = "1"
    if temp_dir is not None:
        env["TMPDIR"] = str(temp_dir)
    return env


def ping(url: str, timeout: float = 2.0, token: str | None = None) -> int:
    """Return the status of ``GET /v2/ping`` with valid headers (and ``X-Auth-Token`` when given)."""
    with ApiSession(url) as session:
        if token is not None:
            del session.headers["X-Project-ID"]
            session.headers["X-Auth-Token"] = token
        return session.get("/v2/ping", timeout=timeout).status_code


def _listening_on_our_port(log: str, port: int, pid: int) -> bool:
    # Another process may have taken the port between free_port() and the bind;
    # only our own master's "Listening at" line proves the answers come from us.
    return re.search(rf"Listening at: http://{re.escape(HOST)}:{port} \({pid}\)", log) is not None


def _start_once(storage_uri: str, log_path: Path, workers: int, extra_args: list[str],
                timeout: float, token: str | None, temp_dir: Path | None,
                env: dict[str, str] | None = None) -> RunningServer:
    port = free_port()
    url = f"http://{HOST}:{port}"
    command = [*serve_command(), "serve", "--bind", f"{HOST}:{port}", "--workers", str(workers),
               "--storage", storage_uri, *extra_args]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=log_path.parent, env={**server_environment(temp_dir), **(env or {})},
                                   start_new_session=True)
    server = RunningServer(url=url, storage_uri=storage_uri, process=process, log_path=log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerFailedToStart(
                f"zaqar-lite exited with {process.returncode} before answering:\n{server.log_tail()}")
        if _listening_on_our_port(server.log(), port, process.pid) and len(server.worker_pids()) >= workers:
            try:
                if ping(url, token=token) == 204:
                    return server
            except requests.RequestException:
                pass
        time.sleep(0.1)
    stop_server(server)
    raise ServerFailedToStart(f"zaqar-lite did not answer /v2/ping within {timeout:.0f} s:\n"
                              f"{server.log_tail()}")


def start_server(storage_uri: str, tmp_path: Path, *, workers: int = 2, extra_args: list[str] | None = None,
                 timeout: float = STARTUP_TIMEOUT, token: str | None = None,
                 temp_dir: Path | None = None, env: dict[str, str] | None = None) -> RunningServer:
    """Start ``zaqar-lite serve`` on a free loopback port and wait until it answers ``/v2/ping``.

    Args:
        storage_uri: the ``--storage`` URI.
        tmp_path: a directory for the server's log (and working directory).
        workers: gunicorn worker processes.
        extra_args: more ``serve`` options, e.g. ``["--config", path]``.
        timeout: seconds to wait for the first 204 from ``/v2/ping``.
        token: the ``X-Auth-Token`` of the readiness ping, for a server with token auth.
        temp_dir: the server's ``TMPDIR`` (where it makes its metrics directory, sweeper
            locks and wake-up sockets), by default ours.
        env: more environment variables of the server (e.g. libfaketime's).

    Returns:
        The running server; stop it with :func:`stop_server`.

    Raises:
        ServerFailedToStart: the process exited or never answered; the message holds its log.
    """
    log_path = tmp_path / f"zaqar-lite-{uuid.uuid4().hex[:8]}.log"
    for attempt in range(PORT_ATTEMPTS):
        try:
            return _start_once(storage_uri, log_path, workers, extra_args or [], timeout, token, temp_dir,
                               env)
        except ServerFailedToStart as exc:
            log = log_path.read_text(errors="replace")
            lost_the_port = "Connection in use" in log or "is already in use" in log
            if not lost_the_port or attempt == PORT_ATTEMPTS - 1:
                raise exc from None
    raise AssertionError("unreachable")


def stop_server(server: RunningServer, timeout: float = STOP_TIMEOUT) -> int:
    """Stop a server with SIGTERM, or SIGKILL its process group if it outlives ``timeout``.

    Returns:
        The master's exit status (negative for a signal, as :mod:`subprocess` reports it).
    """
    process = server.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            # start_new_session made the master a group leader: its group is exactly its workers.
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode


@contextlib.contextmanager
def configured_server(storage_uri: str, directory: Path, config: str) -> Iterator[RunningServer]:
    """Run a server with a configuration file of ``config`` (written in ``directory``) for a with block."""
    path = directory / "zaqar-lite.conf"
    path.write_text(config)
    running = start_server(storage_uri, directory, extra_args=["--config", str(path)])
    try:
        yield running
    finally:
        stop_server(running)


class ServerStarter:
    """Starts servers for one test and stops them all when it ends."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[RunningServer] = []

    def __call__(self, storage_uri: str, *, workers: int = 2, extra_args: list[str] | None = None,
                 temp_dir: Path | None = None, token: str | None = None) -> RunningServer:
        """Start a server on ``storage_uri`` with :func:`start_server` and remember it."""
        server = start_server(storage_uri, self.tmp_path, workers=workers, extra_args=extra_args,
                              temp_dir=temp_dir, token=token)
        self.started.append(server)
        return server

    def stop_all(self) -> None:
        """Stop every server this starter started."""
        for server in self.started:
            stop_server(server)


class ApiSession(requests.Session):
    """A requests session bound to one server, with valid ``Client-ID`` and ``X-Project-ID`` headers.

    Paths are relative to the server (``session.get("/v2/ping")``); proxies from
    the environment are ignored so nothing leaves loopback.
    """

    def __init__(self, base_url: str, project: str = "e2e", client_id: str | None = None) -> None:
        super().__init__()
        self.trust_env = False
        self.base_url = base_url.rstrip("/")
        self.headers.update({"Client-ID": client_id or str(uuid.uuid4()), "X-Project-ID": project})

    def request(self, method: str, url: str, *args: Any,  # type: ignore[override]
                **kwargs: Any) -> requests.Response:
        """Send a request to a path of the server, with a 10 s timeout unless given."""
        kwargs.setdefault("timeout", 10)
        return super().request(method, self.base_url + url, *args, **kwargs)
