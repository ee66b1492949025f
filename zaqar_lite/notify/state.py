"""How subscription state is laid out in the store's versioned records.

Every piece lives in a record of :meth:`zaqar_lite.storage.base.Storage.put_record`,
so it works on every driver and every change is a compare-and-set:

========================  ==========================  ===================================
kind                      key                         value
========================  ==========================  ===================================
``subscription``          ``<queue>/<id>``            the document the API serves
                                                      (:class:`Subscription`)
``subscriber``            ``<queue>/<sha256(url)>``   ``{"subscription_id": id}``: makes
                                                      (project, queue, subscriber) unique
``delivery``              ``<queue>/<id>``            cursor, lease, retry and suspension
                                                      (:class:`Delivery`)
``notifier``              ``<notifier id>``           a live notifier's heartbeat, under
                                                      the project ``NOTIFIER_PROJECT``
========================  ==========================  ===================================

Queue names cannot hold ``/``, so ``<queue>/`` is a prefix that selects exactly
one queue's records.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any

SUBSCRIPTION = "subscription"
SUBSCRIBER = "subscriber"
DELIVERY = "delivery"
NOTIFIER = "notifier"
#: the project under which notifiers announce themselves (no tenant's data lives there)
NOTIFIER_PROJECT = "zaqar-lite-notifiers"


def key(queue: str, subscription_id: str) -> str:
    """Return the key of a subscription's ``subscription`` and ``delivery`` records."""
    return f"{queue}/{subscription_id}"


def subscriber_key(queue: str, subscriber: str) -> str:
    """Return the key of the record that holds one subscriber URL of a queue."""
    return f"{queue}/{hashlib.sha256(subscriber.encode()).hexdigest()}"


def queue_prefix(queue: str) -> str:
    """Return the key prefix of one queue's records."""
    return f"{queue}/"


def _known(cls: type, value: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in value.items() if k in names}


@dataclasses.dataclass(frozen=True)
class Subscription:
    """A subscription as the client created it; ``expires`` is ``updated + ttl``.

    ``auth_token`` is the ``X-Auth-Token`` a ``trust+http(s)`` subscription was
    created (or last given its subscriber) with, sent along with its webhooks;
    None in ``noauth`` mode and for other subscribers. The API never shows it.
    On a server with ``[encryption] keys`` it is stored sealed instead, as
    ``sealed_auth_token`` (an envelope of :mod:`zaqar_lite.rules.encryption`,
    bound to the project, queue and id), and ``auth_token`` is None; the
    notifier opens it for each attempt.
    """

    id: str
    queue: str
    subscriber: str
    ttl: int
    options: dict[str, Any]
    created: float
    expires: float
    confirmed: bool = False
    auth_token: str | None = None
    sealed_auth_token: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        """Return the record key of this subscription."""
        return key(self.queue, self.id)

    def is_expired(self, now: float) -> bool:
        """Return whether the subscription's ttl has run out."""
        return self.expires <= now

    def to_record(self) -> dict[str, Any]:
        """Return the record value."""
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> Subscription:
        """Build a subscription from a record value."""
        return cls(**_known(cls, value))


@dataclasses.dataclass(frozen=True)
class Delivery:
    """Where delivery to one subscription stands.

    ``cursor`` is the marker of the last message the subscriber acknowledged
    (None: none yet; the next message is the first with a greater marker).
    ``owner``/``lease_expires`` is the notifier lease. ``attempts`` counts the
    failed attempts on the message whose marker is ``attempt_marker``, and
    ``retry_at`` is when the next one is due. ``suspended_at`` is set when the
    retry policy ran out; delivery then stops until a resume.
    """

    cursor: int | None = None
    owner: str | None = None
    lease_expires: float = 0.0
    attempts: int = 0
    attempt_marker: int | None = None
    retry_at: float = 0.0
    last_error: str | None = None
    last_error_at: float | None = None
    suspended_at: float | None = None
    delivered: int = 0
    last_delivered_at: float | None = None
    created: float = 0.0

    def held_by(self, owner: str, now: float) -> bool:
        """Return whether ``owner`` holds a live lease at ``now``."""
        return self.owner == owner and self.lease_expires > now

    def lease_is_free(self, now: float) -> bool:
        """Return whether no notifier holds a live lease at ``now``."""
        return self.owner is None or self.lease_expires <= now

    @property
    def suspended(self) -> bool:
        """Return whether delivery is suspended."""
        return self.suspended_at is not None

    def to_record(self) -> dict[str, Any]:
        """Return the record value."""
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> Delivery:
        """Build a delivery state from a record value."""
        return cls(**_known(cls, value))
