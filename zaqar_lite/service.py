"""The messaging service: turns validated requests into policy decisions and storage calls.

The API's resources call this and nothing else; it owns the clock and the id
generator, so tests can move time and predict nothing else.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import backoff as retry_backoff
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.clock import Clock, wall_clock
from zaqar_lite.config import Settings
from zaqar_lite.models import (
    Claim,
    ClaimRequest,
    Message,
    Move,
    QueueStats,
    RedriveRequest,
    RedriveResult,
    SweepResult,
)
from zaqar_lite.notify.subscriptions import remove_queue_subscriptions
from zaqar_lite.storage.base import Storage

LOG = logging.getLogger(__name__)


def _matches(metadata: Mapping[str, Any], key: str, wanted: str) -> bool:
    """Return whether a metadata value equals a query-string value (JSON text for non-strings)."""
    if key not in metadata:
        return False
    value = metadata[key]
    return value == wanted if isinstance(value, str) else json.dumps(value) == wanted


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
        """Create a queue; an existing queue keeps its metadata. Returns whether it was created."""
        stored = self._validated_metadata(project, queue, metadata if metadata is not None else {})
        return self.storage.create_queue(project, queue, stored, self.clock())

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
        Each message keeps ``trace``, the post's W3C trace context, when given.

        Raises:
            InvalidBody: the body is larger than the queue's ``_max_messages_post_size``.
        """
        now = self.clock()
        ids = [self.ids() for _ in messages]

        def plan(stored: Mapping[str, Any] | None) -> list[Message]:
            queue_meta = stored or {}
            size_limit = queue_meta.get(meta.MAX_POST_SIZE, self.limits.max_messages_post_size)
            if body_size > size_limit:
                raise errors.InvalidBody(f"Request body may not exceed {size_limit} bytes on queue {queue}.")
            default_ttl = queue_meta.get(meta.DEFAULT_TTL, self.limits.default_message_ttl)
            default_delay = queue_meta.get(meta.DEFAULT_DELAY, 0)
            records = []
            for message_id, item in zip(ids, messages, strict=True):
                ttl = meta.capped_ttl(item["ttl"] if item["ttl"] is not None else default_ttl, queue_meta)
                delay = item["delay"] if item["delay"] is not None else default_delay
                records.append(Message(
                    id=message_id, body=item["body"], created=now, expires=now + ttl,
                    delay_until=now + delay if delay else 0.0, client_id=client_id,
                    dlq_eligible=item["dlq_eligible"], trace=dict(trace) if trace else None))
            return records

        self.storage.post_planned(project, queue, plan, now)
        return ids

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
        return self.storage.edit_delayed_message(project, queue, message_id, changes, now), now

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

    def delete_messages(self, project: str, queue: str, ids: Sequence[str],
                        claim_ids: Sequence[str] | None) -> None:
        """Delete messages by id."""
        self.storage.delete_messages(project, queue, ids, claim_ids, self.clock())

    def pop(self, project: str, queue: str, limit: int) -> tuple[list[Message], float]:
        """Delete and return up to limit visible messages."""
        now = self.clock()
        return self.storage.pop_messages(project, queue, limit, now), now

    def release_message(self, project: str, queue: str, message_id: str, claim_id: str,
                        reason: Mapping[str, Any] | None, delay: int | None = None) -> None:
        """Release one claimed message, recording the reason in its failure history.

        It is claimable again after ``delay`` seconds when given (0: at once),
        else after the wait of the queue's ``_retry_backoff`` (none without it).
        """
        self.storage.release_message(project, queue, message_id, claim_id, self.clock(), reason,
                                     self.limits.failure_history_length, delay)

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

        def plan(stored: Mapping[str, Any] | None) -> ClaimRequest:
            default = meta.wanted_default_dead_letter_queue(queue, stored, default_dlq)
            backoff = meta.retry_backoff(stored, self.limits)
            return ClaimRequest(claim_id=claim_id, now=now, ttl=ttl, grace=grace, limit=limit,
                                dead_letter=meta.dead_letter_policy(stored, default), backoff=backoff,
                                draws=retry_backoff.draws(backoff, limit, self.draw))

        return claim_id, self.storage.claim_planned(project, queue, plan), now

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

    # -- redrive --------------------------------------------------------------

    def _dead_letters(self, project: str, queue: str, request: RedriveRequest,
                      now: float) -> list[tuple[Message, str]]:
        """Return the dead letters a redrive selects, each with its target queue.

        They are unexpired and unclaimed, in post order, at most ``request.limit``.
        """
        wanted = request.filter
        pages = self._pages(project, queue, now) if wanted.ids is None else [
            self._by_ids(project, queue, sorted(wanted.ids), now)]
        selected: list[tuple[Message, str]] = []
        for page in pages:
            for message in page:
                target = redrive_policy.selected_target(message, queue, request, now)
                if target is not None:
                    selected.append((message, target))
                    if len(selected) == request.limit:
                        return selected
        return selected

    def _by_ids(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        """Return the unexpired messages of a queue among ids, FIFO."""
        size = redrive_policy.BATCH_SIZE
        found = [m for start in range(0, len(ids), size)
                 for m in self.storage.get_messages(project, queue, ids[start:start + size], now)]
        return sorted(found, key=lambda m: m.marker)

    def _pages(self, project: str, queue: str, now: float) -> Iterator[list[Message]]:
        """Yield a queue's unexpired, unclaimed messages (delayed ones too), FIFO, a page at a time."""
        marker = None
        while True:
            page = self.storage.list_messages(
                project, queue, now=now, marker=marker, limit=redrive_policy.BATCH_SIZE,
                include_claimed=False, include_delayed=True, exclude_client_id=None)
            yield page
            if len(page) < redrive_policy.BATCH_SIZE:
                return
            marker = page[-1].marker

    def redrive(self, project: str, queue: str, request: RedriveRequest) -> tuple[RedriveResult, float]:
        """Move the dead letters a request selects back to their source queue or to its destination.

        Messages go in batches (at most ``max_per_second`` a second when
        given, waiting between batches); no batch starts once
        ``max_redrive_seconds`` have passed, so a call may move fewer than it
        selected (the client calls again). A dry run moves nothing.

        Returns:
            What was selected and moved, and the time the selection was made at.
        """
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
            at, min_ttl = self.clock(), self.limits.min_message_ttl
            for target, messages in redrive_policy.by_target(batch).items():
                moves = [Move(m, redrive_policy.redriven(m, at, min_ttl)) for m in messages]
                moved += len(self.storage.move_messages(project, queue, moves, target, at))
            done += len(batch)
        LOG.info("redrive of %s/%s: %d of %d selected dead letters moved",
                 project, queue, moved, len(selected))
        return RedriveResult(matched=len(selected), redriven=moved), now

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

    def ping(self) -> bool:
        """Return whether the store answers."""
        return self.storage.ping()
