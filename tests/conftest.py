"""Fixtures shared by every suite."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import falcon.testing
import pytest

from tests.servers import available_kinds
from zaqar_lite.api.app import create_app
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings

pytest_plugins = [f"tests.servers.{kind}" for kind in available_kinds()]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: a DLQ report the tests start writes no class-data archive into the user's cache (and spends no
#: 20 s doing it); tests/spark/test_class_archive.py gives its reports a cache of their own
os.environ["ZAQAR_LITE_SPARK_CACHE"] = "off"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def missing_server(what: str) -> None:
    """Skip a test whose real server is missing, or fail it under CI."""
    if IN_CI:
        pytest.fail(f"{what} is required under CI but is not available")
    pytest.skip(f"{what} is not available")


@pytest.fixture
def clock() -> ManualClock:
    """A clock that moves only when the test says so."""
    return ManualClock()


#: the store the API and end-to-end suites run on (the storage suite runs on all)
STORE_KIND = os.environ.get("ZAQAR_LITE_TEST_STORE", "sqlite")
#: the fixtures through which a test reaches the store of ``$ZAQAR_LITE_TEST_STORE``
STORE_FIXTURES = frozenset({"store_uri", "store"})
#: the conformance suite, which runs on every driver whatever the pass
STORAGE_SUITE = Path(__file__).parent / "storage"


def same_on_every_store(item: pytest.Item) -> str | None:
    """Return why a test runs the same on every store (marked so, or it reaches none), or None."""
    if item.get_closest_marker("store_independent") is not None:
        return "store independent: runs in the SQLite pass only"
    if STORE_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())):
        return "uses no store: runs in the SQLite pass only"
    return None


#: modules of the first pass that each take minutes (a Spark cluster, the schemathesis run,
#: spark-submit, the seeded fault runs, which mostly wait): in pytest-xdist processes they
#: start first, beside everything else
SLOW_MODULES = ("tests/test_openapi_fuzz.py", "tests/spark/test_spark_submit.py",
                "tests/faults/test_faults.py")
#: modules of the end-to-end suite with a test that takes a minute or more in a store pass, most
#: of it waiting (a redrive task's rate and lease across a killed server, a claim waited out on
#: Swift): they start next, so that a pass does not end on one of them alone in its process.
#: (Not the concurrent claims: their consumer processes beside these starve Swift's proxy.)
LONG_E2E_MODULES = ("tests/e2e/test_redrive_tasks.py", "tests/e2e/test_groups.py")
#: the group of the Spark suite's tests on the session's local Spark (starting one takes
#: seconds and a JVM); it holds tests/spark/test_standalone_cluster.py, so it starts first
SPARK_GROUP = "tests/spark"


def process_group(nodeid: str) -> str:
    """Return the group of tests that run in one pytest-xdist process with the test ``nodeid``.

    A module's tests share its module-scoped fixtures (the end-to-end ``server``), so they
    stay together; the Spark suite's tests but spark-submit's share one local Spark.
    """
    module = nodeid.split("::", 1)[0]
    if module.startswith(f"{SPARK_GROUP}/") and module not in SLOW_MODULES:
        return SPARK_GROUP
    return module


def start_rank(nodeid: str) -> int:
    """Return when the group of ``nodeid`` starts in pytest-xdist processes: the slow ones first."""
    group = process_group(nodeid)
    if group == SPARK_GROUP:
        return 0
    first = (*SLOW_MODULES, *LONG_E2E_MODULES)
    return first.index(group) + 1 if group in first else len(first) + 1


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadscope``, hand the tests out by :func:`process_group`."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByProcessGroup(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return process_group(nodeid)

    return ByProcessGroup(config, log)


def skip_repeats(items: list[pytest.Item]) -> None:
    """In a pass on another store than SQLite, skip the tests that would only repeat the SQLite pass."""
    if STORE_KIND == "sqlite":
        return
    for item in items:
        if STORAGE_SUITE in item.path.parents:
            continue
        reason = same_on_every_store(item)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Skip what only repeats the SQLite pass; in a pytest-xdist process, once every other hook
    has ordered the tests, put the slow groups first (``--dist loadscope`` with
    ``--no-loadscope-reorder`` hands groups out in the order the processes collected them, and
    the store passes' ``--dist load`` hands the first tests out one to each process in turn)."""
    skip_repeats(items)
    yield
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: start_rank(item.nodeid))


@pytest.fixture
def store_uri(request, tmp_path) -> str:
    """A URI naming an empty store of kind ``$ZAQAR_LITE_TEST_STORE`` (default sqlite)."""
    if STORE_KIND == "sqlite":
        return f"sqlite:///{tmp_path}/zaqar.db?synchronous=normal"
    return request.getfixturevalue(f"{STORE_KIND}_store_uri")


@pytest.fixture
def settings(store_uri):
    """Default settings on a fresh store."""
    return load_settings(None, storage_uri=store_uri)


@pytest.fixture
def client(settings, clock) -> falcon.testing.TestClient:
    """A TestClient on the real app (SQLite, manual clock) with valid default headers."""
    app = create_app(settings, clock=clock)
    return falcon.testing.TestClient(
        app, headers={"Client-ID": str(uuid.uuid4()), "X-Project-ID": "project-a"})
