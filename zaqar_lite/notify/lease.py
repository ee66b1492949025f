"""The notifier's lease on a subscription's delivery record.

A :class:`~zaqar_lite.storage.lease.RecordLease` on the ``delivery`` record:
every write a notifier makes to it (take the lease, renew it, advance the
cursor, record a failure, suspend, release) names the version it last read,
and every write other than a release also extends the lease. So a notifier
whose lease lapsed and was taken by another can write nothing: its next write
fails, it re-reads the record, sees another owner and stops. That is what
keeps one subscription in one notifier's hands at a time, and a cursor that
only moves forward.
"""

from __future__ import annotations

from zaqar_lite.clock import Clock
from zaqar_lite.notify import state
from zaqar_lite.notify.state import Delivery
from zaqar_lite.storage.base import Storage
from zaqar_lite.storage.lease import LeaseLost as LeaseLost
from zaqar_lite.storage.lease import RecordLease


class Lease(RecordLease[Delivery]):
    """One notifier's hold on one subscription's delivery record."""

    def __init__(self, storage: Storage, project: str, record_key: str, owner: str,
                 seconds: float, clock: Clock) -> None:
        super().__init__(storage, project, state.DELIVERY, record_key, owner, seconds, clock,
                         Delivery.from_record, Delivery())

    @property
    def delivery(self) -> Delivery:
        """Return the delivery state as last read or written."""
        return self.state
