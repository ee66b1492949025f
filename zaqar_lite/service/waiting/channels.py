"""Wake-up channels: how a write in one worker process wakes the claims waiting in every other.

A channel has two ends. :meth:`publish` is called by the service after each
write that may make messages of a queue claimable, from whatever thread runs
the service (under gevent on SQLite: a thread of gevent's pool), and never
blocks or fails the write: a wake-up that cannot be sent is dropped, which
only costs latency (the waiting claim still wakes at its store's next
due time, or answers 204 at its deadline). The listening end, started once
per worker process, hands every wake-up it receives to the process's
:class:`~zaqar_lite.service.waiting.room.WaitingRoom`.

:class:`LocalChannel` (SQLite, MongoDB, Swift)
    one unix datagram socket per worker process in a run directory shared by
    the processes serving the same storage URI on one machine. A process
    where claims wait on a queue announces it with a marker file,
    ``waiting/<digest of project and queue>/<its socket's name>``, made when
    the queue's first claim there starts waiting and removed when its last one
    leaves; a publisher lists the queue's marker directory and sends one
    datagram to each socket named there. A write to a queue nobody waits on
    thus costs one failed directory listing, and no datagram. Writes made
    through servers on other machines are not seen (MongoDB and Swift
    re-check, see :mod:`~zaqar_lite.service.waiting.long_poll`).

    No wake-up a waiting claim needs is lost: the marker is made (under the
    waiting room's lock, so a second claim of the queue in the same process
    waits for it) before the claim's first attempt, and that attempt reads
    the store afresh. A write whose publisher lists the marker directory
    before the marker exists was stored before that listing, hence before
    the attempt, which sees its messages; a write listed after it sends the
    datagram, which counts as a wake-up of the queue's line even while the
    claim is trying (:mod:`~zaqar_lite.service.waiting.room`). The service
    publishes only after the store acknowledged the write. A marker left by
    a process that ended is removed by the first publish that finds its
    socket gone.
:class:`RedisChannel` (Redis)
    a pub/sub channel per queue, ``zl:{P}:q:Q:wake``; each worker process keeps
    one subscriber connection (a pattern subscription to every queue's
    channel) whose thread fans wake-ups out to the waiting claims. Each
    waiting claim, once in its line and before its first attempt, adds itself
    to the queue's sorted set ``zl:{P}:q:Q:waiting`` (score: the server's time
    it stops waiting, plus a margin); a publisher's one round trip is a script
    that publishes only while that set holds a claim not yet ended, so a write
    to a queue nobody waits on reaches no subscriber. The same argument as
    above holds: the script runs either before the claim's entry (the write
    was stored before, the attempt sees it) or after it (it publishes); both
    scripts read the one server's clock. A post and a release (of a claim or
    of a message) make that check themselves, in the store's own script
    (``storage/redis/lua/post.lua``, ``release_claim.lua``,
    ``release_message.lua``: the write and its wake-up in one round trip): the
    service publishes nothing after them (``store_wakes_up``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import socket
import tempfile
import threading
import time
import urllib.parse
import uuid
from typing import Any, Protocol

from zaqar_lite.service.waiting.room import WaitingRoom

LOG = logging.getLogger(__name__)
#: seconds a listener waits before listening again after its connection failed
RELISTEN_PAUSE = 1.0
#: Redis connections a worker process publishes wake-ups through
PUBLISH_CONNECTIONS = 16
#: seconds a waiting claim stays in its queue's ``waiting`` set past the time it may wait
WAITING_MARGIN = 30

#: KEYS[1] the queue's waiting set; ARGV: milliseconds the claim may stay, its member
ENTER_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stay = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + stay, ARGV[2])
if redis.call('PTTL', KEYS[1]) < stay then
  redis.call('PEXPIRE', KEYS[1], stay)
end
return 1
"""
#: KEYS[1] the queue's waiting set; ARGV: its channel, the payload
PUBLISH_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZCOUNT', KEYS[1], now, '+inf') == 0 then
  return 0
