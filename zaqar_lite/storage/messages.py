"""The message part of the storage contract: posts, reads, deletes, claims and moves between queues.

The words (*visible*, *FIFO*) and the rules every method follows (scope,
``StorageUnavailable``) are those of :mod:`zaqar_lite.storage.base`, whose
:class:`~zaqar_lite.storage.base.Storage` is one of these with the queue and
record parts.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from zaqar_lite.models import (
    NO_DEAD_LETTER,
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

#: makes the messages of a post from the queue's stored metadata (None: no such queue)
PostPlan = Callable[[Mapping[str, Any] | None], Sequence[Message]]
#: makes the request of a claim from the queue's stored metadata (None: no such queue)
ClaimPlan = Callable[[Mapping[str, Any] | None], ClaimRequest]


class MessageStore(QueueStore):
    """The messages and claims of queues; every method may raise StorageUnavailable."""

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
                        delay: float | None = None, *, outcome: str = "retry",
                        dead_letter: DeadLetterPolicy = NO_DEAD_LETTER) -> SweepResult:
        """Release one claimed message with an ``outcome``, appending to its bounded failure history.

        Atomic, under the claim rules of ``policy.check_claim_rules`` with a
        claim id that is required. By outcome (:data:`zaqar_lite.claims.policy.OUTCOMES`):

        * ``retry``: stored as :func:`zaqar_lite.claims.policy.released`
          leaves it: ``failure`` appended when given, claimable after ``delay``
          seconds when given (0: at once), else after the wait its claim fixed.
        * ``postpone``: as ``policy.released`` with that outcome leaves it:
          its claim count one less, an entry appended, claimable after ``delay``.
        * ``reject``: :func:`zaqar_lite.claims.policy.rejected`'s plan: an
          entry appended, then moved into ``dead_letter.queue`` (created if
          missing) by one write, as a claim's dead-letter move, or deleted
          when there is none or the message is not DLQ-eligible.

        Returns:
            How many messages this call moved to the dead-letter queue or
            deleted (a reject's one; 0 and 0 otherwise).

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
