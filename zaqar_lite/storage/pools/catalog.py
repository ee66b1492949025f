"""The catalog: which pools and flavors a deployment has, and which pool holds each queue.

It is kept as versioned records (:mod:`zaqar_lite.storage.records`) of any
store, the ``[pools] catalog`` one (by default the ``[storage] uri`` store):

===============  ===============================  =====================================
project          kind, key                        value
===============  ===============================  =====================================
``CATALOG``      ``pool``, the pool's name        :meth:`Pool.to_record` (uri, weight,
                                                  flavor, options)
``CATALOG``      ``flavor``, the flavor's name    ``{}`` (its pools name it)
the queue's      ``queue_pool``, the queue        ``{"pool": name}``; ``""``: the
                                                  ``[storage] uri`` store
===============  ===============================  =====================================

A placement is written once, by a compare-and-set create (of two processes
placing a queue at once, one wins and both use its pool), and is kept when
the queue is deleted: a queue of that name comes back to the same pool, so a
process that remembers a placement is never wrong. Placements go only with
their pool, once none of its queues exists any more.
"""

from __future__ import annotations

from collections.abc import Iterator

from zaqar_lite import errors
from zaqar_lite.models import Pool
from zaqar_lite.storage.base import Storage

#: the server-wide project whose records hold the pools and flavors
CATALOG = "zaqar-lite-server"
POOL = "pool"
FLAVOR = "flavor"
PLACEMENT = "queue_pool"
#: the pool name of a placement in the ``[storage] uri`` store
DEFAULT = ""
PAGE = 1000


class Catalog:
    """Pools, flavors and placements, read and written as records of one store."""

    def __init__(self, records: Storage) -> None:
        self.records = records

    def _keys(self, project: str, kind: str) -> Iterator[tuple[str, dict[str, object], int]]:
        marker = None
        while True:
            page = self.records.list_records(project, kind, marker=marker, limit=PAGE)
            yield from ((r.key, r.value, r.version) for r in page)
            if len(page) < PAGE:
                return
            marker = page[-1].key

    # -- pools --------------------------------------------------------------------

    def pools(self) -> list[Pool]:
        """Return every pool, by name."""
        return [Pool.from_record(name, value) for name, value, _ in self._keys(CATALOG, POOL)]

    def pool(self, name: str) -> tuple[Pool, int] | None:
        """Return a pool and the version of its record, or None."""
        found = self.records.get_record(CATALOG, POOL, name)
        return None if found is None else (Pool.from_record(name, found.value), found.version)

    def put_pool(self, pool: Pool, version: int | None) -> None:
        """Create (``version`` None) or replace a pool by compare-and-set (raises Conflict)."""
        self.records.put_record(CATALOG, POOL, pool.name, pool.to_record(), version)

    def delete_pool(self, name: str) -> None:
        """Forget a pool (its placements first)."""
        for project, queue in self.placed_in(name):
            self.records.delete_record(project, PLACEMENT, queue)
        self.records.delete_record(CATALOG, POOL, name)

    # -- flavors ------------------------------------------------------------------

    def flavors(self) -> list[str]:
        """Return every flavor's name, sorted."""
        return [name for name, _, _ in self._keys(CATALOG, FLAVOR)]

    def has_flavor(self, name: str) -> bool:
        """Return whether a flavor exists."""
        return self.records.get_record(CATALOG, FLAVOR, name) is not None

    def put_flavor(self, name: str) -> bool:
        """Record a flavor; return whether it is new."""
        try:
            self.records.put_record(CATALOG, FLAVOR, name, {}, None)
        except errors.Conflict:
            return False
        return True

    def delete_flavor(self, name: str) -> None:
        """Forget a flavor (its pools keep their queues and lose the flavor)."""
        self.records.delete_record(CATALOG, FLAVOR, name)

    # -- placements ---------------------------------------------------------------

    def placement(self, project: str, queue: str) -> str | None:
        """Return the pool holding a queue (:data:`DEFAULT`: the ``[storage] uri`` store), or None."""
        found = self.records.get_record(project, PLACEMENT, queue)
        return None if found is None else str(found.value["pool"])

    def place(self, project: str, queue: str, pool: str) -> str:
        """Record a queue's pool unless another process did first; return the pool recorded."""
        try:
            self.records.put_record(project, PLACEMENT, queue, {"pool": pool}, None)
        except errors.Conflict:
            winner = self.placement(project, queue)
            if winner is None:  # removed in between (its pool deleted): ours stands now
                return self.place(project, queue, pool)
            return winner
        return pool

    def placed_in(self, pool: str) -> list[tuple[str, str]]:
        """Return ``(project, queue)`` of every placement in a pool (of queues that exist or did)."""
        return [(project, queue) for project in self.records.record_projects(PLACEMENT)
                for queue, value, _ in self._keys(project, PLACEMENT) if value["pool"] == pool]
