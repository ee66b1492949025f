"""Embedded SQLite driver: the default store, one file shared by every worker process.

URI forms (as SQLAlchemy writes them): ``sqlite:///relative/path.db``,
``sqlite:////absolute/path.db``; ``?synchronous=normal`` trades the last
transactions on power loss for speed (the default ``full`` fsyncs every commit).

Every write runs in one ``BEGIN IMMEDIATE`` transaction (see
:meth:`~zaqar_lite.storage.sqlite.client.SqliteConnected.transaction`), so it
takes SQLite's single write lock before reading anything: reads and writes of
one operation can never interleave with another process's; the claim, sweep,
delete and release loops of :class:`~zaqar_lite.storage.base.PlannedClaimStorage`
each run whole in one (:meth:`SqliteStorage._atomic`), as does a post or claim
with its metadata read; a process's concurrent writes share a commit
(:mod:`~zaqar_lite.storage.sqlite.client`). The file is in WAL mode, so readers never block.
Claim order is strict FIFO by post order within a queue: each queue counts its
own markers (``queues.last_marker``, bumped by the transaction that posts or
moves messages in), so a marker says nothing of other queues' traffic; rows are
addressed by message id. Tables, indexes and the migration of files of older
layouts: :mod:`~zaqar_lite.storage.sqlite.layout`; the SQL of the message paths, each
statement made once: :mod:`~zaqar_lite.storage.sqlite.statements`.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite import errors, jsontext
from zaqar_lite.claims import policy
from zaqar_lite.models import (
    Claim,
    ClaimRequest,
    ClaimResult,
    DeadLetterPolicy,
    Message,
    Move,
    QueueStats,
)
from zaqar_lite.storage.base import Applied, ClaimPlan, PlannedClaimStorage, PostPlan
from zaqar_lite.storage.sqlite.layout import MESSAGE_COLUMNS, message_from_row
from zaqar_lite.storage.sqlite.records import SqliteRecords
from zaqar_lite.storage.sqlite.statements import (
    CANDIDATES,
    INSERT_MESSAGE,
    id_names,
    ids_where,
    select_sql,
    stored_metadata,
)


class SqliteStorage(SqliteRecords, PlannedClaimStorage):
    """SQLite driver; connections per process and thread (:mod:`~zaqar_lite.storage.sqlite.client`)."""

    name = "sqlite"

    # -- queues ---------------------------------------------------------------

    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        with self.transaction() as db:
            cur = db.execute("INSERT OR IGNORE INTO queues (project, name, metadata, created)"
                             " VALUES (?, ?, ?, ?)", (project, queue, json.dumps(metadata), now))
            return cur.rowcount == 1

    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        with self._translate_errors():
            return stored_metadata(self._connection(), project, queue)

    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        with self.transaction() as db:
            # due at once: a new policy may make the sweep move messages it left so far
            cur = db.execute("UPDATE queues SET metadata=?, due=0 WHERE project=? AND name=?",
                             (json.dumps(metadata), project, queue))
            if cur.rowcount == 0:
                raise errors.QueueDoesNotExist(queue, project)

    def delete_queue(self, project: str, queue: str) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM queues WHERE project=? AND name=?", (project, queue))
            db.execute("DELETE FROM dedup WHERE project=? AND queue=?", (project, queue))
            self._purge(db, project, queue)

    def list_queues(self, project: str, *, marker: str | None, limit: int,
                    name_contains: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        sql = "SELECT name, metadata FROM queues WHERE project=? AND name>?"
        args: list[Any] = [project, marker or ""]
        if name_contains:
            sql += " AND instr(name, ?) > 0"
            args.append(name_contains)
        with self._translate_errors():
            rows = self._connection().execute(sql + " ORDER BY name LIMIT ?", (*args, limit)).fetchall()
        return [(row[0], json.loads(row[1])) for row in rows]

    def count_queues(self, project: str) -> int:
        with self._translate_errors():
            return int(self._connection().execute(
                "SELECT COUNT(*) FROM queues WHERE project=?", (project,)).fetchone()[0])

    def all_queues(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        after = ("", "")
        while True:
            with self._translate_errors():
                rows = self._connection().execute(
                    "SELECT project, name, metadata FROM queues WHERE (project, name) > (?, ?)"
                    " ORDER BY project, name LIMIT ?", (*after, self.all_queues_page)).fetchall()
            for project, name, metadata in rows:
                yield project, name, json.loads(metadata)
            if len(rows) < self.all_queues_page:
                return
            after = rows[-1][0], rows[-1][1]

    def due_queues(self, now: float) -> Iterator[tuple[str, str, dict[str, Any]]]:
        after = ("", "")
        while True:
            with self._translate_errors():
                rows = self._connection().execute(
                    "SELECT project, name, metadata FROM queues INDEXED BY queues_by_due WHERE due <= ?"
                    " AND (project, name) > (?, ?) ORDER BY project, name LIMIT ?",
                    (now, *after, self.all_queues_page)).fetchall()
            for project, name, metadata in rows:
                yield project, name, json.loads(metadata)
            if len(rows) < self.all_queues_page:
                return
            after = rows[-1][0], rows[-1][1]

    @staticmethod
    def _due_by(db: sqlite3.Connection, project: str, queue: str, when: float) -> None:
        """Make a queue due at ``when`` at the latest, in the transaction of the write that needs it."""
        db.execute("UPDATE queues SET due = MIN(IFNULL(due, :when), :when) WHERE project=:project"
                   " AND name=:queue", {"project": project, "queue": queue, "when": when})

    # -- messages -------------------------------------------------------------

    @staticmethod
    def _insert(db: sqlite3.Connection, project: str, queue: str, messages: Sequence[Message],
                now: float) -> None:
        """Store messages under the queue's next markers, in order, creating the queue if missing."""
        if not messages:
            return
        last = db.execute(
            "INSERT INTO queues (project, name, metadata, created, last_marker, due)"
            " VALUES (?, ?, '{}', ?, ?, ?)"
            " ON CONFLICT (project, name) DO UPDATE SET last_marker = last_marker + excluded.last_marker,"
            " due = MIN(IFNULL(due, excluded.due), excluded.due) RETURNING last_marker",
            (project, queue, now, len(messages), min(m.expires for m in messages))).fetchall()[0][0]
        first = last - len(messages) + 1
        db.executemany(
            INSERT_MESSAGE,
            [(m.id, project, queue, first + i, jsontext.ascii_text(m.body), m.created, m.expires,
              m.delay_until, m.client_id, m.claim_id, m.claim_expires, m.claim_count, int(m.dlq_eligible),
              jsontext.ascii_text(m.failures) if m.failures else None,
              jsontext.ascii_text(m.dead_letter) if m.dead_letter else None, m.dedup_id, m.group,
              jsontext.ascii_text(m.trace) if m.trace else None) for i, m in enumerate(messages)])

    def post_planned(self, project: str, queue: str, plan: PostPlan, now: float) -> list[str]:
        """Plan from the metadata read by the post's own transaction: one transaction per post."""
        with self.transaction() as db:
            messages = plan(stored_metadata(db, project, queue))
            # the ids their dedup ids remember; without dedup ids every message is new, stored as planned
            answered = [m.dedup_id and self._remembered(db, project, queue, m, now) for m in messages]
            self._insert(db, project, queue, [m for m, first in zip(messages, answered, strict=True)
                                              if not first] if any(answered) else messages, now)
        return [first or m.id for m, first in zip(messages, answered, strict=True)]

    def claim_planned(self, project: str, queue: str, plan: ClaimPlan) -> ClaimResult:
        """Plan from the metadata read by the claim's own transaction: one transaction per claim."""
        with self.transaction() as db:
            return self._claim_atomically(project, queue, plan(stored_metadata(db, project, queue)))

    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float) -> list[str]:
        return self.post_planned(project, queue, lambda metadata: messages, now)

    @staticmethod
    def _remembered(db: sqlite3.Connection, project: str, queue: str, message: Message,
                    now: float) -> str | None:
        """Return the id a live entry of ``message.dedup_id`` names, or remember it with ``message.id``."""
        key = (project, queue, message.dedup_id)
        row = db.execute("SELECT message_id FROM dedup WHERE project=? AND queue=? AND dedup_id=?"
                         " AND expires > ?", (*key, now)).fetchone()
        if row is not None:
            return str(row[0])
        # forget a few lapsed ids of the queue with each new one, so the table stays small
        db.execute("DELETE FROM dedup WHERE (project, queue, dedup_id) IN (SELECT project, queue, dedup_id"
                   " FROM dedup INDEXED BY dedup_by_expiry WHERE project=? AND queue=? AND expires <= ?"
                   " LIMIT 8)", (project, queue, now))
        db.execute("INSERT OR REPLACE INTO dedup VALUES (?, ?, ?, ?, ?)",
                   (*key, message.id, message.dedup_until))
        return None

    def _select(self, db: sqlite3.Connection, where: str, args: Mapping[str, Any],
                limit: int | None = None, index: str | None = None) -> list[Message]:
        sql = select_sql(where, limit is not None, index)
        return [message_from_row(r) for r in db.execute(sql, {**args, "limit": limit})]

    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        where = ["marker > :marker", "expires > :now"]
        if not include_claimed:
            where.append("(claim_expires IS NULL OR claim_expires <= :now)")
        if not include_delayed:  # a claimed message is claimed, not delayed (policy: Message.is_delayed)
            where.append("(delay_until <= :now OR claim_expires > :now)" if include_claimed
                         else "delay_until <= :now")
        if exclude_client_id is not None:
            where.append("client_id != :client")
        args = {"project": project, "queue": queue, "marker": marker or 0, "now": now,
                "client": exclude_client_id}
        with self._translate_errors():
            return self._select(self._connection(), " AND ".join(where), args, limit)

    def get_messages(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        with self._translate_errors():
            return self._get(self._connection(), project, queue, ids, now)

    def _get(self, db: sqlite3.Connection, project: str, queue: str, ids: Sequence[str],
             now: float) -> list[Message]:
        names = dict(zip(id_names(len(ids)), ids, strict=True))
        where = ids_where(len(ids))
        # Left to itself the planner may prefer a range of another index over the queue's rows.
        return self._select(db, where, {"project": project, "queue": queue, "now": now, **names},
                            index="messages_by_id")

    @staticmethod
    def _claim_is_live(db: sqlite3.Connection, project: str, queue: str, claim_id: str,
                       now: float) -> bool:
        return db.execute("SELECT 1 FROM claims WHERE id=? AND project=? AND queue=? AND expires>?",
                          (claim_id, project, queue, now)).fetchone() is not None

    def _candidates(self, db: sqlite3.Connection, args: Mapping[str, Any], limit: int) -> list[Message]:
        """Return up to ``limit`` visible messages after ``args['marker']``, FIFO."""
        return [message_from_row(r) for r in db.execute(CANDIDATES, {**args, "limit": limit})]

    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        with self.transaction() as db:
            popped: list[Message] = []
            args = {"project": project, "queue": queue, "now": now, "marker": 0}
            while len(popped) < limit:
                wanted = limit - len(popped)
                batch = self._candidates(db, args, wanted)
                popped += self._groups_only(project, queue, batch, now, popped)[:wanted]
                if len(batch) < wanted:
                    break
                args["marker"] = batch[-1].marker
            db.executemany("DELETE FROM messages WHERE id=?", [(m.id,) for m in popped])
        return popped

    @staticmethod
    def _purge(db: sqlite3.Connection, project: str, queue: str) -> None:
        db.execute("DELETE FROM messages WHERE project=? AND queue=?", (project, queue))
        db.execute("DELETE FROM claims WHERE project=? AND queue=?", (project, queue))

    def purge_messages(self, project: str, queue: str) -> None:
        with self.transaction() as db:
            self._purge(db, project, queue)

    def queue_stats(self, project: str, queue: str, now: float) -> QueueStats:
        args = {"project": project, "queue": queue, "now": now}
        with self.snapshot() as db:
            claimed, delayed, total = db.execute(
                "SELECT COALESCE(SUM(claim_expires > :now), 0),"
                " COALESCE(SUM((claim_expires IS NULL OR claim_expires <= :now) AND delay_until > :now), 0),"
                " COUNT(*) FROM messages WHERE project=:project AND queue=:queue AND expires > :now",
                args).fetchone()
            ends = [self._select(db, "expires > :now", args, 1)]
            if total:
                newest = db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE project=:project AND"
                                    " queue=:queue AND expires > :now ORDER BY marker DESC LIMIT 1",
                                    args).fetchone()
                ends.append([message_from_row(newest)])
        return QueueStats(claimed=claimed, delayed=delayed, free=total - claimed - delayed,
                          oldest=ends[0][0] if total else None,
                          newest=ends[1][0] if total else None)

    def next_visible_at(self, project: str, queue: str, now: float) -> float | None:
        args = {"project": project, "queue": queue, "now": now}
        with self.snapshot() as db:  # both on an index: messages_by_visibility, claims_by_queue
            ends = db.execute(
                "SELECT (SELECT MIN(delay_until) FROM messages WHERE project=:project AND queue=:queue"
                " AND delay_until > :now), (SELECT MIN(expires) FROM claims WHERE project=:project"
                " AND queue=:queue AND expires > :now)", args).fetchone()
        return min((end for end in ends if end is not None), default=None)

    # -- claims ---------------------------------------------------------------

    def _rehome(self, db: sqlite3.Connection, project: str, target: str, moved: Sequence[Message],
                now: float) -> None:
        """Move messages into ``target`` as given (its next markers), creating it if missing."""
        if moved:
            db.executemany("DELETE FROM messages WHERE id=?", [(m.id,) for m in moved])
            self._insert(db, project, target, moved, now)

    def _live_claim(self, db: sqlite3.Connection, project: str, queue: str, claim_id: str,
                    now: float) -> Claim:
        row = db.execute("SELECT id, ttl, grace, created, expires FROM claims"
                         " WHERE id=? AND project=? AND queue=? AND expires>?",
                         (claim_id, project, queue, now)).fetchone()
        if row is None:
            raise errors.ClaimDoesNotExist(claim_id, queue)
        return Claim(*row)

    def _held(self, db: sqlite3.Connection, project: str, queue: str, claim_id: str,
              now: float) -> list[Message]:
        # by the claim's own index: left to itself the planner may walk the queue's unexpired
        # messages by expiry instead, messages scheduled far ahead included
        return self._select(db, "claim_id = :claim AND claim_expires > :now AND expires > :now",
                            {"project": project, "queue": queue, "now": now, "claim": claim_id},
                            index="messages_by_claim")

    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        with self.snapshot() as db:
            claim = self._live_claim(db, project, queue, claim_id, now)
            return claim, self._held(db, project, queue, claim_id, now)

    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        with self.transaction() as db:
            self._live_claim(db, project, queue, claim_id, now)
            renewed = policy.renewed_claim(claim_id, now, ttl, grace)
            db.execute("UPDATE claims SET ttl=?, grace=?, created=?, expires=? WHERE id=?",
                       (renewed.ttl, renewed.grace, renewed.created, renewed.expires, claim_id))
            held = self._held(db, project, queue, claim_id, now)
            self._write_claim_ends(db, held, [policy.claim_renewed(m, now, ttl, grace) for m in held])

    @staticmethod
    def _write_claim_ends(db: sqlite3.Connection, read: Sequence[Message],
                          changed: Sequence[Message]) -> None:
        """Store the claim end, expiry and (only where they changed: indexed) delay and count of messages."""
        db.executemany("UPDATE messages SET claim_expires=?, expires=? WHERE id=?",
                       [(m.claim_expires, m.expires, m.id) for m in changed])
        db.executemany("UPDATE messages SET delay_until=? WHERE id=?",
                       [(m.delay_until, m.id) for m, old in zip(changed, read, strict=True)
                        if m.delay_until != old.delay_until])
        db.executemany("UPDATE messages SET claim_count=? WHERE id=?",
                       [(m.claim_count, m.id) for m, old in zip(changed, read, strict=True)
                        if m.claim_count != old.claim_count])

    def release_claim(self, project: str, queue: str, claim_id: str, now: float, *,
                      undo: bool = False) -> None:
        ended = policy.claim_undone if undo else policy.claim_released
        with self.transaction() as db:
            held = self._held(db, project, queue, claim_id, now)
            self._write_claim_ends(db, held, [ended(m, now) for m in held])
            db.execute("DELETE FROM claims WHERE id=? AND project=? AND queue=?", (claim_id, project, queue))
            if held:  # a released message whose claims are used up is the sweep's now
                self._due_by(db, project, queue, now)

    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        with self.transaction() as db:
            current = {m.id: m for m in self._get(db, project, queue, [mv.read.id for mv in moves], now)}
            moved = [mv.moved for mv in moves
                     if mv.read.id in current and policy.still_movable(current[mv.read.id], mv.read, now)]
            self._rehome(db, project, target_queue, moved, now)
        return [m.id for m in moved]

    # -- primitives of the loops in storage.base (each inside the loop's transaction) ------

    def _atomic(self) -> contextlib.AbstractContextManager[object]:
        """Run a whole loop in one ``BEGIN IMMEDIATE`` transaction: reads and writes never interleave."""
        return self.transaction()

    def _visible_candidates(self, project: str, queue: str, now: float, after: int,
                            limit: int) -> list[Message]:
        return self._candidates(self._connection(), {"project": project, "queue": queue, "now": now,
                                                     "marker": after}, limit)

    def _sweep_candidates(self, project: str, queue: str, now: float,
                          dead_letter: DeadLetterPolicy) -> Iterator[list[Message]]:
        # a prefilter of policy.is_swept: the expired, then the exhausted and unclaimed
        args = {"project": project, "queue": queue, "now": now, "count": dead_letter.max_claim_count}
        db = self._connection()
        candidates = self._select(db, "expires <= :now", args)
        if dead_letter.counts_claims:
            candidates += self._select(db, "expires > :now AND claim_count >= :count"
                                           " AND (claim_expires IS NULL OR claim_expires <= :now)", args)
        yield candidates

    def _apply_plan(self, project: str, queue: str, plan: policy.Plan, read: Sequence[Message],
                    dead_letter: DeadLetterPolicy, now: float) -> Applied:
        db = self._connection()
        db.executemany(
            "UPDATE messages SET claim_id=?, claim_expires=?, claim_count=?, expires=? WHERE id=?",
            [(m.claim_id, m.claim_expires, m.claim_count, m.expires, m.id) for m in plan.claimed])
        # delay_until is indexed: written only where the plan changed it (a matured delay
        # ends, a _retry_backoff wait starts), so claims of other queues touch no index
        before = {m.id: m.delay_until for m in read}
        waits = [(m.delay_until, m.id) for m in plan.claimed if m.delay_until != before[m.id]]
        if waits:
            db.executemany("UPDATE messages SET delay_until=? WHERE id=?", waits)
        if plan.deleted:
            db.executemany("DELETE FROM messages WHERE id=?", [(i,) for i in plan.deleted])
        self._rehome(db, project, dead_letter.queue or queue, plan.moved, now)
        return Applied(plan.claimed, len(plan.moved), len(plan.deleted))

    def _group_members(self, project: str, queue: str, names: set[str]) -> dict[str, list[Message]]:
        db = self._connection()
        found = {name: [message_from_row(r) for r in db.execute(
            select_sql("group_name=:group", False, "messages_by_group"),
            {"project": project, "queue": queue, "group": name})] for name in sorted(names)}
        return {name: stored for name, stored in found.items() if stored}

    def _store_claim(self, project: str, queue: str, request: ClaimRequest) -> None:
        self._connection().execute("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?)", (
            request.claim_id, project, queue, request.ttl, request.grace, request.now,
            request.now + request.ttl))
        self._due_by(self._connection(), project, queue, request.now + request.ttl)

    def _drop_lapsed_claims(self, project: str, queue: str, now: float) -> None:
        self._connection().execute("DELETE FROM claims WHERE project=? AND queue=? AND expires<=?",
                                   (project, queue, now))

    def _record_next_due(self, project: str, queue: str, now: float) -> None:
        # both on an index: messages_by_expiry, claims_by_queue
        self._connection().execute(
            "UPDATE queues SET due = (SELECT MIN(t) FROM (SELECT MIN(expires) AS t FROM messages"
            " WHERE project=:project AND queue=:queue UNION ALL SELECT MIN(expires) FROM claims"
            " WHERE project=:project AND queue=:queue)) WHERE project=:project AND name=:queue",
            {"project": project, "queue": queue})

    def _message_and_claim(self, project: str, queue: str, message_id: str, claim_id: str | None,
                           now: float) -> tuple[Message | None, bool]:
        db = self._connection()
        found = self._get(db, project, queue, [message_id], now)
        live = claim_id is not None and self._claim_is_live(db, project, queue, claim_id, now)
        return (found[0] if found else None), live

    def _delete_unchanged(self, project: str, queue: str, messages: Sequence[Message]) -> set[str]:
        self._connection().executemany("DELETE FROM messages WHERE id=?", [(m.id,) for m in messages])
        return {m.id for m in messages}

    def _write_released(self, project: str, queue: str, read: Message, released: Message) -> bool:
        db = self._connection()
        db.execute("UPDATE messages SET claim_expires=?, claim_count=?, failures=? WHERE id=?", (
            released.claim_expires, released.claim_count, json.dumps(released.failures) or None, released.id))
        self._due_by(db, project, queue, released.claim_expires or 0.0)
        if released.delay_until != read.delay_until:
            db.execute("UPDATE messages SET delay_until=? WHERE id=?", (released.delay_until, released.id))
        return True

    def _write_edited(self, project: str, queue: str, read: Message, edited: Message) -> bool:
        # the loop's transaction (_atomic) holds the row as read
        db = self._connection()
        db.execute("UPDATE messages SET body=?, expires=?, delay_until=? WHERE id=?", (
            json.dumps(edited.body), edited.expires, edited.delay_until, edited.id))
        self._due_by(db, project, queue, edited.expires)
        return True
