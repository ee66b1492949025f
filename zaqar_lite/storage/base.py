"""The storage contract every driver implements, and the loops most drivers share.

:class:`Storage` is the contract (its queue and record parts:
:mod:`~zaqar_lite.storage.queues`, :mod:`~zaqar_lite.storage.records`, and the
redrive tasks built on the records, :mod:`~zaqar_lite.storage.tasks`).
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
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import groups, policy
from zaqar_lite.models import (
    Claim,
    ClaimRequest,
    ClaimResult,
    DeadLetterPolicy,
    Message,
    Move,
    QueueStats,
    SweepResult,
)
from zaqar_lite.storage.queues import QueueStore

# for the stores of storage's subpackages that keep their records in another store
from zaqar_lite.storage.records import RecordsKeptElsewhere as RecordsKeptElsewhere
from zaqar_lite.storage.records import RecordStore as RecordStore
from zaqar_lite.storage.tasks import RedriveTaskStore

#: makes the messages of a post from the queue's stored metadata (None: no such queue)
PostPlan = Callable[[Mapping[str, Any] | None], Sequence[Message]]
#: makes the request of a claim from the queue's stored metadata (None: no such queue)
ClaimPlan = Callable[[Mapping[str, Any] | None], ClaimRequest]
#: reads of a message whose guarded write keeps losing to concurrent changes, before giving up
CHANGE_ATTEMPTS = 10


class Storage(QueueStore, RedriveTaskStore):
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

    # -- messages -------------------------------------------------------------

    @abc.abstractmethod
    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float) -> list[str]:
        """Store new messages, creating the queue (empty metadata) if it is missing.

        Atomic: all messages are stored or none; once this returns they are
        durable to the backend's own guarantee. Markers are assigned in list
        order, after every marker already in the queue.

        Deduplication (:mod:`zaqar_lite.claims.dedup`): a message with a
        ``dedup_id`` that the queue remembers until after ``now`` is not
        stored; otherwise the queue remembers its id with the message's id
        until its ``dedup_until``. The check and the write are atomic with the
        post: of two concurrent posts of one id, one stores its message. The
        messages of one call carry distinct ``dedup_id``.

        Returns:
            For each message in order, the id it is acknowledged with: its own,
            or the remembered message's for a duplicate.
        """

    def post_planned(self, project: str, queue: str, plan: PostPlan, now: float) -> list[str]:
        """Store the messages ``plan`` makes from the queue's stored metadata (:meth:`post_messages`).

        ``plan`` gets the metadata (None for a missing queue) and may raise a
        domain error to refuse the post. A change of the metadata made by
        another process before this call is never missed. This default reads
        the metadata, then posts; a driver may plan from what it remembers
        when its write checks that against the store and plans again if not.
        """
        return self.post_messages(project, queue, plan(self.get_queue_metadata(project, queue)), now)

    @abc.abstractmethod
    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        """Return up to ``limit`` unexpired messages with marker > ``marker``, FIFO.

        Claimed messages only with ``include_claimed``, delayed ones only with
        ``include_delayed``; messages posted by ``exclude_client_id`` are skipped.
        """

    @abc.abstractmethod
    def get_messages(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        """Return the unexpired messages among ``ids`` (missing ones are left out)."""

    @abc.abstractmethod
    def delete_message(self, project: str, queue: str, message_id: str, claim_id: str | None,
                       now: float) -> None:
        """Delete one message, obeying the claim rules of ``policy.check_claim_rules``.

        Atomic: the check and the delete happen in one step. An absent or
        expired message is not an error.

        Raises:
            MessageIsClaimed, MessageIsClaimedBy, InvalidClaim, MessageNotClaimed.
        """

    @abc.abstractmethod
    def delete_messages(
        self, project: str, queue: str, ids: Sequence[str], claim_ids: Sequence[str] | None, now: float
    ) -> None:
        """Delete messages by id.

        Without ``claim_ids`` every listed message goes, claimed or not (as
        Zaqar). With ``claim_ids`` a message held by a live claim that is not
        listed is kept and the call raises after deleting the others.

        Raises:
            MessageIsClaimedBy: some listed message is held by another claim.
        """

    @abc.abstractmethod
    def edit_delayed_message(self, project: str, queue: str, message_id: str, changes: Mapping[str, Any],
                             now: float) -> Message:
        """Change a delayed message's ``body``, ``ttl`` or ``delay`` (``changes`` holds any of them).

        Atomic, under :func:`zaqar_lite.claims.policy.check_editable` (still
        delayed, unclaimed, unexpired at ``now``): the check and the write of
        :func:`zaqar_lite.claims.policy.edited` happen in one step, so an edit
        racing the delay's end, a claim or another edit either lands on the
        state it was checked on or is refused; it never overwrites a change it
        did not see (Swift: see its module).

        Returns:
            The message as stored after the edit.

        Raises:
            MessageDoesNotExist: absent or expired.
            MessageNotEditable: no longer delayed, or claimed (409).
        """

    @abc.abstractmethod
    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        """Delete and return up to ``limit`` visible messages, FIFO, atomically."""

    @abc.abstractmethod
    def purge_messages(self, project: str, queue: str) -> None:
        """Delete every message and claim of a queue, claimed ones included."""

    @abc.abstractmethod
    def queue_stats(self, project: str, queue: str, now: float) -> QueueStats:
        """Count the unexpired messages of a queue by state, with the oldest and newest."""

    # -- claims ---------------------------------------------------------------

    @abc.abstractmethod
    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> ClaimResult:
        """Claim up to ``request.limit`` visible messages, FIFO, applying the claim plan.

        The driver reads candidates (visible messages, FIFO) and applies
        :func:`zaqar_lite.claims.policy.plan_claim` to them, in one atomic step
        per message at least: a message is handed to at most one live claim, its
        ``claim_count`` is incremented by the same write that claims it, and a
        message the plan dead-letters is moved to ``request.dead_letter.queue``
        (creating that queue if needed) by one write, never present in both
        queues or neither (Swift: see its module). It keeps reading candidates
        until ``limit`` messages are claimed or none are left.

        Returns:
            The claimed messages (empty when none were visible; the claim record
            exists when some were claimed), and how many exhausted messages this
            call itself moved to the dead-letter queue or deleted (a message a
            concurrent claim or sweep removed first is not counted).
        """

    def claim_planned(self, project: str, queue: str, plan: ClaimPlan) -> ClaimResult:
        """Claim as the request ``plan`` makes from the queue's stored metadata (:meth:`claim_messages`).

        As :meth:`post_planned`: this default reads the metadata, then claims.
        """
        return self.claim_messages(project, queue, plan(self.get_queue_metadata(project, queue)))

    def next_visible_at(self, project: str, queue: str, now: float) -> float | None:
        """Return when a message of the queue that is not visible at ``now`` may next become visible.

        That is the earliest end of a delay or of a claim after ``now``, or None
        when no message is delayed or claimed. A prefilter, as the candidate
        queries: the answer may come early (the caller's claim then finds
        nothing and asks again), never late. Long polling sleeps until then.
        This default, for a store without a cheap way to tell, answers ``now``:
        it may be any time, and the caller re-checks at its own pace.
        """
        return now

    @abc.abstractmethod
    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        """Return a live claim and the unexpired messages it still holds.

        Raises:
            ClaimDoesNotExist: absent or expired.
        """

    @abc.abstractmethod
    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        """Renew a live claim from ``now``; its messages' expiry becomes at least now+ttl+grace.

        Each message held becomes :func:`zaqar_lite.claims.policy.claim_renewed`
        (a wait its claim fixed moves with the claim's end).

        Raises:
            ClaimDoesNotExist: absent or expired.
        """

    @abc.abstractmethod
    def release_claim(self, project: str, queue: str, claim_id: str, now: float, *,
                      undo: bool = False) -> None:
        """Release a claim: its messages become visible at once, or after their wait. Absent claims are fine.

        Each message held becomes :func:`zaqar_lite.claims.policy.claim_released`
        (the wait its claim fixed, under the queue's ``_retry_backoff``, starts now).
        With ``undo`` the claim is taken back instead, as if it had not been
        made (its messages could not be handed out): each message held becomes
        :func:`zaqar_lite.claims.policy.claim_undone`, visible at once with the
        claim count it had before. Atomic per message: only a message the
        claim still holds changes; the claim record is removed.
        """

    @abc.abstractmethod
    def release_message(self, project: str, queue: str, message_id: str, claim_id: str, now: float,
                        failure: Mapping[str, Any] | None, history_limit: int,
                        delay: float | None = None) -> None:
        """Release one claimed message and append ``failure`` to its bounded history.

        Atomic, under the claim rules of ``policy.check_claim_rules`` with a
        claim id that is required. The message is stored as
        :func:`zaqar_lite.claims.policy.released` leaves it: claimable after
        ``delay`` seconds when given (0: at once), else after the wait its
        claim fixed.

        Raises:
            MessageDoesNotExist, InvalidClaim, MessageNotClaimed, MessageIsClaimedBy.
        """

    # -- moves between queues -------------------------------------------------

    @abc.abstractmethod
    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        """Move messages of ``queue`` into ``target_queue`` (a redrive), each one guarded and atomic.

        For each :class:`~zaqar_lite.models.Move`, in order: the message is
        moved only if :func:`zaqar_lite.claims.policy.still_movable` holds for
        it as stored now against ``move.read`` (still in ``queue``, unexpired
        and unclaimed at ``now``, its claim, claim count and expiry unchanged
        since it was read); otherwise it is skipped and left as it is. A moved
        message keeps its id, body, creation time, client id, eligibility and
        failure history; it gets a marker of ``target_queue`` (after every
        marker already there; Swift: its own marker, see its module), is
        unclaimed and not delayed, and takes ``claim_count``, ``expires`` and
        ``dead_letter`` from ``move.moved``. ``target_queue`` is created (empty
        metadata) if it is missing, by the same step as the first move.

        Atomic per message, as the dead-letter move of :meth:`claim_messages`:
        there is no instant where it is in both queues or in neither (Swift
        copies, then deletes: a crash in between leaves it in both, never in
        neither); a message claimed or changed concurrently is never moved.

        Returns:
            The ids of the messages moved, in the order given.
        """

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
                        delay: float | None = None) -> None:
        """Read the message, apply ``policy.check_claim_rules`` and ``policy.released``, write it."""
        for _ in range(CHANGE_ATTEMPTS):
            with self._atomic():
                found, live = self._message_and_claim(project, queue, message_id, claim_id, now)
                if found is None:
                    raise errors.MessageDoesNotExist(message_id, queue)
                policy.check_claim_rules(found, claim_id, live, now)
                if self._write_released(project, queue, found,
                                        policy.released(found, failure, now, history_limit, delay)):
                    return
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
    def _group_heads(self, project: str, queue: str, names: set[str]) -> dict[str, str]:
        """Return the id of each named group's head: its message with the lowest marker in the queue.

        Every stored message of the queue counts (claimed, delayed, expired
        and not yet swept); a group with no message is left out.
        """

    def _heads_only(self, project: str, queue: str, read: list[Message],
                    taken: Collection[str] = ()) -> list[Message]:
        """Keep the candidates the group rule lets a claim or pop take (``claims.groups.claimable``)."""
        names = groups.groups_of(read)
        return groups.claimable(read, self._group_heads(project, queue, names), taken) if names else read

    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> ClaimResult:
        """Read visible candidates, FIFO, and apply ``policy.plan_claim``, until the limit or none left."""
        claimed: list[Message] = []
        moved = deleted = after = 0
        with self._atomic():
            while len(claimed) < request.limit:
                wanted = request.limit - len(claimed)
                batch = self._visible_candidates(project, queue, request.now, after, wanted)
                visible = [m for m in batch if policy.is_visible(m, request.now)]
                read = self._heads_only(project, queue, visible)
                plan = policy.plan_claim(read, request, queue, len(claimed))
                applied = self._apply_plan(project, queue, plan, read, request.dead_letter, request.now)
                claimed += applied.claimed
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
