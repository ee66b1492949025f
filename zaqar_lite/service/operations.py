"""What the background processes, the metrics and the console read: sweep, census, health."""

from __future__ import annotations

from typing import Any

from zaqar_lite import errors
from zaqar_lite import metrics as counted
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.models import (
    Message,
    SweepResult,
)
from zaqar_lite.service.core import ServiceBase


class Operations(ServiceBase):
    """Store-wide work: the sweep, message counts, and the console's reads."""

    # -- background -----------------------------------------------------------

    def sweep(self) -> SweepResult:
        """Run the expiry and dead-letter rules once over every queue that has something due.

        Only the queues the store finds due are read (``Storage.due_queues``): a
        sweep costs what is due, not the number of queues.
        """
        now = self.clock()
        moved = discarded = 0
        default_dlqs: dict[str, str | None] = {}
        for project, queue, stored in self.storage.due_queues(now):
            policy = meta.dead_letter_policy(stored)
            if meta.wanted_default_dead_letter_queue(queue, stored, self.settings.default_dead_letter_queue):
                if project not in default_dlqs:
                    default_dlqs[project] = self._existing_default_dlq(project, queue)
                policy = meta.dead_letter_policy(stored, default_dlqs[project])
                if meta.holds_expired(stored, policy):
                    continue
            result = self.storage.sweep_queue(project, queue, now, policy)
            if result.discarded:
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
