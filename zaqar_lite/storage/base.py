"""The storage contract every driver implements, and the loops most drivers share.

:class:`Storage` is the contract (its queue, message and record parts:
:mod:`~zaqar_lite.storage.queues`, :mod:`~zaqar_lite.storage.messages`,
:mod:`~zaqar_lite.storage.records`; the features kept in records are built
over them, e.g. :mod:`~zaqar_lite.storage.tasks`).
Drivers only store and atomically move; every decision is made by
:mod:`zaqar_lite.claims.policy`. :class:`PlannedStorage` and
:class:`PlannedClaimStorage` implement the sweep, delete, release and claim
methods once, as loops that read, call the policy and hand its plan to small
driver primitives (fetch candidates, apply guarded writes, move a message):
SQLite and MongoDB use all of them, Swift all but the claim (its settle
protocol), Redis none (one Lua script per operation, each following one named
rule of the policy mechanically). The conformance suite
(``tests/storage/conformance/``) holds every driver to the same rules.

Words used below:

* *visible* at ``now``: ``expires > now``, not claimed (``claim_expires`` is
  null or ``<= now``) and not delayed (``delay_until <= now``).
* *FIFO*: ascending ``marker``, a number the driver assigns, increasing in post
  order within a queue (and assigned anew when a message is moved to another queue).
  A queue's markers depend only on its own posts and moves (Swift: and the post
  time), never on other queues', so they show nobody else's traffic.
* every method may raise :class:`~zaqar_lite.errors.StorageUnavailable` when
  the backend cannot be reached; nothing is changed in that case.
* ``project`` and ``queue`` scope every call: nothing of another project is
  ever read or changed.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from zaqar_lite import errors
from zaqar_lite.claims import groups, policy
from zaqar_lite.models import (
    NO_DEAD_LETTER,
    ClaimRequest,
    ClaimResult,
    DeadLetterPolicy,
    Message,
    SweepResult,
)
from zaqar_lite.storage.messages import ClaimPlan as ClaimPlan
from zaqar_lite.storage.messages import MessageStore
from zaqar_lite.storage.messages import PostPlan as PostPlan

# the record part of the contract, for storage's subpackages (which import only base)
from zaqar_lite.storage.records import RecordStore as RecordStore

#: reads of a message whose guarded write keeps losing to concurrent changes, before giving up
CHANGE_ATTEMPTS = 10


class Storage(MessageStore, RecordStore):
    """Abstract storage driver; one instance per process, safe across processes."""

    #: short name shown in logs and health (``sqlite``, ``redis``, ...)
    name: str = "abstract"
    #: seconds after its post within which a message may still become listable after
    #: a message with a higher marker was listed (0: markers become visible in order).
    #: Subscription delivery waits this long before passing a message by.
    visibility_lag: float = 0.0
    #: whether the driver remembers anything per queue in memory; such a driver keeps it
    #: in :class:`~zaqar_lite.storage.cache.LRUCache` instances and takes their size,
    #: ``[storage] queue_cache_size``, as the ``queue_cache_size`` keyword of its constructor
    remembers_queues: bool = False

    # -- links between queues -------------------------------------------------

    def check_same_pool(self, project: str, queue: str, other: str, role: str) -> None:
        """Refuse a link between ``queue`` and ``other`` (``role`` names it) that would cross pools.

        A deployment of one store has one pool, so this default refuses
        nothing; a pooled deployment (:mod:`zaqar_lite.storage.pools.router`)
        places whichever of the two is new beside the other.

        Raises:
            ValidationFailed: they are in two pools (the message names both).
        """

    # -- background work ------------------------------------------------------

    def due_queues(self, now: float) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield ``(project, queue, metadata)`` of every queue a :meth:`sweep_queue` at ``now`` may change.

        A queue is due from the earliest of its messages' expiry and its claims'
        end, and at once after a write that may leave it something to sweep (a
        message released, a claim released, its metadata replaced); a sweep of
        it records its next due time. A driver keeps that time in the same
        atomic write as the change that moves it earlier, so a queue is never
        passed over; it may be yielded when nothing is left to do (its due time
        is a lower bound). Idle queues are not read: the sweep's cost follows
        the messages and claims due, not the number of queues. Reads at most
        :attr:`all_queues_page` queues at a time.

        The default, for a driver that keeps no due times, is every queue.
        """
        return self.all_queues()

    @abc.abstractmethod
    def sweep_queue(self, project: str, queue: str, now: float, dead_letter: DeadLetterPolicy) -> SweepResult:
        """Apply :func:`zaqar_lite.claims.policy.plan_sweep` to one queue.

        Expired messages are dead-lettered (``on_expiry``) or discarded, and
        messages whose count is exhausted and whose claim has lapsed are moved,
        each move atomic as in :meth:`claim_messages`. Lapsed claims are removed,
        and the queue's next due time (:meth:`due_queues`) recorded.
        """

    # -- health ---------------------------------------------------------------

    @abc.abstractmethod
    def ping(self) -> bool:
        """Return True when the backend answers."""

    def describe(self) -> str:
        """Return where the data lives, for startup logs."""
        return self.name

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default does nothing."""


@dataclasses.dataclass(frozen=True)
class Applied:
    """What of a :class:`~zaqar_lite.claims.policy.Plan` took effect: claims won, moves, deletes."""

    claimed: list[Message]
    moved: int
    deleted: int


class PlannedStorage(Storage):
    """A driver whose sweep, delete and release loops are the ones written here.

    Each loop reads, lets :mod:`zaqar_lite.claims.policy` decide, and hands the
    decision to the driver's primitives, which only store and move: a guarded
    write takes effect only on the state it was planned on (SQLite: the whole
    loop runs in one transaction, :meth:`_atomic`; MongoDB: a filter on that
    state; Swift: see its module). A store's queries are prefilters of the
    policy's predicates (:func:`~zaqar_lite.claims.policy.is_visible`,
    :func:`~zaqar_lite.claims.policy.is_swept`): they may return more than the
    rule allows, never less, and the loops check every candidate again.
    """

    def _atomic(self) -> contextlib.AbstractContextManager[object]:
        """Return the context one pass of a loop runs in; the default is none (each write is guarded)."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def _sweep_candidates(self, project: str, queue: str, now: float,
                          dead_letter: DeadLetterPolicy) -> Iterator[list[Message]]:
        """Yield batches of messages among which is every one that ``policy.is_swept`` holds for.

        The loop applies each batch before asking for the next, so a store may
        query again until what it finds is fewer than a page.
        """

    @abc.abstractmethod
    def _apply_plan(self, project: str, queue: str, plan: policy.Plan, read: Sequence[Message],
                    dead_letter: DeadLetterPolicy, now: float) -> Applied:
        """Write a plan made from ``read``, each change only if its message is still as read.

        Claimed messages are updated, moved ones re-homed in ``dead_letter.queue``
        (created if missing) by one write each, deleted ones removed.
        """

    @abc.abstractmethod
    def _drop_lapsed_claims(self, project: str, queue: str, now: float) -> None:
        """Remove the claim records of a queue that ended by ``now``."""

    def _record_next_due(self, project: str, queue: str, now: float) -> None:  # noqa: B027 - optional
        """Record when the swept queue is next due: its earliest message expiry or claim end, if any.

        The default, for a driver whose :meth:`due_queues` yields every queue, records nothing.
        """

    @abc.abstractmethod
    def _message_and_claim(self, project: str, queue: str, message_id: str, claim_id: str | None,
                           now: float) -> tuple[Message | None, bool]:
        """Return the unexpired message (None if absent) and whether ``claim_id`` is a live claim."""

    @abc.abstractmethod
    def _delete_unchanged(self, project: str, queue: str, messages: Sequence[Message]) -> set[str]:
        """Delete the messages still as read; return the ids gone now (by this call or another).

        A message changed since it was read is left; the loop reads it again.
        """

    @abc.abstractmethod
    def _write_released(self, project: str, queue: str, read: Message, released: Message) -> bool:
        """Store a released message's claim end, delay and failures if still as read; say if it was."""

    @abc.abstractmethod
    def _write_edited(self, project: str, queue: str, read: Message, edited: Message) -> bool:
        """Store an edited message's body, expiry and delay if it is still as read; return whether it was."""

    def sweep_queue(self, project: str, queue: str, now: float, dead_letter: DeadLetterPolicy) -> SweepResult:
        """Read sweep candidates, keep those ``policy.is_swept`` holds for, apply ``policy.plan_sweep``."""
        moved = discarded = 0
        with self._atomic():
            for batch in self._sweep_candidates(project, queue, now, dead_letter):
                read = [m for m in batch if policy.is_swept(m, now, dead_letter)]
                plan = policy.plan_sweep(read, queue, now, dead_letter)
                applied = self._apply_plan(project, queue, plan, read, dead_letter, now)
                moved, discarded = moved + applied.moved, discarded + applied.deleted
            self._drop_lapsed_claims(project, queue, now)
            self._record_next_due(project, queue, now)
        return SweepResult(dead_lettered=moved, discarded=discarded)

    def delete_message(self, project: str, queue: str, message_id: str, claim_id: str | None,
                       now: float) -> None:
        """Read the message, apply ``policy.check_claim_rules``, delete it if unchanged; repeat on a race."""
        for _ in range(CHANGE_ATTEMPTS):
            with self._atomic():
                found, live = self._message_and_claim(project, queue, message_id, claim_id, now)
                if found is None:
                    return
                policy.check_claim_rules(found, claim_id, live, now)
                if self._delete_unchanged(project, queue, [found]):
                    return
        raise errors.StorageUnavailable(f"message {message_id} kept changing while being deleted")

    def delete_messages(self, project: str, queue: str, ids: Sequence[str],
                        claim_ids: Sequence[str] | None, now: float) -> None:
        """Read the messages, split them by ``policy.split_bulk_delete``, delete; repeat for races lost."""
        pending, kept = list(ids), list[Message]()
        for _ in range(CHANGE_ATTEMPTS):
            with self._atomic():
                doomed, held = policy.split_bulk_delete(self.get_messages(project, queue, pending, now),
                                                        claim_ids, now)
                deleted = self._delete_unchanged(project, queue, doomed)
            kept += held
            pending = [m.id for m in doomed if m.id not in deleted]
            if not pending:
                break
        else:
            raise errors.StorageUnavailable("messages kept changing while being deleted")
        if kept:
            raise errors.MessageIsClaimedBy(kept[-1].id, ",".join(claim_ids or ()))

    def release_message(self, project: str, queue: str, message_id: str, claim_id: str, now: float,
                        failure: Mapping[str, Any] | None, history_limit: int,
                        delay: float | None = None, *, outcome: str = policy.RETRY,
                        dead_letter: DeadLetterPolicy = NO_DEAD_LETTER) -> SweepResult:
        """Read the message, apply ``policy.check_claim_rules`` and the outcome's rule, write it.

        Retry and postpone write ``policy.released``; reject applies the plan
        of ``policy.rejected`` (a move or a delete) as a sweep's.
        """
        for _ in range(CHANGE_ATTEMPTS):
            with self._atomic():
                found, live = self._message_and_claim(project, queue, message_id, claim_id, now)
                if found is None:
                    raise errors.MessageDoesNotExist(message_id, queue)
                policy.check_claim_rules(found, claim_id, live, now)
                if outcome == policy.REJECT:
                    plan = policy.rejected(found, failure, now, history_limit, queue, dead_letter)
                    applied = self._apply_plan(project, queue, plan, [found], dead_letter, now)
                    if applied.moved or applied.deleted:
                        return SweepResult(dead_lettered=applied.moved, discarded=applied.deleted)
                    continue
                if self._write_released(project, queue, found,
                                        policy.released(found, failure, now, history_limit, delay, outcome)):
                    return SweepResult(dead_lettered=0, discarded=0)
        raise errors.StorageUnavailable(f"message {message_id} kept changing while being released")

    def edit_delayed_message(self, project: str, queue: str, message_id: str, changes: Mapping[str, Any],
                             now: float) -> Message:
        """Read the message, apply ``policy.check_editable`` and ``policy.edited``, write it if unchanged."""
        for _ in range(CHANGE_ATTEMPTS):
            with self._atomic():
                found, _ = self._message_and_claim(project, queue, message_id, None, now)
                if found is None:
                    raise errors.MessageDoesNotExist(message_id, queue)
                policy.check_editable(found, now)
                result = policy.edited(found, changes, now)
                if self._write_edited(project, queue, found, result):
                    return result
        raise errors.StorageUnavailable(f"message {message_id} kept changing while being edited")


