"""The ``driver`` fixture: every storage driver, each on a real store, under readable ids.

A driver whose server is missing is skipped locally and fails under CI
(``tests/conftest.py:missing_server``). Each test gets a fresh, empty store.
"""

from __future__ import annotations

import zlib

import pytest

from tests.servers import available_kinds
from zaqar_lite import errors
from zaqar_lite.config import load_settings
from zaqar_lite.models import Pool
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage
from zaqar_lite.storage.base import Storage
from zaqar_lite.storage.pools.catalog import Catalog
from zaqar_lite.storage.pools.router import PooledStorage

#: a deployment of two pools, a SQLite file and a Redis database, its catalog in a third SQLite file
POOLS = "pools"
#: the stores, each one server (or file) a URI names
STORES = ["sqlite", *available_kinds()]
DRIVERS = [*STORES, *([POOLS] if "redis" in available_kinds() else [])]
#: how the suite names a two-pool deployment where it names a store by its URI (never a real URI)
POOLS_PREFIX = "test-pools:"


def storage_uri(kind: str, request: pytest.FixtureRequest, tmp_path) -> str:
    """Return a URI naming an empty store of the given kind, starting its server if needed."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/conformance.db"
    if kind == POOLS:
        redis_uri = request.getfixturevalue("redis_store_uri")
        return f"{POOLS_PREFIX}{tmp_path}|{redis_uri}"
    return request.getfixturevalue(f"{kind}_store_uri")


def open_test_storage(uri: str) -> Storage:
    """Open a store the suite names: a driver's URI, or the two-pool deployment of :data:`POOLS_PREFIX`.

    The deployment's default store and catalog are one SQLite file; the pools
    are another SQLite file and a Redis database, of equal weight. A queue's
    pool is drawn from the first word of its name (``orders-dlq``: ``orders``),
    so the queues a test links (``orders`` and ``orders-dlq``) share a pool, as
    the API would place them, and the others land in both.
    """
    if not uri.startswith(POOLS_PREFIX):
        return open_storage(uri)
    directory, redis_uri = uri[len(POOLS_PREFIX):].split("|")
    default = open_storage(f"sqlite:///{directory}/default.db")
    catalog = Catalog(default)
    for pool in (Pool("lite", f"sqlite:///{directory}/lite.db", 1), Pool("fast", redis_uri, 1)):
        try:
            catalog.put_pool(pool, None)
        except errors.Conflict:
            pass  # registered by another process of the test
    return PooledStorage(default, catalog, open_storage, queue_cache_size=1000, refresh_interval=3600,
                         draw=_by_first_word)


def _by_first_word(project: str, queue: str) -> float:
    """Return a draw in [0, 1) fixed by the first word of a queue's name."""
    return zlib.crc32(queue.split("-")[0].encode()) % 1000 / 1000


@pytest.fixture(params=DRIVERS)
def driver_uri(request, tmp_path):
    """The URI of a fresh store of each driver."""
    return storage_uri(request.param, request, tmp_path)


@pytest.fixture
def driver(driver_uri):
    """A storage driver instance on a fresh store."""
    storage = open_test_storage(driver_uri)
    yield storage
    storage.close()


@pytest.fixture
def messaging(driver, clock):
    """The messaging service over the driver, with a manual clock."""
    return Messaging(driver, load_settings(None, storage_uri="sqlite:///unused.db"), clock)


@pytest.fixture
def other_worker(driver_uri, clock):
    """A second messaging service on the same store through a driver instance of its own."""
    storage = open_test_storage(driver_uri)
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
