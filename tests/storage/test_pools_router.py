"""The router of a deployment with pools, on SQLite files: placement, what a process remembers, outages.

The conformance suite runs on a two-pool deployment as on every store; these
tests hold what only a deployment with pools has.
"""

from __future__ import annotations

import pytest

from zaqar_lite import errors
from zaqar_lite.models import Pool
from zaqar_lite.storage import open_storage
from zaqar_lite.storage.pools.catalog import Catalog
from zaqar_lite.storage.pools.router import PooledStorage

P = "project-a"


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def default(tmp_path):
    store = open_storage(f"sqlite:///{tmp_path}/default.db")
    yield store
    store.close()


def router(default, clock, draw=0.0) -> PooledStorage:
    """A process's router over the default store (which holds the catalog), refreshing every 5 s."""
    return PooledStorage(default, Catalog(default), open_storage, queue_cache_size=100, refresh_interval=5,
                         monotonic=clock, draw=lambda project, queue: draw)


def register(default, tmp_path, *names: str) -> dict[str, str]:
    uris = {name: f"sqlite:///{tmp_path}/{name}.db" for name in names}
    for name, uri in uris.items():
        Catalog(default).put_pool(Pool(name, uri, 1), None)
    return uris


def test_a_queue_made_before_the_first_pool_stays_in_the_default_store(default, clock, tmp_path):
    before = router(default, clock)
    before.create_queue(P, "old", {}, 0.0)
    register(default, tmp_path, "east")
    clock.now = 6  # the process reads the pool table again
    before.create_queue(P, "new", {}, 0.0)
    assert (before.placement(P, "old"), before.placement(P, "new")) == ("", "east")
    assert before.pool_store("east").get_queue_metadata(P, "new") == {}
    assert before.pool_store("east").get_queue_metadata(P, "old") is None


def test_a_process_that_has_not_seen_a_new_pool_yet_still_finds_its_queues(default, clock, tmp_path):
    stale, fresh = router(default, clock), router(default, clock)
    assert stale.pools() == {}
    register(default, tmp_path, "east")
    fresh.create_queue(P, "orders", {}, 0.0)
    assert fresh.placement(P, "orders") == "east"
    assert stale.get_queue_metadata(P, "orders") == {}  # its table is stale: the placement reads it anew


def test_a_remembered_placement_of_a_deleted_pool_is_read_again(default, clock, tmp_path):
    first, second = router(default, clock, draw=0.0), router(default, clock, draw=0.99)
    register(default, tmp_path, "east")
    first.create_queue(P, "orders", {}, 0.0)
    assert second.get_queue_metadata(P, "orders") == {}  # second remembers east
    first.delete_queue(P, "orders")
    Catalog(default).delete_pool("east")
    register(default, tmp_path, "west")
    clock.now = 6  # a deletion is seen by the other processes once they read the pool table again
    second.create_queue(P, "orders", {}, 0.0)
    assert second.placement(P, "orders") == "west"


def test_a_catalog_that_stops_answering_leaves_remembered_queues_working(default, clock, tmp_path,
                                                                         monkeypatch):
    pooled = router(default, clock)
    register(default, tmp_path, "east")
    pooled.create_queue(P, "orders", {}, 0.0)

    def down(*args, **kwargs):
        raise errors.StorageUnavailable("the catalog is down")

    monkeypatch.setattr(default, "list_records", down)
    monkeypatch.setattr(default, "get_record", down)
    clock.now = 6  # time to read the pool table again: the one read before stays in use
    assert pooled.get_queue_metadata(P, "orders") == {}
    with pytest.raises(errors.StorageUnavailable):
        pooled.get_queue_metadata(P, "unknown")


def test_a_pool_that_is_down_is_skipped_by_the_walk_over_every_queue(default, clock, tmp_path, monkeypatch):
    pooled = router(default, clock, draw=0.0)
    register(default, tmp_path, "east", "west")
    pooled.create_queue(P, "a", {}, 0.0)
    pooled.draw = lambda project, queue: 0.99
    pooled.create_queue(P, "b", {}, 0.0)

    def down(*args, **kwargs):
        raise errors.StorageUnavailable("west is down")
        yield  # pragma: no cover - a generator, as all_queues is

    def refused(*args, **kwargs):
        raise errors.StorageUnavailable("west is down")

    monkeypatch.setattr(pooled.pool_store("west"), "all_queues", down)
    monkeypatch.setattr(pooled.pool_store("west"), "list_queues", refused)
    assert [queue for _, queue, _ in pooled.all_queues()] == ["a"]
    with pytest.raises(errors.StorageUnavailable):
        pooled.list_queues(P, marker=None, limit=10)


def test_without_pools_enabled_the_deployment_is_its_one_store(tmp_path):
    from zaqar_lite.config import PoolSettings, load_settings
    from zaqar_lite.storage import open_deployment

    settings = load_settings(None, storage_uri=f"sqlite:///{tmp_path}/one.db")
    single = open_deployment(settings)
    pooled = open_deployment(settings.replace(pools=PoolSettings(enabled=True)))
    try:
        assert (single.name, type(single).__name__) == ("sqlite", "SqliteStorage")
        assert (pooled.name, type(pooled).__name__) == ("pools", "PooledStorage")
    finally:
        single.close()
        pooled.close()
