"""The Redis connection of a driver: the pool, each thread's client, the scripts, the one error translation.

Scripts (``lua/*.lua``, each documenting its KEYS, ARGV and reply) get the
functions of ``lua/_lib.lua`` they call prepended (:func:`library_for`), are
registered once and run by SHA, reloaded on NOSCRIPT. Connection errors and timeouts become
:class:`~zaqar_lite.errors.StorageUnavailable`; the connection pool reconnects
by itself when Redis is back.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any, TypeVar

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import URL_QUERY_ARGUMENT_PARSERS
from redis.retry import Retry

from zaqar_lite import errors
from zaqar_lite.storage.redis.batch import SharedRoundTrips
from zaqar_lite.storage.redis.layout import Target, parse_uri
from zaqar_lite.storage.redis.pool import BoundedPool, connection_class, execute, execute_after, packing

T = TypeVar("T")
SCRIPTS = ("create_queue", "set_metadata", "post", "claim", "renew", "release_claim", "release_message",
           "reject",
           "delete", "bulk_delete", "pop", "sweep", "purge", "list", "stats", "redrive", "put_record",
           "delete_record", "edit")
#: a function of ``lua/_lib.lua``: the comments above it, its name, and its text up to its closing ``end``
_LUA_FUNCTION = re.compile(r"(?:^--[^\n]*\n)*^local function (\w+)\(.*?^end\n", re.MULTILINE | re.DOTALL)
#: a Lua comment to the end of its line, or a string on one line (a field named as a function)
_LUA_NOT_CODE = re.compile(r"--[^\n]*|'[^'\n]*'|\"[^\"\n]*\"")
DEFAULTS = {"socket_timeout": 5.0, "socket_connect_timeout": 3.0, "health_check_interval": 5,
            "decode_responses": True}
#: under gevent: connections of a worker's pool, and seconds a command waits for one of them
GREENLET_POOL = {"max_connections": 64, "timeout": 5.0}
# unreachable, timed out, or refused for now before running (replica, maxmemory, cluster failover)
_UNAVAILABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                redis.exceptions.ReadOnlyError, redis.exceptions.OutOfMemoryError,
                redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError,
                redis.exceptions.MovedError, redis.exceptions.AskError,
                redis.exceptions.RedisClusterException)


def _cluster_options(target: Target) -> dict[str, Any]:
    """Return the cluster client's arguments: seed nodes, credentials, TLS, typed query options."""
    nodes = [ClusterNode(h, p) for h, p in target.nodes]  # type: ignore[no-untyped-call]
    options: dict[str, Any] = {**DEFAULTS, "startup_nodes": nodes,
                               "ssl": target.ssl, "username": target.username, "password": target.password}
    for name, value in target.options.items():
        if name not in URL_QUERY_ARGUMENT_PARSERS or name == "db":
            raise ValueError(f"redis cluster URI: unknown option {name}")
        parse: Any = URL_QUERY_ARGUMENT_PARSERS[name]
        options[name] = parse(value)
    return options


def _greenlet_locals() -> bool:
    """Return whether gevent has patched :mod:`threading` (its locals are then a greenlet's)."""
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a base dependency
        return False
    return bool(monkey.is_module_patched("threading"))


def library_for(script: str, library: str) -> str:
    """Return the functions of ``library`` that ``script`` calls, with those they call, in library order.

    Each ``local function`` of a script is made anew (a closure, later collected)
    every time the script runs: a script that carried the whole library would
    pay on every call for the functions it never calls. A name in a comment or
    a string calls nothing: calls are looked for in the code only.
    """
    functions = {match.group(1): match.group(0) for match in _LUA_FUNCTION.finditer(library)}
    needed: set[str] = set()
    pending = [script]
    while pending:
        text = _LUA_NOT_CODE.sub("", pending.pop())
        for name, definition in functions.items():
            if name not in needed and re.search(rf"\b{name}\b", text):
                needed.add(name)
                pending.append(definition)
    return "".join(definition for name, definition in functions.items() if name in needed)


def _handed_a_closed_socket(exc: BaseException) -> bool:
    """Return whether redis-py's pool failed to check a connection another thread had just closed.

    A cluster client that meets a failover disconnects every connection of the
    node; a connection the pool is handing out at that moment has no socket
    left when the pool polls it (``can_read``), and the poll refuses the
    missing socket: gevent's with ``ValueError: Invalid file object``, the
    standard library's with ``TypeError: ... fileno() method``. Nothing was
    sent on it.
    """
    return isinstance(exc, (ValueError, TypeError)) and ("file object" in str(exc) or "fileno" in str(exc))


