"""The messaging service: turns validated requests into policy decisions and storage calls.

The API's resources call this and nothing else; it owns the clock and the id
generator, so tests can move time and predict nothing else.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite import metrics as counted
from zaqar_lite.claims import backoff as retry_backoff
from zaqar_lite.claims import dedup
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.claims import templates as template_rules
from zaqar_lite.claims.policy import REASON_MAX_CLAIMS
from zaqar_lite.clock import Clock, wall_clock
from zaqar_lite.config import Settings
from zaqar_lite.models import (
    Claim,
    ClaimRequest,
    Message,
    Move,
    QueueStats,
    QueueTemplate,
    RedriveRequest,
    RedriveResult,
    RedriveTask,
    SweepResult,
)
from zaqar_lite.notify.lease import RecordLease
from zaqar_lite.notify.subscriptions import remove_queue_subscriptions
from zaqar_lite.storage.base import Storage
from zaqar_lite.storage.tasks import TASK, task_key
from zaqar_lite.templates import QueueTemplates

LOG = logging.getLogger(__name__)
#: reads of a redrive task whose compare-and-set keeps losing to its runner, before giving up
CHANGE_ATTEMPTS = 20


def _matches(metadata: Mapping[str, Any], key: str, wanted: str) -> bool:
    """Return whether a metadata value equals a query-string value (JSON text for non-strings)."""
    if key not in metadata:
        return False
    value = metadata[key]
    return value == wanted if isinstance(value, str) else json.dumps(value) == wanted


def nobody_waits(project: str, queue: str) -> None:
    """Do nothing: the wake-up hook of a service whose claims never wait."""


def new_id() -> str:
    """Return a fresh message or claim id."""
    return str(uuid.uuid4())


class Messaging:
    """Queue, message and claim operations with zaqar-lite's policy applied."""

    def __init__(self, storage: Storage, settings: Settings, clock: Clock = wall_clock,
                 ids: Callable[[], str] = new_id, sleep: Callable[[float], None] = time.sleep,
                 draw: Callable[[], float] = random.random) -> None:
        self.storage = storage
        self.settings = settings
        self.limits = settings.limits
        self.clock = clock
        self.ids = ids
        self.sleep = sleep
        self.templates = QueueTemplates(storage, settings)
        #: called with (project, queue) after a write that may make messages of the queue
        #: claimable; long polling (``waiting/``) sets it to its channel's ``publish``
        self.wake_up: Callable[[str, str], None] = nobody_waits
        #: the random source of ``_retry_backoff`` jitter: a number in [0, 1) per call
        self.draw = draw

    # -- queues ---------------------------------------------------------------

    def _validated_metadata(self, project: str, queue: str, metadata: Any) -> dict[str, Any]:
        stored = meta.validate(metadata, self.limits, self.settings.default_dead_letter_queue)
        meta.check_dead_letter_links(
            queue, stored,
            lambda name: self.storage.get_queue_metadata(project, name),
            lambda: self._every_queue(project))
        return stored

    def _every_queue(self, project: str) -> list[tuple[str, dict[str, Any]]]:
        found: list[tuple[str, dict[str, Any]]] = []
        marker = None
        while True:
            page = self.storage.list_queues(project, marker=marker, limit=1000)
            found.extend(page)
            if len(page) < 1000:
                return found
            marker = page[-1][0]

    def create_queue(self, project: str, queue: str, metadata: Any) -> bool:
        """Create a queue; an existing queue keeps its metadata. Returns whether it was created.

        A new queue whose name a queue template matches starts with the
        template's metadata under the request's (:mod:`zaqar_lite.claims.templates`).
        """
        requested = metadata if metadata is not None else {}
        if isinstance(requested, dict):
            template_rules.refuse_template_key(requested)
        template = self.templates.for_queue(queue)
        if template is None or not isinstance(requested, dict) \
                or self.storage.get_queue_metadata(project, queue) is not None:
            stored = self._validated_metadata(project, queue, requested)
        else:
            try:
                stored = self._validated_metadata(project, queue, template_rules.merged(template, requested))
            except errors.ValidationFailed as exc:
                raise errors.ValidationFailed(
                    f"Queue template {template.name} (pattern {template.pattern}) applies to queue "
                    f"{queue}: {exc}") from None
        return self.storage.create_queue(project, queue, stored, self.clock())

    def list_templates(self) -> list[QueueTemplate]:
        """Return every queue template by name, those of the configuration file included."""
        return self.templates.all()

    def get_template(self, name: str) -> QueueTemplate:
        """Return one queue template (raises TemplateDoesNotExist)."""
        return self.templates.get(name)

    def put_template(self, name: str, pattern: Any, metadata: Any) -> bool:
        """Define or replace a queue template; return whether it was new."""
        return self.templates.put(name, pattern, metadata)

    def delete_template(self, name: str) -> None:
        """Remove a queue template; queues created from it keep their metadata."""
        self.templates.delete(name)

    def queue_metadata(self, project: str, queue: str) -> dict[str, Any]:
        """Return a queue's metadata with reserved defaults (also for a missing queue, as Zaqar)."""
        return meta.with_defaults(self.storage.get_queue_metadata(project, queue), self.limits)

    def update_queue(self, project: str, queue: str,
                     operations: Sequence[tuple[str, str, Any]]) -> dict[str, Any]:
        """Apply JSON-patch operations to a queue's metadata and return the result with defaults.

        Raises:
            QueueDoesNotExist, Conflict (replace/remove of an absent plain key),
            ValidationFailed.
        """
        current = self.storage.get_queue_metadata(project, queue)
        if current is None:
            raise errors.QueueDoesNotExist(queue, project)
        template_rules.refuse_template_key(key for _, key, _ in operations)
        reserved = meta.reserved_keys(self.limits)
        updated = dict(current)
        for op, key, value in operations:
            if op in ("replace", "remove") and key not in updated and key not in reserved:
                raise errors.Conflict(f"Cannot {op} metadata key {key!r}: it is not set.")
            if op == "remove":
                updated.pop(key, None)
            else:
                updated[key] = value
        stored = self._validated_metadata(project, queue, updated)
        self.storage.set_queue_metadata(project, queue, stored)
        return meta.with_defaults(stored, self.limits)

    def delete_queue(self, project: str, queue: str) -> None:
        """Delete a queue and everything in it, its subscriptions included."""
        self.storage.delete_queue(project, queue)
        remove_queue_subscriptions(self.storage, project, queue)

    def list_queues(self, project: str, *, marker: str | None, limit: int, name: str | None,
                    filters: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
        """Return a page of queues, filtered by name substring and metadata equality."""
        page: list[tuple[str, dict[str, Any]]] = []
        while len(page) < limit:
            batch = self.storage.list_queues(project, marker=marker, limit=limit, name_contains=name)
            page.extend(q for q in batch if all(_matches(q[1], k, v) for k, v in filters.items()))
            if len(batch) < limit:
                break
            marker = batch[-1][0]
        return page[:limit]

    def count_queues(self, project: str) -> int:
        """Return how many queues the project has."""
        return self.storage.count_queues(project)

    def queue_stats(self, project: str, queue: str) -> tuple[QueueStats, float]:
        """Return a queue's message counts and the time they were taken at."""
        now = self.clock()
        return self.storage.queue_stats(project, queue, now), now

    def purge(self, project: str, queue: str, resource_types: Sequence[str]) -> None:
        """Remove a queue's messages (claimed ones too) and/or subscriptions.

        A missing queue has nothing to purge (204, as Zaqar).
        """
        if "messages" in resource_types:
            self.storage.purge_messages(project, queue)
        if "subscriptions" in resource_types:
            remove_queue_subscriptions(self.storage, project, queue)

    # -- messages -------------------------------------------------------------

    def post(self, project: str, queue: str, client_id: str,
             messages: Sequence[Mapping[str, Any]], body_size: int,
             trace: Mapping[str, str] | None = None) -> list[str]:
        """Store validated messages, applying the queue's default ttl and delay; return their ids.

        A ttl (given or the queue's default) above the queue's ``_max_message_ttl`` is lowered to it.
        A message with a ``dedup_id`` the queue remembers is not stored: its id is the
        remembered message's; so is that of a message repeating an earlier one's
        ``dedup_id`` in the same post (:mod:`zaqar_lite.claims.dedup`).
        Each message keeps ``trace``, the post's W3C trace context, when given.

        Raises:
            InvalidBody: the body is larger than the queue's ``_max_messages_post_size``.
        """
        now = self.clock()
        stored_as = dedup.collapse([item.get("dedup_id") for item in messages])
        unique = [item for index, item in enumerate(messages) if stored_as[index] == index]
        ids = [self.ids() for _ in unique]

        def plan(stored: Mapping[str, Any] | None) -> list[Message]:
            queue_meta = stored or {}
            size_limit = queue_meta.get(meta.MAX_POST_SIZE, self.limits.max_messages_post_size)
            if body_size > size_limit:
                raise errors.InvalidBody(f"Request body may not exceed {size_limit} bytes on queue {queue}.")
            default_ttl = queue_meta.get(meta.DEFAULT_TTL, self.limits.default_message_ttl)
            default_delay = queue_meta.get(meta.DEFAULT_DELAY, 0)
            dedup_until = dedup.window_end(queue_meta, now)
            records = []
            for message_id, item in zip(ids, unique, strict=True):
                ttl = meta.capped_ttl(item["ttl"] if item["ttl"] is not None else default_ttl, queue_meta)
                delay = item["delay"] if item["delay"] is not None else default_delay
                dedup_id = item.get("dedup_id")
                records.append(Message(
                    id=message_id, body=item["body"], created=now, expires=now + ttl,
                    delay_until=now + delay if delay else 0.0, client_id=client_id,
                    dlq_eligible=item["dlq_eligible"], dedup_id=dedup_id,
                    dedup_until=dedup_until if dedup_id is not None else 0.0, group=item.get("group"),
                    trace=dict(trace) if trace else None))
            return records

        answered = self.storage.post_planned(project, queue, plan, now)
        stored = sum(1 for new, acknowledged in zip(ids, answered, strict=True) if new == acknowledged)
        counted.MESSAGES_POSTED.inc(stored)
        if stored:
            self.wake_up(project, queue)
        first_of = {index: answered[n] for n, index in enumerate(sorted(set(stored_as)))}
        return [first_of[index] for index in stored_as]

    def edit_delayed_message(self, project: str, queue: str, message_id: str, changes: Mapping[str, Any],
                             body_size: int) -> tuple[Message, float]:
        """Edit a message that is still delayed (``body``, ``ttl``, ``delay``); return it as stored now.

        A ttl above the queue's ``_max_message_ttl`` is lowered to it, as a post's.

        Raises:
            InvalidBody: the body is larger than the queue's ``_max_messages_post_size``.
            MessageDoesNotExist, MessageNotEditable: see ``Storage.edit_delayed_message``.
        """
        now = self.clock()
        stored = self.storage.get_queue_metadata(project, queue) or {}
        size_limit = stored.get(meta.MAX_POST_SIZE, self.limits.max_messages_post_size)
        if body_size > size_limit:
            raise errors.InvalidBody(f"Request body may not exceed {size_limit} bytes on queue {queue}.")
        if "ttl" in changes:  # capped as a post's ttl is
            changes = {**changes, "ttl": meta.capped_ttl(changes["ttl"], stored)}
        edited = self.storage.edit_delayed_message(project, queue, message_id, changes, now)
        self.wake_up(project, queue)  # its delay may end sooner now
        return edited, now

    def list_messages(self, project: str, queue: str, *, client_id: str, marker: int | None,
                      limit: int, echo: bool, include_claimed: bool,
                      include_delayed: bool) -> tuple[list[Message], float]:
        """Return a page of messages, FIFO, and the time it was read at."""
        now = self.clock()
        found = self.storage.list_messages(
            project, queue, now=now, marker=marker, limit=limit, include_claimed=include_claimed,
            include_delayed=include_delayed, exclude_client_id=None if echo else client_id)
        return found, now

    def get_messages(self, project: str, queue: str, ids: Sequence[str]) -> tuple[list[Message], float]:
        """Return the unexpired messages among ids."""
        now = self.clock()
        return self.storage.get_messages(project, queue, ids, now), now

    def delete_message(self, project: str, queue: str, message_id: str, claim_id: str | None) -> None:
        """Delete one message under the claim rules."""
        self.storage.delete_message(project, queue, message_id, claim_id, self.clock())
        counted.MESSAGES_DELETED.inc()

    def delete_messages(self, project: str, queue: str, ids: Sequence[str],
                        claim_ids: Sequence[str] | None) -> None:
        """Delete messages by id."""
        self.storage.delete_messages(project, queue, ids, claim_ids, self.clock())
        counted.MESSAGES_DELETED.inc(len(ids))

    def pop(self, project: str, queue: str, limit: int) -> tuple[list[Message], float]:
        """Delete and return up to limit visible messages."""
        now = self.clock()
        popped = self.storage.pop_messages(project, queue, limit, now)
        counted.MESSAGES_DELETED.inc(len(popped))
        return popped, now

    def release_message(self, project: str, queue: str, message_id: str, claim_id: str,
                        reason: Mapping[str, Any] | None, delay: int | None = None) -> None:
        """Release one claimed message, recording the reason in its failure history.

        It is claimable again after ``delay`` seconds when given (0: at once),
        else after the wait of the queue's ``_retry_backoff`` (none without it).
        """
        self.storage.release_message(project, queue, message_id, claim_id, self.clock(), reason,
                                     self.limits.failure_history_length, delay)
        counted.MESSAGES_RELEASED.inc()
        self.wake_up(project, queue)

    # -- claims ---------------------------------------------------------------

    def _existing_default_dlq(self, project: str, queue: str) -> str | None:
        """Return the default dead-letter queue's name when it is set, is not ``queue`` and exists."""
        name = self.settings.default_dead_letter_queue
        if not name or name == queue or self.storage.get_queue_metadata(project, name) is None:
            return None
        return name

    def claim(self, project: str, queue: str, limit: int, ttl: int,
              grace: int) -> tuple[str, list[Message], float]:
        """Claim up to limit messages; exhausted ones are dead-lettered on the way."""
        now = self.clock()
        claim_id = self.ids()
        default_dlq = self._existing_default_dlq(project, queue)

        planned: list[ClaimRequest] = []

        def plan(stored: Mapping[str, Any] | None) -> ClaimRequest:
            default = meta.wanted_default_dead_letter_queue(queue, stored, default_dlq)
            backoff = meta.retry_backoff(stored, self.limits)
            planned.append(ClaimRequest(
                claim_id=claim_id, now=now, ttl=ttl, grace=grace, limit=limit,
                dead_letter=meta.dead_letter_policy(stored, default), backoff=backoff,
                draws=retry_backoff.draws(backoff, limit, self.draw)))
            return planned[-1]

        result = self.storage.claim_planned(project, queue, plan)
        counted.MESSAGES_CLAIMED.inc(len(result.claimed))
        counted.MESSAGES_DISCARDED.inc(result.discarded)
        if result.dead_lettered:
            counted.MESSAGES_DEAD_LETTERED.labels(REASON_MAX_CLAIMS).inc(result.dead_lettered)
            dead_letter_queue = planned[-1].dead_letter.queue  # the plan the store applied is the last made
            if dead_letter_queue:
                self.wake_up(project, dead_letter_queue)
        return claim_id, result.claimed, now

    def get_claim(self, project: str, queue: str, claim_id: str) -> tuple[Claim, list[Message], float]:
        """Return a live claim and its messages."""
        now = self.clock()
        claim, messages = self.storage.get_claim(project, queue, claim_id, now)
        return claim, messages, now

    def renew_claim(self, project: str, queue: str, claim_id: str, ttl: int, grace: int) -> None:
        """Renew a live claim from now."""
        self.storage.renew_claim(project, queue, claim_id, self.clock(), ttl, grace)

    def release_claim(self, project: str, queue: str, claim_id: str) -> None:
        """Release a claim; its messages become claimable at once (or after their ``_retry_backoff`` wait)."""
        self.storage.release_claim(project, queue, claim_id, self.clock())
        counted.CLAIMS_RELEASED.inc()
        self.wake_up(project, queue)

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
        counted.MESSAGES_REDRIVEN.inc(moved)
        return moved

    def _check_destination(self, project: str, request: RedriveRequest) -> None:
        """Refuse a redrive ``destination`` that does not exist, unless the request may create it."""
        destination = request.destination
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
        self._check_destination(project, request)
        now = self.clock()
        selected = self._dead_letters(project, queue, request, now)
        sample = selected[:redrive_policy.SAMPLE_SIZE] if request.dry_run else []
        if request.dry_run or not selected:
            return RedriveResult(matched=len(selected), redriven=0, sample=sample), now
        started, done, moved = self.clock(), 0, 0
        for batch in redrive_policy.batches(selected, request.max_per_second):
            wait = redrive_policy.throttle_wait(started, done, self.clock(), request.max_per_second)
            if done and self.clock() + wait - now > self.limits.max_redrive_seconds:
                break
            if wait > 0:
                self.sleep(wait)
            moved += self._move_batch(project, queue, batch)
            at, min_ttl = self.clock(), self.limits.min_message_ttl
            for target, messages in redrive_policy.by_target(batch).items():
                moves = [Move(m, redrive_policy.redriven(m, at, min_ttl)) for m in messages]
                moved += len(self.storage.move_messages(project, queue, moves, target, at))
                self.wake_up(project, target)
            done += len(batch)
        LOG.info("redrive of %s/%s: %d of %d selected dead letters moved",
                 project, queue, moved, len(selected))
        return RedriveResult(matched=len(selected), redriven=moved), now

    # -- redrive tasks --------------------------------------------------------
    # The calls a client (the API, a console) makes: start, list, read, cancel;
    # then the steps the task runner (zaqar_lite/redrive_runner.py) takes.

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
        self._check_destination(project, request)
        newest = self.storage.queue_stats(project, queue, now).newest
        task = RedriveTask(
            id=self.ids(), queue=queue, status=redrive_policy.RUNNING, created=now,
            destination=request.destination, filter=request.filter, limit=request.limit or None,
            max_per_second=request.max_per_second or float(self.limits.max_redrive_rate),
            until_marker=newest.marker if newest is not None else -1)
        self.storage.create_redrive_task(project, task)
        LOG.info("redrive task %s started on %s/%s", task.id, project, queue)
        for old in redrive_policy.forgotten(self.storage.list_redrive_tasks(project, queue),
                                            self.limits.redrive_tasks_kept):
            self.storage.delete_redrive_task(project, queue, old.id)
        return task

    def redrive_tasks(self, project: str, queue: str | None = None) -> list[RedriveTask]:
        """Return the redrive tasks of a queue (of the whole project when None), newest first."""
        tasks = self.storage.list_redrive_tasks(project, queue)
        return sorted(tasks, key=lambda t: (t.created, t.id), reverse=True)

    def redrive_task(self, project: str, queue: str, task_id: str) -> RedriveTask:
        """Return one redrive task of a queue.

        Raises:
            RedriveTaskDoesNotExist: no such task (or it was forgotten).
        """
        found = self.storage.get_redrive_task(project, queue, task_id)
        if found is None:
            raise errors.RedriveTaskDoesNotExist(task_id, queue)
        return found[0]

    def cancel_redrive_task(self, project: str, queue: str, task_id: str) -> RedriveTask:
        """Cancel a running redrive task and return it; a new task may start on the queue at once.

        The batch its server is moving at that instant still moves (and counts).

        Raises:
            RedriveTaskDoesNotExist, RedriveTaskFinished (it is not running).
        """
        for _ in range(CHANGE_ATTEMPTS):
            found = self.storage.get_redrive_task(project, queue, task_id)
            if found is None:
                raise errors.RedriveTaskDoesNotExist(task_id, queue)
            task = redrive_policy.cancelled(found[0], self.clock())
            try:
                self.storage.update_redrive_task(project, task, found[1])
            except errors.Conflict:
                continue
            self.storage.release_redrive_queue(project, queue, task_id)
            LOG.info("redrive task %s on %s/%s cancelled", task_id, project, queue)
            return task
        raise errors.StorageUnavailable("the redrive task is changing too often; try again")

    def running_redrive_tasks(self) -> list[tuple[str, str, str]]:
        """Return ``(project, queue, task id)`` of every running redrive task of the store."""
        return self.storage.running_redrive_tasks()

    def redrive_task_lease(self, project: str, queue: str, task_id: str,
                           owner: str) -> RecordLease[RedriveTask]:
        """Return ``owner``'s lease on a task's record (not taken yet: call its ``acquire``)."""
        initial = RedriveTask(id=task_id, queue=queue, status=redrive_policy.RUNNING, created=0.0)
        return RecordLease(self.storage, project, TASK, task_key(queue, task_id), owner,
                           self.settings.redrive_task_lease, self.clock, RedriveTask.from_record, initial)

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
        self.storage.release_redrive_queue(lease.project, task.queue, task.id)
        lease.release()
        LOG.info("redrive task %s on %s/%s %s: %d moved%s", task.id, lease.project, task.queue,
                 task.status, task.moved, f" ({task.error})" if task.error else "")

    # -- background -----------------------------------------------------------

    def sweep(self) -> SweepResult:
        """Run the expiry and dead-letter rules over every queue once."""
        now = self.clock()
        moved = discarded = 0
        default_dlqs: dict[str, str | None] = {}
        for project, queue, stored in self.storage.all_queues():
            policy = meta.dead_letter_policy(stored)
            if meta.wanted_default_dead_letter_queue(queue, stored, self.settings.default_dead_letter_queue):
                if project not in default_dlqs:
                    default_dlqs[project] = self._existing_default_dlq(project, queue)
                policy = meta.dead_letter_policy(stored, default_dlqs[project])
                if meta.holds_expired(stored, policy):
                    continue
            result = self.storage.sweep_queue(project, queue, now, policy)
            counted.MESSAGES_DISCARDED.inc(result.discarded)
            if result.dead_lettered:
                reason = counted.dead_letter_reason(policy.on_expiry, policy.counts_claims)
                counted.MESSAGES_DEAD_LETTERED.labels(reason).inc(result.dead_lettered)
            if result.dead_lettered and policy.queue:
                self.wake_up(project, policy.queue)
            moved += result.dead_lettered
            discarded += result.discarded
        return SweepResult(dead_lettered=moved, discarded=discarded)

    def message_volume(self, project: str) -> dict[str, int]:
        """Return the project's message counts by state, over all its queues."""
        volume = {"claimed": 0, "free": 0, "delayed": 0, "total": 0}
        now = self.clock()
        for queue, _ in self._every_queue(project):
            stats = self.storage.queue_stats(project, queue, now)
            for key in volume:
                volume[key] += getattr(stats, key)
        return volume

    def queue_census(self) -> tuple[list[counted.QueueCensus], float]:
        """Return every queue's message counts at one instant, each marked when it is a dead-letter queue.

        A queue is a dead-letter queue when another queue of its project names it in
        ``_dead_letter_queue``, or it is the server's default dead-letter queue.
        One read of the queue list, then one ``queue_stats`` per queue.
        """
        now = self.clock()
        queues = list(self.storage.all_queues())
        targets = {(project, meta.dead_letter_policy(stored).queue) for project, _, stored in queues}
        default = self.settings.default_dead_letter_queue
        census = [counted.QueueCensus(project, queue, self.storage.queue_stats(project, queue, now),
                                      (project, queue) in targets or queue == default)
                  for project, queue, _ in queues]
        return census, now

    def ping(self) -> bool:
        """Return whether the store answers."""
        return self.storage.ping()

    # -- the operators' console -------------------------------------------------

    def existing_queue_metadata(self, project: str, queue: str) -> dict[str, Any]:
        """Return a queue's stored metadata (without the reserved defaults).

        Raises:
            QueueDoesNotExist: the project has no such queue.
        """
        stored = self.storage.get_queue_metadata(project, queue)
        if stored is None:
            raise errors.QueueDoesNotExist(queue, project)
        return stored

    def dead_letters(self, project: str, queue: str, limit: int) -> tuple[list[Message], bool, float]:
        """Return the first ``limit`` dead letters of a queue, claimed and delayed ones too, FIFO.

        Returns:
            The dead letters, whether the queue holds more messages than were
            read (so more dead letters may follow), and the time they were read at.
        """
        now = self.clock()
        found: list[Message] = []
        marker = None
        while len(found) < limit:
            page = self.storage.list_messages(
                project, queue, now=now, marker=marker, limit=redrive_policy.BATCH_SIZE,
                include_claimed=True, include_delayed=True, exclude_client_id=None)
            found.extend(m for m in page if m.dead_letter is not None)
            if len(page) < redrive_policy.BATCH_SIZE:
                return found[:limit], len(found) > limit, now
            marker = page[-1].marker
        return found[:limit], True, now
