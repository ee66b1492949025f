"""Where each queue of a pooled deployment lives: the pool table, each pool's driver, the placements.

The pool table is read from the catalog (:mod:`.catalog`) at most every
``refresh_interval`` seconds; each pool's driver is opened on first use (and
again when its URI changes). The placement of a queue is remembered per
process (an LRU of ``[storage] queue_cache_size`` entries), and since a
placement never changes while its pool exists, a remembered one is never
wrong: the common request costs no catalog round trip. A queue no pool holds
lives in the ``[storage] uri`` store, the *default store* (:data:`DEFAULT`).

A new queue is placed by :func:`zaqar_lite.rules.pools.place` (by weight,
within its ``_flavor``; beside its dead-letter queue when it names one). A
queue another must share a pool with (a dead-letter queue, a redrive
destination, a fan-out target) that does not exist yet is placed in that pool
first; one in another pool is refused (:func:`~zaqar_lite.rules.pools.check_same_pool`),
and a claim's or a sweep's dead-letter queue in another pool is not used.

Each call's dispatch to the pool found here:
:class:`~zaqar_lite.storage.pools.router.PooledStorage`.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import metadata as meta
from zaqar_lite.models import DeadLetterPolicy, Pool
from zaqar_lite.rules import pools as rules
from zaqar_lite.storage.base import Storage
from zaqar_lite.storage.cache import LRUCache
from zaqar_lite.storage.pools.catalog import DEFAULT, Catalog

LOG = logging.getLogger(__name__)


class PoolPlacements:
    """The pools of a deployment and the pool of each queue, placing a new queue when asked."""

    def __init__(self, default: Storage, catalog: Catalog, opener: Callable[[str], Storage], *,
                 queue_cache_size: int, refresh_interval: float,
                 monotonic: Callable[[], float] = time.monotonic,
                 draw: Callable[[str, str], float] = lambda project, queue: random.random()) -> None:
        self.default = default
        #: the store the router passes the records (subscriptions, redrive tasks, templates)
        #: and the calls on no one queue to: the default store (storage/forwarding.py)
        self.inner: Storage = default
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

    def _store_for(self, project: str, queue: str) -> Storage:
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
        rules.check_same_pool(queue, shown_pool(home), other, shown_pool(theirs), role)

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
                    project, queue, shown_pool(home), policy.queue, shown_pool(theirs))
        return dataclasses.replace(policy, queue=None)


def shown_pool(pool: str) -> str:
    """Return how messages name a pool (the default store has no name of its own)."""
    return pool or "(the [storage] uri store)"
