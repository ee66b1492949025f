"""The redrive policy, written once: which dead letters a redrive takes, and how they return.

docs/api.rst, "Redrive (zaqar-lite extension)" and "Redrive tasks". A dead
letter is a message that carries a ``dead_letter`` provenance record
(docs/api.rst, "Provenance"), in whatever queue it is. A redrive selects the unclaimed,
unexpired dead letters of one queue that match its filter, in post order, up
to its limit, and moves each to its ``destination`` or else back to its
``source_queue``. Drivers only store the result
(:meth:`~zaqar_lite.storage.base.Storage.move_messages`).

A redrive task (:class:`~zaqar_lite.models.RedriveTask`) does the same a batch
at a time in the background; the rules at the end of this module say how its
record changes: progress is recorded after each move, with the ids of the
batch about to move, so a task resumed after a crash counts what that batch
moved (:func:`reconciled`) and selects again whatever is still there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite.claims.metadata import DEAD_LETTER_QUEUE
from zaqar_lite.claims.signatures import is_legacy_id, legacy_failure_signature_id, signature, signature_id
from zaqar_lite.errors import RedriveTaskFinished
from zaqar_lite.models import Message, RedriveFilter, RedriveRequest, RedriveTask

#: messages shown by a dry run
SAMPLE_SIZE = 10
#: messages moved by one storage call (one transaction, script or bulk write)
BATCH_SIZE = 100


def not_a_dead_letter_queue(queue: str, project_queues: Iterable[tuple[str, Mapping[str, Any]]],
                            default_dead_letter_queue: str | None) -> str | None:
    """Return what a redrive that selected nothing says when ``queue`` is no queue's dead-letter queue.

    None when some queue of the project names it as ``_dead_letter_queue``, or
    it is the server's default dead-letter queue; else the sentence the answer's
    ``warning`` carries, so that ``matched: 0`` does not read as "no dead letters yet".
    """
    if queue == default_dead_letter_queue:
        return None
    if any(metadata.get(DEAD_LETTER_QUEUE) == queue for _, metadata in project_queues):
        return None
    return (f"Queue {queue} is no queue's dead-letter queue: no queue of this project names it as "
            "_dead_letter_queue, nor is it the default dead-letter queue; redrive the queue a "
            "_dead_letter_queue names.")


def last_failure(message: Message) -> Mapping[str, Any] | None:
    """Return the latest entry of a message's failure history, or None when it has none."""
    return message.failures[-1] if message.failures else None


def last_signature(message: Message) -> str:
    """Return the signature text of a message's last failure, as the DLQ report computes it.

    A message without failures has the signature of a failure without a reason
    (``(no reason given)``), as in the report.
    """
    failure = last_failure(message) or {}
    return signature(failure.get("error_type"), failure.get("error"))


def last_signature_id(message: Message) -> str:
    """Return the signature id of a message's last failure (what a ``signature`` filter compares)."""
    return signature_id(last_signature(message))


def has_last_signature(message: Message, identifier: str) -> bool:
    """Return whether a message's last failure has a signature id, of this scheme or of the first.

    An id of the first scheme (12 hex digits, no ``v2-``: what reports and
    consoles showed before) is compared with the id that scheme gives the
    failure, so a filter stored or written down then still finds its dead letters.
    """
    if not is_legacy_id(identifier):
        return last_signature_id(message) == identifier
    failure = last_failure(message) or {}
    return legacy_failure_signature_id(failure.get("error_type"), failure.get("error")) == identifier


@dataclasses.dataclass(frozen=True)
class SignatureGroup:
    """The dead letters whose last failure has one signature: what a ``signature`` filter selects."""

    signature_id: str
    signature: str
    messages: tuple[Message, ...]


def by_last_signature(messages: Iterable[Message]) -> list[SignatureGroup]:
    """Group dead letters by the signature of their last failure, largest group first.

    Messages keep their order within a group; groups of the same size are
    ordered by signature id, so a page lists them the same way every time.
    """
    groups: dict[str, list[Message]] = {}
    texts: dict[str, str] = {}
    for message in messages:
        text = last_signature(message)
        key = signature_id(text)
        texts[key] = text
        groups.setdefault(key, []).append(message)
    ordered = sorted(groups, key=lambda key: (-len(groups[key]), key))
    return [SignatureGroup(key, texts[key], tuple(groups[key])) for key in ordered]


def matches(message: Message, wanted: RedriveFilter) -> bool:
    """Return whether a message is a dead letter that every criterion of the filter accepts.

    ``source_queue`` is compared with the provenance record; ``error_type``
    (exactly) and ``signature`` (an id of either scheme, :func:`has_last_signature`)
    with the message's LAST failure, so a message
    whose last failure has no ``error_type`` never matches an ``error_type``;
    ``ids`` lists the message ids accepted.
    """
    record = message.dead_letter
    if record is None:
        return False
    if wanted.source_queue is not None and record.get("source_queue") != wanted.source_queue:
        return False
    if wanted.ids is not None and message.id not in wanted.ids:
        return False
    if wanted.error_type is not None and (last_failure(message) or {}).get("error_type") != wanted.error_type:
        return False
    return wanted.signature is None or has_last_signature(message, wanted.signature)


def target_queue(message: Message, queue: str, destination: str | None) -> str | None:
    """Return where a dead letter of ``queue`` goes: ``destination``, else its source queue.

    None when it has nowhere to go: no source recorded, or the source is the
    queue it is in.
    """
    target = destination or (message.dead_letter or {}).get("source_queue")
    if not isinstance(target, str) or not target or target == queue:
        return None
    return target


