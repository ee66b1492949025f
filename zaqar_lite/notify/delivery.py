"""Delivering one subscription's messages: in marker order, one at a time, at least once.

The loop, while this notifier holds the subscription's lease:

1. read the first message after the cursor (claimed and delayed ones included:
   notifications do not depend on claims; a delayed message is waited for,
   and the messages after it wait behind it, to keep post order);
2. make sure the lease has time for the attempt (``2 * request_timeout + 1`` s);
3. hand it to the subscriber's transport (:mod:`zaqar_lite.notify.transports`:
   a webhook POST, or a mail); once acknowledged (a 2xx answer, a mail the
   SMTP server accepted) advance the cursor to its marker (compare-and-set);
4. on a failure record it (``attempts``, ``retry_at``, ``last_error``) and wait
   as the retry policy says; when the policy is used up, suspend.

So a message is only sent after every earlier one was acknowledged, and the
cursor moves only past acknowledged messages. A notifier that dies between an
acknowledgement and the cursor write leaves the cursor before that message: whoever takes
the lease next delivers it again. That is the one duplicate at-least-once
allows, and it is always the newest message the subscriber has seen.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from collections.abc import Callable

from zaqar_lite import errors, metrics
from zaqar_lite.clock import Clock
from zaqar_lite.models import Message
from zaqar_lite.notify.lease import Lease, LeaseLost
from zaqar_lite.notify.records import with_token
from zaqar_lite.notify.state import Delivery, Subscription
from zaqar_lite.notify.transports import Transports
from zaqar_lite.rules import delivery_retry, encryption
from zaqar_lite.storage.base import Storage

LOG = logging.getLogger(__name__)

#: messages read from the store at once
PAGE = 20
#: longest time one subscription keeps a thread before the scheduler looks again
SLICE_SECONDS = 2.0


def visibility_lag(storage: Storage) -> float:
    """Return how long after its post a message is surely listed together with every earlier one.

    The cursor skips nothing only if a message never becomes visible after one
    with a greater marker has been delivered. SQLite and Redis assign markers
    and store messages in one atomic step, so the lag is 0. A driver that
    reserves markers first and writes later (MongoDB's counter, Swift's clock
    markers) can declare a ``visibility_lag`` in seconds; messages younger than
    that are then not delivered yet.
    """
    return storage.visibility_lag


class Pause(enum.Enum):
    """Why a delivery run stopped."""

    IDLE = "no message to deliver"
    WAITING = "waiting for a retry or a delayed message"
    SLICE = "time slice used"
    SUSPENDED = "retry policy used up"
    STOPPING = "notifier stopping"


class Courier:
    """Delivers one subscription's pending messages while holding its lease."""

    def __init__(self, storage: Storage, transports: Transports, clock: Clock, stopping: threading.Event,
                 monotonic: Callable[[], float] = time.monotonic,
                 keyring: encryption.Keyring | None = None) -> None:
        self.storage = storage
        self.keyring = keyring or encryption.Keyring()
        self.transports = transports
        self.clock = clock
        self.stopping = stopping
        self.monotonic = monotonic
        self.lag = visibility_lag(storage)

    def run(self, project: str, subscription: Subscription, lease: Lease) -> Pause:
        """Deliver until idle, waiting, suspended, stopping or out of time.

        Raises:
            LeaseLost: another notifier took the subscription, or it was deleted.
        """
        policy = delivery_retry.effective_policy(subscription.options,
                                                 self.storage.get_queue_metadata(project, subscription.queue))
        deadline = self.monotonic() + SLICE_SECONDS
        pending: list[Message] = []
        while True:
            interrupted = self._interrupted(deadline)
            if interrupted is not None:
                return interrupted
            delivery = lease.delivery
            if delivery.suspended:
                return Pause.SUSPENDED
            now = self.clock()
            if delivery.retry_at > now:
                return Pause.WAITING
            pending = self._readable_pending(project, subscription, lease, policy, pending, now)
            if not pending:
                return Pause.IDLE
            message = pending[0]
            if message.delay_until > now or message.created > now - self.lag:
                return Pause.WAITING
            if not self._deliver(project, subscription, lease, message, policy):
                pending = []
                if lease.delivery.suspended:
                    return Pause.SUSPENDED

    def _interrupted(self, deadline: float) -> Pause | None:
        """Return why to stop whatever the subscription's state (stopping, out of time), if so."""
        if self.stopping.is_set():
            return Pause.STOPPING
        if self.monotonic() > deadline:
            return Pause.SLICE
        return None

    def _pending(self, project: str, queue: str, delivery: Delivery, pending: list[Message],
                 now: float) -> list[Message]:
        """Return the messages held past the cursor, or else the store's next page of them."""
        pending = [m for m in pending if delivery.cursor is None or m.marker > delivery.cursor]
        if pending:
            return pending
        return self.storage.list_messages(
            project, queue, now=now, marker=delivery.cursor, limit=PAGE,
            include_claimed=True, include_delayed=True, exclude_client_id=None)

    def _readable_pending(self, project: str, subscription: Subscription, lease: Lease,
                          policy: delivery_retry.RetryPolicy, pending: list[Message],
                          now: float) -> list[Message]:
        """Return :meth:`_pending`; a page holding a body that cannot be decrypted is a failed attempt.

        The attempt is counted on that message under the subscription's retry
        policy (its ``last_error`` says why), so delivery waits, then is
        suspended, rather than skip it or send a wrong body; it goes on once
        the key is back.
        """
        try:
            return self._pending(project, subscription.queue, lease.delivery, pending, now)
        except errors.MessageUnreadable as exc:
            failed = next(m for m in exc.stored if m.id == exc.unreadable[0])
            self._record_failure(project, subscription, lease, failed, policy, str(exc), now)
            return []

    def _deliver(self, project: str, subscription: Subscription, lease: Lease, message: Message,
                 policy: delivery_retry.RetryPolicy) -> bool:
        """Make one attempt; return whether it was acknowledged (its outcome is then recorded).

        A sealed token that cannot be opened (its key is gone) is a failed
        attempt, as an undecryptable body is: delivery waits, then is suspended.
        """
        try:
            subscription = with_token(project, subscription, self.keyring)
        except encryption.Unopenable as exc:
            self._record_failure(project, subscription, lease, message, policy,
                                 f"the subscription's token cannot be decrypted: {exc}", self.clock())
            return False
        transport = self.transports.for_subscriber(subscription.subscriber)
        lease.ensure(transport.attempt_seconds + 1)
        outcome = transport.send(subscription, message)
        now = self.clock()
        expected = lease.delivery.cursor
        if outcome.acknowledged:
            def advance(d: Delivery) -> Delivery:
                if d.cursor != expected:
                    raise LeaseLost(f"cursor of {lease.key} moved from {expected} to {d.cursor}")
                return dataclasses.replace(d, cursor=message.marker, attempts=0, attempt_marker=None,
                                           retry_at=0.0, delivered=d.delivered + 1, last_delivered_at=now)
            lease.write(advance)
            metrics.NOTIFIER_DELIVERIES.labels(metrics.scheme_of(subscription.subscriber)).inc()
            return True
        metrics.NOTIFIER_FAILURES.labels(metrics.scheme_of(subscription.subscriber)).inc()
        self._record_failure(project, subscription, lease, message, policy, outcome.error or "failed", now)
        return False

    @staticmethod
    def _record_failure(project: str, subscription: Subscription, lease: Lease, message: Message,
                        policy: delivery_retry.RetryPolicy, error: str, now: float) -> None:
        delivery = lease.delivery
        failures = (delivery.attempts if delivery.attempt_marker == message.marker else 0) + 1
        delays = policy.delays()
        if failures > len(delays):
            LOG.warning("subscription %s of %s/%s suspended after %d attempts on message %s: %s",
                        subscription.id, project, subscription.queue, failures, message.id, error)
            lease.release(lambda d: dataclasses.replace(
                d, attempts=0, attempt_marker=None, retry_at=0.0, last_error=error, last_error_at=now,
                suspended_at=now))
            metrics.NOTIFIER_SUSPENSIONS.labels(metrics.scheme_of(subscription.subscriber)).inc()
            return
        wait = delays[failures - 1]
        LOG.info("subscription %s: attempt %d on message %s failed (%s); next in %g s",
                 subscription.id, failures, message.id, error, wait)
        lease.write(lambda d: dataclasses.replace(
            d, attempts=failures, attempt_marker=message.marker, retry_at=now + wait if wait else 0.0,
            last_error=error, last_error_at=now))
