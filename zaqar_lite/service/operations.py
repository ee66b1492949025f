"""What the background processes, the metrics and the console read: sweep, census, health."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from zaqar_lite import errors
from zaqar_lite import metrics as counted
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import pause
from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.claims.policy import REASON_MAX_CLAIMS, REASON_REJECTED
from zaqar_lite.models import (
    Message,
    SweepResult,
)
from zaqar_lite.service.pauses import Pauses

#: the records of the console's sessions: under this project, of this kind, keyed by the
#: SHA-256 of the session id (the store never holds an id a browser could present)
CONSOLE_PROJECT = "zaqar-lite-console"
CONSOLE_SESSION = "console_session"
#: queues the census counts between two pauses that let a worker's other requests run
CENSUS_QUEUES_BETWEEN_PAUSES = 100
#: seconds of each of those pauses
CENSUS_PAUSE = 0.001
#: expired sessions a login looks for among the stored ones, from a random key on
SESSIONS_SWEPT_PER_LOGIN = 100


def session_key(session_id: str) -> str:
    """Return the record key of a console session."""
    return hashlib.sha256(session_id.encode()).hexdigest()


class Operations(Pauses):
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
            if policy.queue:
                reason = counted.dead_letter_reason(policy.on_expiry, policy.counts_claims)
                if result.dead_lettered:
                    counted.count_dead_letters(reason, project, queue, policy.queue, result.dead_lettered,
                                               self.settings.metrics.max_labelled_queues)
                    self.wake_up(project, policy.queue)
                else:  # its first arrival, by whatever path, then counts in rate()
                    counted.watch_dead_letters((reason, REASON_MAX_CLAIMS, REASON_REJECTED), project, queue,
                                               policy.queue, self.settings.metrics.max_labelled_queues)
            if result.dead_lettered and pause.BREAKER in stored:
                self.count_toward_breaker(project, queue, stored, result.dead_lettered, 0)
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
        census = []
        for counted_queues, (project, queue, stored) in enumerate(queues, 1):
            census.append(counted.QueueCensus(project, queue, self.storage.queue_stats(project, queue, now),
                                              (project, queue) in targets or queue == default,
                                              pause.is_paused(stored)))
            if counted_queues % CENSUS_QUEUES_BETWEEN_PAUSES == 0:
                # a store call that never waits (SQLite) would hold a gevent worker for the
                # whole census: let the worker's requests in between (a pause above 0 lets
                # gevent's loop poll its sockets; 0 may not)
                self.sleep(CENSUS_PAUSE)
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

    # -- the console's sessions: the token kept in the store, the browser holding an opaque id --

    def open_console_session(self, token: str) -> str:
        """Keep a checked token for ``[console] session_lifetime`` seconds; return the new session's id.

        The id is random (256 bits) and only its hash is stored, with the
        token and the expiry: every worker and server of the deployment reads
        the same sessions. It also forgets some expired sessions.
        """
        now = self.clock()
        self._forget_expired_sessions(now)
        session_id = secrets.token_urlsafe(32)
        self.storage.put_record(CONSOLE_PROJECT, CONSOLE_SESSION, session_key(session_id),
                                {"token": token, "expires": now + self.settings.console_session_lifetime},
                                None)
        return session_id

    def console_session_token(self, session_id: str) -> str | None:
        """Return the token of an open console session; None when it is unknown, closed or expired."""
        key = session_key(session_id)
        found = self.storage.get_record(CONSOLE_PROJECT, CONSOLE_SESSION, key)
        if found is None:
            return None
        if self.clock() >= float(found.value["expires"]):
            self.storage.delete_record(CONSOLE_PROJECT, CONSOLE_SESSION, key, found.version)
            return None
        return str(found.value["token"])

    def close_console_session(self, session_id: str) -> None:
        """Forget a console session (its id opens nothing any more, on any server)."""
        self.storage.delete_record(CONSOLE_PROJECT, CONSOLE_SESSION, session_key(session_id))

    def _forget_expired_sessions(self, now: float) -> None:
        """Remove the expired sessions among some stored ones, read from a random key on."""
        page = self.storage.list_records(CONSOLE_PROJECT, CONSOLE_SESSION, marker=secrets.token_hex(32),
                                         limit=SESSIONS_SWEPT_PER_LOGIN)
        for record in page:
            if now >= float(record.value["expires"]):
                self.storage.delete_record(CONSOLE_PROJECT, CONSOLE_SESSION, record.key, record.version)
