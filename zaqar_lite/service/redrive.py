"""Redrive: moving dead letters back, at once or as a tracked task."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence

from zaqar_lite import errors
from zaqar_lite import metrics as counted
from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.models import (
    Message,
    Move,
    RedriveRequest,
    RedriveResult,
    RedriveTask,
)
from zaqar_lite.service.core import LOG, ServiceBase
from zaqar_lite.storage.lease import RecordLease

#: reads of a redrive task whose compare-and-set keeps losing to its runner, before giving up
CHANGE_ATTEMPTS = 20


class Redrive(ServiceBase):
    """Redrive of dead letters, blocking or as a task the redrive runner advances."""

    # -- redrive --------------------------------------------------------------

    def _dead_letters(self, project: str, queue: str, request: RedriveRequest,
                      now: float) -> list[tuple[Message, str]]:
        """Return the dead letters a redrive selects, each with its target queue.

        They are unexpired and unclaimed, in post order, at most ``request.limit``.
        """
        return list(itertools.islice(self._selected(project, queue, request, now), request.limit))

    def _selected(self, project: str, queue: str, request: RedriveRequest, now: float,
                  after: int | None = None, until: int | None = None) -> Iterator[tuple[Message, str]]:
        """Yield the dead letters a redrive selects with their target queues, FIFO, read a page at a time.

        Only messages with a marker above ``after`` and up to ``until`` (when given).
        """
        wanted = request.filter
        pages = self._pages(project, queue, now, after) if wanted.ids is None else [
            self._by_ids(project, queue, sorted(wanted.ids), now)]
        for page in pages:
            for message in page:
                if until is not None and message.marker > until:
                    return
                if after is not None and message.marker <= after:
                    continue
                target = redrive_policy.selected_target(message, queue, request, now)
                if target is not None:
                    yield message, target

    def _by_ids(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        """Return the unexpired messages of a queue among ids, FIFO."""
        size = redrive_policy.BATCH_SIZE
        found = [m for start in range(0, len(ids), size)
                 for m in self.storage.get_messages(project, queue, ids[start:start + size], now)]
        return sorted(found, key=lambda m: m.marker)

    def _pages(self, project: str, queue: str, now: float,
               marker: int | None = None) -> Iterator[list[Message]]:
        """Yield the unexpired, unclaimed messages (delayed ones too) after ``marker``, FIFO, by pages."""
        while True:
            page = self.storage.list_messages(
                project, queue, now=now, marker=marker, limit=redrive_policy.BATCH_SIZE,
                include_claimed=False, include_delayed=True, exclude_client_id=None)
            yield page
            if len(page) < redrive_policy.BATCH_SIZE:
                return
            marker = page[-1].marker

    def _move_batch(self, project: str, queue: str, batch: Sequence[tuple[Message, str]]) -> int:
        """Move a batch of selected dead letters to their targets, each guarded; return how many moved."""
        at, min_ttl = self.clock(), self.limits.min_message_ttl
        moved = 0
        for target, messages in redrive_policy.by_target(batch).items():
            moves = [Move(m, redrive_policy.redriven(m, at, min_ttl)) for m in messages]
            moved += len(self.storage.move_messages(project, queue, moves, target, at))
            self.wake_up(project, target)
        counted.MESSAGES_REDRIVEN.inc(moved)
        return moved

    def _check_destination(self, project: str, queue: str, request: RedriveRequest) -> None:
        """Refuse a redrive ``destination`` that does not exist, unless the request may create it.

        Raises:
            ValidationFailed: also when the destination is in another pool than the queue.
        """
        destination = request.destination
        if destination is not None:  # linked queues share a pool (storage/pools/router.py)
            self.storage.check_same_pool(project, queue, destination, "redrive destination")
        if destination is not None and not request.create_destination \
                and self.storage.get_queue_metadata(project, destination) is None:
            raise errors.ValidationFailed(
                f"destination queue {destination} does not exist in this project; create it first, "
                'or send "create_destination": true.')

    def redrive(self, project: str, queue: str, request: RedriveRequest) -> tuple[RedriveResult, float]:
        """Move the dead letters a request selects back to their source queue or to its destination.

        Messages go in batches (at most ``max_per_second`` a second when
        given, waiting between batches); no batch starts once
        ``max_redrive_seconds`` have passed, so a call may move fewer than it
        selected (the client calls again). A dry run moves nothing.

        Raises:
            ValidationFailed: the destination does not exist and the request
                does not ask to create it.

        Returns:
            What was selected and moved, and the time the selection was made at.
        """
        self._check_destination(project, queue, request)
        now = self.clock()
        selected = self._dead_letters(project, queue, request, now)
        sample = selected[:redrive_policy.SAMPLE_SIZE] if request.dry_run else []
        if request.dry_run or not selected:
            warning = None if selected else redrive_policy.not_a_dead_letter_queue(
                queue, self._every_queue(project), self.settings.default_dead_letter_queue)
            return RedriveResult(matched=len(selected), redriven=0, sample=sample, warning=warning), now
        started, done, moved = self.clock(), 0, 0
        for batch in redrive_policy.batches(selected, request.max_per_second):
            wait = redrive_policy.throttle_wait(started, done, self.clock(), request.max_per_second)
            if done and self.clock() + wait - now > self.limits.max_redrive_seconds:
                break
            if wait > 0:
                self.sleep(wait)
            moved += self._move_batch(project, queue, batch)
            done += len(batch)
        LOG.info("redrive of %s/%s: %d of %d selected dead letters moved",
                 project, queue, moved, len(selected))
        return RedriveResult(matched=len(selected), redriven=moved), now

    # -- redrive tasks --------------------------------------------------------
    # The calls a client (the API, a console) makes: start, list, read, cancel;
    # then the steps the task runner (zaqar_lite/server/redrive_runner.py) takes.

    def start_redrive_task(self, project: str, queue: str, request: RedriveRequest) -> RedriveTask:
        """Start a redrive task on a dead-letter queue and return it (running, nothing moved yet).

        It moves the dead letters the request selects that the queue holds now
        (up to its newest message), ``max_per_second`` at most, in the
        background; the ended tasks of the queue beyond ``redrive_tasks_kept``
        are forgotten.

        Raises:
            QueueDoesNotExist: no such queue. RedriveTaskRunning: a task runs on it.
        """
        now = self.clock()
        if self.storage.get_queue_metadata(project, queue) is None:
            raise errors.QueueDoesNotExist(queue, project)
        self._check_destination(project, queue, request)
        newest = self.storage.queue_stats(project, queue, now).newest
        task = RedriveTask(
            id=self.ids(), queue=queue, status=redrive_policy.RUNNING, created=now,
            destination=request.destination, filter=request.filter, limit=request.limit or None,
            max_per_second=request.max_per_second or float(self.limits.max_redrive_rate),
            until_marker=newest.marker if newest is not None else -1)
        self.tasks.create(project, task)
        LOG.info("redrive task %s started on %s/%s", task.id, project, queue)
        for old in redrive_policy.forgotten(self.tasks.of(project, queue),
                                            self.limits.redrive_tasks_kept):
            self.tasks.delete(project, queue, old.id)
        return task

    def redrive_tasks(self, project: str, queue: str | None = None) -> list[RedriveTask]:
        """Return the redrive tasks of a queue (of the whole project when None), newest first."""
        tasks = self.tasks.of(project, queue)
        return sorted(tasks, key=lambda t: (t.created, t.id), reverse=True)

    def redrive_task_page(self, project: str, after: redrive_policy.TaskPlace | None,
                          limit: int) -> list[RedriveTask]:
        """Return a page of the project's redrive tasks, every queue's, newest first, after ``after``."""
        return redrive_policy.newest_first_page(self.tasks.of(project), after, limit)

    def redrive_task(self, project: str, queue: str, task_id: str) -> RedriveTask:
        """Return one redrive task of a queue.

        Raises:
            RedriveTaskDoesNotExist: no such task (or it was forgotten).
        """
        found = self.tasks.get(project, queue, task_id)
        if found is None:
            raise errors.RedriveTaskDoesNotExist(task_id, queue)
        return found[0]

    def cancel_redrive_task(self, project: str, queue: str, task_id: str) -> RedriveTask:
        """Cancel a running redrive task and return it; a new task may start on the queue at once.

        The batch its server is moving at that instant still moves (and counts).

        Raises:
            RedriveTaskDoesNotExist, RedriveTaskFinished (it is not running).
        """
        for attempt in range(CHANGE_ATTEMPTS):
            found = self.tasks.get(project, queue, task_id)
            if found is None:
                raise errors.RedriveTaskDoesNotExist(task_id, queue)
            if attempt and found[0].status == redrive_policy.CANCELLED:
                # a write answered Conflict may still be the one left (a store whose
                # compare-and-set settles, as Swift's): the task is cancelled as asked
                task = found[0]
                break
            task = redrive_policy.cancelled(found[0], self.clock())
            try:
                self.tasks.update(project, task, found[1])
            except errors.Conflict:
                continue
            break
        else:
            raise errors.StorageUnavailable("the redrive task is changing too often; try again")
        self.tasks.release_queue(project, queue, task_id)
        LOG.info("redrive task %s on %s/%s cancelled", task_id, project, queue)
        return task

    def running_redrive_tasks(self) -> list[tuple[str, str, str]]:
        """Return ``(project, queue, task id)`` of every running redrive task of the store."""
        return self.tasks.running()

    def redrive_task_lease(self, project: str, queue: str, task_id: str,
                           owner: str) -> RecordLease[RedriveTask]:
        """Return ``owner``'s lease on a task's record (not taken yet: call its ``acquire``)."""
        return self.tasks.lease(project, queue, task_id, owner, self.settings.redrive_task_lease, self.clock)

    def advance_redrive_task(self, lease: RecordLease[RedriveTask]) -> int | None:
        """Move the next batch of a task whose lease is held, recording progress; None once it has ended.

        First settles a batch a crashed server left pending (:func:`redrive_policy.reconciled`)
        and counts what the task selects; then records the ids of the next
        batch, moves it, and records what moved. A task that has nothing left
        completes; one cancelled meanwhile stops.

        Returns:
            How many messages this step tried to move, or None when the task has ended
            (its lease is then released).

        Raises:
            LeaseLost: another server holds the task now. StorageUnavailable.
        """
        task = lease.state
        if task.status == redrive_policy.RUNNING and task.pending:
            still = self.storage.get_messages(lease.project, task.queue, task.pending, self.clock())
            task = lease.write(lambda t: redrive_policy.reconciled(t, [m.id for m in still]))
        if task.status != redrive_policy.RUNNING:
            self._end_redrive_task(lease, task.status)
            return None
        request = RedriveRequest(limit=0, destination=task.destination, filter=task.filter)
        if task.to_move is None:
            selected = self._count_for_task(lease, request)
            task = lease.write(lambda t: redrive_policy.counted(t, selected + t.moved))
        size = redrive_policy.batch_size(task.max_per_second)
        left = redrive_policy.left_to_move(task)
        batch = list(itertools.islice(self._selected(lease.project, task.queue, request, self.clock(),
                                                     task.cursor, task.until_marker),
                                      size if left is None else min(size, left)))
        if not batch:
            self._end_redrive_task(lease, redrive_policy.COMPLETED)
            return None
        pending = tuple(m.id for m, _ in batch)
        task = lease.write(lambda t: dataclasses.replace(t, pending=pending)
                           if t.status == redrive_policy.RUNNING else t)
        if task.status != redrive_policy.RUNNING:  # cancelled since it was read: move nothing more
            self._end_redrive_task(lease, task.status)
            return None
        moved = self._move_batch(lease.project, task.queue, batch)
        task = lease.write(lambda t: redrive_policy.progressed(t, moved, batch[-1][0].marker, ()))
        if task.status != redrive_policy.RUNNING:
            self._end_redrive_task(lease, task.status)
            return None
        return len(batch)

    def _count_for_task(self, lease: RecordLease[RedriveTask], request: RedriveRequest) -> int:
        """Count what a task selects, renewing its lease as the count goes (a long queue takes long)."""
        task = lease.state
        selected = 0
        for _ in self._selected(lease.project, task.queue, request, self.clock(), task.cursor,
                                task.until_marker):
            selected += 1
            if selected % redrive_policy.BATCH_SIZE == 0:
                lease.ensure(lease.seconds / 2)
        return selected

    def fail_redrive_task(self, lease: RecordLease[RedriveTask], error: str) -> None:
        """End a task whose step failed with an error that trying again would not mend."""
        self._end_redrive_task(lease, redrive_policy.FAILED, error)

    def _end_redrive_task(self, lease: RecordLease[RedriveTask], status: str,
                          error: str | None = None) -> None:
        task = lease.write(lambda t: redrive_policy.ended(t, status, self.clock(), error))
        self.tasks.release_queue(lease.project, task.queue, task.id)
        lease.release()
        LOG.info("redrive task %s on %s/%s %s: %d moved%s", task.id, lease.project, task.queue,
                 task.status, task.moved, f" ({task.error})" if task.error else "")
