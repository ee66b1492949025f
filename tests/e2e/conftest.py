"""Fixtures of the end-to-end suites: real ``zaqar-lite serve`` processes reached over loopback.

``server`` is one server per test module, on the store named by
``$ZAQAR_LITE_TEST_STORE`` (default SQLite; ``tests/run_all.sh`` runs these
suites once per store kind). ``start_server_for_test`` starts more servers inside
one test (other options, restarts). When a test fails, the logs of the servers it
used are attached to its report.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.conftest import STORE_KIND
from tests.e2e.harness import (
    STORES,
    ApiSession,
    RunningServer,
    ServerStarter,
    Store,
    start_server,
    stop_server,
)

LOOPBACK = "127.0.0.1,localhost"
ReportWrapper = Generator[None, pytest.TestReport, pytest.TestReport]


@pytest.fixture(scope="session", autouse=True)
def loopback_only() -> Iterator[None]:
    """Keep every HTTP client of these suites (and the processes they spawn) away from proxies."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("NO_PROXY", "no_proxy"):
            patch.setenv(name, LOOPBACK)
        yield


def networked_store(kind: str, request: pytest.FixtureRequest) -> Store:
    """Return a Store on the session's real server of a kind: each data directory gets its own
    empty database (or container prefix), and the same directory always the same one."""
    names: dict[Path, str] = {}

    def name_for(data_dir: Path) -> str:
        return names.setdefault(data_dir, f"e2e{uuid.uuid4().hex[:10]}")

    if kind == "redis":
        redis_server = request.getfixturevalue("redis_server")
        redis_server.flushall()
        # Redis has 16 numbered databases; db 0 stays for the storage suites.
        databases: dict[Path, int] = {}

        def database(data_dir: Path) -> int:
            return databases.setdefault(data_dir, 1 + len(databases) % 15)

        return Store("redis", lambda d: redis_server.uri(database(d)),
                     lambda d: f"redis at 127.0.0.1:{redis_server.port}/{database(d)}")
    if kind == "redis_cluster":
        # A cluster has one database: the module's servers share it, emptied when the module
        # starts. Each data directory names the cluster by its seeds in another order, so that
        # each server has a URI, and so a sweeper lock, of its own.
        cluster = request.getfixturevalue("redis_cluster_server")
        cluster.flushall()
        turns: dict[Path, int] = {}

        def seeds_from(data_dir: Path) -> str:
            return cluster.uri(first=turns.setdefault(data_dir, len(turns)))

        return Store("redis", seeds_from, lambda d: "redis cluster at 127.0.0.1:")
    if kind == "mongodb":
        from tests.servers.mongodb import with_database

        server_uri = request.getfixturevalue("mongodb_server_uri")
        return Store("mongodb", lambda d: with_database(server_uri, name_for(d)),
                     lambda d: f"MongoDB database {name_for(d)}")
    if kind == "swift":
        swift_server = request.getfixturevalue("swift_server")
        return Store("swift", lambda d: swift_server.uri(name_for(d)),
                     lambda d: f"containers {name_for(d)}.*")
    raise ValueError(f"no end-to-end store for {kind}")


@pytest.fixture(scope="module")
def store(request: pytest.FixtureRequest) -> Store:
    """The store the module's server runs on: ``$ZAQAR_LITE_TEST_STORE`` (default SQLite)."""
    if STORE_KIND == "sqlite":
        return STORES["sqlite"]
    return networked_store(STORE_KIND, request)


@pytest.fixture(scope="module")
def data_dir(store: Store, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the module server's data and log."""
    return tmp_path_factory.mktemp(f"e2e-{store.name}")


@pytest.fixture(scope="module")
def server(store: Store, data_dir: Path) -> Iterator[RunningServer]:
    """A real server with 2 workers on ``store``, shared by the tests of one module."""
    running = start_server(store.uri(data_dir), data_dir)
    yield running
    stop_server(running)


@pytest.fixture
def start_server_for_test(tmp_path: Path) -> Iterator[ServerStarter]:
    """A function that starts servers stopped at the end of the test: ``start(storage_uri)``."""
    starter = ServerStarter(tmp_path)
    yield starter
    starter.stop_all()


@pytest.fixture
def project() -> str:
    """A project of its own for each test, so counts and listings see only the test's queues."""
    return f"e2e-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def queue_name() -> str:
    """A fresh queue name."""
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def api(server: RunningServer, project: str) -> Iterator[ApiSession]:
    """A plain HTTP session on the module server, in the test's project."""
    with ApiSession(server.url, project=project) as session:
        yield session


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> ReportWrapper:
    """Attach the log of every server a failed test used to its report."""
    report = yield
    if not report.failed:
        return report
    servers: list[RunningServer] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, RunningServer):
            servers.append(value)
        elif isinstance(value, ServerStarter):
            servers.extend(value.started)
    for running in servers:
        report.sections.append((f"zaqar-lite log ({running.url}, {running.storage_uri})",
                                running.log_tail()))
    return report
