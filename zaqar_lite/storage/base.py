"""The storage contract every driver implements.

Drivers only store and atomically move. Every decision (claim counts, what to
dead-letter, new expiries, delay and claim visibility, the claim rules of
deletes) is made by :mod:`zaqar_lite.claims.policy` and either handed to a
primitive as arguments (:class:`~zaqar_lite.models.ClaimRequest`,
:class:`~zaqar_lite.models.DeadLetterPolicy`) or, for drivers that can run
Python inside their atomic step (SQLite), called from inside that step. A
driver whose atomic step cannot call Python (a Redis Lua script) implements
the same documented rules mechanically; the conformance suite
(``tests/storage/test_conformance.py``) holds every driver to them.

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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite.models import (
    Claim,
    ClaimRequest,
    DeadLetterPolicy,
    Message,
    MetadataSnapshot,
    Move,
    QueueStats,
    Record,
    SweepResult,
)


class Storage(abc.ABC):
    """Abstract storage driver; one instance per process, safe across processes."""

    #: short name shown in logs and health (``sqlite``, ``redis``, ...)
    name: str = "abstract"
    #: seconds after its post within which a message may still become listable after
    #: a message with a higher marker was listed (0: markers become visible in order).
    #: Subscription delivery waits this long before passing a message by.
    visibility_lag: float = 0.0
    #: queues :meth:`all_queues` reads from the store at a time (a sweep holds one page, not every queue)
    all_queues_page: int = 1000
    #: whether the driver remembers anything per queue in memory; such a driver keeps it
    #: in :class:`~zaqar_lite.storage.cache.LRUCache` instances and takes their size,
    #: ``[storage] queue_cache_size``, as the ``queue_cache_size`` keyword of its constructor
    remembers_queues: bool = False

    # -- queues ---------------------------------------------------------------

    @abc.abstractmethod
    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        """Create a queue with its metadata.

        Atomic: two concurrent creates make one queue; the loser leaves the
        existing metadata unchanged.

        Returns:
            True if the queue was created, False if it already existed.
        """

    @abc.abstractmethod
    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        """Return the stored metadata of a queue, or None if the queue does not exist."""

    def metadata_for_write(self, project: str, queue: str, *, fresh: bool = False) -> MetadataSnapshot:
        """Return the metadata a post or a claim of the queue is planned with.

        This default reads the store and asks for no check. A driver may answer
        from memory instead (unless ``fresh``) when it gives a version that its
        ``post_messages`` and ``claim_messages`` compare with the stored
        metadata inside their atomic step, raising
        :class:`~zaqar_lite.errors.StaleMetadata` on a difference: a change made
        by another process is then never missed, only costs a second plan.
        """
        return MetadataSnapshot(self.get_queue_metadata(project, queue))

    @abc.abstractmethod
    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        """Replace the metadata of an existing queue.

        Raises:
            QueueDoesNotExist: no such queue.
        """

    @abc.abstractmethod
    def delete_queue(self, project: str, queue: str) -> None:
        """Delete a queue with all its messages and claims; absent queues are fine."""

    @abc.abstractmethod
    def list_queues(
        self, project: str, *, marker: str | None, limit: int, name_contains: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Return up to ``limit`` ``(name, metadata)`` pairs with name > marker, by name."""

    @abc.abstractmethod
    def count_queues(self, project: str) -> int:
        """Return the number of queues of a project."""

    @abc.abstractmethod
    def all_queues(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield ``(project, queue, metadata)`` for every queue of every project.

        Reads at most :attr:`all_queues_page` queues from the store at a time, so
        that the memory of a sweep does not grow with the number of queues.
        """

    # -- messages -------------------------------------------------------------

    @abc.abstractmethod
    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float,
                      metadata_version: str | None = None) -> None:
        """Store new messages, creating the queue (empty metadata) if it is missing.

        Atomic: all messages are stored or none; once this returns they are
        durable to the backend's own guarantee. Markers are assigned in list
        order, after every marker already in the queue.

        Raises:
            StaleMetadata: ``metadata_version`` (see :meth:`metadata_for_write`)
                is not the stored metadata's; nothing was stored.
        """

    @abc.abstractmethod
    def list_messages(
        self,
        project: str,
        queue: str,
        *,
        now: float,
        marker: int | None,
        limit: int,
        include_claimed: bool,
        include_delayed: bool,
        exclude_client_id: str | None,
    ) -> list[Message]:
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
    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> list[Message]:
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
            The claimed messages (empty when none were visible); the claim record
            exists when this returns a non-empty list.

        Raises:
            StaleMetadata: ``request.metadata_version`` is not the stored
                metadata's (see :meth:`metadata_for_write`); nothing was changed.
        """

    @abc.abstractmethod
    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        """Return a live claim and the unexpired messages it still holds.

        Raises:
            ClaimDoesNotExist: absent or expired.
        """

    @abc.abstractmethod
    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        """Renew a live claim from ``now``; its messages' expiry becomes at least now+ttl+grace.

        Raises:
            ClaimDoesNotExist: absent or expired.
        """

    @abc.abstractmethod
    def release_claim(self, project: str, queue: str, claim_id: str, now: float) -> None:
        """Release a claim: its messages become visible at once. Absent claims are fine."""

    @abc.abstractmethod
    def release_message(
        self,
        project: str,
        queue: str,
        message_id: str,
        claim_id: str,
        now: float,
        failure: Mapping[str, Any] | None,
        history_limit: int,
    ) -> None:
        """Release one claimed message and append ``failure`` to its bounded history.

        Atomic, under the claim rules of ``policy.check_claim_rules`` with a
        claim id that is required.

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

    # -- background work ------------------------------------------------------

    @abc.abstractmethod
    def sweep_queue(self, project: str, queue: str, now: float, dead_letter: DeadLetterPolicy) -> SweepResult:
        """Apply :func:`zaqar_lite.claims.policy.plan_sweep` to one queue.

        Expired messages are dead-lettered (``on_expiry``) or discarded, and
        messages whose count is exhausted and whose claim has lapsed are moved,
        each move atomic as in :meth:`claim_messages`. Lapsed claims are removed.
        """

    # -- versioned records (subscriptions, cursors, leases) -------------------
    #
    # A record is a JSON object under (project, kind, key), written only by
    # compare-and-set on its version. Everything built on them (subscriptions,
    # delivery cursors, notifier leases) is policy in zaqar_lite/notify/.

    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        """Return a record, or None if absent."""
        raise NotImplementedError(f"{self.name} does not store records yet")

    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        """Write a record by compare-and-set, atomically.

        Args:
            expected_version: None to create (fails if the record exists), else
                the version read (fails if it changed since).

        Returns:
            The new version.

        Raises:
            Conflict: the record exists (create) or its version changed (update).
        """
        raise NotImplementedError(f"{self.name} does not store records yet")

    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        """Delete a record (only at ``expected_version`` when given); return whether one was deleted."""
        raise NotImplementedError(f"{self.name} does not store records yet")

    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        """Return up to ``limit`` records of a kind whose key starts with prefix and is > marker, by key."""
        raise NotImplementedError(f"{self.name} does not store records yet")

    def record_projects(self, kind: str) -> list[str]:
        """Return every project that has at least one record of a kind."""
        raise NotImplementedError(f"{self.name} does not store records yet")

    # -- health ---------------------------------------------------------------

    @abc.abstractmethod
    def ping(self) -> bool:
        """Return True when the backend answers."""

    def describe(self) -> str:
        """Return where the data lives, for startup logs."""
        return self.name

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default does nothing."""
