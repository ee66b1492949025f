"""Storage drivers, chosen by the scheme of a URI and imported only when used."""

from __future__ import annotations

import importlib
import urllib.parse
from collections.abc import Callable

from zaqar_lite.config import QUEUE_CACHE_SIZE, Settings
from zaqar_lite.rules.pools import masked_uri
from zaqar_lite.storage.base import Storage

#: URI scheme -> (module, class, pip extra that provides its client library)
DRIVERS: dict[str, tuple[str, str, str | None]] = {
    "sqlite": ("zaqar_lite.storage.sqlite.driver", "SqliteStorage", None),
    "redis": ("zaqar_lite.storage.redis.driver", "RedisStorage", "redis"),
    "rediss": ("zaqar_lite.storage.redis.driver", "RedisStorage", "redis"),
    "redis+cluster": ("zaqar_lite.storage.redis.driver", "RedisStorage", "redis"),
    "rediss+cluster": ("zaqar_lite.storage.redis.driver", "RedisStorage", "redis"),
    "mongodb": ("zaqar_lite.storage.mongodb.driver", "MongoStorage", "mongodb"),
    "mongodb+srv": ("zaqar_lite.storage.mongodb.driver", "MongoStorage", "mongodb"),
    "swift": ("zaqar_lite.storage.swift.driver", "SwiftStorage", "swift"),
}


def scheme_of(uri: str) -> str:
    """Return the driver kind of a storage URI: its scheme, "sqlite" for ``sqlite:///...``."""
    return urllib.parse.urlsplit(uri).scheme


def open_storage(uri: str, queue_cache_size: int = QUEUE_CACHE_SIZE) -> Storage:
    """Return a driver instance for a storage URI.

    ``queue_cache_size`` bounds what the driver remembers per queue
    (``Settings.queue_cache_size``; see :mod:`zaqar_lite.storage.cache`).

    Raises:
        ValueError: unknown scheme, or the driver's client library is missing
            (the message names the ``pip install`` that adds it).
    """
    scheme = scheme_of(uri)
    if scheme not in DRIVERS:
        known = ", ".join(sorted(DRIVERS))
        raise ValueError(f"unknown storage scheme {scheme!r} in {masked_uri(uri)!r}; known: {known}")
    module_name, class_name, extra = DRIVERS[scheme]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if extra is None:
            raise
        raise ValueError(
            f"the {scheme} driver needs an extra dependency: pip install 'zaqar-lite[{extra}]' ({exc})"
        ) from exc
    cls: type[Storage] = getattr(module, class_name)
    driver = cls(uri, queue_cache_size=queue_cache_size) if cls.remembers_queues else cls(uri)  # type: ignore[call-arg]
    return driver


def open_deployment(settings: Settings, opener: Callable[[str, int], Storage] = open_storage) -> Storage:
    """Return the store of a deployment: ``[storage] uri``'s driver, or with ``[pools] enabled`` the pools.

    With pools, the driver of ``[storage] uri`` is the default store and the
    catalog is ``[pools] catalog`` (the same driver when empty or the same URI);
    each pool's driver is opened on its first use
    (:class:`~zaqar_lite.storage.pools.router.PooledStorage`). Every driver is
    opened by ``opener`` (``uri``, ``queue_cache_size``): the gevent worker's
    puts a blocking store on the thread pool (``server.open_store_off_the_hub``).

    Raises:
        ValueError: as :func:`open_storage`.
    """
    default = opener(settings.storage_uri, settings.queue_cache_size)
    if not settings.pools.enabled:
        return default
    from zaqar_lite.storage.pools.catalog import Catalog
    from zaqar_lite.storage.pools.router import PooledStorage

    named = settings.pools.catalog
    records = default if not named or named == settings.storage_uri \
        else opener(named, settings.queue_cache_size)
    return PooledStorage(default, Catalog(records), lambda uri: opener(uri, settings.queue_cache_size),
                         queue_cache_size=settings.queue_cache_size,
                         refresh_interval=settings.pools.refresh_interval)


__all__ = ["DRIVERS", "Storage", "open_deployment", "open_storage", "scheme_of"]
