"""The long-polling claim: the service's claim, tried again whenever something may have changed.

``POST /v2/queues/{q}/claims?wait=S`` comes here. Each attempt is the
service's own claim (the store's atomic claim: two waiting claims never get
the same message); between attempts the claim sleeps in its queue's line of
the :class:`~zaqar_lite.service.waiting.room.WaitingRoom` until

* a wake-up of its queue: a post, a release of a claim or of a message, an
  edit of a delayed message, a redrive into it or a dead letter swept into it
  or moved into it by another queue's claim,
  made by any worker process (:mod:`~zaqar_lite.service.waiting.channels`);
* the time something of the queue becomes claimable by itself, a delay or a
  claim ending, read from the store after each empty attempt
  (``Storage.next_visible_at``: two indexed reads on SQLite, one round trip
  on Redis); a store that cannot tell cheaply (MongoDB, Swift) is asked
  again at an interval that doubles from :data:`RECHECK_MIN` to
  :data:`RECHECK_MAX`, as is every store whose wake-ups miss writes made
  elsewhere (MongoDB and Swift: through servers on other machines);
* its deadline: then it answers 204.

The sleeping happens on the calling greenlet (or thread, under gthread);
under gevent on SQLite only each attempt, and each read of the next time,
goes to the thread pool (``server.OffTheHub``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from zaqar_lite.models import Message
from zaqar_lite.service.waiting.room import Place, WaitingRoom, Woken

#: the first and longest pause between two re-checks of a store that cannot name its next time
RECHECK_MIN = 0.5
RECHECK_MAX = 4.0


class LongPoll:
    """Claims that wait up to a number of seconds for a message to claim."""

    def __init__(self, messaging: Any, room: WaitingRoom, *, sees_every_write: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Wait around ``messaging``'s claims.

        Args:
            messaging: the service (:class:`~zaqar_lite.service.Messaging`, or
                the same through ``server.OffTheHub``).
            room: this process's waiting room, fed by the wake-up channel.
            sees_every_write: whether every write that can make a message
                claimable reaches ``room`` as a wake-up; when not, the store is
                re-checked at an interval as well.
            clock: the monotonic time source of deadlines.
        """
        self.messaging = messaging
        self.room = room
        self.sees_every_write = sees_every_write
        self.clock = clock

    def claim(self, project: str, queue: str, limit: int, ttl: int, grace: int,
              wait: int | None) -> tuple[str, list[Message], float]:
        """Claim as ``Messaging.claim``, waiting up to ``wait`` seconds for a message when none is claimable.

        Returns:
            The claim id, the claimed messages (empty after the wait) and the
            time of the last attempt.
        """
        if not wait:
            return self.messaging.claim(project, queue, limit, ttl, grace)  # type: ignore[no-any-return]
        deadline = self.clock() + wait
        recheck = RECHECK_MIN
        with self.room.place(project, queue, wait) as place:
            while True:
                seen = place.generation
                claim_id, claimed, now = self.messaging.claim(project, queue, limit, ttl, grace)
                if claimed:
                    place.pass_on()
                    return claim_id, claimed, now
                if self.clock() >= deadline:
                    return claim_id, claimed, now
                if place.generation != seen:  # woken while trying: try again at once
                    continue
                recheck = self._expect_next(place, project, queue, now, recheck)
                if place.sleep(seen, deadline) is Woken.DEADLINE:
                    return claim_id, claimed, now

    def _expect_next(self, place: Place, project: str, queue: str, now: float, recheck: float) -> float:
        """Tell the line when to try again by itself; return the next re-check interval."""
        at = self.messaging.storage.next_visible_at(project, queue, now)
        if at is not None and at > now:
            place.expect(self.clock() + (at - now))
            if self.sees_every_write:
                return RECHECK_MIN
        elif at is None and self.sees_every_write:
            return RECHECK_MIN
        place.expect(self.clock() + recheck)  # the store cannot tell, or others write unseen
        return min(recheck * 2, RECHECK_MAX)
