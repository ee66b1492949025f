"""The operator's pools and flavors (``/v2/pools``, ``/v2/flavors``) and the detailed health.

Everything is kept in the catalog (:mod:`zaqar_lite.storage.pools.catalog`)
of the deployment's :class:`~zaqar_lite.storage.pools.router.PooledStorage`;
what a pool and a flavor mean for queues is :mod:`zaqar_lite.rules.pools`.
As in Zaqar, a flavor's pools are the pools naming it: creating or changing a
flavor's ``pool_list`` sets their ``flavor``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.clock import Clock
from zaqar_lite.config import PoolSettings
from zaqar_lite.models import Pool
from zaqar_lite.rules import pools as rules
from zaqar_lite.storage.base import Storage
from zaqar_lite.storage.pools.router import PooledStorage

LOG = logging.getLogger(__name__)
#: compare-and-set attempts of a change racing another admin's
CHANGE_ATTEMPTS = 10
#: queues named in the refusal to delete a pool that holds some
NAMED_QUEUES = 5


@dataclasses.dataclass(frozen=True)
class Flavor:
    """A flavor as the API shows it: its name, its pools and what they can all do."""

    name: str
    pool_list: list[str]
    capabilities: list[str]


class PoolAdmin:
    """Register, change and remove pools and flavors; report the health of every store."""

    def __init__(self, storage: PooledStorage, clock: Clock, default_uri: str,
                 settings: PoolSettings) -> None:
        self.storage = storage
        self.catalog = storage.catalog
        self.clock = clock
        #: the ``[storage] uri`` store, which no pool may name again
        self.default_uri = default_uri
        #: where pools may be: ``[pools] sqlite_dir`` and ``allowed_hosts``
        self.settings = settings
        #: the directory a relative SQLite path of ``[storage] uri`` is read from
        self.cwd = os.getcwd()

    # -- pools ----------------------------------------------------------------------

    def list_pools(self, marker: str | None, limit: int) -> list[Pool]:
        """Return up to ``limit`` pools with a name after ``marker``, by name."""
        return [p for p in self.catalog.pools() if marker is None or p.name > marker][:limit]

    def get_pool(self, name: str) -> Pool:
        """Return a pool (raises PoolDoesNotExist)."""
        rules.check_name("pool", name)
        found = self.catalog.pool(name)
        if found is None:
            raise errors.PoolDoesNotExist(name)
        return found[0]

    def _check_reachable(self, name: str, uri: str) -> None:
        """Refuse a URI outside the operator's allow-list, of another pool or of the default store,
        one no driver can open, or whose store does not answer (400, as Zaqar)."""
        identity = rules.check_pool_uri(uri, sqlite_dir=self.settings.sqlite_dir,
                                        allowed_hosts=self.settings.allowed_hosts,
                                        default_uri=self.default_uri, cwd=self.cwd)
        for other in self.catalog.pools():
            if other.name != name and rules.pool_store_identity(other.uri, self.cwd) == identity:
                raise errors.ValidationFailed(f"uri: pool {other.name} has this store already; "
                                              "a pool needs a store of its own.")
        if identity[0] == "sqlite":
            self._check_sqlite_file(identity[1])
        shown = rules.masked_uri(uri)
        try:
            driver = self.storage.open_pool(uri)
        except (ValueError, OSError, errors.StorageUnavailable) as exc:
            reason = _masked(str(exc), uri)
            raise errors.ValidationFailed(f"uri: cannot connect to {shown}: {reason}") from None
        try:
            if not driver.ping():
                raise errors.ValidationFailed(f"uri: cannot connect to {shown}: the store does not answer.")
        finally:
            driver.close()

    def _check_sqlite_file(self, path: str) -> None:
        """Refuse a SQLite pool whose directory does not exist (none is made), or that a link takes
        out of ``[pools] sqlite_dir`` or to the ``[storage] uri`` file."""
        real = os.path.realpath(path)
        if not os.path.isdir(os.path.dirname(real)):
            raise errors.ValidationFailed("uri: the directory of a SQLite pool must exist; the operator "
                                          "makes it under [pools] sqlite_dir.")
        directory = os.path.realpath(self.settings.sqlite_dir)
        if os.path.commonpath([directory, real]) != directory or os.path.isdir(real):
            raise errors.ValidationFailed("uri: a SQLite pool is a file under [pools] sqlite_dir.")
        default = rules.pool_store_identity(self.default_uri, self.cwd)
        if default[0] == "sqlite" and os.path.realpath(default[1]) == real:
            raise errors.ValidationFailed("uri: this is the [storage] uri store, which holds the queues "
                                          "of no pool; a pool needs a store of its own.")

    def put_pool(self, name: str, uri: str, weight: int, flavor: str, options: Mapping[str, Any]) -> bool:
        """Register a pool, or replace one of that name (as Zaqar's PUT); return whether it is new.

        Raises:
            ValidationFailed: a bad name or flavor, or a URI that cannot be reached.
        """
        rules.check_name("pool", name)
        self._check_flavor_name(flavor)
        self._check_reachable(name, uri)
        pool = Pool(name=name, uri=uri, weight=weight, flavor=flavor, options=dict(options))
        for _ in range(CHANGE_ATTEMPTS):
            found = self.catalog.pool(name)
            try:
                self.catalog.put_pool(pool, None if found is None else found[1])
            except errors.Conflict:
                continue
            self.storage.pools(fresh=True)
            LOG.info("pool %s %s: %s, weight %d", name, "registered" if found is None else "replaced",
                     rules.masked_uri(uri), weight)
            return found is None
        raise errors.StorageUnavailable("the pool kept changing; try again")

    @staticmethod
    def _check_flavor_name(flavor: str) -> None:
        if flavor and rules.NAME.fullmatch(flavor) is None:
            raise errors.ValidationFailed(
                "flavor must be a flavor name: 1 to 64 ASCII letters, digits, _ or -.")

    def patch_pool(self, name: str, changes: Mapping[str, Any]) -> Pool:
        """Change some of a pool's ``uri``, ``weight``, ``flavor`` and ``options``; return it.

        Raises:
            PoolDoesNotExist. ValidationFailed: a bad flavor, or a URI that cannot be reached.
        """
        rules.check_name("pool", name)
        self._check_flavor_name(changes.get("flavor", ""))
        if "uri" in changes:
            self._check_reachable(name, changes["uri"])
        return self._change_pool(name, lambda pool: dataclasses.replace(pool, **changes))

    def _change_pool(self, name: str, change: Any) -> Pool:
        for _ in range(CHANGE_ATTEMPTS):
            found = self.catalog.pool(name)
            if found is None:
                raise errors.PoolDoesNotExist(name)
            changed: Pool = change(found[0])
            try:
                self.catalog.put_pool(changed, found[1])
            except errors.Conflict:
                continue
            self.storage.pools(fresh=True)
            return changed
        raise errors.StorageUnavailable("the pool kept changing; try again")

    def delete_pool(self, name: str) -> None:
        """Remove a pool that holds no queue (absent pools are fine).

        Raises:
            Conflict: queues live in it (some are named); delete them first.
            StorageUnavailable: the pool cannot be asked whether it holds queues.
        """
        rules.check_name("pool", name)
        if self.catalog.pool(name) is None:
            return
        store = self.storage.pool_store(name)
        held = [f"{project}/{queue}" for project, queue in self.catalog.placed_in(name)
                if store.get_queue_metadata(project, queue) is not None]
        if held:
            shown = ", ".join(held[:NAMED_QUEUES]) + (", ..." if len(held) > NAMED_QUEUES else "")
            raise errors.Conflict(
                f"Pool {name} holds {len(held)} queue(s) ({shown}); a pool is deleted only once "
                "its queues are: delete them first (set its weight to 0 to stop new queues going there).")
        self.catalog.delete_pool(name)
        self.storage.pools(fresh=True)
        LOG.info("pool %s deleted", name)

    # -- flavors --------------------------------------------------------------------

    def _flavor(self, name: str, pools: Sequence[Pool]) -> Flavor:
        mine = [p for p in pools if p.flavor == name]
        return Flavor(name=name, pool_list=[p.name for p in mine], capabilities=rules.capabilities(mine))

    def list_flavors(self, marker: str | None, limit: int) -> list[Flavor]:
        """Return up to ``limit`` flavors with a name after ``marker``, by name."""
        pools = self.catalog.pools()
        names = [n for n in self.catalog.flavors() if marker is None or n > marker][:limit]
        return [self._flavor(n, pools) for n in names]

    def get_flavor(self, name: str) -> Flavor:
        """Return a flavor (raises FlavorDoesNotExist)."""
        rules.check_name("flavor", name)
        if not self.catalog.has_flavor(name):
            raise errors.FlavorDoesNotExist(name)
        return self._flavor(name, self.catalog.pools())

    def _set_pools(self, name: str, pool_list: Sequence[str]) -> None:
        """Make ``pool_list`` the flavor's pools: they name it, the others it had no longer do."""
        if not pool_list:
            raise errors.ValidationFailed(f"pool_list: flavor {name} needs at least one pool.")
        known = {p.name: p for p in self.catalog.pools()}
        missing = [p for p in pool_list if p not in known]
        if missing:
            raise errors.ValidationFailed(f"pool_list: pool {missing[0]} does not exist; register it first.")
        for pool in known.values():
            if pool.name in pool_list and pool.flavor != name:
                self._change_pool(pool.name, lambda p: dataclasses.replace(p, flavor=name))
            elif pool.name not in pool_list and pool.flavor == name:
                self._change_pool(pool.name, lambda p: dataclasses.replace(p, flavor=""))

    def put_flavor(self, name: str, pool_list: Sequence[str]) -> bool:
        """Create a flavor of these pools, or give an existing one these pools; return whether it is new.

        Raises:
            ValidationFailed: a bad name, an empty list, or a pool that does not exist.
        """
        rules.check_name("flavor", name)
        self._set_pools(name, pool_list)
        return self.catalog.put_flavor(name)

    def patch_flavor(self, name: str, pool_list: Sequence[str]) -> Flavor:
        """Give a flavor these pools and return it (raises FlavorDoesNotExist, ValidationFailed)."""
        rules.check_name("flavor", name)
        if not self.catalog.has_flavor(name):
            raise errors.FlavorDoesNotExist(name)
        self._set_pools(name, pool_list)
        return self.get_flavor(name)

    def delete_flavor(self, name: str) -> None:
        """Remove a flavor; its pools keep their queues and belong to no flavor (absent ones are fine)."""
        rules.check_name("flavor", name)
        for pool in self.catalog.pools():
            if pool.flavor == name:
                self._change_pool(pool.name, lambda p: dataclasses.replace(p, flavor=""))
        self.catalog.delete_flavor(name)

    # -- health ---------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """Return Zaqar's detailed health: the catalog's reachability, then each pool's, by name.

        Each pool says whether its store answers, its kind, and (when it
        answers) the message counts of each of its queues and their sum.
        """
        body: dict[str, Any] = {"catalog_reachable": self.storage.catalog_reachable()}
        if not body["catalog_reachable"]:
            return body
        for pool in self.catalog.pools():
            body[pool.name] = self._pool_health(pool.name)
        return body

    def _pool_health(self, name: str) -> dict[str, Any]:
        store = self.storage.pool_store(name)
        report: dict[str, Any] = {"storage_reachable": _answers(store), "storage": store.name}
        if not report["storage_reachable"]:
            return report
        now = self.clock()
        volume = {"free": 0, "claimed": 0, "delayed": 0, "total": 0}
        queues = []
        try:
            for project, queue, _ in self.storage.queues_of(name):
                stats = store.queue_stats(project, queue, now)
                counts = {"free": stats.free, "claimed": stats.claimed, "delayed": stats.delayed,
                          "total": stats.total}
                queues.append({"project": project, "name": queue, **counts})
                for key, value in counts.items():
                    volume[key] += value
        except errors.StorageUnavailable:
            return {**report, "storage_reachable": False}
        return {**report, "message_volume": volume, "queues": queues}


def _masked(text: str, uri: str) -> str:
    """Return an error's text with the URI, and its password, masked (a driver may repeat either)."""
    text = text.replace(uri, rules.masked_uri(uri))
    password = urllib.parse.urlsplit(uri).password
    for secret in {password, urllib.parse.unquote(password or "")} - {None, ""}:
        text = text.replace(str(secret), rules.MASK)
    return text


def _answers(store: Storage) -> bool:
    try:
        return store.ping()
    except errors.StorageUnavailable:
        return False

