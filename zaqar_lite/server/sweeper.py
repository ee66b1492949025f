"""The background sweeper: expiry and dead-letter rules applied to every queue, periodically.

``zaqar-lite serve`` starts :class:`SweeperThread` in every worker; a file lock
lets exactly one of them sweep at a time on a machine (the others wait on the
lock, so a dead worker's duty passes on). Sweeps from several machines are
harmless: every step is atomic in the store.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import tempfile
import threading
from typing import IO

from zaqar_lite import metrics
from zaqar_lite.errors import StorageUnavailable
from zaqar_lite.service import Messaging

LOG = logging.getLogger(__name__)


def lock_path(storage_uri: str, duty: str = "sweep") -> str:
    """Return the lock file shared by the workers serving one store, for one duty."""
    digest = hashlib.sha1(storage_uri.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"zaqar-lite-{duty}-{digest}.lock")


class MachineLock:
    """An exclusive lock on a file, taken without waiting and held until the process ends.

    It makes one worker of a machine do a duty (sweeping, running redrive
    tasks); when that worker dies, the lock is free and another takes it.
    """

    def __init__(self, path: str, duty: str) -> None:
        self.path = path
        self.duty = duty
        self._handle: IO[str] | None = None

    def held(self) -> bool:
        """Return whether this process holds the lock, taking it if it is free."""
        if self._handle is None:
            handle = open(self.path, "a")  # noqa: SIM115 - held for the process's life
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                return False
            self._handle = handle
            LOG.info("this worker (pid %d) runs the %s", os.getpid(), self.duty)
        return True


def sweep_once(messaging: Messaging) -> None:
    """Sweep every queue once, logging what moved; an unreachable store is logged, not raised."""
    try:
        result = messaging.sweep()
    except StorageUnavailable as exc:
        LOG.warning("sweep skipped, storage unavailable: %s", exc)
        metrics.STORAGE_ERRORS.labels(messaging.storage.name).inc()
        return
    if result.dead_lettered or result.discarded:
        LOG.info("sweep: %d dead-lettered, %d discarded", result.dead_lettered, result.discarded)


class SweeperThread(threading.Thread):
    """A daemon thread that sweeps every ``interval`` seconds while it holds the lock."""

    def __init__(self, messaging: Messaging, interval: float, lock_file: str) -> None:
        super().__init__(name="zaqar-lite-sweeper", daemon=True)
        self.messaging = messaging
        self.interval = interval
        self.lock_file = lock_file
        self.stopped = threading.Event()
        self._lock = MachineLock(lock_file, "sweeper")

    def _holds_lock(self) -> bool:
        return self._lock.held()

    def run(self) -> None:
        """Sweep until stopped; never let an exception end the thread."""
        while not self.stopped.wait(self.interval):
            try:
                if self._holds_lock():
                    sweep_once(self.messaging)
            except Exception:  # noqa: BLE001 - the sweeper must outlive any single failure
                LOG.exception("sweep failed")
