"""Pausing a queue and the dead-letter circuit breaker: counting, tripping, telling subscribers.

docs/api.rst, "Pausing a queue" and "Dead-letter circuit breaker". The rules
are :mod:`zaqar_lite.claims.pause`; the counts live in the store's records
(:class:`~zaqar_lite.storage.breaker_windows.BreakerWindows`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from zaqar_lite import errors
from zaqar_lite import metrics as counted
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import pause
from zaqar_lite.models import Message
from zaqar_lite.notify.records import project_subscriptions
from zaqar_lite.service.core import ServiceBase

LOG = logging.getLogger("zaqar_lite.service")
#: the client id of the notice a tripped breaker posts
NOTICE_CLIENT_ID = "zaqar-lite"
#: the prefix of the claim that holds that notice, so that no consumer ever takes it
NOTICE_CLAIM_PREFIX = "queue-paused-"


class Pauses(ServiceBase):
    """The breaker's counting and what a trip does; what claims and sweeps call when a queue sets one."""

    def count_toward_breaker(self, project: str, queue: str, stored: Mapping[str, Any],
                             dead_letters: int, claimed: int) -> None:
        """Count dead letters (and, for a ``max_share`` breaker, messages claimed) of a queue; trip if due.

        Called only for a queue whose stored metadata sets ``_dead_letter_breaker``;
        a count of nothing writes nothing. A count the store cannot take (it is
        unreachable, or the window's record kept changing) is logged and lost:
        the claim or sweep it counts has happened, and its answer stands.
        """
        breaker = pause.breaker_of(stored)
        if breaker is None:
            return
        if not breaker.counts_claims:
            claimed = 0
        if not dead_letters and not claimed:
            return
        now = self.clock()
        try:
            window, trips = self.breaker_windows.count(
                project, queue, lambda found: pause.counted(found, breaker, now, dead_letters, claimed))
            if trips:
                self.trip_breaker(project, queue, breaker, window, now)
        except errors.StorageUnavailable as exc:
            # the claim or sweep that counted has happened: its answer must not be lost for the count
            LOG.warning("dead-letter breaker of %s/%s: %d dead letters and %d claimed not counted: %s",
                        project, queue, dead_letters, claimed, exc)

    def trip_breaker(self, project: str, queue: str, breaker: pause.Breaker, window: pause.Window,
                     now: float) -> None:
        """Pause the queue with the breaker's record, count the trip and tell the queue's subscribers.

        A queue an operator paused meanwhile stays as it is (nothing counted, nobody told).
        """
        current = self.storage.get_queue_metadata(project, queue)
        if current is None:
            return
        record = pause.pause_record(breaker, window, now)
        paused = pause.paused_metadata(current, record)
        if paused is None:
            return
        self.storage.set_queue_metadata(project, queue, paused)
        counted.BREAKER_TRIPS.inc()
        LOG.warning("queue %s/%s paused by its dead-letter breaker: %d dead letters, %d claimed "
                    "since %s (%s)",
                    project, queue, window.dead_letters, window.claimed, record["window_started"],
                    record["rule"])
        self.notify_pause(project, queue, current, record, now)

    def notify_pause(self, project: str, queue: str, stored: Mapping[str, Any], record: Mapping[str, Any],
                     now: float) -> None:
        """Post the pause notice for the queue's subscriptions, if it has any.

        The notice is a message of the queue, so subscription delivery sends it
        as any other; it is posted held by a claim of its own until it expires
        (the queue's default ttl), so no consumer ever claims it, and it is not
        eligible for a dead-letter queue.
        """
        if next(iter(project_subscriptions(self.storage, project, queue)), None) is None:
            return
        ttl = meta.capped_ttl(stored.get(meta.DEFAULT_TTL, self.limits.default_message_ttl), stored)
        notice_id = self.ids()
        self.storage.post_messages(project, queue, [Message(
            id=notice_id, body=pause.notice_body(queue, record), created=now, expires=now + ttl,
            client_id=NOTICE_CLIENT_ID, claim_id=NOTICE_CLAIM_PREFIX + notice_id, claim_expires=now + ttl,
            dlq_eligible=False)], now)

    def resume_wakes(self, project: str, queue: str, before: Mapping[str, Any],
                     after: Mapping[str, Any]) -> None:
        """Wake the claims waiting on a queue that a metadata change resumed."""
        if pause.is_paused(before) and not pause.is_paused(after):
            self.wake_up(project, queue)
