"""The scripts that greenlets of one worker run in the same turn of the event loop, sent as one write.

Under the gevent worker about as many requests are under way in a worker as
it has busy client connections, and each script of theirs was a round trip of
its own: a ``sendall`` (which wakes redis-server inside the syscall), an io
watcher and two switches through the hub to wait for the reply, a ``recv``,
and on the server a read and a write of its event loop. :class:`SharedRoundTrips`
lets the scripts issued in one turn of the loop share them: a caller queues
its command (a post that registers its project: the ``SADD`` and the script)
and waits; the first command of a turn starts a flush on the
loop's callbacks, which run once the greenlets that the turn's I/O woke have
run (no timer: a command issued alone goes out alone, in the same turn). The
flush borrows one connection of the pool, sends every queued command in one
packed write (a pipeline of independent commands, not a ``MULTI``), reads
their replies in order and hands each reply, or each error reply, to its own
caller. A refused or broken connection is retried as a command alone is
(:func:`~zaqar_lite.storage.redis.pool.execute`: the connection's ``retry``,
closing it first) for the commands whose replies were not read yet; any other
failure (a timeout, no connection free) fails each of those. A caller that
stops waiting (``GreenletExit``, a gevent ``Timeout``) leaves the flush to read
its reply, so the connection goes back to the pool owing nothing.

Used only on the event loop it was made on (a native thread, or a process
without gevent, runs each command alone), and only on one server: a Redis
Cluster client routes each command by its keys, one node each, as before.
"""

from __future__ import annotations

from typing import Any

import redis

from zaqar_lite.storage.redis.pool import BoundedPool, execute, execute_after

#: a caller's commands (their arguments; the caller waits for the last one's reply), and its waiter
_Queued = tuple[tuple[tuple[Any, ...], ...], Any]


class SharedRoundTrips:
    """The commands of one event loop's greenlets, each turn's sent together on one connection of ``pool``."""

    def __init__(self, pool: BoundedPool) -> None:
        from gevent import get_hub
        from gevent._hub_local import get_hub_if_exists
        from gevent.hub import RawGreenlet, Waiter, getcurrent

        self._pool = pool
        self._hub = get_hub()
        self._current_hub = get_hub_if_exists
        self._greenlet = RawGreenlet
        self._getcurrent = getcurrent
        self._waiter = Waiter
        #: the commands of this turn, until its flush takes them
        self._queued: list[_Queued] | None = None
        #: flushers waiting for a turn's commands (a greenlet started per flush would cost more
        #: than the round trip it spares)
        self._idle: list[Any] = []

    def execute(self, client: Any, *args: Any) -> Any:
        """Run one command as :func:`~zaqar_lite.storage.redis.pool.execute` does, its round trip shared
        with the other commands of this turn of the loop; return its reply or raise its error."""
        hub = self._current_hub()
        if hub is not self._hub:  # another thread's loop (or none): its commands go alone
            return execute(client, *args)
        return self._queue(hub, client, (args,))

    def execute_after(self, client: Any, first: tuple[Any, ...], *args: Any) -> Any:
        """Run ``first`` then one command in the same round trip (a pipeline, not a transaction);
        return the command's reply, or raise the first error reply of the two."""
        hub = self._current_hub()
        if hub is not self._hub:
            return execute_after(client, first, *args)
        return self._queue(hub, client, (first, args))

    def _queue(self, hub: Any, client: Any, commands: tuple[tuple[Any, ...], ...]) -> Any:
        """Queue a caller's commands for this turn's flush; wait for the last one's reply."""
        queued = self._queued
        if queued is None:
            queued = self._queued = []
            self._start_flush(queued)
        waiter = self._waiter(hub)
        queued.append((commands, waiter))
        reply, error = waiter.get()
        if error is not None:
            raise error
        callback = client.response_callbacks.get(commands[-1][0])
        return reply if callback is None else callback(reply)

    def _start_flush(self, queued: list[_Queued]) -> None:
        """Have an idle flusher (or a new one) send ``queued`` once the loop runs its callbacks."""
        idle = self._idle
        while idle:
            flusher = idle.pop()
            if not flusher.dead:
                break
        else:
            flusher = self._greenlet(self._flusher, self._hub)
        self._hub.loop.run_callback(flusher.switch, queued)

    def _flusher(self, queued: list[_Queued]) -> None:
        """Flush the commands handed over, then wait, idle, for the next ones."""
        me = self._getcurrent()
        while True:
            self._flush(queued)
            self._idle.append(me)
            queued = self._hub.switch()

    def _flush(self, queued: list[_Queued]) -> None:
        """Send the commands of one turn in one write and hand each caller its reply, or its error."""
        if self._queued is queued:
            self._queued = None  # commands queued from now on are the next flush's
        answer = self._hub.loop.run_callback
        answered = 0
        try:
            connection = self._pool.get_connection()
            try:
                def attempt() -> None:
                    nonlocal answered
                    pending = queued[answered:]
                    if len(pending) == 1 and len(pending[0][0]) == 1:
                        connection.send_command(*pending[0][0][0])
                    else:
                        flat = [args for commands, _ in pending for args in commands]
                        connection.send_packed_command(connection.pack_commands(flat))
                    for commands, waiter in pending:
                        reply: Any = None
                        error: BaseException | None = None
                        for _ in commands:
                            try:
                                reply = connection.read_response()
                            except redis.exceptions.ResponseError as exc:  # an error reply: its caller's
                                error = error or exc
                        answered += 1
                        answer(waiter.switch, (reply, error))

                connection.retry.call_with_retry(attempt, lambda error: connection.disconnect())
            finally:
                self._pool.release(connection)
        except BaseException as exc:  # noqa: BLE001 - handed to each caller not answered, which raises it
            for _, waiter in queued[answered:]:
                answer(waiter.switch, (None, exc))
            if not isinstance(exc, Exception):  # the flusher itself is stopped (GreenletExit): it ends
                raise