end
return redis.call('PUBLISH', ARGV[1], ARGV[2])
"""


class Channel(Protocol):
    """Both ends of a wake-up channel."""

    #: whether every write that makes messages claimable reaches the channel
    sees_every_write: bool
    #: whether the store's own post and releases wake the claims waiting on their queue
    #: (the service then publishes nothing after them)
    store_wakes_up: bool

    def publish(self, project: str, queue: str) -> None:
        """Wake the claims waiting on a queue in every process; never raises, never blocks long."""

    def listen(self, room: WaitingRoom) -> None:
        """Start handing the wake-ups received to ``room`` (a daemon thread)."""

    def close(self) -> None:
        """Stop listening and release what the channel holds."""


def encode(project: str, queue: str) -> bytes:
    """Return a wake-up's payload: the project and the queue (neither may hold a newline)."""
    return f"{project}\n{queue}".encode()


def decode(payload: bytes | str) -> tuple[str, str] | None:
    """Return the project and queue of a payload, or None for a malformed one."""
    text = payload.decode(errors="replace") if isinstance(payload, bytes) else payload
    project, newline, queue = text.partition("\n")
    return (project, queue) if newline else None


def run_directory(storage_uri: str) -> str:
    """Return the directory of the wake-up sockets of the processes serving one storage URI."""
    digest = hashlib.sha1(storage_uri.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"zaqar-lite-wake-{digest}")


def _plain_socket_class() -> Any:
    """Return the socket class gevent has not patched: sending from any thread, never yielding."""
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a base dependency
        return socket.socket
    return monkey.get_original("socket", "socket")


class InProcessChannel:
    """Wake-ups within one process only (a single app built by ``create_app``, the API tests)."""

    sees_every_write = True
    store_wakes_up = False

    def __init__(self) -> None:
        self._room: WaitingRoom | None = None

    def publish(self, project: str, queue: str) -> None:
        """Wake the queue's claims waiting in this process."""
        if self._room is not None:
            self._room.wake(project, queue)

    def listen(self, room: WaitingRoom) -> None:
        """Deliver this process's wake-ups to ``room``."""
        self._room = room

    def close(self) -> None:
        """Forget the room."""
        self._room = None


