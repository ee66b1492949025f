"""OpenStack Swift driver (python-swiftclient): messages as JSON objects, claims by the settle protocol.

URI ``swift://ACCOUNT%3AUSER:KEY@HOST:PORT/auth/v1.0`` (tempauth v1; options and
the object layout: :mod:`~zaqar_lite.storage.swift.layout`; connections and
the one StorageUnavailable translation: :mod:`~zaqar_lite.storage.swift.client`).
Every decision is :mod:`zaqar_lite.claims.policy`'s; this module reads, writes, moves.
The sweep, delete and release loops are those of
:class:`~zaqar_lite.storage.base.PlannedStorage`, which has no claim loop;
claims (and pops) take the settle protocol instead, as Swift ignores
``If-Match``. Queue records and
message objects: :mod:`~zaqar_lite.storage.swift.container`; the settle protocol of
claims and the dead-letter move: :mod:`~zaqar_lite.storage.swift.settle`.

Edits of a delayed message (``edit_delayed_message``, the loop of
:class:`~zaqar_lite.storage.base.PlannedStorage`) take the settle protocol
too: read the object and its ETag, check it is still as the loop read it,
PUT the edited state with ``If-Match``, wait ``settle``, read back. The edit
stands only if the read-back shows exactly what it wrote; otherwise a claim
or another edit landed after it, and the loop reads again (and answers 409
if the message is now claimed or visible). So an edit never lands unnoticed
over a claim that read-back saw as won: the later write wins in both
read-backs. Limits, as for claims: an edit whose read-to-PUT takes longer
than ``settle`` (logged as a warning) may overwrite a change landing in
between, and a delete racing an edit may be undone by the edit's PUT (Swift
has no conditional write).

Expiry: ``X-Delete-At`` at least an hour after the body's expiry, on the
hour (the sweep may dead-letter first); with no object-expirer running,
expired objects stay listed, so the body's ``expires`` always decides.

Single node (the test Swift): reads see every completed write, and a post or
a move returns only once the listing shows what it wrote (the container
module's "Listed before acknowledged"), so all of the above holds; FIFO is
strict within a process and by post time across them.
Multi-node: a GET may come from a replica that missed a recent write, and
listings (with their hints) are updated asynchronously, so (a) a read-back can
miss a competitor's write and two claims can overlap: raise ``settle`` above
the replication lag for a practical, never absolute, guarantee (the same for
queue creation and records); (b) new messages are listed late, so FIFO is
approximate and a claim may answer 204 right after a post; (c) overwrites
(claim, release, renew) can be read stale; (d) stats lag. On every cluster:
moves never lose a message; batch posts are not atomic (a failed post deletes
what it wrote, best effort); a delete races a concurrent claim; subscription
delivery passes a message by once it is ``visibility_lag`` old, so a post whose
write lands more than that after its marker was taken (a slow or retried PUT),
or a marker from an API host whose clock runs behind, can go unnotified: keep
the API hosts' clocks in sync.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from swiftclient.exceptions import ClientException

from zaqar_lite import errors
from zaqar_lite.claims import policy
from zaqar_lite.models import Claim, ClaimRequest, ClaimResult, DeadLetterPolicy, Message, Move, QueueStats
from zaqar_lite.storage.base import Applied, PlannedStorage
from zaqar_lite.storage.swift import layout
from zaqar_lite.storage.swift.client import SwiftObjects, bounded
from zaqar_lite.storage.swift.settle import Removed, SettledClaims

LOG = logging.getLogger(__name__)


@bounded
class SwiftStorage(SettledClaims, PlannedStorage):
    """Swift driver; safe across threads and processes."""

    name = "swift"
    #: markers are reserved (or taken from the clock) before the write lands
    visibility_lag = 2.0

    def __init__(self, uri: str) -> None:
        self.options = layout.parse_uri(uri)
        self.objects = SwiftObjects(self.options)
        self._markers = layout.MarkerClock()

    def describe(self) -> str:
        """Return the auth endpoint and the container prefix."""
        return f"swift {self.options.auth_url} containers {self.options.prefix}.*"

    # -- queues (the rest: storage.swift.container) ------------------------------

    def delete_queue(self, project: str, queue: str) -> None:
        container = self._container(project)
        self.objects.delete(container, layout.queue_object(queue))
        self.purge_messages(project, queue)
        names = [n for n, _ in self.objects.rows(container, layout.dedup_prefix(queue))]
        self.objects.map(lambda n: self.objects.delete(container, n), names)

    # -- messages -------------------------------------------------------------

    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float) -> list[str]:
        container = self._container(project)
        self._ensure_queue(container, project, queue, now)
        answered = self.objects.map(lambda m: self._remembered(container, queue, m, now), messages)
        fresh = [m for m, first in zip(messages, answered, strict=True) if first is None]
        markers = self._markers.take(project, queue, len(fresh), now) if fresh else []
        named = [(layout.message_object(queue, marker, m.id), m)
                 for marker, m in zip(markers, fresh, strict=True)]
        try:
            self.objects.map(lambda item: self._store(container, *item), named)
            self._await_listed(container, queue, [name for name, _ in named])
        except BaseException:
            try:
                self.objects.map(lambda item: self.objects.delete(container, item[0]), named)
                self._forget(container, queue, fresh)
            except (errors.StorageUnavailable, ClientException):
                pass
            raise
        return [first or m.id for m, first in zip(messages, answered, strict=True)]

    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        key = None if exclude_client_id is None else layout.client_key(exclude_client_id)
        container = self._container(project)
        rows = (n for n, h in self.objects.rows(container, layout.message_prefix(queue),
                                                 layout.after_marker(queue, marker))
                if h.expires > now and (include_claimed or h.claim_expires <= now)
                and (include_delayed or h.delay_until <= now or h.claim_expires > now) and h.client != key)
        found: list[Message] = []
        while len(found) < limit and (batch := list(itertools.islice(rows, limit - len(found)))):
            found += [m for _, m in self._alive(container, batch, now)
                      if (include_claimed or not m.is_claimed(now))
                      and (include_delayed or not m.is_delayed(now)) and m.client_id != exclude_client_id]
        return found

    def get_messages(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        container = self._container(project)
        return [m for _, m in self._alive(container, self._locate(container, queue, ids), now)]

    def _live_claim(self, container: str, queue: str, claim_id: str | None,
                    now: float) -> dict[str, Any] | None:
        if claim_id is None:
            return None
        record = self.objects.read_json(container, layout.claim_object(queue, claim_id))
        return record if record is not None and record["expires"] > now else None

    def _claimed_message(self, container: str, queue: str, message_id: str, claim_id: str | None,
                         now: float) -> tuple[tuple[str, Message] | None, bool]:
        """Return the (name, message) of an unexpired message, and whether ``claim_id`` is live."""
        claim = self._live_claim(container, queue, claim_id, now)
        names = self._locate(container, queue, [message_id], claim["names"] if claim else ())
        found = self._alive(container, names, now)
        return (found[0] if found else None), claim is not None

    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        container = self._container(project)
        request = ClaimRequest(claim_id=f"pop-{uuid.uuid4()}", now=now, ttl=60, grace=0, limit=limit)
        won = self._claim(container, project, queue, request, Removed())
        self.objects.map(lambda attempt: self.objects.delete(container, attempt.name), won)
        return [attempt.original for attempt in won]

    def purge_messages(self, project: str, queue: str) -> None:
        container = self._container(project)
        for prefix in (layout.message_prefix(queue), layout.claim_prefix(queue)):
            names = [n for n, _ in self.objects.rows(container, prefix)]
            self.objects.map(lambda n: self.objects.delete(container, n), names)

    def queue_stats(self, project: str, queue: str, now: float) -> QueueStats:
        container = self._container(project)
        rows = [(n, h) for n, h in self.objects.rows(container, layout.message_prefix(queue))
                if h.expires > now]
        claimed = sum(1 for _, h in rows if h.claim_expires > now)
        delayed = sum(1 for _, h in rows if h.claim_expires <= now and h.delay_until > now)

        def first_alive(names: Iterable[str]) -> Message | None:
            return next((m for n in names for _, m in self._alive(container, [n], now)), None)

        return QueueStats(claimed=claimed, delayed=delayed, free=len(rows) - claimed - delayed,
                          oldest=first_alive(n for n, _ in rows),
                          newest=first_alive(n for n, _ in reversed(rows)))

    # -- claims (the settle protocol: storage.swift.settle) -------------------

    def _write_claim(self, container: str, queue: str, record: Mapping[str, Any]) -> None:
        self.objects.write(container, layout.claim_object(queue, record["id"]), json.dumps(record).encode(),
                           layout.claim_type(record["expires"]), layout.delete_at(record["expires"]))

    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> ClaimResult:
        container = self._container(project)
        removed = Removed()
        won = self._claim(container, project, queue, request, removed)
        if won:
            self._write_claim(container, queue, {
                "id": request.claim_id, "ttl": request.ttl, "grace": request.grace, "created": request.now,
                "expires": request.now + request.ttl, "names": [a.name for a in won]})
        return ClaimResult([a.claimed for a in won], dead_lettered=removed.moved, discarded=removed.deleted)

    def _held(self, container: str, record: Mapping[str, Any], now: float) -> list[tuple[str, Message]]:
        return [(n, m) for n, m in self._alive(container, record["names"], now)
                if m.claim_id == record["id"] and m.is_claimed(now)]

    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        container = self._container(project)
        record = self._live_claim(container, queue, claim_id, now)
        if record is None:
            raise errors.ClaimDoesNotExist(claim_id, queue)
        claim = Claim(claim_id, record["ttl"], record["grace"], record["created"], record["expires"])
        return claim, [m for _, m in self._held(container, record, now)]

    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        container = self._container(project)
        record = self._live_claim(container, queue, claim_id, now)
        if record is None:
            raise errors.ClaimDoesNotExist(claim_id, queue)
        held = self._held(container, record, now)
        self.objects.map(lambda item: self._store(
            container, item[0], policy.claim_renewed(item[1], now, ttl, grace)), held)
        renewed = policy.renewed_claim(claim_id, now, ttl, grace)
        self._write_claim(container, queue, {**record, "ttl": renewed.ttl, "grace": renewed.grace,
                                             "created": renewed.created, "expires": renewed.expires})

    def release_claim(self, project: str, queue: str, claim_id: str, now: float, *,
                      undo: bool = False) -> None:
        container = self._container(project)
        record = self.objects.read_json(container, layout.claim_object(queue, claim_id))
        ended = policy.claim_undone if undo else policy.claim_released
        if record is not None:
            held = self._held(container, record, now)
            self.objects.map(lambda item: self._store(container, item[0], ended(item[1], now)), held)
            self.objects.delete(container, layout.claim_object(queue, claim_id))

    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        container = self._container(project)

        def move(mv: Move) -> str | None:
            name = layout.message_object(queue, mv.read.marker, mv.read.id)
            got = self._load(container, name)
            if got is None or not policy.still_movable(got[0], mv.read, now):
                return None
            self._move(container, project, name, target_queue,
                       dataclasses.replace(mv.moved, marker=mv.read.marker), now)
            return mv.read.id

        return [i for i in self.objects.map(move, moves) if i is not None]

    # -- primitives of the loops in storage.base --------------------------------

    def _sweep_candidates(self, project: str, queue: str, now: float,
                          dead_letter: DeadLetterPolicy) -> Iterator[list[Message]]:
        # the listing hints are a prefilter of policy.is_swept; objects Swift already
        # expired (X-Delete-At) stay listed until deleted, and are deleted here
        container = self._container(project)
        names = [n for n, h in self.objects.rows(container, layout.message_prefix(queue))
                 if policy.swept_at(h.expires, h.claim_expires, h.claim_count, now, dead_letter)]
        got = dict(zip(names, self.objects.map(lambda n: self._load(container, n), names), strict=True))
        gone = [n for n, found in got.items() if found is None]
        self.objects.map(lambda n: self.objects.delete(container, n), gone)
        yield [found[0] for found in got.values() if found is not None]

    def _drop_lapsed_claims(self, project: str, queue: str, now: float) -> None:
        container = self._container(project)
        lapsed = [n for n, h in self.objects.rows(container, layout.claim_prefix(queue)) if h.expires <= now]
        self.objects.map(lambda n: self.objects.delete(container, n), lapsed)

    def _message_and_claim(self, project: str, queue: str, message_id: str, claim_id: str | None,
                           now: float) -> tuple[Message | None, bool]:
        found, live = self._claimed_message(self._container(project), queue, message_id, claim_id, now)
        return (found[1] if found else None), live

    def _delete_unchanged(self, project: str, queue: str, messages: Sequence[Message]) -> set[str]:
        # Swift has no conditional DELETE: a delete races a concurrent claim (see the module)
        container = self._container(project)
        names = [layout.message_object(queue, m.marker, m.id) for m in messages]
        self.objects.map(lambda n: self.objects.delete(container, n), names)
        return {m.id for m in messages}

    def _write_released(self, project: str, queue: str, read: Message, released: Message) -> bool:
        self._store(self._container(project), layout.message_object(queue, read.marker, read.id), released)
        return True

    def _write_edited(self, project: str, queue: str, read: Message, edited: Message) -> bool:
        """Write an edit by the settle protocol (the module's "Edits"): PUT, settle, read back."""
        container = self._container(project)
        name = layout.message_object(queue, read.marker, read.id)
        self.objects.connection()  # authenticating is not part of the timed read-to-PUT
        started = time.monotonic()
        got = self._load(container, name)
        if got is None or got[0] != read:
            return False
        try:
            self._store(container, name, edited, {"If-Match": got[1]})
        except ClientException as exc:
            if exc.http_status == 412:
                return False
            raise
        written = time.monotonic()
        self.objects.settle(written)
        back = self._load(container, name)
        if back is None or back[0] != edited:
            return False  # a claim or another edit landed after it: the loop reads again
        if written - started > self.options.settle:
            LOG.warning("edit of %s: its read and write took %.2f s, more than settle (%.2f s); "
                        "a change landing meanwhile may have been overwritten", name,
                        written - started, self.options.settle)
        return True

    def _apply_plan(self, project: str, queue: str, plan: policy.Plan, read: Sequence[Message],
                    dead_letter: DeadLetterPolicy, now: float) -> Applied:
        """Write the moves and deletes of a sweep's plan, which holds no claims."""
        moved, deleted = self._remove(self._container(project), project, queue, plan, read, dead_letter, now)
        return Applied([], moved, deleted)

    # -- health ---------------------------------------------------------------

    def ping(self) -> bool:
        try:
            self.objects.call("head_account")
        except (errors.StorageUnavailable, ClientException):
            return False
        return True

    def close(self) -> None:
        """Close connections and worker threads."""
        self.objects.close()
