"""The redrive task runner: moves the dead letters of every running redrive task, batch by batch.

``zaqar-lite serve`` starts :class:`RedriveRunnerThread` in every worker; a
file lock (:class:`~zaqar_lite.server.sweeper.MachineLock`) lets one worker of a
machine run tasks at a time, as the sweeper. Across machines, each task is
held by one server at a time through a lease on its record
(:class:`~zaqar_lite.storage.lease.RecordLease`, as the notifier's lease): a
server that dies keeps its tasks until their leases lapse, then any server
(the restarted one too) resumes them from their recorded progress.

Each task moves at most ``max_per_second`` messages a second: the runner
moves a batch of at most one second's worth, then waits until the task's
count since it took the lease allows the next.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.errors import StorageUnavailable
from zaqar_lite.models import RedriveTask
from zaqar_lite.server.sweeper import MachineLock
from zaqar_lite.service import Messaging
from zaqar_lite.storage.lease import LeaseLost, RecordLease

LOG = logging.getLogger(__name__)


def new_owner() -> str:
    """Return a name for this runner's leases: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclasses.dataclass
class HeldTask:
    """A task this runner holds: its lease, and what it moved since it took it (for the rate)."""

    lease: RecordLease[RedriveTask]
    since: float
    done: int = 0

    def wait(self, now: float) -> float:
        """Return the seconds until the task's rate allows its next batch."""
        return redrive_policy.throttle_wait(self.since, self.done, now, self.lease.state.max_per_second)


class RedriveRunner:
    """Runs the store's redrive tasks: takes the leases of running ones and advances those due."""

    def __init__(self, messaging: Messaging, interval: float, owner: str | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.messaging = messaging
        self.interval = interval
        self.owner = owner or new_owner()
        #: the time source of the rates (a test passes one that stands still)
        self.monotonic = monotonic
        self.held: dict[tuple[str, str, str], HeldTask] = {}
        self._looked = -float("inf")

    def step(self) -> float:
        """Take free tasks (every ``interval``), move a batch of each task due; return the seconds to wait."""
        now = self.monotonic()
        if now - self._looked >= self.interval:
            self._looked = now
            self._take_free_tasks()
        waits = [self.interval]
        for key, held in list(self.held.items()):
            wait = held.wait(self.monotonic())
            if wait <= 0:
                wait = self._advance(key, held)
            waits.append(wait)
        return max(0.0, min(waits))

    def _take_free_tasks(self) -> None:
        for key in self.messaging.running_redrive_tasks():
            if key in self.held:
                continue
            lease = self.messaging.redrive_task_lease(*key, self.owner)
            if lease.acquire():
                LOG.info("redrive task %s on %s/%s taken by %s", key[2], key[0], key[1], self.owner)
                self.held[key] = HeldTask(lease, since=self.monotonic())

    def _advance(self, key: tuple[str, str, str], held: HeldTask) -> float:
        """Move one batch of a task; return the seconds until its next (the interval once it is gone)."""
        try:
            held.lease.ensure(held.lease.seconds / 2)
            tried = self.messaging.advance_redrive_task(held.lease)
        except LeaseLost as exc:
            LOG.info("redrive task %s is no longer ours: %s", key[2], exc)
            tried = None
        except StorageUnavailable as exc:
            LOG.warning("redrive task %s waits, storage unavailable: %s", key[2], exc)
            return self.interval
        except Exception as exc:  # noqa: BLE001 - a task that cannot go on is marked failed, not retried forever
            LOG.exception("redrive task %s failed", key[2])
            self._fail(held, f"{type(exc).__name__}: {exc}")
            tried = None
        if tried is None:
            del self.held[key]
            return self.interval
        held.done += tried
        return held.wait(self.monotonic())

    def _fail(self, held: HeldTask, error: str) -> None:
        try:
            self.messaging.fail_redrive_task(held.lease, error)
        except (LeaseLost, StorageUnavailable) as exc:
            LOG.warning("redrive task %s could not be marked failed: %s", held.lease.key, exc)


class RedriveRunnerThread(threading.Thread):
    """A daemon thread that runs redrive tasks while its worker holds the machine's lock."""

    def __init__(self, messaging: Messaging, interval: float, lock_file: str) -> None:
        super().__init__(name="zaqar-lite-redrive-runner", daemon=True)
        self.runner = RedriveRunner(messaging, interval)
        self.interval = interval
        self.stopped = threading.Event()
        self._lock = MachineLock(lock_file, "redrive task runner")

    def run(self) -> None:
        """Run tasks until stopped; never let an exception end the thread."""
        wait = self.interval
        while not self.stopped.wait(wait):
            wait = self.interval
            try:
                if self._lock.held():
                    wait = self.runner.step()
            except StorageUnavailable as exc:
                LOG.warning("redrive tasks wait, storage unavailable: %s", exc)
            except Exception:  # noqa: BLE001 - the runner must outlive any single failure
                LOG.exception("redrive task runner step failed")