class LocalChannel:
    """Unix datagram sockets in a run directory, one per worker process (see the module)."""

    store_wakes_up = False

    def __init__(self, directory: str, *, sees_every_write: bool) -> None:
        self.directory = directory
        self.sees_every_write = sees_every_write
        self.path = os.path.join(directory, f"{os.getpid()}.sock")
        #: the marker directories of the waited queues, one per queue
        self.waiting = os.path.join(directory, "waiting")
        #: the path of ``waiting`` and a separator: a queue's markers is this and a name
        #: (``os.path.join`` per write would cost a post about 50 instructions)
        self._waiting_prefix = os.path.join(self.waiting, "")
        self._sender = _plain_socket_class()(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.setblocking(False)
        self._receiver: socket.socket | None = None
        self._marked: set[str] = set()

    def markers(self, project: str, queue: str) -> str:
        """Return the directory of a queue's markers: one file per process where claims wait on it."""
        return self._waiting_prefix + hashlib.sha1(encode(project, queue)).hexdigest()[:24]

    def publish(self, project: str, queue: str) -> None:
        """Send the wake-up to the socket of every worker process where claims wait on the queue."""
        markers = self.markers(project, queue)
        try:
            names = os.listdir(markers)
        except OSError:  # nobody waits on the queue (the usual case): nothing to send
            return
        payload = encode(project, queue)
        for name in names:
            path = os.path.join(self.directory, name)
            try:
                self._sender.sendto(payload, path)
            except (ConnectionRefusedError, FileNotFoundError):  # a process that ended
                if path != self.path:
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(markers, name))
                    with contextlib.suppress(OSError):
                        os.unlink(path)
            except OSError as exc:  # EAGAIN: that process is behind on its wake-ups; drop this one
                if exc.errno not in (errno.EAGAIN, errno.ENOBUFS):
                    LOG.debug("wake-up to %s not sent: %s", path, exc)

    def listen(self, room: WaitingRoom) -> None:
        """Bind this process's socket and start the thread (a greenlet under gevent) that reads it.

        From now on the room announces its waited queues here (see the module).
        """
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.bind(self.path)
        self._receiver = receiver
        room.on_first, room.on_last = self._mark, self._unmark
        threading.Thread(target=self._receive, args=(receiver, room), name="zaqar-lite-wake-ups",
                         daemon=True).start()

    def _mark(self, project: str, queue: str) -> None:
        """Announce that claims wait on the queue here (before the first one's first attempt)."""
        markers = self.markers(project, queue)
        marker = os.path.join(markers, os.path.basename(self.path))
        for _ in range(8):  # another process may remove the directory it emptied between the two steps
            try:
                os.makedirs(markers, mode=0o700, exist_ok=True)
                os.close(os.open(marker, os.O_CREAT | os.O_WRONLY, 0o600))
            except FileNotFoundError:
                continue
            except OSError as exc:
                LOG.warning("claims waiting on %s/%s wake at their due time only: %s", project, queue, exc)
                return
            self._marked.add(marker)
            return
        LOG.warning("claims waiting on %s/%s wake at their due time only: %s kept vanishing",
                    project, queue, markers)

    def _unmark(self, project: str, queue: str) -> None:
        """Withdraw the queue's marker: its last waiting claim here left."""
        markers = self.markers(project, queue)
        marker = os.path.join(markers, os.path.basename(self.path))
        self._marked.discard(marker)
        with contextlib.suppress(OSError):
            os.unlink(marker)
        with contextlib.suppress(OSError):  # fails while another process still waits on the queue
            os.rmdir(markers)

    @staticmethod
    def _receive(receiver: socket.socket, room: WaitingRoom) -> None:
        while True:
            try:
                payload = receiver.recv(4096)
            except OSError:  # closed
                return
            key = decode(payload)
            if key is not None:
                room.wake(*key)

    def close(self) -> None:
        """Close both sockets and remove this process's socket and markers."""
        if self._receiver is not None:
            self._receiver.close()
            for marker in list(self._marked):
                with contextlib.suppress(OSError):
                    os.unlink(marker)
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.dirname(marker))
            self._marked.clear()
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            with contextlib.suppress(OSError):  # the last process of the store leaves no directory
                os.rmdir(self.waiting)
            with contextlib.suppress(OSError):
                os.rmdir(self.directory)
        self._sender.close()