def selected_target(message: Message, queue: str, request: RedriveRequest, now: float) -> str | None:
    """Return the queue a redrive sends a message of ``queue`` to, or None if it does not select it.

    Selected: an unclaimed dead letter with somewhere to go (:func:`target_queue`)
    that the request's filter accepts (:func:`matches`).
    """
    target = target_queue(message, queue, request.destination)
    if target is None or message.is_claimed(now) or not matches(message, request.filter):
        return None
    return target


def redriven(message: Message, now: float, min_ttl: int) -> Message:
    """Return a dead letter as it must be stored in its target queue: an ordinary message again.

    It keeps its id, body, creation time, client id and failure history; its
    claim count is 0, it is unclaimed and not delayed, and it has no
    provenance record. It keeps its expiry, but lives at least ``min_ttl``
    seconds from now, so that it can still be claimed after the move.
    """
    return dataclasses.replace(
        message,
        claim_id=None,
        claim_expires=None,
        claim_count=0,
        delay_until=0.0,
        expires=max(message.expires, now + min_ttl),
        dead_letter=None,
    )


def batch_size(max_per_second: float | None) -> int:
    """Return how many messages one storage call moves: at most one second's worth when throttled."""
    return BATCH_SIZE if max_per_second is None else max(1, min(BATCH_SIZE, math.floor(max_per_second)))


def batches(selected: Sequence[tuple[Message, str]],
            max_per_second: float | None) -> Iterator[list[tuple[Message, str]]]:
    """Cut the selected messages into storage calls (:func:`batch_size`)."""
    size = batch_size(max_per_second)
    for start in range(0, len(selected), size):
        yield list(selected[start:start + size])


def throttle_wait(started: float, done: int, now: float, max_per_second: float | None) -> float:
    """Return the seconds to wait before moving more, so that ``done`` moves took at least done / rate."""
    if max_per_second is None:
        return 0.0
    return max(0.0, started + done / max_per_second - now)


def by_target(batch: Sequence[tuple[Message, str]]) -> dict[str, list[Message]]:
    """Group a batch by target queue, keeping post order within each group."""
    groups: dict[str, list[Message]] = {}
    for message, target in batch:
        groups.setdefault(target, []).append(message)
    return groups


# -- redrive tasks ---------------------------------------------------------------

RUNNING, COMPLETED, CANCELLED, FAILED = "running", "completed", "cancelled", "failed"


def left_to_move(task: RedriveTask) -> int | None:
    """Return how many more messages the task may move under its limit (None: no limit)."""
    return None if task.limit is None else max(0, task.limit - task.moved)


def remaining(task: RedriveTask) -> int | None:
    """Return how many selected dead letters the task has still to move (None: not counted yet).

    A completed task has none left; a cancelled or failed one leaves what it
    counted and did not move.
    """
    if task.status == COMPLETED:
        return 0
    if task.to_move is None:
        return None
    return max(0, task.to_move - task.moved)


def counted(task: RedriveTask, selected: int) -> RedriveTask:
    """Return the task with the number of dead letters it selected at its start, within its limit."""
    limit = task.limit if task.limit is not None else selected
    return dataclasses.replace(task, to_move=min(selected, limit))


def progressed(task: RedriveTask, moved: int, cursor: int | None, pending: Sequence[str]) -> RedriveTask:
    """Return the task after a batch: ``moved`` more moved, examined up to ``cursor``, ``pending`` next."""
    return dataclasses.replace(task, moved=task.moved + moved, cursor=cursor, pending=tuple(pending))


def reconciled(task: RedriveTask, still_there: Sequence[str]) -> RedriveTask:
    """Return the task with its pending batch settled after a crash: what left the queue was moved.

    ``still_there`` are the pending ids the queue still holds; they will be
    selected again.
    """
    gone = set(task.pending) - set(still_there)
    return dataclasses.replace(task, moved=task.moved + len(gone), pending=())


def ended(task: RedriveTask, status: str, now: float, error: str | None = None) -> RedriveTask:
    """Return a running task ended with ``status`` at ``now`` (a task that ended already is kept)."""
    if task.status != RUNNING:
        return task
    return dataclasses.replace(task, status=status, finished=now, error=error)


def cancelled(task: RedriveTask, now: float) -> RedriveTask:
    """Return the task cancelled at ``now``.

    Raises:
        RedriveTaskFinished: it is not running.
    """
    if task.status != RUNNING:
        raise RedriveTaskFinished(task.id, task.status)
    return ended(task, CANCELLED, now)


def forgotten(tasks: Sequence[RedriveTask], keep: int) -> list[RedriveTask]:
    """Return the ended tasks of a queue beyond the ``keep`` most recent: those to forget."""
    done = sorted((t for t in tasks if t.status != RUNNING), key=lambda t: (t.created, t.id), reverse=True)
    return done[keep:]


#: a task's place in a newest-first listing: its start in whole microseconds, then its id
TaskPlace = tuple[int, str]


def task_place(task: RedriveTask) -> TaskPlace:
    """Return where a task stands in a newest-first listing (the larger, the newer)."""
    return round(task.created * 1_000_000), task.id


def task_marker(task: RedriveTask) -> str:
    """Return the ``marker`` of a listing page that ends with ``task``: ``<microseconds>-<id>``."""
    at, task_id = task_place(task)
    return f"{at}-{task_id}"


def newest_first_page(tasks: Iterable[RedriveTask], after: TaskPlace | None, limit: int) -> list[RedriveTask]:
    """Return up to ``limit`` tasks, newest first, older than the place ``after`` when given."""
    ordered = sorted(tasks, key=task_place, reverse=True)
    if after is not None:
        ordered = [task for task in ordered if task_place(task) < after]
    return ordered[:limit]
