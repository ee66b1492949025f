"""A deployment of several stores behind the storage contract: each call goes to its queue's pool.

:class:`PooledStorage` is a :class:`~zaqar_lite.storage.base.Storage`, so the
service and the policy above it do not know pools exist. Each call naming a
queue goes to the driver of the pool the catalog (:mod:`.catalog`) records for
it; the placement is remembered per process (an LRU of ``[storage]
queue_cache_size`` entries), and since a placement never changes while its
pool exists, a remembered one is never wrong: the common request costs no
catalog round trip. A queue no pool holds lives in the ``[storage] uri``
store, the *default store* (every queue, before the first pool is
registered), which also keeps the records: subscriptions, delivery cursors,
leases, redrive tasks, queue templates.

A new queue is placed by :func:`zaqar_lite.claims.pools.place` (by weight,
within its ``_flavor``; beside its dead-letter queue when it names one). A
queue another must share a pool with (a dead-letter queue, a redrive
destination, a fan-out target) that does not exist yet is placed in that pool
first; one in another pool is refused (:func:`~zaqar_lite.claims.pools.check_same_pool`).
Claims and sweeps then hand the pool's driver a dead-letter queue of the same
pool, so the move stays one atomic operation of that driver. Calls over every
queue (listings, the sweep, the census) go over every store.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import pools as rules
from zaqar_lite.models import (
    Claim,
    ClaimRequest,
    ClaimResult,
    DeadLetterPolicy,
    Message,
    Move,
    Pool,
    QueueStats,
    Record,
    RedriveTask,
    SweepResult,
)
from zaqar_lite.storage.base import ClaimPlan, PostPlan, Storage
from zaqar_lite.storage.cache import LRUCache
from zaqar_lite.storage.pools.catalog import DEFAULT, Catalog

LOG = logging.getLogger(__name__)


class PooledStorage(Storage):
    """The stores of a deployment: the default store and every pool of the catalog."""

    name = "pools"

    def __init__(self, default: Storage, catalog: Catalog, opener: Callable[[str], Storage], *,
                 queue_cache_size: int, refresh_interval: float,
                 monotonic: Callable[[], float] = time.monotonic,
                 draw: Callable[[str, str], float] = lambda project, queue: random.random()) -> None:
        self.default = default
        self.catalog = catalog
        self.opener = opener
        self.refresh_interval = refresh_interval
        self.monotonic = monotonic
        self.draw = draw
        self._placed: LRUCache[tuple[str, str], str] = LRUCache(queue_cache_size)
        self._table: dict[str, Pool] = {}
        self._read_at = -float("inf")
        self._drivers: dict[str, tuple[str, Storage]] = {}
        self._lock = threading.Lock()

    @property
    def visibility_lag(self) -> float:  # type: ignore[override]  # read from the pools, never set
        """Return the largest lag of the default store and every pool (a message may be in any)."""
        return max(store.visibility_lag for _, store in self._stores())

    # -- the pool table and its drivers -------------------------------------------

    def pools(self, fresh: bool = False) -> dict[str, Pool]:
        """Return the pools by name, read from the catalog at most every ``refresh_interval`` seconds.

        A catalog that does not answer at a periodic read leaves the table read
        before in use (for another ``refresh_interval``), so the queues whose
        placement a process remembers keep working meanwhile.
        """
        if fresh or self.monotonic() - self._read_at >= self.refresh_interval:
            try:
                table = {p.name: p for p in self.catalog.pools()}
            except errors.StorageUnavailable as exc:
                if fresh or self._read_at == -float("inf"):
                    raise
                LOG.warning("the catalog does not answer; using the pools read before: %s", exc)
                table = self._table
            with self._lock:
                self._table, self._read_at = table, self.monotonic()
        return self._table

    def pool_store(self, name: str) -> Storage:
        """Return the driver of a pool (:data:`DEFAULT`: the default store), opening it on first use.

        Raises:
            StorageUnavailable: the pool is gone from the catalog.
        """
        if name == DEFAULT:
            return self.default
        pool = self.pools().get(name) or self.pools(fresh=True).get(name)
        if pool is None:
            raise errors.StorageUnavailable(f"pool {name} is not in the catalog any more")
        with self._lock:
            known = self._drivers.get(name)
            if known is not None and known[0] == pool.uri:
                return known[1]
        driver = self.opener(pool.uri)
        with self._lock:
            previous = self._drivers.get(name)
            self._drivers[name] = (pool.uri, driver)
        if previous is not None:
            previous[1].close()
        return driver

    def open_pool(self, uri: str) -> Storage:
        """Open a driver for a URI not (yet) a pool's (the caller closes it)."""
        return self.opener(uri)

    def _stores(self) -> list[tuple[str, Storage]]:
        return [(DEFAULT, self.default), *((name, self.pool_store(name)) for name in sorted(self.pools()))]

    # -- placements ---------------------------------------------------------------

    def placement(self, project: str, queue: str) -> str | None:
        """Return the pool holding a queue (remembered, else the catalog's), or None when not placed."""
        known = self._placed.get((project, queue))
        if known is not None:
            return known
        found = self.catalog.placement(project, queue)
        if found is not None:
            self._placed.put((project, queue), found)
        return found

    def _place(self, project: str, queue: str, pool: str) -> str:
        placed = self.catalog.place(project, queue, pool)
        self._placed.put((project, queue), placed)
        return placed

    def _existing_home(self, project: str, queue: str) -> str | None:
        """Return the pool of a placed queue, or of a queue the default store holds (placing it there).

        A placement is remembered once read, so only a queue that exists
        nowhere costs a catalog read on each call.
        """
        found = self.placement(project, queue)
        if found is not None and found != DEFAULT and found not in self.pools() \
                and found not in self.pools(fresh=True):
            self._placed.pop((project, queue))  # its pool was deleted (with its placements) since
            found = self.placement(project, queue)
        if found is None and self.default.get_queue_metadata(project, queue) is not None:
            found = self._place(project, queue, DEFAULT)  # made before pools (or by a process unaware)
        return found

    def _store(self, project: str, queue: str) -> Storage:
        """Return the store of a queue for a call that does not create it."""
        return self.pool_store(self._existing_home(project, queue) or DEFAULT)

    def _home(self, project: str, queue: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Return the pool of a queue, placing it first when it has none (beside its dead-letter queue)."""
        found = self._existing_home(project, queue)
        if found is not None:
            return found
        flavor = rules.requested_flavor(metadata)
        if flavor and not self.catalog.has_flavor(flavor):
            raise errors.ValidationFailed(f"{rules.FLAVOR} names flavor {flavor}, which does not exist.")
        linked = None
        if metadata and metadata.get(meta.DEAD_LETTER_QUEUE):
            linked = self._existing_home(project, metadata[meta.DEAD_LETTER_QUEUE])
        if linked == DEFAULT:
            return self._place(project, queue, DEFAULT)
        pools = self.pools()
        linked_pool = pools.get(linked) if linked is not None else None
        chosen = rules.place(queue, flavor, list(pools.values()), linked_pool, self.draw(project, queue))
        return self._place(project, queue, DEFAULT if chosen is None else chosen.name)

    def check_same_pool(self, project: str, queue: str, other: str, role: str) -> None:
        """Refuse ``other`` in another pool than ``queue``; place whichever is new beside the other.

        Raises:
            ValidationFailed: they are in two pools (the message names both).
        """
        home = self._home(project, queue)
        theirs = self._existing_home(project, other)
        if theirs is None:
            theirs = self._place(project, other, home)
        rules.check_same_pool(queue, _shown(home), other, _shown(theirs), role)

    def _dead_letter_here(self, project: str, queue: str, home: str,
                          policy: DeadLetterPolicy) -> DeadLetterPolicy:
        """Return the policy a claim or sweep in ``home`` may apply: its DLQ in the same pool.

        A dead-letter queue that does not exist yet is placed in ``home``; one in
        another pool (the server's default DLQ, placed by another queue) is not
        used: the messages stay, as without a dead-letter queue.
        """
        if policy.queue is None:
            return policy
        theirs = self._existing_home(project, policy.queue)
        if theirs is None:
            theirs = self._place(project, policy.queue, home)
        if theirs == home:
            return policy
        LOG.warning("queue %s/%s (pool %s): its dead-letter queue %s is in pool %s; not moving there",
                    project, queue, _shown(home), policy.queue, _shown(theirs))
        return dataclasses.replace(policy, queue=None)

    # -- queues -------------------------------------------------------------------

    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        """Create a queue in its pool (placing it), its dead-letter queue checked to share it."""
        home = self._home(project, queue, metadata)
        self._check_links(project, queue, home, metadata)
        return self.pool_store(home).create_queue(project, queue, metadata, now)

    def _check_links(self, project: str, queue: str, home: str, metadata: Mapping[str, Any]) -> None:
        dlq = metadata.get(meta.DEAD_LETTER_QUEUE)
        if dlq is None:
            return
        theirs = self._existing_home(project, dlq)
        if theirs is not None:
            rules.check_same_pool(queue, _shown(home), dlq, _shown(theirs),
                                  f"dead-letter queue ({meta.DEAD_LETTER_QUEUE})")

    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        """Read a queue's metadata from its pool."""
        return self._store(project, queue).get_queue_metadata(project, queue)

    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        """Write a queue's metadata in its pool, its dead-letter queue checked to share it."""
        home = self._existing_home(project, queue) or DEFAULT
        self._check_links(project, queue, home, metadata)
        self.pool_store(home).set_queue_metadata(project, queue, metadata)

    def delete_queue(self, project: str, queue: str) -> None:
        """Delete a queue in its pool (its placement stays: a queue of that name comes back there)."""
        self._store(project, queue).delete_queue(project, queue)

    def list_queues(self, project: str, *, marker: str | None, limit: int,
                    name_contains: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Merge a page of every store's queues, by name (a store that is down makes it 503)."""
        merged: dict[str, dict[str, Any]] = {}
        for _, store in self._stores():
            for name, stored in store.list_queues(project, marker=marker, limit=limit,
                                                  name_contains=name_contains):
                merged.setdefault(name, stored)
        return sorted(merged.items())[:limit]

    def count_queues(self, project: str) -> int:
        """Add up every store's queues of a project."""
        return sum(store.count_queues(project) for _, store in self._stores())

    def all_queues(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield every queue of every store; a store that is down is skipped (and logged)."""
        for name, store in self._stores():
            store.all_queues_page = self.all_queues_page
            try:
                yield from store.all_queues()
            except errors.StorageUnavailable as exc:
                LOG.warning("pool %s is unavailable; its queues are skipped: %s", _shown(name), exc)

    def queues_of(self, pool: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield ``(project, queue, metadata)`` of the queues one pool holds."""
        yield from self.pool_store(pool).all_queues()

    # -- messages and claims: the queue's pool -------------------------------------

    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float) -> list[str]:
        """Post in the queue's pool (placing a new queue)."""
        return self.pool_store(self._home(project, queue)).post_messages(project, queue, messages, now)

    def post_planned(self, project: str, queue: str, plan: PostPlan, now: float) -> list[str]:
        """Post in the queue's pool (placing a new queue)."""
        return self.pool_store(self._home(project, queue)).post_planned(project, queue, plan, now)

    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        """List from the queue's pool."""
        return self._store(project, queue).list_messages(
            project, queue, now=now, marker=marker, limit=limit, include_claimed=include_claimed,
            include_delayed=include_delayed, exclude_client_id=exclude_client_id)

    def get_messages(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        """Read from the queue's pool."""
        return self._store(project, queue).get_messages(project, queue, ids, now)

    def delete_message(self, project: str, queue: str, message_id: str, claim_id: str | None,
                       now: float) -> None:
        """Delete in the queue's pool."""
        self._store(project, queue).delete_message(project, queue, message_id, claim_id, now)

    def delete_messages(self, project: str, queue: str, ids: Sequence[str],
                        claim_ids: Sequence[str] | None, now: float) -> None:
        """Delete in the queue's pool."""
        self._store(project, queue).delete_messages(project, queue, ids, claim_ids, now)

    def edit_delayed_message(self, project: str, queue: str, message_id: str, changes: Mapping[str, Any],
                             now: float) -> Message:
        """Edit in the queue's pool."""
        return self._store(project, queue).edit_delayed_message(project, queue, message_id, changes, now)

    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        """Pop in the queue's pool."""
        return self._store(project, queue).pop_messages(project, queue, limit, now)

    def purge_messages(self, project: str, queue: str) -> None:
        """Purge in the queue's pool."""
        self._store(project, queue).purge_messages(project, queue)

    def queue_stats(self, project: str, queue: str, now: float) -> QueueStats:
        """Count in the queue's pool."""
        return self._store(project, queue).queue_stats(project, queue, now)

    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> ClaimResult:
        """Claim in the queue's pool, dead-lettering only into a queue of the same pool."""
        home = self._existing_home(project, queue) or DEFAULT
        policy = self._dead_letter_here(project, queue, home, request.dead_letter)
        return self.pool_store(home).claim_messages(
            project, queue, dataclasses.replace(request, dead_letter=policy))

    def claim_planned(self, project: str, queue: str, plan: ClaimPlan) -> ClaimResult:
        """Claim in the queue's pool, dead-lettering only into a queue of the same pool."""
        home = self._existing_home(project, queue) or DEFAULT

        def here(stored: Mapping[str, Any] | None) -> ClaimRequest:
            request = plan(stored)
            policy = self._dead_letter_here(project, queue, home, request.dead_letter)
            if policy is request.dead_letter:
                return request
            return dataclasses.replace(request, dead_letter=policy)
        return self.pool_store(home).claim_planned(project, queue, here)

    def next_visible_at(self, project: str, queue: str, now: float) -> float | None:
        """Ask the queue's pool."""
        return self._store(project, queue).next_visible_at(project, queue, now)

    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        """Read in the queue's pool."""
        return self._store(project, queue).get_claim(project, queue, claim_id, now)

    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        """Renew in the queue's pool."""
        self._store(project, queue).renew_claim(project, queue, claim_id, now, ttl, grace)

    def release_claim(self, project: str, queue: str, claim_id: str, now: float) -> None:
        """Release in the queue's pool."""
        self._store(project, queue).release_claim(project, queue, claim_id, now)

    def release_message(self, project: str, queue: str, message_id: str, claim_id: str, now: float,
                        failure: Mapping[str, Any] | None, history_limit: int,
                        delay: float | None = None) -> None:
        """Release in the queue's pool."""
        self._store(project, queue).release_message(project, queue, message_id, claim_id, now, failure,
                                                    history_limit, delay)

    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        """Move within the queue's pool; a target in another pool is refused (400 naming both)."""
        self.check_same_pool(project, queue, target_queue, "redrive destination")
        return self._store(project, queue).move_messages(project, queue, moves, target_queue, now)

    def sweep_queue(self, project: str, queue: str, now: float, dead_letter: DeadLetterPolicy) -> SweepResult:
        """Sweep in the queue's pool, dead-lettering only into a queue of the same pool."""
        home = self._existing_home(project, queue) or DEFAULT
        policy = self._dead_letter_here(project, queue, home, dead_letter)
        return self.pool_store(home).sweep_queue(project, queue, now, policy)

    # -- records: the default store --------------------------------------------------

    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        """Read a record of the default store."""
        return self.default.get_record(project, kind, key)

    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        """Write a record of the default store."""
        return self.default.put_record(project, kind, key, value, expected_version)

    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        """Delete a record of the default store."""
        return self.default.delete_record(project, kind, key, expected_version)

    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        """List records of the default store."""
        return self.default.list_records(project, kind, prefix=prefix, marker=marker, limit=limit)

    def record_projects(self, kind: str) -> list[str]:
        """List the projects with records of a kind in the default store."""
        return self.default.record_projects(kind)

    def create_redrive_task(self, project: str, task: RedriveTask) -> None:
        """Start a task whose destination shares its queue's pool (400 naming both otherwise)."""
        if task.destination is not None:
            self.check_same_pool(project, task.queue, task.destination, "redrive destination")
        super().create_redrive_task(project, task)

    # -- health ---------------------------------------------------------------------

    def ping(self) -> bool:
        """Return whether the default store and the catalog answer."""
        return self.default.ping() and self.catalog_reachable()

    def catalog_reachable(self) -> bool:
        """Return whether the catalog answers."""
        try:
            self.catalog.flavors()
        except errors.StorageUnavailable:
            return False
        return True

    def describe(self) -> str:
        """Say where the default store and the catalog are."""
        return f"default store {self.default.name} ({self.default.describe()}), pools in its catalog"

    def close(self) -> None:
        """Close every driver."""
        for _, driver in self._drivers.values():
            driver.close()
        if self.catalog.records is not self.default:
            self.catalog.records.close()
        self.default.close()


def _shown(pool: str) -> str:
    """Return how messages name a pool (the default store has no name of its own)."""
    return pool or "(the [storage] uri store)"
