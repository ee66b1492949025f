"""The waiting room of one worker process: its waiting claims, one line per queue.

Every waiting claim has a :class:`Place` in its queue's :class:`Line`. A
wake-up of a queue (a post, a release, ... made by any process) wakes one
sleeping place, the one asleep longest, rather than all of them: a claim that
then gets messages wakes the next (more may be left), one that gets none goes
back to sleep, so a post costs a worker one or two claim attempts however many
claims wait. Each line counts its wake-ups (``generation``): a place compares
the count before and after a claim attempt, so a wake-up that arrives while it
is trying, not sleeping, is never lost.

A line also knows when something of its queue may next become claimable by
itself (a delay or a claim ending: ``due``); only the first sleeper sleeps
until then, so a delay maturing wakes one claim, not all of them.

The primitives are :mod:`threading`'s, looked up at call time: under the gevent
worker (which patches them) every place is a greenlet and sleeping holds no
thread; under gthread a waiting claim holds its request thread.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from collections.abc import Callable, Iterator

Key = tuple[str, str]


class Woken(enum.Enum):
    """Why :meth:`Place.sleep` returned."""

    #: a wake-up of the queue (or a claim attempt that came back empty was overtaken by one)
    WAKE_UP = "wake-up"
    #: the line's due time came: something of the queue may be claimable by now
    DUE = "due"
    #: the waiting claim's deadline passed
    DEADLINE = "deadline"


class Line:
    """The waiting claims of one queue in this process."""

    def __init__(self) -> None:
        #: every place, in the order they came
        self.places: dict[Place, None] = {}
        #: the sleeping places, the one asleep longest first
        self.sleepers: dict[Place, None] = {}
        #: wake-ups of this queue so far
        self.generation = 0
        #: monotonic time something of the queue may become claimable by itself (None: not known)
        self.due: float | None = None

    def first_sleeper(self) -> Place | None:
        """Return the place asleep longest, or None."""
        return next(iter(self.sleepers), None)

    def wake_one(self) -> None:
        """Count a wake-up and wake the place asleep longest (caller holds the room's lock)."""
        self.generation += 1
        first = self.first_sleeper()
        if first is not None:
            del self.sleepers[first]
            first.event.set()


class Place:
    """One waiting claim's place in its queue's line."""

    def __init__(self, room: WaitingRoom, line: Line, clock: Callable[[], float]) -> None:
        self.room = room
        self.line = line
        self.clock = clock
        self.event = threading.Event()

    @property
    def generation(self) -> int:
        """Return the line's wake-up count (compare it before and after a claim attempt)."""
        return self.line.generation

    def expect(self, at: float) -> None:
        """Note that something of the queue may become claimable at monotonic time ``at``.

        The line keeps the earliest time it was told: an early one only costs a
        claim attempt that finds nothing, a late one would cost latency.
        """
        with self.room.lock:
            line = self.line
            if line.due is not None and line.due <= at:
                return
            line.due = at
            first = line.first_sleeper()
            if first is not None:  # it sleeps longer than that: let it count again
                first.event.set()

    def pass_on(self) -> None:
        """Wake the next sleeper: this claim got messages, so more may be left."""
        with self.room.lock:
            self.line.wake_one()

    def sleep(self, seen: int, deadline: float) -> Woken:
        """Sleep until a wake-up after the count ``seen``, the line's due time, or ``deadline``.

        Only the first sleeper watches the due time.

        Args:
            seen: the line's ``generation`` read before the claim attempt that found nothing.
            deadline: monotonic time the waiting claim ends.
        """
        line, lock = self.line, self.room.lock
        with lock:
            if line.generation != seen:  # a wake-up came while the claim was trying
                return Woken.WAKE_UP
            line.sleepers[self] = None
        while True:
            with lock:
                if self not in line.sleepers:  # a wake-up took it out of the line's sleepers
                    return Woken.WAKE_UP
                now = self.clock()
                if now >= deadline:
                    del line.sleepers[self]
                    return Woken.DEADLINE
                timeout = deadline - now
                if line.due is not None and line.first_sleeper() is self:
                    if now >= line.due:
                        line.due = None
                        del line.sleepers[self]
                        return Woken.DUE
                    timeout = min(timeout, line.due - now)
                self.event.clear()
            self.event.wait(timeout)


class WaitingRoom:
    """Every waiting claim of this process, by queue; wake-ups come in through :meth:`wake`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.lines: dict[Key, Line] = {}
        #: told (under the lock) when a queue gets its first waiting claim here, before that
        #: claim's first attempt, and when its last one leaves (set by a channel's ``listen``)
        self.on_first: Callable[[str, str], None] | None = None
        self.on_last: Callable[[str, str], None] | None = None
        #: told (outside the lock) of each waiting claim, with the seconds it may wait, once it
        #: is in its line and before its first attempt (set by a channel's ``listen``)
        self.on_enter: Callable[[str, str, float], None] | None = None

    @contextlib.contextmanager
    def place(self, project: str, queue: str, seconds: float = 0.0) -> Iterator[Place]:
        """Give a waiting claim a place in its queue's line for the time of the ``with`` block.

        ``seconds``: how long the claim may wait (told to ``on_enter``).
        """
        key = (project, queue)
        with self.lock:
            line = self.lines.get(key)
            if line is None:
                line = self.lines[key] = Line()
                if self.on_first is not None:
                    self.on_first(project, queue)
            place = Place(self, line, self.clock)
            line.places[place] = None
        try:
            if self.on_enter is not None:
                self.on_enter(project, queue, seconds)
            yield place
        finally:
            with self.lock:
                del line.places[place]
                was_first = line.first_sleeper() is place
                line.sleepers.pop(place, None)
                if not line.places:
                    del self.lines[key]
                    if self.on_last is not None:
                        self.on_last(project, queue)
                elif was_first and line.due is not None:
                    following = line.first_sleeper()  # it watches the due time from now on
                    if following is not None:
                        following.event.set()

    def wake(self, project: str, queue: str) -> None:
        """Wake one waiting claim of a queue (none waits here: nothing to do)."""
        with self.lock:
            line = self.lines.get((project, queue))
            if line is not None:
                line.wake_one()

    def wake_all(self) -> None:
        """Wake one waiting claim of every queue: wake-ups may have been lost (a channel reconnected)."""
        with self.lock:
            for line in self.lines.values():
                line.wake_one()

    def waiting(self) -> int:
        """Return how many claims wait in this process."""
        with self.lock:
            return sum(len(line.places) for line in self.lines.values())
