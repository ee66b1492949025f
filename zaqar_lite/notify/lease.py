"""A notifier's lease on one subscription: the ``delivery`` record, written only by compare-and-set.

Every write a notifier makes to a delivery record (take the lease, renew it,
advance the cursor, record a failure, suspend, release) names the version it
last read, and every write other than a release also extends the lease. So a
notifier whose lease lapsed and was taken by another can write nothing: its
next write fails, it re-reads the record, sees another owner and stops. That
is what keeps one subscription in one notifier's hands at a time, and a
cursor that only moves forward.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from zaqar_lite import errors
from zaqar_lite.clock import Clock
from zaqar_lite.notify import state
from zaqar_lite.notify.state import Delivery
from zaqar_lite.storage.base import Storage

#: how often a write is tried again when the API changed the record in between
MERGE_ATTEMPTS = 10


class LeaseLost(Exception):
    """Another notifier holds the subscription now, or it was deleted."""


class Lease:
    """One notifier's hold on one subscription's delivery record."""

    def __init__(self, storage: Storage, project: str, record_key: str, owner: str,
                 seconds: float, clock: Clock) -> None:
        self.storage = storage
        self.project = project
        self.key = record_key
        self.owner = owner
        self.seconds = seconds
        self.clock = clock
        self.delivery = Delivery()
        self.version = 0

    def _read(self) -> Delivery:
        record = self.storage.get_record(self.project, state.DELIVERY, self.key)
        if record is None:
            raise LeaseLost(f"{self.key} has no delivery record")
        self.delivery, self.version = Delivery.from_record(record.value), record.version
        return self.delivery

    def acquire(self) -> bool:
        """Take the lease if it is free, or renew ours if half of it has run; return whether we hold it."""
        try:
            current = self._read()
        except LeaseLost:
            return False
        now = self.clock()
        if current.owner == self.owner and current.lease_expires - now > self.seconds / 2:
            return True
        if current.owner != self.owner and not current.lease_is_free(now):
            return False
        try:
            self.write(lambda d: d, take=True)
        except LeaseLost:
            return False
        return True

    def write(self, change: Callable[[Delivery], Delivery], take: bool = False) -> Delivery:
        """Apply a change to the delivery record and extend the lease, by compare-and-set.

        If the API wrote in between (a resume), the change is applied again to
        the fresh record.

        Raises:
            LeaseLost: another notifier took the lease, or the record is gone.
        """
        for _ in range(MERGE_ATTEMPTS):
            if not take and self.delivery.owner != self.owner:
                raise LeaseLost(f"{self.key} is held by {self.delivery.owner}")
            updated = dataclasses.replace(change(self.delivery), owner=self.owner,
                                          lease_expires=self.clock() + self.seconds)
            try:
                self.version = self.storage.put_record(self.project, state.DELIVERY, self.key,
                                                       updated.to_record(), self.version)
                self.delivery = updated
                return updated
            except errors.Conflict:
                fresh = self._read()
                if take and not (fresh.owner == self.owner or fresh.lease_is_free(self.clock())):
                    raise LeaseLost(f"{self.key} was taken by {fresh.owner}") from None
        raise LeaseLost(f"{self.key} keeps changing")

    def ensure(self, seconds_left: float) -> None:
        """Renew the lease unless it has at least ``seconds_left`` to run."""
        if self.delivery.lease_expires - self.clock() < seconds_left:
            self.write(lambda d: d)

    def release(self, change: Callable[[Delivery], Delivery] = lambda d: d, to_anyone: bool = False) -> None:
        """Apply a last change and give the lease up.

        Args:
            change: the last change to the record.
            to_anyone: let any notifier take the subscription at once (on
                shutdown); otherwise the one that hashing prefers takes it.
        """
        for _ in range(MERGE_ATTEMPTS):
            if self.delivery.owner != self.owner:
                return
            released = dataclasses.replace(change(self.delivery), owner=None,
                                           lease_expires=0.0 if to_anyone else self.clock())
            try:
                self.version = self.storage.put_record(self.project, state.DELIVERY, self.key,
                                                       released.to_record(), self.version)
                self.delivery = released
                return
            except errors.Conflict:
                try:
                    self._read()
                except LeaseLost:
                    return
