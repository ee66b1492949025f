"""A deployment of several stores behind the storage contract: each call goes to its queue's pool.

:class:`PooledStorage` is a :class:`~zaqar_lite.storage.base.Storage`, so the
service and the policy above it do not know pools exist. Each call naming a
queue goes to the driver of the pool the catalog (:mod:`.catalog`) records for
it, which :mod:`.placements` finds (remembered per process: the common request
costs no catalog round trip) or chooses for a new queue. A queue no pool holds
lives in the ``[storage] uri`` store, the *default store* (every queue, before
the first pool is registered), which also keeps the records: subscriptions,
delivery cursors, leases, redrive tasks, queue templates, console sessions
(the catalog's records are in the ``[pools] catalog`` store, by default this
one).

It is a :class:`~zaqar_lite.storage.forwarding.ForwardingStorage`: every call
it does not write here goes to the store of its queue's pool (``_store_for``,
a post's: ``_store_for_post``), the records to the default store.

Calls that may create a queue place it first; calls that link two queues keep
them in one pool (:meth:`~.placements.PoolPlacements.check_same_pool`).
Claims and sweeps hand the pool's driver a dead-letter queue of the same
pool, so the move stays one atomic operation of that driver. Calls over every
queue (listings, the sweep, the census) go over every store.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import metadata as meta
from zaqar_lite.models import (
    ClaimRequest,
    ClaimResult,
    DeadLetterPolicy,
    Move,
    SweepResult,
)
from zaqar_lite.rules import pools as rules
from zaqar_lite.storage.base import ClaimPlan, Storage
from zaqar_lite.storage.forwarding import ForwardingStorage
from zaqar_lite.storage.pools.catalog import DEFAULT
from zaqar_lite.storage.pools.placements import PoolPlacements, shown_pool

LOG = logging.getLogger(__name__)


class PooledStorage(PoolPlacements, ForwardingStorage):
    """The stores of a deployment: the default store and every pool of the catalog."""

    name = "pools"

    @property
    def visibility_lag(self) -> float:  # type: ignore[override]  # read from the pools, never set
        """Return the largest lag of the default store and every pool (a message may be in any)."""
        return max(store.visibility_lag for _, store in self._stores())

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
            rules.check_same_pool(queue, shown_pool(home), dlq, shown_pool(theirs),
                                  f"dead-letter queue ({meta.DEAD_LETTER_QUEUE})")

    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        """Write a queue's metadata in its pool, its dead-letter queue checked to share it."""
        home = self._existing_home(project, queue) or DEFAULT
        self._check_links(project, queue, home, metadata)
        self.pool_store(home).set_queue_metadata(project, queue, metadata)

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
                LOG.warning("pool %s is unavailable; its queues are skipped: %s", shown_pool(name), exc)

    def due_queues(self, now: float) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield the due queues of every store; a store that is down is skipped (and logged)."""
        for name, store in self._stores():
            store.all_queues_page = self.all_queues_page
            try:
                yield from store.due_queues(now)
            except errors.StorageUnavailable as exc:
                LOG.warning("pool %s is unavailable; its queues are skipped: %s", shown_pool(name), exc)

    def queues_of(self, pool: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield ``(project, queue, metadata)`` of the queues one pool holds."""
        yield from self.pool_store(pool).all_queues()

    # -- messages and claims: the queue's pool -------------------------------------
    # Every call on one queue not written here goes to the store of its pool (``_store_for``,
    # :mod:`.placements`), a post to that of the pool it is placed in first.

    def _store_for_post(self, project: str, queue: str) -> Storage:
        """Return the store of the queue's pool, placing a new queue first."""
        return self.pool_store(self._home(project, queue))

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

    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        """Move within the queue's pool; a target in another pool is refused (400 naming both)."""
        self.check_same_pool(project, queue, target_queue, "redrive destination")
        return self._store_for(project, queue).move_messages(project, queue, moves, target_queue, now)

    def sweep_queue(self, project: str, queue: str, now: float, dead_letter: DeadLetterPolicy) -> SweepResult:
        """Sweep in the queue's pool, dead-lettering only into a queue of the same pool."""
        home = self._existing_home(project, queue) or DEFAULT
        policy = self._dead_letter_here(project, queue, home, dead_letter)
        return self.pool_store(home).sweep_queue(project, queue, now, policy)

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