class RedisChannel:
    """A Redis pub/sub channel per queue; one subscriber connection per process (see the module)."""

    sees_every_write = True
    #: post.lua and the release scripts publish when a claim waits on the queue (see the module)
    store_wakes_up = True
    #: what every queue's channel matches: ``zl:{P}:q:Q:wake`` (``layout.queue_prefix`` + ``wake``)
    PATTERN = "zl:*:wake"

    def __init__(self, uri: str) -> None:
        """Connect to the Redis server of a ``redis://`` or ``rediss://`` storage URI.

        Raises:
            ValueError: not such a URI (a Redis Cluster's ``redis+cluster://``, say).
        """
        import redis

        from zaqar_lite.storage.redis.pool import BoundedPool, connection_class

        self._redis = redis
        uri = plain_redis_url(uri)
        self._uri = uri
        # a few connections, shared by every request of the process (a publish takes one for
        # its round trip, through the store's lean pool); a publish that waits longer than a
        # second for one is dropped
        self._publisher = redis.Redis(connection_pool=BoundedPool.from_url(
            uri, connection_class=connection_class(uri), decode_responses=True,
            max_connections=PUBLISH_CONNECTIONS, timeout=1.0, socket_timeout=5.0, socket_connect_timeout=3.0))
        self._publish = self._publisher.register_script(PUBLISH_SCRIPT)
        self._enter = self._publisher.register_script(ENTER_SCRIPT)
        self._closed = False

    @staticmethod
    def channel(project: str, queue: str) -> str:
        """Return a queue's wake-up channel."""
        from zaqar_lite.storage.redis.layout import queue_prefix

        return queue_prefix(project, queue) + "wake"

    @staticmethod
    def waiting(project: str, queue: str) -> str:
        """Return the key of the queue's waiting claims (see the module)."""
        from zaqar_lite.storage.redis.layout import queue_prefix

        return queue_prefix(project, queue) + "waiting"

    def publish(self, project: str, queue: str) -> None:
        """Publish the wake-up on the queue's channel if a claim waits on the queue."""
        try:
            self._publish(keys=[self.waiting(project, queue)],
                          args=[self.channel(project, queue), encode(project, queue)])
        except self._redis.exceptions.RedisError as exc:
            LOG.debug("wake-up of %s/%s not published: %s", project, queue, exc)

    def enter(self, project: str, queue: str, seconds: float) -> None:
        """Add a waiting claim to its queue's waiting set, before its first attempt."""
        stay = int((seconds + WAITING_MARGIN) * 1000)
        try:
            self._enter(keys=[self.waiting(project, queue)], args=[stay, uuid.uuid4().hex])
        except self._redis.exceptions.RedisError as exc:
            LOG.warning("claim waiting on %s/%s wakes at its due time only: %s", project, queue, exc)

    def listen(self, room: WaitingRoom) -> None:
        """Start the thread (a greenlet under gevent) that subscribes and fans wake-ups out.

        From now on every waiting claim of the room enters its queue's waiting set.
        """
        room.on_enter = self.enter
        threading.Thread(target=self._receive, args=(room,), name="zaqar-lite-wake-ups",
                         daemon=True).start()

    def _receive(self, room: WaitingRoom) -> None:
        while not self._closed:
            subscriber: Any = self._redis.Redis.from_url(self._uri, decode_responses=True)
            try:
                with subscriber.pubsub(ignore_subscribe_messages=True) as pubsub:
                    pubsub.psubscribe(self.PATTERN)
                    room.wake_all()  # wake-ups published while not subscribed were lost
                    for message in pubsub.listen():
                        key = decode(message["data"])
                        if key is not None:
                            room.wake(*key)
            except self._redis.exceptions.RedisError as exc:
                if not self._closed:
                    LOG.warning("wake-up subscription lost, subscribing again: %s", exc)
                    time.sleep(RELISTEN_PAUSE)
            finally:
                subscriber.close()

    def close(self) -> None:
        """Stop listening (at the next message) and close the publisher's connections."""
        self._closed = True
        self._publisher.close()


def plain_redis_url(uri: str) -> str:
    """Return a single server's storage URI with only the options redis-py's ``from_url`` knows.

    Raises:
        ValueError: not a ``redis://`` or ``rediss://`` URI.
    """
    from redis.connection import URL_QUERY_ARGUMENT_PARSERS

    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("redis", "rediss"):
        raise ValueError(f"wake-ups by pub/sub need a redis:// or rediss:// URI, not {parts.scheme}://")
    known = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k in URL_QUERY_ARGUMENT_PARSERS]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(known)))


def channel_for(storage_name: str, storage_uri: str) -> Channel:
    """Return the channel of a store: Redis's pub/sub, or local sockets shared on this machine.

    A Redis store reached otherwise than through one server's URI (a cluster)
    gets the local sockets, and its waiting claims re-check as MongoDB's do.
    """
    if storage_name == "redis":
        try:
            return RedisChannel(storage_uri)
        except ValueError as exc:
            LOG.info("long polling on local wake-ups and re-checks: %s", exc)
            return LocalChannel(run_directory(storage_uri), sees_every_write=False)
    # an SQLite file is written by this machine's processes only; MongoDB and Swift also by others
    return LocalChannel(run_directory(storage_uri), sees_every_write=storage_name == "sqlite")