class PlannedClaimStorage(PlannedStorage):
    """A :class:`PlannedStorage` whose claim loop is the one written here too."""

    @abc.abstractmethod
    def _visible_candidates(self, project: str, queue: str, now: float, after: int,
                            limit: int) -> list[Message]:
        """Return up to ``limit`` messages with marker > ``after``, FIFO: a prefilter of ``is_visible``.

        Every visible message of the queue up to the last one returned is among them.
        """

    @abc.abstractmethod
    def _store_claim(self, project: str, queue: str, request: ClaimRequest) -> None:
        """Store the record of a claim that took messages."""

    @abc.abstractmethod
    def _group_members(self, project: str, queue: str, names: set[str]) -> dict[str, list[Message]]:
        """Return each named group's messages stored in the queue, in marker order.

        Every stored message of the queue counts (claimed, delayed, expired
        and not yet swept); a group with no message is left out.
        """

    def _groups_only(self, project: str, queue: str, read: list[Message], now: float,
                     earlier: Iterable[Message] = ()) -> list[Message]:
        """Keep the candidates the group rule lets a claim or pop take (``claims.groups.claimable``).

        ``earlier`` are the messages the same claim or pop took from earlier
        reads: it takes no more of their groups.
        """
        names = groups.groups_of(read)
        if not names:
            return read
        taken = groups.groups_of(earlier)
        return groups.claimable(read, self._group_members(project, queue, names - taken), now, taken)

    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> ClaimResult:
        """Read visible candidates, FIFO, and apply ``policy.plan_claim``, until the limit or none left."""
        with self._atomic():
            return self._claim_atomically(project, queue, request)

    def _claim_atomically(self, project: str, queue: str, request: ClaimRequest) -> ClaimResult:
        """The loop of :meth:`claim_messages`, inside its :meth:`_atomic` context already (a driver
        whose ``claim_planned`` reads the metadata in that context calls it there)."""
        claimed: list[Message] = []
        moved = deleted = after = 0
        while len(claimed) < request.limit:
            wanted = request.limit - len(claimed)
            batch = self._visible_candidates(project, queue, request.now, after, wanted)
            visible = policy.visible_only(batch, request.now)
            read = self._groups_only(project, queue, visible, request.now, claimed)
            plan = policy.plan_claim(read, request, queue, len(claimed))
            applied = self._apply_plan(project, queue, plan, read, request.dead_letter, request.now)
            if len(applied.claimed) == len(plan.claimed):
                claimed += applied.claimed
            else:  # another claim won some: a group's messages after one it won are given back at once
                kept = groups.kept_in_order(plan.claimed, applied.claimed)
                for m in groups.unanswered(applied.claimed, kept):
                    self._write_released(project, queue, m, policy.claim_undone(m, request.now))
                claimed += kept
            moved, deleted = moved + applied.moved, deleted + applied.deleted
            if (plan.moved or plan.deleted) and groups.frees_a_group(
                    read, [*(m.id for m in plan.moved), *plan.deleted]):
                continue  # the group's next message may be claimable now: read again from `after`
            if len(batch) < wanted:
                break
            after = batch[-1].marker
        if claimed:  # written last: should this fail, the messages come back when their claim lapses
            self._store_claim(project, queue, request)
        return ClaimResult(claimed, dead_lettered=moved, discarded=deleted)


D = TypeVar("D", bound=type)


def each_operation_within(budget: Callable[[Any], contextlib.AbstractContextManager[Any]],
                          ) -> Callable[[D], D]:
    """Return a class decorator that runs each public method of a driver inside ``budget(self)``.

    A driver that bounds the time of a whole operation (a claim, a post of
    many, a queue's stats...) opens the bound here, once per operation: the
    internal calls an operation makes run inside it. Generators are left as
    they are: their requests run as they are consumed.
    """
    def decorate(cls: D) -> D:
        for name in dir(cls):
            fn = inspect.getattr_static(cls, name)
            if name.startswith("_") or not inspect.isfunction(fn) or inspect.isgeneratorfunction(fn):
                continue

            def wrapped(self: Any, *args: Any, __fn: Callable[..., Any] = fn, **kwargs: Any) -> Any:
                with budget(self):
                    return __fn(self, *args, **kwargs)

            setattr(cls, name, functools.wraps(fn)(wrapped))
        return cls
    return decorate
