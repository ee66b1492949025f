"""The base of every store that wraps another: each method of the contract passed on, written once.

A wrapper (encryption at rest, :mod:`zaqar_lite.storage.encrypted`; the pools'
router, :mod:`zaqar_lite.storage.pools.router`) derives from
:class:`ForwardingStorage` and overrides only what it changes, so a method
added to the contract is forwarded by one edit here, not one per wrapper
(``tests/storage/test_forwarding.py`` holds every wrapper to it, on real
stores).

Where a call goes is chosen by two hooks: a call on one queue goes to
:meth:`~ForwardingStorage._store_for` of that queue (a post to
:meth:`~ForwardingStorage._store_for_post`, as a post creates a missing
queue); the records and the calls on no one queue (listings, the sweep's
queues, health) go to :attr:`~ForwardingStorage.inner`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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
    Record,
    SweepResult,
)
from zaqar_lite.storage.base import ClaimPlan, PostPlan, Storage


class ForwardingStorage(Storage):
    """A store that passes every call of the contract on: to the store of its queue, else to :attr:`inner`."""

    #: the store wrapped: it keeps the records and answers the calls on no one queue
    inner: Storage

    def __init__(self, inner: Storage) -> None:
        self.inner = inner

    def _store_for(self, project: str, queue: str) -> Storage:
        """Return the store a call on ``queue`` goes to: :attr:`inner`, unless the wrapper routes it."""
        return self.inner

    def _store_for_post(self, project: str, queue: str) -> Storage:
        """Return the store a post to ``queue`` goes to (it creates a missing queue): :meth:`_store_for`."""
        return self._store_for(project, queue)

    # -- queues ---------------------------------------------------------------

    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        return self._store_for(project, queue).create_queue(project, queue, metadata, now)

    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        return self._store_for(project, queue).get_queue_metadata(project, queue)

    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        self._store_for(project, queue).set_queue_metadata(project, queue, metadata)

    def delete_queue(self, project: str, queue: str) -> None:
        self._store_for(project, queue).delete_queue(project, queue)

    def list_queues(self, project: str, *, marker: str | None, limit: int,
                    name_contains: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        return self.inner.list_queues(project, marker=marker, limit=limit, name_contains=name_contains)

    def count_queues(self, project: str) -> int:
        return self.inner.count_queues(project)

    def all_queues(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        return self.inner.all_queues()

    # -- messages -------------------------------------------------------------

    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float) -> list[str]:
        return self._store_for_post(project, queue).post_messages(project, queue, messages, now)

    def post_planned(self, project: str, queue: str, plan: PostPlan, now: float) -> list[str]:
        return self._store_for_post(project, queue).post_planned(project, queue, plan, now)

    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        return self._store_for(project, queue).list_messages(
            project, queue, now=now, marker=marker, limit=limit, include_claimed=include_claimed,
            include_delayed=include_delayed, exclude_client_id=exclude_client_id)

    def get_messages(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        return self._store_for(project, queue).get_messages(project, queue, ids, now)

    def delete_message(self, project: str, queue: str, message_id: str, claim_id: str | None,
                       now: float) -> None:
        self._store_for(project, queue).delete_message(project, queue, message_id, claim_id, now)

    def delete_messages(self, project: str, queue: str, ids: Sequence[str],
                        claim_ids: Sequence[str] | None, now: float) -> None:
        self._store_for(project, queue).delete_messages(project, queue, ids, claim_ids, now)

    def edit_delayed_message(self, project: str, queue: str, message_id: str, changes: Mapping[str, Any],
                             now: float) -> Message:
        return self._store_for(project, queue).edit_delayed_message(project, queue, message_id, changes, now)

    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        return self._store_for(project, queue).pop_messages(project, queue, limit, now)

    def purge_messages(self, project: str, queue: str) -> None:
        self._store_for(project, queue).purge_messages(project, queue)

    def queue_stats(self, project: str, queue: str, now: float) -> QueueStats:
        return self._store_for(project, queue).queue_stats(project, queue, now)

    # -- claims ---------------------------------------------------------------

    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> ClaimResult:
        return self._store_for(project, queue).claim_messages(project, queue, request)

    def claim_planned(self, project: str, queue: str, plan: ClaimPlan) -> ClaimResult:
        return self._store_for(project, queue).claim_planned(project, queue, plan)

    def next_visible_at(self, project: str, queue: str, now: float) -> float | None:
        return self._store_for(project, queue).next_visible_at(project, queue, now)

    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        return self._store_for(project, queue).get_claim(project, queue, claim_id, now)

    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        self._store_for(project, queue).renew_claim(project, queue, claim_id, now, ttl, grace)

    def release_claim(self, project: str, queue: str, claim_id: str, now: float, *,
                      undo: bool = False) -> None:
        self._store_for(project, queue).release_claim(project, queue, claim_id, now, undo=undo)

    def release_message(self, project: str, queue: str, message_id: str, claim_id: str, now: float,
                        failure: Mapping[str, Any] | None, history_limit: int,
                        delay: float | None = None, *, outcome: str = "retry",
                        dead_letter: DeadLetterPolicy = NO_DEAD_LETTER) -> SweepResult:
        return self._store_for(project, queue).release_message(
            project, queue, message_id, claim_id, now, failure, history_limit, delay, outcome=outcome,
            dead_letter=dead_letter)

    # -- moves and links between queues ----------------------------------------

    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        return self._store_for(project, queue).move_messages(project, queue, moves, target_queue, now)

    def check_same_pool(self, project: str, queue: str, other: str, role: str) -> None:
        self._store_for(project, queue).check_same_pool(project, queue, other, role)

    # -- background work ------------------------------------------------------

    def due_queues(self, now: float) -> Iterator[tuple[str, str, dict[str, Any]]]:
        return self.inner.due_queues(now)

    def sweep_queue(self, project: str, queue: str, now: float, dead_letter: DeadLetterPolicy) -> SweepResult:
        return self._store_for(project, queue).sweep_queue(project, queue, now, dead_letter)

    # -- records --------------------------------------------------------------

    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        return self.inner.get_record(project, kind, key)

    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        return self.inner.put_record(project, kind, key, value, expected_version)

    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        return self.inner.delete_record(project, kind, key, expected_version)

    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        return self.inner.list_records(project, kind, prefix=prefix, marker=marker, limit=limit)

    def record_projects(self, kind: str) -> list[str]:
        return self.inner.record_projects(kind)

    # -- health ---------------------------------------------------------------

    def ping(self) -> bool:
        return self.inner.ping()

    def describe(self) -> str:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()
