"""Fixtures of the notification suites: a webhook receiver, an API server and notifier processes.

Notifiers run as real ``zaqar-lite notifier`` processes with short leases and
timeouts (``NOTIFIER_ENV``), on the same SQLite file as a real ``zaqar-lite
serve``; everything talks over loopback on free ports.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import (
    ApiSession,
    RunningServer,
    serve_command,
    server_environment,
    start_server,
    stop_server,
)
from tests.notify.receiver import Receiver
from tests.storage.conftest import storage_uri as driver_uri
from zaqar_lite.config import NotifierSettings, Settings, load_settings
from zaqar_lite.notify.worker import Notifier
from zaqar_lite.storage import Storage, open_storage

LOOPBACK = "127.0.0.1,localhost"
#: ``[notifier] allowed_targets`` of these suites: their receivers listen on loopback, which the
#: default target rule refuses
ALLOW_LOOPBACK = ("127.0.0.0/8", "::1")
#: short leases and timeouts, so that takeovers and retries happen within seconds
NOTIFIER_ENV = {
    "ZAQAR_LITE_NOTIFIER_LEASE_SECONDS": "4",
    "ZAQAR_LITE_NOTIFIER_REQUEST_TIMEOUT": "1",
    "ZAQAR_LITE_NOTIFIER_POLL_INTERVAL": "0.05",
    "ZAQAR_LITE_NOTIFIER_THREADS": "4",
}
#: a retry policy that retries at once, many times: random failures never suspend
PATIENT = {"retries_with_no_delay": 60, "minimum_delay_retries": 0, "maximum_delay_retries": 0,
           "minimum_delay": 0, "maximum_delay": 0}


def child_environment() -> dict[str, str]:
    """Return the environment of a notifier or server started by these suites."""
    env = server_environment()
    env.update(NOTIFIER_ENV)
    env["NO_PROXY"] = env["no_proxy"] = LOOPBACK
    return env


class NotifierProcesses:
    """Starts ``zaqar-lite notifier`` processes for one test and stops them all at its end."""

    def __init__(self, storage_uri: str, log_dir: Path) -> None:
        self.storage_uri = storage_uri
        self.log_dir = log_dir
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start one notifier (``extra``: more options, e.g. ``--workers 2``; ``env``: more variables)."""
        log = self.log_dir / f"notifier-{uuid.uuid4().hex[:8]}.log"
        with open(log, "wb") as handle:
            process = subprocess.Popen([*serve_command(), "notifier", "--storage", self.storage_uri, *extra],
                                       stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env={**child_environment(), **(env or {})}, start_new_session=True)
        process.log_path = log  # type: ignore[attr-defined]
        self.started.append(process)
        return process

    def logs(self) -> str:
        """Return every started notifier's log."""
        return "\n".join(p.log_path.read_text(errors="replace") for p in self.started)  # type: ignore[attr-defined]

    def stop_all(self) -> None:
        """SIGTERM every notifier still running; SIGKILL the process group of any that lingers."""
        for process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.started:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture
def settings(store_uri: str) -> Settings:
    """Default settings on a fresh store, with webhooks to loopback allowed (the receivers are there)."""
    return load_settings(None, storage_uri=store_uri).replace(
        notifier=NotifierSettings(allowed_targets=ALLOW_LOOPBACK))


@pytest.fixture(scope="session", autouse=True)
def loopback_only() -> Iterator[None]:
    """Keep every HTTP client of these suites away from proxies."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("NO_PROXY", "no_proxy"):
            patch.setenv(name, LOOPBACK)
        yield


@contextlib.contextmanager
def running_notifier(storage: Storage, settings: Settings) -> Iterator[Notifier]:
    """Run a notifier in a thread of this process for the duration of the block."""
    notifier = Notifier(storage, settings)
    thread = threading.Thread(target=notifier.run, daemon=True)
    thread.start()
    try:
        yield notifier
    finally:
        notifier.stop()
        thread.join(15)


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    """A fresh store of each kind the in-process notifier tests run on (SQLite and Redis)."""
    storage = open_storage(driver_uri(request.param, request, tmp_path))
    yield storage
    storage.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver on a free loopback port."""
    with Receiver() as running:
        yield running


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of the module's store and logs."""
    return tmp_path_factory.mktemp("notify")


@pytest.fixture(scope="module")
def storage_uri(data_dir: Path) -> str:
    """The SQLite store shared by the module's server and notifiers (no fsync per commit)."""
    return f"sqlite:///{data_dir.resolve()}/zaqar.db?synchronous=normal"


@pytest.fixture(scope="module")
def server(storage_uri: str, data_dir: Path) -> Iterator[RunningServer]:
    """A real API server for the module."""
    running = start_server(storage_uri, data_dir)
    yield running
    stop_server(running)


@pytest.fixture
def api(server: RunningServer) -> Iterator[ApiSession]:
    """An HTTP session on the module server, in a project of the test's own."""
    with ApiSession(server.url, project=f"n-{uuid.uuid4().hex[:10]}") as session:
        yield session


@pytest.fixture
def notifiers(storage_uri: str, tmp_path: Path) -> Iterator[NotifierProcesses]:
    """Starts notifier processes on the module's store and stops them when the test ends."""
    processes = NotifierProcesses(storage_uri, tmp_path)
    yield processes
    processes.stop_all()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the notifier and server logs of a failed test to its report."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, NotifierProcesses):
            report.sections.append(("notifier logs", value.logs()[-20000:]))
        elif isinstance(value, RunningServer):
            report.sections.append((f"zaqar-lite log ({value.url})", value.log_tail()))


def wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll ``condition`` until it holds; fail the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
