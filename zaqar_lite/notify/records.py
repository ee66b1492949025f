"""A project's stored subscriptions: listed, opened for delivery, removed.

The notifier reads and removes subscriptions through these, and so do the
subscription service (:mod:`zaqar_lite.service.subscriptions`) and a queue's
delete and purge; the records' layout is :mod:`zaqar_lite.notify.state`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from zaqar_lite.notify import state
from zaqar_lite.notify.state import Subscription
from zaqar_lite.rules import encryption
from zaqar_lite.storage.base import Storage

#: records read per page when listing a project's subscriptions
PAGE = 1000


def project_subscriptions(storage: Storage, project: str, queue: str | None = None) -> Iterator[Subscription]:
    """Yield every stored subscription of a project (or of one queue), expired ones included."""
    prefix = state.queue_prefix(queue) if queue is not None else ""
    marker = None
    while True:
        batch = storage.list_records(project, state.SUBSCRIPTION, prefix=prefix, marker=marker, limit=PAGE)
        for record in batch:
            yield Subscription.from_record(record.value)
        if len(batch) < PAGE:
            return
        marker = batch[-1].key


def with_token(project: str, subscription: Subscription, keyring: encryption.Keyring) -> Subscription:
    """Return a subscription as delivery uses it: its sealed token opened into ``auth_token``.

    Raises:
        Unopenable: the token was sealed with a key the keyring does not hold (or altered).
    """
    if subscription.sealed_auth_token is None:
        return subscription
    token = encryption.open_token(subscription.sealed_auth_token, keyring, project, subscription.queue,
                                  subscription.id)
    return dataclasses.replace(subscription, auth_token=token, sealed_auth_token=None)


def remove_subscription(storage: Storage, project: str, subscription: Subscription) -> None:
    """Delete a subscription's records: the document, its delivery state, its subscriber record."""
    storage.delete_record(project, state.SUBSCRIPTION, subscription.key)
    storage.delete_record(project, state.DELIVERY, subscription.key)
    index_key = state.subscriber_key(subscription.queue, subscription.subscriber)
    index = storage.get_record(project, state.SUBSCRIBER, index_key)
    if index is not None and index.value.get("subscription_id") == subscription.id:
        storage.delete_record(project, state.SUBSCRIBER, index_key, index.version)


def remove_queue_subscriptions(storage: Storage, project: str, queue: str) -> None:
    """Delete every subscription of a queue (on queue delete and purge)."""
    for subscription in list(project_subscriptions(storage, project, queue)):
        remove_subscription(storage, project, subscription)
