"""The subscription service: create, list, get, update, delete, confirm and resume.

All state is in versioned records (layout in :mod:`zaqar_lite.notify.state`).
A subscription is written in three steps, each a compare-and-set, in an order
that leaves nothing visible half-made:

1. the ``subscriber`` record ``(queue, url) -> id`` is created: it makes the
   subscriber unique in its queue (a second create of it fails);
2. the ``delivery`` record is created with its cursor on the newest message of
   the queue, so only messages posted from now on are delivered (as in Zaqar);
3. the ``subscription`` record is created: from then on it is served.

A create that finds a ``subscriber`` record whose subscription is missing
(a crash after step 1) finishes that creation under the recorded id; one whose
subscription expired or names another URL (a crash during an update) replaces
it. Deletion goes the other way round (subscription, delivery, subscriber), so a
notifier serving the subscription loses it at once: its next write of the
delivery record fails.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import metadata as queue_rules
from zaqar_lite.clock import Clock, wall_clock
from zaqar_lite.config import Settings
from zaqar_lite.notify import options as checks
from zaqar_lite.notify import state, webhook
from zaqar_lite.notify.records import project_subscriptions, remove_queue_subscriptions, remove_subscription
from zaqar_lite.notify.state import Delivery, Subscription
from zaqar_lite.rules import encryption, topics
from zaqar_lite.rules import pools as pool_rules
from zaqar_lite.storage.base import Storage

LOG = logging.getLogger(__name__)

#: how often a read-modify-write is tried again when a notifier wrote in between
CAS_ATTEMPTS = 20


class SubscriptionExists(errors.Conflict):
    """The queue (or topic) already has a confirmed subscription for this subscriber."""

    def __init__(self, project: str) -> None:
        kind = topics.source_kind(project)
        super().__init__("Such subscription already exists. Subscriptions are unique by "
                         f"project + {kind} + subscriber URI.")


class TooManySubscriptions(errors.Conflict):
    """The queue (or topic) already has as many subscriptions as ``[limits] max_subscriptions_per_queue``."""

    def __init__(self, project: str, queue: str, most: int) -> None:
        kind = topics.source_kind(project)
        super().__init__(f"The {kind} {queue} already has {most} subscriptions, the most this server "
                         f"allows ([limits] max_subscriptions_per_queue); delete one to add another.")


class NoSuchSubscription(errors.SubscriptionDoesNotExist):
    """No such subscription, or it has expired."""

    def __init__(self, subscription_id: str, project: str, queue: str) -> None:
        kind = topics.source_kind(project)  # a topic's subscriptions are stored under its namespace
        super().__init__(f"Subscription {subscription_id} does not exist in {kind} {queue}.")


def new_subscription_id() -> str:
    """Return a fresh subscription id."""
    return uuid.uuid4().hex


class Subscriptions:
    """Subscription operations on the store, with validation and Zaqar's answers."""

    def __init__(self, storage: Storage, settings: Settings, clock: Clock = wall_clock,
                 ids: Callable[[], str] = new_subscription_id) -> None:
        self.storage = storage
        self.settings = settings
        self.limits = settings.limits
        self.clock = clock
        self.ids = ids
        self.keyring = encryption.Keyring.from_setting(settings.encryption_keys)

    def _stored_token(self, project: str, queue: str, subscription_id: str,
                      token: str | None) -> dict[str, Any]:
        """Return the token fields of a subscription as stored: sealed when there is a key to seal with."""
        if token is None or not self.keyring.can_seal:
            return {"auth_token": token, "sealed_auth_token": None}
        sealed = encryption.seal_token(token, self.keyring, project, queue, subscription_id)
        return {"auth_token": None, "sealed_auth_token": sealed}

    # -- create ---------------------------------------------------------------

    def create(self, project: str, queue: str, document: Any,
               auth_token: str | None = None) -> tuple[str, bool]:
        """Create a subscription, creating the queue if missing (as Zaqar).

        Args:
            project: the project.
            queue: the queue.
            document: the request body.
            auth_token: the creator's token (token auth only); a ``trust+http(s)``
                subscription keeps it and sends it with its webhooks.

        Returns:
            The subscription id and whether it was created. An existing
            unconfirmed subscription of the same subscriber is returned with
            False (Zaqar answers 201 with its id).

        Raises:
            ValidationFailed: a bad field. SubscriptionExists: the subscriber
            already has a confirmed subscription on this queue.
        """
        now = self.clock()
        fields = checks.creation(document, self.limits, self.settings.notifier, self.settings.smtp, now)
        fields["auth_token"] = auth_token if webhook.is_trust(fields["subscriber"]) else None
        self._check_fan_out(project, queue, fields["subscriber"])
        self._check_room(project, queue, fields["subscriber"], now)
        if self.storage.get_queue_metadata(project, queue) is None:
            queue_rules.check_room_for_queue(project, self.storage.count_queues(project),
                                             self.limits.max_queues_per_project)
        self.storage.create_queue(project, queue, {}, now)
        index_key = state.subscriber_key(queue, fields["subscriber"])
        for _ in range(CAS_ATTEMPTS):
            subscription_id = self.ids()
            try:
                self.storage.put_record(project, state.SUBSCRIBER, index_key,
                                        {"subscription_id": subscription_id}, None)
            except errors.Conflict:
                existing = self._resolve_index(project, queue, index_key, fields["subscriber"], now)
                if existing is None:
                    continue
                if isinstance(existing, Subscription):
                    return self._duplicate(project, existing)
                subscription_id = existing
            return self._write_new(project, queue, subscription_id, fields, now)
        raise errors.StorageUnavailable("the subscription could not be created; try again")

    def _check_room(self, project: str, queue: str, subscriber: str, now: float) -> None:
        """Refuse a new subscriber on a queue that has ``max_subscriptions_per_queue`` live ones.

        Creations racing each other may pass the limit by as many as run at once;
        the limit bounds how far one post fans out, not an exact count.
        """
        most = self.limits.max_subscriptions_per_queue
        live = 0
        for subscription in project_subscriptions(self.storage, project, queue):
            if subscription.is_expired(now):
                continue
            if subscription.subscriber == subscriber:
                return  # answered as a duplicate below
            live += 1
        if live >= most:
            raise TooManySubscriptions(project, queue, most)

    def _resolve_index(self, project: str, queue: str, index_key: str, url: str,
                       now: float) -> Subscription | str | None:
        """Read a ``subscriber`` record that already exists.

        Returns:
            The live subscription it names; or its id when that subscription
            was never finished (to finish it); or None after removing a stale
            record (the caller tries again).
        """
        record = self.storage.get_record(project, state.SUBSCRIBER, index_key)
        if record is None:
            return None
        subscription_id = record.value["subscription_id"]
        found = self.storage.get_record(project, state.SUBSCRIPTION, state.key(queue, subscription_id))
        if found is None:
            return str(subscription_id)
        subscription = Subscription.from_record(found.value)
        if subscription.is_expired(now):
            remove_subscription(self.storage, project, subscription)
            return None
        if subscription.subscriber != url:
            self.storage.delete_record(project, state.SUBSCRIBER, index_key, record.version)
            return None
        return subscription

    @staticmethod
    def _duplicate(project: str, existing: Subscription) -> tuple[str, bool]:
        if existing.confirmed:
            raise SubscriptionExists(project)
        return existing.id, False

    def _write_new(self, project: str, queue: str, subscription_id: str, fields: dict[str, Any],
                   now: float) -> tuple[str, bool]:
        stats = self.storage.queue_stats(project, queue, now)
        cursor = stats.newest.marker if stats.newest is not None else None
        delivery = Delivery(cursor=cursor, lease_expires=now, created=now)
        try:
            self.storage.put_record(project, state.DELIVERY, state.key(queue, subscription_id),
                                    delivery.to_record(), None)
        except errors.Conflict:
            pass  # finishing a creation that wrote it before stopping
        subscription = Subscription(id=subscription_id, queue=queue, subscriber=fields["subscriber"],
                                    ttl=fields["ttl"], options=fields["options"], created=now,
                                    expires=now + fields["ttl"], **self._stored_token(
                                        project, queue, subscription_id, fields["auth_token"]))
        try:
            self.storage.put_record(project, state.SUBSCRIPTION, subscription.key,
                                    subscription.to_record(), None)
        except errors.Conflict:
            found = self.storage.get_record(project, state.SUBSCRIPTION, subscription.key)
            if found is None:
                raise
            return self._duplicate(project, Subscription.from_record(found.value))
        return subscription_id, True

    # -- read -----------------------------------------------------------------

    def get(self, project: str, queue: str, subscription_id: str) -> tuple[Subscription, Delivery]:
        """Return a live subscription and its delivery state.

        Raises:
            SubscriptionDoesNotExist: absent or expired.
        """
        record = self.storage.get_record(project, state.SUBSCRIPTION, state.key(queue, subscription_id))
        if record is None:
            raise NoSuchSubscription(subscription_id, project, queue)
        subscription = Subscription.from_record(record.value)
        if subscription.is_expired(self.clock()):
            raise NoSuchSubscription(subscription_id, project, queue)
        return subscription, self._delivery(project, subscription)

    def _delivery(self, project: str, subscription: Subscription) -> Delivery:
        record = self.storage.get_record(project, state.DELIVERY, subscription.key)
        return Delivery.from_record(record.value) if record else Delivery()

    def list(self, project: str, queue: str, *, marker: str | None,
             limit: int) -> list[tuple[Subscription, Delivery]]:
        """Return up to ``limit`` live subscriptions of a queue with id > marker, by id."""
        now = self.clock()
        page: list[tuple[Subscription, Delivery]] = []
        after = state.key(queue, marker) if marker else None
        while len(page) < limit:
            batch = self.storage.list_records(project, state.SUBSCRIPTION, prefix=state.queue_prefix(queue),
                                              marker=after, limit=limit)
            for record in batch:
                subscription = Subscription.from_record(record.value)
                if not subscription.is_expired(now):
                    page.append((subscription, self._delivery(project, subscription)))
            if len(batch) < limit:
                break
            after = batch[-1].key
        return page[:limit]

    # -- change ---------------------------------------------------------------

    def update(self, project: str, queue: str, subscription_id: str, document: Any,
               auth_token: str | None = None) -> None:
        """Change a subscription's subscriber, ttl and/or options (a new ttl counts from now).

        A new subscriber of the ``trust+http(s)`` kind keeps ``auth_token``, the
        token of whoever gave it; the subscriber left as it was keeps its token.

        Raises:
            ValidationFailed, SubscriptionDoesNotExist, SubscriptionExists (the
            new subscriber already has a subscription on this queue).
        """
        now = self.clock()
        changes = checks.update(document, self.limits, self.settings.notifier, now)
        subscription, _ = self.get(project, queue, subscription_id)
        if "options" in changes:
            changes["options"] = checks.unmasked(changes["options"], subscription.options)
        new_url = changes.get("subscriber", subscription.subscriber)
        checks.for_subscriber(new_url, changes.get("options", subscription.options), self.settings.smtp)
        if "subscriber" in changes:
            changes.update(self._stored_token(project, queue, subscription_id,
                                              auth_token if webhook.is_trust(new_url) else None))
        if new_url != subscription.subscriber:
            self._check_fan_out(project, queue, new_url)
            self._claim_subscriber(project, queue, subscription_id, new_url, now)
        if "ttl" in changes:
            changes["expires"] = now + changes["ttl"]
        self._change(project, queue, subscription_id, lambda s: dataclasses.replace(s, **changes))
        if new_url != subscription.subscriber:
            old_key = state.subscriber_key(queue, subscription.subscriber)
            old = self.storage.get_record(project, state.SUBSCRIBER, old_key)
            if old is not None and old.value.get("subscription_id") == subscription_id:
                self.storage.delete_record(project, state.SUBSCRIBER, old_key, old.version)

    def _check_fan_out(self, project: str, queue: str, subscriber: str) -> None:
        """Refuse a fan-out subscriber (a webhook posting to a queue of this API) in another pool."""
        target = pool_rules.fan_out_queue(subscriber)
        if target is not None:
            self.storage.check_same_pool(project, queue, target, "fan-out subscriber's queue")

    def _claim_subscriber(self, project: str, queue: str, subscription_id: str, url: str,
                          now: float) -> None:
        index_key = state.subscriber_key(queue, url)
        for _ in range(CAS_ATTEMPTS):
            try:
                self.storage.put_record(project, state.SUBSCRIBER, index_key,
                                        {"subscription_id": subscription_id}, None)
                return
            except errors.Conflict:
                existing = self._resolve_index(project, queue, index_key, url, now)
                if isinstance(existing, Subscription):
                    raise SubscriptionExists(project) from None
                if isinstance(existing, str):
                    self.storage.delete_record(project, state.SUBSCRIBER, index_key)
        raise errors.StorageUnavailable("the subscription could not be updated; try again")

    def _change(self, project: str, queue: str, subscription_id: str,
                change: Callable[[Subscription], Subscription]) -> None:
        record_key = state.key(queue, subscription_id)
        for _ in range(CAS_ATTEMPTS):
            record = self.storage.get_record(project, state.SUBSCRIPTION, record_key)
            if record is None or Subscription.from_record(record.value).is_expired(self.clock()):
                raise NoSuchSubscription(subscription_id, project, queue)
            updated = change(Subscription.from_record(record.value))
            try:
                self.storage.put_record(project, state.SUBSCRIPTION, record_key, updated.to_record(),
                                        record.version)
                return
            except errors.Conflict:
                continue
        raise errors.StorageUnavailable("the subscription is changing too often; try again")

    def confirm(self, project: str, queue: str, subscription_id: str, document: Any) -> None:
        """Set the ``confirmed`` flag of a subscription."""
        confirmed = checks.confirmation(document)
        self._change(project, queue, subscription_id, lambda s: dataclasses.replace(s, confirmed=confirmed))

    def delete(self, project: str, queue: str, subscription_id: str) -> None:
        """Delete a subscription and its delivery state; an absent one is fine."""
        record = self.storage.get_record(project, state.SUBSCRIPTION, state.key(queue, subscription_id))
        if record is not None:
            remove_subscription(self.storage, project, Subscription.from_record(record.value))

    # -- resume ---------------------------------------------------------------

    def resume(self, project: str, queue: str, subscription_id: str) -> None:
        """Restart delivery of a suspended (or retrying) subscription from its first undelivered message."""
        subscription, _ = self.get(project, queue, subscription_id)
        self._resume(project, subscription)

    def resume_subscriber(self, project: str, document: Any) -> int:
        """Resume every subscription of the project whose subscriber is the given URL.

        Returns:
            How many subscriptions were suspended and are now resumed.
        """
        url = checks.resume_request(document, self.settings.notifier)
        now = self.clock()
        resumed = 0
        for subscription in project_subscriptions(self.storage, project):
            if subscription.subscriber == url and not subscription.is_expired(now):
                resumed += self._resume(project, subscription)
        return resumed

    def _resume(self, project: str, subscription: Subscription) -> int:
        for _ in range(CAS_ATTEMPTS):
            record = self.storage.get_record(project, state.DELIVERY, subscription.key)
            if record is None:
                return 0
            delivery = Delivery.from_record(record.value)
            if not delivery.suspended and not delivery.attempts:
                return 0
            resumed = dataclasses.replace(delivery, suspended_at=None, attempts=0, attempt_marker=None,
                                          retry_at=0.0)
            try:
                self.storage.put_record(project, state.DELIVERY, subscription.key, resumed.to_record(),
                                        record.version)
            except errors.Conflict:
                continue
            LOG.info("subscription %s of %s/%s resumed", subscription.id, project, subscription.queue)
            return 1 if delivery.suspended else 0
        raise errors.StorageUnavailable("the subscription is changing too often; try again")

    def delete_queue_subscriptions(self, project: str, queue: str) -> None:
        """Delete every subscription of a queue."""
        remove_queue_subscriptions(self.storage, project, queue)
