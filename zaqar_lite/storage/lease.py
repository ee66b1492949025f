"""A lease on one versioned record, written only by compare-and-set.

The record (:mod:`zaqar_lite.storage.records`) holds some work's state and its
lease (``owner``, ``lease_expires``): :class:`RecordLease` works on any such
record, for whichever feature keeps its work in one (the redrive tasks of
:mod:`zaqar_lite.storage.tasks`; the notifier's delivery records,
:class:`zaqar_lite.notify.lease.Lease`).

Every write a holder makes to the record names the version it last read, and
every write other than a release also extends the lease. So a holder whose
lease lapsed and was taken by another can write nothing: its next write fails,
it re-reads the record, sees another owner and stops. That is what keeps one
record's work in one holder's hands at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from zaqar_lite import errors
from zaqar_lite.clock import Clock
from zaqar_lite.storage.records import RecordStore

#: how often a write is tried again when the API changed the record in between
MERGE_ATTEMPTS = 10


class LeaseLost(Exception):
    """Another holder has the lease now (another notifier the subscription), or the record was deleted."""


class Leased(Protocol):
    """The state of a leased record: a dataclass with a lease holder and its end."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @property
    def owner(self) -> str | None:
        """Return who holds the lease (None: nobody)."""

    @property
    def lease_expires(self) -> float:
        """Return when the lease ends unless renewed."""

    def lease_is_free(self, now: float) -> bool:
        """Return whether nobody holds a live lease at ``now``."""

    def to_record(self) -> dict[str, Any]:
        """Return the record value."""


StateT = TypeVar("StateT", bound=Leased)


class RecordLease(Generic[StateT]):
    """One holder's hold on one versioned record (``kind``, ``key``) whose state carries its lease."""

    def __init__(self, records: RecordStore, project: str, kind: str, record_key: str, owner: str,
                 seconds: float, clock: Clock, decode: Callable[[Mapping[str, Any]], StateT],
                 initial: StateT) -> None:
        self.records = records
        self.project = project
        self.kind = kind
        self.key = record_key
        self.owner = owner
        self.seconds = seconds
        self.clock = clock
        self.decode = decode
        self.state = initial
        self.version = 0

    def _read(self) -> StateT:
        record = self.records.get_record(self.project, self.kind, self.key)
        if record is None:
            raise LeaseLost(f"{self.key} has no {self.kind} record")
        self.state, self.version = self.decode(record.value), record.version
        return self.state

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

    def write(self, change: Callable[[StateT], StateT], take: bool = False) -> StateT:
        """Apply a change to the record and extend the lease, by compare-and-set.

        If the API wrote in between (a resume), the change is applied again to
        the fresh record.

        Raises:
            LeaseLost: another holder took the lease, or the record is gone.
        """
        for _ in range(MERGE_ATTEMPTS):
            if not take and self.state.owner != self.owner:
                raise LeaseLost(f"{self.key} is held by {self.state.owner}")
            updated = dataclasses.replace(change(self.state), owner=self.owner,
                                          lease_expires=self.clock() + self.seconds)
            try:
                self.version = self.records.put_record(self.project, self.kind, self.key,
                                                       updated.to_record(), self.version)
                self.state = updated
                return updated
            except errors.Conflict:
                fresh = self._read()
                if take and not (fresh.owner == self.owner or fresh.lease_is_free(self.clock())):
                    raise LeaseLost(f"{self.key} was taken by {fresh.owner}") from None
        raise LeaseLost(f"{self.key} keeps changing")

    def ensure(self, seconds_left: float) -> None:
        """Renew the lease unless it has at least ``seconds_left`` to run."""
        if self.state.lease_expires - self.clock() < seconds_left:
            self.write(lambda d: d)

    def release(self, change: Callable[[StateT], StateT] = lambda d: d, to_anyone: bool = False) -> None:
        """Apply a last change and give the lease up.

        Args:
            change: the last change to the record.
            to_anyone: let any holder take the record at once (a notifier
                shutting down); otherwise the notifier that hashing prefers
                takes a subscription.
        """
        for _ in range(MERGE_ATTEMPTS):
            if self.state.owner != self.owner:
                return
            released = dataclasses.replace(change(self.state), owner=None,
                                           lease_expires=0.0 if to_anyone else self.clock())
            try:
                self.version = self.records.put_record(self.project, self.kind, self.key,
                                                       released.to_record(), self.version)
                self.state = released
                return
            except errors.Conflict:
                try:
                    self._read()
                except LeaseLost:
                    return
