"""Redrive tasks, kept in a store's versioned records: at most one running per queue.

:class:`RedriveTasks` is built over the records of
:mod:`zaqar_lite.storage.records` (``RedriveTasks(records)``), so every
driver stores tasks as it stores subscriptions, and every change is a
compare-and-set:

===================  =================  ==============================================
kind                 key                value
===================  =================  ==============================================
``redrive_task``     ``<queue>/<id>``   the task (:class:`~zaqar_lite.models.RedriveTask`)
``redrive_running``  ``<queue>``        ``{"task_id": id, "task": <its first record>}``:
                                        the queue's running task (one at most)
===================  =================  ==============================================

A task is created in two steps, each a compare-and-set: the ``redrive_running``
record first (its creation fails while another task holds the queue), then
the task record. A start that finds a ``redrive_running`` record whose task
record is missing (a crash in between) writes that task record from the copy
it holds; one whose task is no longer running removes it and tries again.
Queue names cannot hold ``/``, so ``<queue>/`` selects one queue's tasks.
The server running a task holds a lease on its task record
(:class:`~zaqar_lite.storage.lease.RecordLease`, :meth:`RedriveTasks.lease`).
"""

from __future__ import annotations

from zaqar_lite import errors
from zaqar_lite.claims.redrive import RUNNING as RUNNING_STATUS
from zaqar_lite.clock import Clock
from zaqar_lite.models import RedriveTask
from zaqar_lite.storage.lease import RecordLease
from zaqar_lite.storage.records import RecordStore

TASK = "redrive_task"
RUNNING = "redrive_running"
#: how often a start tries again after removing a finished task's ``redrive_running`` record
START_ATTEMPTS = 5
PAGE = 1000


def task_key(queue: str, task_id: str) -> str:
    """Return the key of a task's record."""
    return f"{queue}/{task_id}"


class RedriveTasks:
    """The redrive tasks kept in a store's records; every method may raise StorageUnavailable."""

    def __init__(self, records: RecordStore) -> None:
        self.records = records

    def create(self, project: str, task: RedriveTask) -> None:
        """Store a new running task, unless another task is running on its queue.

        Atomic as to the rule: of concurrent creations on one queue, one wins.

        Raises:
            RedriveTaskRunning: a task is running on the queue (naming it).
        """
        for _ in range(START_ATTEMPTS):
            try:
                self.records.put_record(project, RUNNING, task.queue,
                                {"task_id": task.id, "task": task.to_record()}, None)
            except errors.Conflict:
                self._resolve_running(project, task.queue)
                continue
            self._write_first(project, task)
            return
        raise errors.StorageUnavailable(
            f"the redrive task of queue {task.queue} could not be started; try again")

    def _resolve_running(self, project: str, queue: str) -> None:
        """Look at the queue's ``redrive_running`` record: raise if its task runs, else remove it."""
        lock = self.records.get_record(project, RUNNING, queue)
        if lock is None:
            return
        found = self.records.get_record(project, TASK, task_key(queue, lock.value["task_id"]))
        if found is None:  # its start stopped between its two writes: finish it
            self._write_first(project, RedriveTask.from_record(lock.value["task"]))
            raise errors.RedriveTaskRunning(queue, lock.value["task_id"])
        if RedriveTask.from_record(found.value).status == RUNNING_STATUS:
            raise errors.RedriveTaskRunning(queue, lock.value["task_id"])
        self.records.delete_record(project, RUNNING, queue, lock.version)

    def _write_first(self, project: str, task: RedriveTask) -> None:
        try:
            self.records.put_record(project, TASK, task_key(task.queue, task.id), task.to_record(), None)
        except errors.Conflict:
            pass  # written already, by another start that found it half-made

    def get(self, project: str, queue: str, task_id: str) -> tuple[RedriveTask, int] | None:
        """Return a task of a queue and the version of its record, or None if absent."""
        found = self.records.get_record(project, TASK, task_key(queue, task_id))
        return None if found is None else (RedriveTask.from_record(found.value), found.version)

    def of(self, project: str, queue: str | None = None) -> list[RedriveTask]:
        """Return the tasks of a queue (of every queue of the project when None), by queue and id."""
        prefix = "" if queue is None else task_key(queue, "")
        found: list[RedriveTask] = []
        marker = None
        while True:
            page = self.records.list_records(project, TASK, prefix=prefix, marker=marker, limit=PAGE)
            found.extend(RedriveTask.from_record(r.value) for r in page)
            if len(page) < PAGE:
                return found
            marker = page[-1].key

    def update(self, project: str, task: RedriveTask, expected_version: int) -> int:
        """Write a task by compare-and-set on the version read; return the new version.

        Raises:
            Conflict: the record changed since it was read (or is gone).
        """
        return self.records.put_record(project, TASK, task_key(task.queue, task.id), task.to_record(),
                               expected_version)

    def delete(self, project: str, queue: str, task_id: str) -> bool:
        """Forget a task; return whether it existed. Its queue's running mark is left to its runner."""
        return self.records.delete_record(project, TASK, task_key(queue, task_id))

    def release_queue(self, project: str, queue: str, task_id: str) -> None:
        """Let a new task start on a queue: remove its ``redrive_running`` record if it names this task."""
        lock = self.records.get_record(project, RUNNING, queue)
        if lock is not None and lock.value["task_id"] == task_id:
            self.records.delete_record(project, RUNNING, queue, lock.version)

    def running(self) -> list[tuple[str, str, str]]:
        """Return ``(project, queue, task id)`` of every queue's running task, in every project."""
        running: list[tuple[str, str, str]] = []
        for project in self.records.record_projects(RUNNING):
            marker = None
            while True:
                page = self.records.list_records(project, RUNNING, marker=marker, limit=PAGE)
                running.extend((project, r.key, str(r.value["task_id"])) for r in page)
                if len(page) < PAGE:
                    break
                marker = page[-1].key
        return running

    def lease(self, project: str, queue: str, task_id: str, owner: str, seconds: float,
              clock: Clock) -> RecordLease[RedriveTask]:
        """Return ``owner``'s lease on a task's record (not taken yet: call its ``acquire``)."""
        initial = RedriveTask(id=task_id, queue=queue, status=RUNNING_STATUS, created=0.0)
        return RecordLease(self.records, project, TASK, task_key(queue, task_id), owner, seconds, clock,
                           RedriveTask.from_record, initial)