class FirstTryRetry(Retry):
    """redis-py's :class:`~redis.retry.Retry`, whose first attempt runs before any of its bookkeeping.

    ``call_with_retry`` resets the backoff and sets up its loop before every
    command, though a healthy connection answers at the first attempt. Here the
    first attempt is tried at once; after its failure the same steps follow as
    in redis-py's loop (the backoff reset, the failure handler, the retries
    and their waits), so the errors retried, their number and the waits
    between them are redis-py's (``tests/storage/test_redis_specific.py``).
    """

    def call_with_retry(self, do: Callable[[], T], fail: Callable[..., Any],
                        is_retryable: Callable[[Exception], bool] | None = None,
                        with_failure_count: bool = False) -> T:
        try:
            return do()
        except self._supported_errors as error:
            if is_retryable and not is_retryable(error):
                raise
            self._backoff.reset()  # type: ignore[no-untyped-call]
            failures = 1
            last = error
        while True:  # redis-py's loop, from its first failure
            if with_failure_count:
                fail(last, failures)
            else:
                fail(last)
            if self._retries >= 0 and failures > self._retries:
                raise last
            backoff = self._backoff.compute(failures)
            if backoff > 0:
                time.sleep(backoff)
            try:
                return do()
            except self._supported_errors as error:
                if is_retryable and not is_retryable(error):
                    raise
                failures += 1
                last = error


class _ErrorsTranslated:
    """The one error translation of a connection, a context built once per connection: no request pays
    for a generator-based context manager (``contextlib``: about 75 instructions a ``with``).

    It holds no state of its own, so nested and concurrent ``with`` blocks share it.
    """

    def __init__(self, connected: RedisConnected) -> None:
        self.connected = connected

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: Any) -> None:
        if exc is not None:
            self.translate(exc)

    def translate(self, exc: BaseException) -> None:
        """Raise :class:`StorageUnavailable` for an unreachable or refusing Redis's error, else return."""
        if isinstance(exc, _UNAVAILABLE) or _handed_a_closed_socket(exc):
            if self.connected._pool is None:  # a primary may have failed over: learn the slots again
                self.connected._refresh_slots()
            raise errors.StorageUnavailable(f"redis: {exc}") from exc


