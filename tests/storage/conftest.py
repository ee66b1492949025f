"""The ``driver`` fixture: every storage driver, each on a real store, under readable ids.

A driver whose server is missing is skipped locally and fails under CI
(``tests/conftest.py:missing_server``). Each test gets a fresh, empty store.
"""

from __future__ import annotations

import pytest

from tests.servers import available_kinds
from zaqar_lite.config import load_settings
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage

DRIVERS = ["sqlite", *available_kinds()]


def storage_uri(kind: str, request: pytest.FixtureRequest, tmp_path) -> str:
    """Return a URI naming an empty store of the given kind, starting its server if needed."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/conformance.db"
    return request.getfixturevalue(f"{kind}_store_uri")


@pytest.fixture(params=DRIVERS)
def driver_uri(request, tmp_path):
    """The URI of a fresh store of each driver."""
    return storage_uri(request.param, request, tmp_path)


@pytest.fixture
def driver(driver_uri):
    """A storage driver instance on a fresh store."""
    storage = open_storage(driver_uri)
    yield storage
    storage.close()


@pytest.fixture
def messaging(driver, clock):
    """The messaging service over the driver, with a manual clock."""
    return Messaging(driver, load_settings(None, storage_uri="sqlite:///unused.db"), clock)


@pytest.fixture
def other_worker(driver_uri, clock):
    """A second messaging service on the same store through a driver instance of its own."""
    storage = open_storage(driver_uri)
    yield Messaging(storage, load_settings(None, storage_uri="sqlite:///unused.db"), clock)
    storage.close()


@pytest.fixture(params=available_kinds())
def restartable_store(request):
    """A store of each server-backed driver whose server the test may kill and restart.

    See :class:`tests.servers.RestartableStore`. SQLite is not here: it is
    embedded, so it has no server to lose (its crash test kills the process
    writing it instead).
    """
    return request.getfixturevalue(f"{request.param}_restartable_store")
