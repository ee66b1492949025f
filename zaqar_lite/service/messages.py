"""Messages and claims: post, read, delete, release, claim."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite import metrics as counted
from zaqar_lite.claims import dedup, pause, retry_backoff, schedule
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims.policy import REASON_MAX_CLAIMS, REASON_REJECTED, REJECT, RETRY
from zaqar_lite.models import (
    NO_DEAD_LETTER,
    Claim,
    ClaimRequest,
    DeadLetterPolicy,
    Message,
)
from zaqar_lite.rules import topics
from zaqar_lite.service.pauses import Pauses


def post_too_large(size_limit: int, project: str, queue: str) -> errors.InvalidBody:
    """Return the error of a body over a queue's (or a topic's) ``_max_messages_post_size``."""
    return errors.InvalidBody(
        f"Request body may not exceed {size_limit} bytes on {topics.source_kind(project)} {queue}.")


class Messages(Pauses):
    """Message and claim operations with zaqar-lite's policy applied."""

    # -- messages -------------------------------------------------------------

    def post(self, project: str, queue: str, client_id: str,
             messages: Sequence[Mapping[str, Any]], body_size: int,
             trace: Mapping[str, str] | None = None) -> list[str]:
        """Store validated messages, applying the queue's default ttl and delay; return their ids.

        A ``deliver_at`` (POSIX seconds) sets the delay end instead of ``delay``
        (:mod:`zaqar_lite.claims.schedule`); the queue's default ttl counts from
        when a message is due when it would end before.
        A ttl (given or the queue's default) above the queue's ``_max_message_ttl`` is lowered to it.
        A message with a ``dedup_id`` the queue remembers is not stored: its id is the
        remembered message's; so is that of a message repeating an earlier one's
        ``dedup_id`` in the same post (:mod:`zaqar_lite.claims.dedup`).
        Each message keeps ``trace``, the post's W3C trace context, when given.

        Raises:
            InvalidBody: the body is larger than the queue's ``_max_messages_post_size``.
            ValidationFailed: a ``deliver_at`` is too far in the past or ahead.
        """
        now = self.clock()
        dedup_ids = [item.get("dedup_id") for item in messages]
        # most posts carry no dedup_id: each message is then stored as itself, and no window is read
        stored_as = None if dedup_ids.count(None) == len(dedup_ids) else dedup.collapse(dedup_ids)
        unique = messages if stored_as is None else [
            item for index, item in enumerate(messages) if stored_as[index] == index]
        ids = [self.ids() for _ in unique]

        def plan(stored: Mapping[str, Any] | None) -> list[Message]:
            if stored is None:  # the post creates the queue
                meta.check_room_for_queue(project, self.storage.count_queues(project),
                                          self.limits.max_queues_per_project)
            queue_meta = stored or {}
            size_limit = queue_meta.get(meta.MAX_POST_SIZE, self.limits.max_messages_post_size)
            if body_size > size_limit:
                raise post_too_large(size_limit, project, queue)
            default_ttl = queue_meta.get(meta.DEFAULT_TTL, self.limits.default_message_ttl)
            default_delay = queue_meta.get(meta.DEFAULT_DELAY, 0)
            dedup_until = 0.0 if stored_as is None else dedup.window_end(queue_meta, now)
            records = []
            for message_id, item in zip(ids, unique, strict=True):
                if "deliver_at" in item:
                    delay_until = schedule.delay_until(item["deliver_at"], now, self.limits.max_message_delay,
                                                       f"messages[{messages.index(item)}].deliver_at")
                    delay = delay_until - now if delay_until else 0
                else:
                    delay = item["delay"] if item["delay"] is not None else default_delay
                    delay_until = now + delay if delay else 0.0
                if item["ttl"] is not None:
                    ttl = meta.capped_ttl(item["ttl"], queue_meta)
                else:
                    ttl = meta.capped_ttl(schedule.default_ttl(default_ttl, delay) if delay else default_ttl,
                                          queue_meta)
                dedup_id = item.get("dedup_id")
                records.append(Message(
                    id=message_id, body=item["body"], created=now, expires=now + ttl,
                    delay_until=delay_until, client_id=client_id,
                    dlq_eligible=item["dlq_eligible"], dedup_id=dedup_id,
                    dedup_until=dedup_until if dedup_id is not None else 0.0, group=item.get("group"),
                    trace=dict(trace) if trace else None))
            return records

        answered = self.storage.post_planned(project, queue, plan, now)
        stored = len(ids) if answered == ids else sum(
            1 for new, acknowledged in zip(ids, answered, strict=True) if new == acknowledged)
        counted.MESSAGES_POSTED.inc(stored)
        if stored:
            self.wake_up_after_post_or_release(project, queue)
        if stored_as is None:
            return answered
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
            raise post_too_large(size_limit, project, queue)
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
        """Delete and return up to limit visible messages; a paused queue hands out none."""
        now = self.clock()
        if pause.is_paused(self.storage.get_queue_metadata(project, queue)):
            return [], now
        popped = self.storage.pop_messages(project, queue, limit, now)
        counted.MESSAGES_DELETED.inc(len(popped))
        return popped, now

    def release_message(self, project: str, queue: str, message_id: str, claim_id: str,
                        reason: Mapping[str, Any] | None, delay: int | None = None,
                        outcome: str = RETRY) -> None:
        """Release one claimed message with an outcome, recording the reason in its failure history.

        Retry (the default): claimable again after ``delay`` seconds when given
        (0: at once), else after the wait of the queue's ``_retry_backoff``
        (none without it). Postpone: after ``delay``, and the claim does not
        count. Reject: dead-lettered at once (discarded without a dead-letter
        queue). docs/api.rst, "Release one message (zaqar-lite extension)".

        Raises:
            DefaultDeadLetterQueueMissing: a reject on a queue whose dead-letter
                queue would be the server's default, which the project lacks.
        """
        stored, dead_letter = (self._rejection_policy(project, queue) if outcome == REJECT
                               else (None, NO_DEAD_LETTER))
        result = self.storage.release_message(project, queue, message_id, claim_id, self.clock(), reason,
                                              self.limits.failure_history_length, delay, outcome=outcome,
                                              dead_letter=dead_letter)
        counted.MESSAGES_RELEASED.inc()
        if result.dead_lettered or result.discarded:
            self._count_removed(project, queue, REASON_REJECTED, dead_letter, result.dead_lettered,
                                result.discarded)
            if stored and pause.BREAKER in stored:  # rejects arriving count toward the breaker too
                self.count_toward_breaker(project, queue, stored, result.dead_lettered, 0)
        self.wake_up_after_post_or_release(project, queue)

    def _rejection_policy(self, project: str,
                          queue: str) -> tuple[Mapping[str, Any] | None, DeadLetterPolicy]:
        """Return the queue's stored metadata and where a rejected message of it goes, as a claim's would."""
        stored = self.storage.get_queue_metadata(project, queue)
        wanted = meta.wanted_default_dead_letter_queue(queue, stored, self.settings.default_dead_letter_queue)
        default = self._existing_default_dlq(project, queue) if wanted else None
        if wanted and default is None:
            raise errors.DefaultDeadLetterQueueMissing(wanted, queue)
        return stored, meta.dead_letter_policy(stored, default)

    def _count_removed(self, project: str, queue: str, reason: str, dead_letter: DeadLetterPolicy,
                       moved: int, discarded: int) -> None:
        """Count messages a claim or a release moved to the dead-letter queue or discarded; wake the DLQ."""
        if discarded:
            counted.MESSAGES_DISCARDED.inc(discarded)
        if moved and dead_letter.queue:
            counted.count_dead_letters(reason, project, queue, dead_letter.queue, moved,
                                       self.settings.metrics.max_labelled_queues)
            self.wake_up(project, dead_letter.queue)

    # -- claims ---------------------------------------------------------------

    def claim(self, project: str, queue: str, limit: int, ttl: int,
              grace: int) -> tuple[str, list[Message], float]:
        """Claim up to limit messages; exhausted ones are dead-lettered on the way.

        A paused queue (``_paused``) hands out nothing: the claim is refused by
        its plan, from the metadata the store's claim reads, and takes nothing.
        A queue with a ``_dead_letter_breaker`` counts what the claim did toward it.
        """
        now = self.clock()
        claim_id = self.ids()
        default_dlq = self._existing_default_dlq(project, queue)

        planned: list[ClaimRequest] = []
        watched: list[Mapping[str, Any]] = []

        def plan(stored: Mapping[str, Any] | None) -> ClaimRequest:
            if stored:
                if stored.get(pause.PAUSED):
                    raise errors.QueuePaused(queue)
                if pause.BREAKER in stored:
                    watched.append(stored)
            default = meta.wanted_default_dead_letter_queue(queue, stored, default_dlq)
            backoff = meta.retry_backoff(stored, self.limits)
            planned.append(ClaimRequest(
                claim_id=claim_id, now=now, ttl=ttl, grace=grace, limit=limit,
                dead_letter=meta.dead_letter_policy(stored, default), backoff=backoff,
                draws=retry_backoff.draws(backoff, limit, self.draw)))
            return planned[-1]

        try:
            result = self.storage.claim_planned(project, queue, plan)
        except errors.QueuePaused:
            return claim_id, [], now
        counted.MESSAGES_CLAIMED.inc(len(result.claimed))
        if result.discarded or result.dead_lettered:  # rare: counted only when it happens
            # the plan the store applied is the last made
            self._count_removed(project, queue, REASON_MAX_CLAIMS, planned[-1].dead_letter,
                                result.dead_lettered, result.discarded)
        if watched:
            self.count_toward_breaker(project, queue, watched[-1], result.dead_lettered, len(result.claimed))
        return claim_id, result.claimed, now

    def get_claim(self, project: str, queue: str, claim_id: str) -> tuple[Claim, list[Message], float]:
        """Return a live claim and its messages."""
        now = self.clock()
        claim, messages = self.storage.get_claim(project, queue, claim_id, now)
        return claim, messages, now

    def renew_claim(self, project: str, queue: str, claim_id: str, ttl: int, grace: int) -> None:
        """Renew a live claim from now."""
        self.storage.renew_claim(project, queue, claim_id, self.clock(), ttl, grace)

    def release_claim(self, project: str, queue: str, claim_id: str, outcome: str = RETRY,
                      delay: int | None = None) -> None:
        """Release a claim; its messages become claimable at once (or after their ``_retry_backoff`` wait).

        With an ``outcome`` other than retry, or a ``delay``, each message the
        claim holds is released as :meth:`release_message` does with them
        (atomically one by one; one that changed meanwhile is left as it is),
        then the claim is let go of. An absent claim is fine.
        """
        if outcome != RETRY or delay is not None:
            self._release_held(project, queue, claim_id, outcome, delay)
        self.storage.release_claim(project, queue, claim_id, self.clock())
        counted.CLAIMS_RELEASED.inc()
        self.wake_up_after_post_or_release(project, queue)

    def _release_held(self, project: str, queue: str, claim_id: str, outcome: str, delay: int | None) -> None:
        """Release every message a live claim holds with ``outcome`` and ``delay``."""
        try:
            _, held = self.storage.get_claim(project, queue, claim_id, self.clock())
        except errors.ClaimDoesNotExist:
            return
        for message in held:
            try:
                self.release_message(project, queue, message.id, claim_id, None, delay, outcome)
            except (errors.NotFound, errors.MessageNotClaimed, errors.MessageIsClaimedBy):
                continue  # deleted, expired or released meanwhile: nothing of this claim's left to do
            except errors.InvalidClaim:
                return  # the claim lapsed meanwhile: its messages went back as any lapsed claim's