class RedisConnected:
    """One connection pool per instance, of which each thread keeps one connection.

    On a Redis Cluster (``redis+cluster://``) one cluster client per process
    routes each command by its keys' hash slot; a script and its ``WAIT`` run
    on the primary of the slot, over one connection.
    """

    def __init__(self, uri: str) -> None:
        self.target = parse_uri(uri)
        # retry only a refused or broken connection (stale after a restart), never a timeout:
        # the script may have run (post is idempotent by id; a claim's messages come back)
        retry = FirstTryRetry(ExponentialBackoff(cap=0.5, base=0.05), 2,
                              supported_errors=(redis.exceptions.ConnectionError,))
        self._pool: redis.ConnectionPool | None = None
        self._shared: Any = None
        #: how a script's command runs: alone (``execute(client, *args)``), or sharing a round trip
        self._execute: Callable[..., Any] = execute
        #: how a command runs after another in one round trip (a registration before a post)
        self._execute_after: Callable[..., Any] = execute_after
        self._cluster: tuple[int, RedisCluster] | None = None
        if self.target.cluster:
            self._cluster_options = _cluster_options(self.target)
        elif _greenlet_locals():
            # Under gevent threading.local is a greenlet's, and a greenlet serves one client
            # connection for as long as it stays open (a waiting claim, an idle keep-alive): a
            # client per greenlet would hold a Redis connection per client connection. There the
            # greenlets share one client whose commands borrow a connection of a bounded pool
            # (waiting for a free one) for their own time only. redis-py's BlockingConnectionPool
            # would do, at an eighth of a claim's and a delete's instructions: a lean pool of ours
            # lends and takes back (storage/redis/pool.py says what it spares, and how).
            self._pool = BoundedPool.from_url(
                self.target.uri, retry=retry, connection_class=connection_class(self.target.uri),
                **DEFAULTS, **GREENLET_POOL, **packing())
            self._shared = redis.Redis(connection_pool=self._pool)
            # the scripts of the loop's greenlets share a round trip per turn (storage/redis/batch.py)
            shared = SharedRoundTrips(self._pool)
            self._execute, self._execute_after = shared.execute, shared.execute_after
        else:
            self._pool = redis.ConnectionPool.from_url(self.target.uri, retry=retry, **DEFAULTS, **packing())
        self._local = threading.local()
        self._errors_translated = _ErrorsTranslated(self)
        lua = resources.files("zaqar_lite.storage.redis") / "lua"
        library = (lua / "_lib.lua").read_text()
        #: name -> (SHA1, text) of each script; loaded into Redis on first use (NOSCRIPT)
        self._scripts: dict[str, tuple[str, str]] = {}
        for name in SCRIPTS:
            script = (lua / f"{name}.lua").read_text()
            text = library_for(script, library) + script
            self._scripts[name] = hashlib.sha1(text.encode()).hexdigest(), text

    @property
    def client(self) -> Any:
        """This thread's client, which keeps one connection of the pool for itself (not under gevent).

        A command then skips the pool's check-out, check-in and stale-data poll;
        the connection goes back to the pool when its thread ends. On a cluster,
        the process's cluster client (thread-safe, a pool per node).
        (Any: redis-py types replies as bytes | str; with decode_responses they are str.)
        """
        if self._pool is None:
            if self._cluster is None or self._cluster[0] != os.getpid():
                try:  # it reads the slots from a seed node at once
                    self._cluster = os.getpid(), RedisCluster(**self._cluster_options)
                except _UNAVAILABLE as exc:
                    raise errors.StorageUnavailable(f"redis cluster: {exc}") from exc
            return self._cluster[1]
        if self._shared is not None:
            return self._shared
        owner, client = getattr(self._local, "client", (None, None))
        if owner != os.getpid():  # none yet, or inherited through fork: never share the parent's socket
            client = redis.Redis(connection_pool=self._pool, single_connection_client=True)
            self._local.client = os.getpid(), client
        return client

    def describe(self) -> str:
        """Return the server and database, or the cluster's seed nodes, without credentials."""
        if self._pool is None:
            return "redis cluster at " + ",".join(f"{host}:{port}" for host, port in self.target.nodes)
        kwargs = self._pool.connection_kwargs
        return f"redis at {kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"

    def close(self) -> None:
        """Close every connection of the pool, the threads' own included."""
        if self._pool is not None:
            self._pool.disconnect()
        elif self._cluster is not None and self._cluster[0] == os.getpid():
            self._cluster[1].close()
            self._cluster = None

    def _translate_errors(self) -> _ErrorsTranslated:
        """Return the context that makes an unreachable or refusing Redis :class:`StorageUnavailable`."""
        return self._errors_translated

    def _refresh_slots(self) -> None:
        with contextlib.suppress(*_UNAVAILABLE):
            self.client.nodes_manager.initialize()

    def _eval(self, script: str, keys: Sequence[str], args: Sequence[Any],
              register: tuple[str, str] | None = None) -> Any:
        """Run a script by SHA; after a NOSCRIPT, by its text (EVAL, which caches it where it runs);
        with ``register=(index, project)``, SADD the project first, in the same round trip (on a
        cluster, just before: another slot).

        Loading the script and running it by SHA again could fail again: a failover empties the
        cache of the node that serves the slot next, and the slot map may send the load and the
        run to different nodes while it changes. The text runs wherever it lands.
        """
        command: tuple[str, str] = ("EVALSHA", self._scripts[script][0])
        moves = 0
        # the error translation of _translate_errors, without a context entered and left per command
        try:
            while True:
                try:
                    if self._pool is not None and not self.target.wait_replicas:
                        if register is None:
                            return self._execute(self.client, *command, len(keys), *keys, *args)
                        return self._execute_after(self.client, ("SADD", *register),
                                                   *command, len(keys), *keys, *args)
                    return self._eval_acknowledged(command, keys, args, register)
                except redis.exceptions.NoScriptError:
                    if command[0] == "EVAL":
                        raise
                    # once, whatever the moves before: a failover's new primary comes after them
                    command = ("EVAL", self._scripts[script][1])
                except (redis.exceptions.MovedError, redis.exceptions.AskError):
                    moves += 1
                    if moves == 3:  # not run: the slot is served elsewhere now
                        raise
                    self._refresh_slots()
        except Exception as exc:
            self._errors_translated.translate(exc)
            raise

    def _primary(self, key: str) -> Any:
        """Return a client of the primary holding a key (on one server: this thread's client)."""
        if self._pool is not None:
            return self.client
        return self.client.get_node_from_key(key).redis_connection

    def _eval_acknowledged(self, command: tuple[str, str], keys: Sequence[str], args: Sequence[Any],
                           register: tuple[str, str] | None) -> Any:
        """Run a script on its keys' primary, then ``WAIT`` on the same connection when asked.

        Raises:
            StorageUnavailable: fewer replicas than ``wait_replicas`` acknowledged the
                write in time, or the primary became a replica while it waited; it may
                have been applied, but may not survive a failover.
        """
        if register is not None and self._pool is None:
            self.client.sadd(*register)
        wanted = self.target.wait_replicas
        with self._primary(keys[0]).pipeline(transaction=False) as pipe:
            if register is not None and self._pool is not None:
                pipe.sadd(*register)
            pipe.execute_command(*command, len(keys), *keys, *args)
            if wanted:
                pipe.execute_command("WAIT", wanted, int(self.target.wait_timeout * 1000))
            replies = pipe.execute(raise_on_error=False)
        for reply in replies[:-1] if wanted else replies:
            if isinstance(reply, Exception):
                raise reply
        if wanted and isinstance(replies[-1], redis.exceptions.ResponseError):
            # "UNBLOCKED ... (master -> replica?)": the primary became a replica (a failover)
            # while the write waited; whether the write survives is unknown, as after a timeout
            raise errors.StorageUnavailable(
                f"redis: the write's WAIT was cut short ({replies[-1]}); it may be applied, "
                "but may not survive a failover")
        if wanted and replies[-1] < wanted:
            raise errors.StorageUnavailable(
                f"redis: the write reached {replies[-1]} of {wanted} replicas within "
                f"{self.target.wait_timeout} s; it may be applied, but may not survive a failover")
        return replies[-2] if wanted else replies[-1]

    def ping(self) -> bool:
        try:
            with self._translate_errors():
                return bool(self.client.ping())
        except errors.StorageUnavailable:
            return False
