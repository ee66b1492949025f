"""Redis connections that count the replies they are owed, and the bounded pool greenlets share them through.

Under the gevent worker every command of a worker borrows a connection of one
bounded pool (1,000 waiting claims must not hold 1,000 connections), so the
pool's check-out and check-in are paid on every command. redis-py's own pools
pay for much that this server never uses: the deprecated-arguments wrapper of
``get_connection``, a queue whose ``get`` and ``put`` take a condition's lock,
connection-count metrics and maintenance-notification checks on each check-out
and check-in, a retry wrapper around ``connect`` of a connected socket, and a
poll of the socket for unread data (a select through the gevent hub) whose
answer is ignored while maintenance notifications are on "auto", their default.
Together that was an eighth of the instructions of a claim and a delete (112k of 835k).
:class:`BoundedPool` keeps redis-py's pool as the client sees it (the same
class, options and connections) and replaces only check-out and check-in: a
semaphore bounds the connections lent, a list holds the idle ones (last in,
first out, so few stay warm), and a connection's own count of the replies it
is owed (:class:`OwedRepliesConnection`) stands in for the poll. Holding one
connection per request instead would spare no more than the semaphore and
the list: with a connection per greenlet (before the pool) a claim and a
delete ran as many instructions as through this pool.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import redis


class OwedRepliesConnection(redis.Connection):
    """A connection that counts the replies it is owed, so that a check-out need not poll it.

    A reply is left unread only by a command that did not complete: a send or
    read interrupted (``GreenletExit``, a gevent ``Timeout``: redis-py closes
    the connection then), or a pipeline whose replies were not all read.
    Commands sent less replies read tells such a connection apart, even while
    its reply is still on the way (a poll would miss it): it asks to be
    reconnected (``should_reconnect``, which the client and the pool consult
    when a command lets go of it), and answers a poll with "dirty" at once. A
    connection owed nothing is not polled: the server sends nothing unasked
    over RESP2 without pub/sub, and a connection it closed meanwhile fails its
    health check (``health_check_interval``) or its command, which the retry
    policy retries.
    """

    #: commands sent on this socket whose replies are not read yet
    owed = 0
    #: commands in the buffer :meth:`pack_commands` made last (a pipeline's), 1 for a single command
    _packed = 1

    def connect(self) -> None:
        # a connected socket has nothing to do: skip the retry wrapper that would find so itself
        if self._sock is None:
            super().connect()  # type: ignore[no-untyped-call]

    def pack_commands(self, commands: Iterable[Sequence[Any]]) -> Any:
        commands = list(commands)
        self._packed = len(commands)
        return super().pack_commands(commands)  # type: ignore[no-untyped-call]

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        # counted once sent in full: an interrupted send closes the connection (owed 0)
        sent, self._packed = self._packed, 1
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]
        self.owed += sent

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            response = super().read_response(*args, **kwargs)
        except redis.exceptions.ResponseError:  # an error reply, read in full
            self.owed = max(self.owed - 1, 0)
            raise
        self.owed = max(self.owed - 1, 0)  # never below: a failed read closed it (owed 0)
        return response

    def can_read(self, timeout: float = 0) -> bool:
        if timeout:
            return bool(super().can_read(timeout))
        return self.owed > 0

    def should_reconnect(self) -> bool:
        return self.owed > 0 or bool(super().should_reconnect())  # type: ignore[no-untyped-call]

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        self.owed = 0
        super().disconnect(*args, **kwargs)  # type: ignore[no-untyped-call]


class OneWordPacker:
    """hiredis's packing of a command, without redis-py's pass over its arguments first.

    redis-py's hiredis serializer splits a command name of several words and
    copies each bytearray or memoryview argument to bytes before hiredis packs
    the command: a generator step per argument (a post of one message sends 34,
    about 500 bytecode instructions, a tenth of the post's). This driver's
    commands are named in one word, with str, bytes and number arguments: hiredis
    packs them as they are. Any other command goes redis-py's way.
    """

    def __init__(self) -> None:
        import hiredis
        from redis.connection import HiredisRespSerializer

        self._pack = hiredis.pack_command
        self._general = HiredisRespSerializer()

    def pack(self, *args: Any) -> list[bytes]:
        name = args[0]
        if isinstance(name, str) and " " not in name:
            try:
                return [self._pack(args)]
            except TypeError:  # an argument hiredis does not take (bytearray, memoryview)
                pass
        return self._general.pack(*args)  # type: ignore[no-any-return]


def packing() -> dict[str, Any]:
    """Return the connection option of :class:`OneWordPacker` (none without hiredis)."""
    from redis.utils import HIREDIS_AVAILABLE

    return {"command_packer": OneWordPacker()} if HIREDIS_AVAILABLE else {}


class OwedRepliesSSLConnection(OwedRepliesConnection, redis.SSLConnection):
    """A TLS connection (``rediss://``) that counts the replies it is owed."""


def connection_class(uri: str) -> type[OwedRepliesConnection]:
    """Return the reply-counting connection class of a ``redis://`` or ``rediss://`` URI."""
    return OwedRepliesSSLConnection if uri.startswith("rediss:") else OwedRepliesConnection


def _semaphore(slots: int) -> Any:
    """Return a bounded semaphore of ``slots``: gevent's where gevent patched threading, else a thread's.

    Both block their caller (a greenlet, or a thread) until a slot is free; the
    pure-Python ``threading`` semaphore, cooperative once patched, costs ten
    times gevent's compiled one.
    """
    try:
        from gevent import lock, monkey
    except ImportError:  # pragma: no cover - gevent is a base dependency
        return threading.BoundedSemaphore(slots)
    return lock.BoundedSemaphore(slots) if monkey.is_module_patched("threading") else (
        threading.BoundedSemaphore(slots))


class BoundedPool(redis.ConnectionPool):
    """At most ``max_connections`` connections lent at once; a borrower waits ``timeout`` s for one.

    The same bound, wait and error as redis-py's ``BlockingConnectionPool``
    (``ConnectionError("No connection available.")``), with a check-out and a
    check-in of a few operations (see the module): safe between greenlets and
    between threads (the semaphore blocks; a list's ``pop`` and ``append`` are
    atomic). Only :class:`OwedRepliesConnection`\\ s: one owed a reply is
    reconnected before it is lent again. A process forked with the pool
    makes connections of its own.
    """

    def __init__(self, *, max_connections: int, timeout: float,
                 connection_class: type[OwedRepliesConnection] = OwedRepliesConnection,
                 **connection_kwargs: Any) -> None:
        self.timeout = timeout
        super().__init__(connection_class=connection_class, max_connections=max_connections,
                         **connection_kwargs)

    def reset(self) -> None:
        """Forget every connection (a new process must not share its parent's sockets)."""
        self._slots = _semaphore(self.max_connections)
        self._created_connections = 0
        self._available_connections: list[Any] = []
        self._in_use_connections: set[Any] = set()
        self.pid = os.getpid()  # last, as redis-py's reset: other threads then see the pool ready

    def get_connection(self, command_name: Any = None, *keys: Any, **options: Any) -> Any:
        """Lend an idle connection, or a new one while fewer than the maximum exist; wait for one else.

        Raises:
            redis.ConnectionError: none was free within ``timeout`` seconds.
        """
        if self.pid != os.getpid():
            self._checkpid()
        if not self._slots.acquire(timeout=self.timeout):
            raise redis.ConnectionError("No connection available.")
        try:
            connection = self._available_connections.pop()
        except IndexError:
            try:
                connection = self.make_connection()
            except BaseException:
                self._slots.release()
                raise
        self._in_use_connections.add(connection)
        try:
            if connection.can_read():  # owed a reply: its next reply would answer another command
                connection.disconnect()
            connection.connect()
        except BaseException:
            self.release(connection)
            raise
        return connection

    def make_connection(self) -> Any:
        """Make a connection (never more than the slots allow: one is made only while none is idle)."""
        self._created_connections += 1
        return self.connection_class(**self.connection_kwargs)

    def release(self, connection: Any) -> None:
        """Take a connection back (closing first one owed a reply: it connects anew) and free its slot."""
        if self.pid != os.getpid():
            self._checkpid()
        try:
            self._in_use_connections.remove(connection)
        except KeyError:  # not lent by this pool (or lent before a fork): no slot of ours
            return
        try:
            if connection.should_reconnect():
                connection.disconnect()
        finally:  # even when the borrower is killed meanwhile: a slot lost would be lost for good
            self._available_connections.append(connection)
            self._slots.release()

    def disconnect(self, inuse_connections: bool = True) -> None:
        """Close the idle connections, and those lent too unless ``inuse_connections`` is false."""
        connections = list(self._available_connections)
        if inuse_connections:
            connections += list(self._in_use_connections)
        for connection in connections:
            connection.disconnect()


def execute(client: Any, *args: Any) -> Any:
    """Run one command through ``client`` as its ``execute_command`` does, less what this driver never uses.

    The same connection (the client's own, or one borrowed from its pool and
    given back), the same retry of a refused or broken connection (the
    connection's ``retry``, closing it before each new attempt), the same
    reconnect of a connection left owed a reply, and the same reply callback.
    What redis-py 8 adds to every command and this driver never uses is left
    out: its observability hooks (a duration and error recorder behind a
    deprecated-arguments check, with no meter configured), the HIMPORT
    dispatch, and option handling for keyword arguments (this driver passes
    none). Together that was about 300 bytecode instructions a command, a
    fifteenth of a Redis post.
    """
    own = client.connection
    pool = client.connection_pool
    connection = own or pool.get_connection()
    locked = client._single_connection_client  # noqa: SLF001 - redis-py's own flag, read as it reads it

    def attempt() -> Any:
        connection.send_command(*args)
        return connection.read_response()

    if locked:
        client.single_connection_lock.acquire()
    try:
        response = connection.retry.call_with_retry(attempt, lambda error: connection.disconnect())
    finally:
        try:
            if connection.should_reconnect():
                connection.disconnect()
                connection.connect()
        finally:
            if locked:
                client.single_connection_lock.release()
            if not own:
                pool.release(connection)
    callback = client.response_callbacks.get(args[0])
    return response if callback is None else callback(response)


def execute_after(client: Any, first: tuple[Any, ...], *args: Any) -> Any:
    """Run ``first`` then one command through ``client`` in one round trip (a pipeline, not a
    transaction); return the command's reply, or raise the first error reply of the two."""
    with client.pipeline(transaction=False) as pipe:
        pipe.execute_command(*first).execute_command(*args)
        return pipe.execute()[1]
