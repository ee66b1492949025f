"""The Redis connection of a driver: the pool, each thread's client, the scripts, the one error translation.

Scripts (``lua/*.lua``, each documenting its KEYS, ARGV and reply) get
``lua/_lib.lua`` prepended, are registered once and run by SHA, reloaded on
NOSCRIPT. Connection errors and timeouts become
:class:`~zaqar_lite.errors.StorageUnavailable`; the connection pool reconnects
by itself when Redis is back.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from zaqar_lite import errors

SCRIPTS = ("post", "claim", "renew", "release_claim", "release_message", "delete", "bulk_delete",
           "pop", "sweep", "purge", "list", "stats", "redrive", "put_record", "delete_record", "edit")
DEFAULTS = {"socket_timeout": 5.0, "socket_connect_timeout": 3.0, "health_check_interval": 5,
            "decode_responses": True}
# unreachable, timed out, or refused for now before running (replica, maxmemory, cluster failover)
#: under gevent: connections of a worker's pool, and seconds a command waits for one of them
GREENLET_POOL = {"max_connections": 64, "timeout": 5.0}
_UNAVAILABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                redis.exceptions.ReadOnlyError, redis.exceptions.OutOfMemoryError,
                redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError)


def _greenlet_locals() -> bool:
    """Return whether gevent has patched :mod:`threading` (its locals are then a greenlet's)."""
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a base dependency
        return False
    return bool(monkey.is_module_patched("threading"))


class RedisConnected:
    """One connection pool per instance, of which each thread keeps one connection."""

    def __init__(self, uri: str) -> None:
        scheme = urllib.parse.urlsplit(uri).scheme
        if scheme not in ("redis", "rediss"):
            raise ValueError(f"not a redis URI: {uri}")
        # retry only a refused or broken connection (stale after a restart), never a timeout:
        # the script may have run (post is idempotent by id; a claim's messages come back)
        retry = Retry(ExponentialBackoff(cap=0.5, base=0.05), 2,
                      supported_errors=(redis.exceptions.ConnectionError,))
        # Under gevent threading.local is a greenlet's, and a greenlet serves one client
        # connection for as long as it stays open (a waiting claim, an idle keep-alive): a
        # client per greenlet would hold a Redis connection per client connection. There the
        # greenlets share one client whose commands borrow a connection of a bounded pool
        # (waiting for a free one) for their own time only.
        self._shared: Any = None
        self._pool: redis.ConnectionPool
        if _greenlet_locals():
            self._pool = redis.BlockingConnectionPool.from_url(uri, retry=retry, **DEFAULTS, **GREENLET_POOL)
            self._shared = redis.Redis(connection_pool=self._pool)
        else:
            self._pool = redis.ConnectionPool.from_url(uri, retry=retry, **DEFAULTS)
        self._local = threading.local()
        lua = resources.files("zaqar_lite.storage.redis") / "lua"
        library = (lua / "_lib.lua").read_text()
        #: name -> (SHA1, text) of each script; loaded into Redis on first use (NOSCRIPT)
        self._scripts: dict[str, tuple[str, str]] = {}
        for name in SCRIPTS:
            text = library + (lua / f"{name}.lua").read_text()
            self._scripts[name] = hashlib.sha1(text.encode()).hexdigest(), text

    @property
    def client(self) -> Any:
        """This thread's client, which keeps one connection of the pool for itself (not under gevent).

        A command then skips the pool's check-out, check-in and stale-data poll;
        the connection goes back to the pool when its thread ends.
        (Any: redis-py types replies as bytes | str; with decode_responses they are str.)
        """
        if self._shared is not None:
            return self._shared
        owner, client = getattr(self._local, "client", (None, None))
        if owner != os.getpid():  # none yet, or inherited through fork: never share the parent's socket
            client = redis.Redis(connection_pool=self._pool, single_connection_client=True)
            self._local.client = os.getpid(), client
        return client

    def describe(self) -> str:
        """Return the server and database, without credentials."""
        kwargs = self._pool.connection_kwargs
        return f"redis at {kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"

    def close(self) -> None:
        """Close every connection of the pool, the threads' own included."""
        self._pool.disconnect()

    @contextlib.contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except _UNAVAILABLE as exc:
            raise errors.StorageUnavailable(f"redis: {exc}") from exc

    def _eval(self, script: str, keys: Sequence[str], args: Sequence[Any],
              register: tuple[str, str] | None = None) -> Any:
        """Run a script by SHA, loading it on NOSCRIPT; with ``register=(index, project)``, SADD
        the project first, in the same round trip."""
        sha, text = self._scripts[script]
        with self._translate_errors():
            for attempt in range(2):
                try:
                    if register is None:
                        return self.client.execute_command("EVALSHA", sha, len(keys), *keys, *args)
                    with self.client.pipeline(transaction=False) as pipe:
                        return pipe.sadd(*register).evalsha(sha, len(keys), *keys, *args).execute()[1]
                except redis.exceptions.NoScriptError:
                    if attempt:
                        raise
                    self.client.script_load(text)

    def ping(self) -> bool:
        try:
            with self._translate_errors():
                return bool(self.client.ping())
        except errors.StorageUnavailable:
            return False
