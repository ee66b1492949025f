"""The dead-letter circuit breaker's windows, kept in a store's versioned records.

:class:`BreakerWindows` is built over the records of
:mod:`zaqar_lite.storage.records` (``BreakerWindows(records)``), as the redrive
tasks are: one record per queue that sets ``_dead_letter_breaker``.

======================  ===========  ===========================================
kind                    key          value
======================  ===========  ===========================================
``breaker_window``      ``<queue>``  the window's counts
                                     (:class:`~zaqar_lite.claims.pause.Window`)
======================  ===========  ===========================================

Every count is a compare-and-set of that record (read, count with
:func:`zaqar_lite.claims.pause.counted`, write at the version read; a write
that lost to another worker's reads again), so the counts of every worker and
process on one store add up, none lost, and of the writes into one window
exactly one is told that it tripped the breaker.
"""

from __future__ import annotations

from collections.abc import Callable

from zaqar_lite import errors
from zaqar_lite.claims.pause import Window
from zaqar_lite.storage.records import RecordStore

WINDOW = "breaker_window"
#: compare-and-sets lost to other writers before a count gives up (it is then not counted)
COUNT_ATTEMPTS = 20


class BreakerWindows:
    """The breaker windows of a store's queues; every method may raise StorageUnavailable."""

    def __init__(self, records: RecordStore) -> None:
        self.records = records

    def count(self, project: str, queue: str,
              rule: Callable[[Window | None], tuple[Window, bool]]) -> tuple[Window, bool]:
        """Apply ``rule`` to the queue's window and store what it returns, by compare-and-set.

        Returns:
            The window stored and whether this count tripped the breaker.

        Raises:
            StorageUnavailable: the record kept changing (or the store did not answer).
        """
        for _ in range(COUNT_ATTEMPTS):
            found = self.records.get_record(project, WINDOW, queue)
            window, trips = rule(Window.from_record(found.value) if found else None)
            try:
                self.records.put_record(project, WINDOW, queue, window.to_record(),
                                        found.version if found else None)
            except errors.Conflict:
                continue
            return window, trips
        raise errors.StorageUnavailable(f"the breaker window of queue {queue} kept changing")

    def get(self, project: str, queue: str) -> Window | None:
        """Return the queue's current window, or None when nothing was counted."""
        found = self.records.get_record(project, WINDOW, queue)
        return Window.from_record(found.value) if found else None

    def forget(self, project: str, queue: str) -> None:
        """Remove the queue's window (the queue was deleted)."""
        self.records.delete_record(project, WINDOW, queue)
