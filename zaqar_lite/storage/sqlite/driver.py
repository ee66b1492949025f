"""Embedded SQLite driver: the default store, one file shared by every worker process.

URI forms (as SQLAlchemy writes them): ``sqlite:///relative/path.db``,
``sqlite:////absolute/path.db``; ``?synchronous=normal`` trades the last
transactions on power loss for speed (the default ``full`` fsyncs every commit).

Every write runs in one ``BEGIN IMMEDIATE`` transaction (see
:meth:`SqliteStorage.transaction`), so it takes SQLite's single write lock
before reading anything: reads and writes of one operation can never interleave
with another process's. The file is in WAL mode, so readers never block.
Claim order is strict FIFO by post order within a queue: each queue counts its
own markers (``queues.last_marker``, bumped by the transaction that posts or
moves messages in), so a marker says nothing of other queues' traffic; rows are
addressed by message id. Tables, indexes and the migration of files of older
layouts: :mod:`~zaqar_lite.storage.sqlite.layout`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import policy
from zaqar_lite.models import (
    Claim,
    ClaimRequest,
    DeadLetterPolicy,
    Message,
    Move,
    QueueStats,
    Record,
)
from zaqar_lite.storage.base import Applied, PlannedClaimStorage
from zaqar_lite.storage.sqlite.layout import MESSAGE_FIELDS, prepare_schema

_COLUMNS = ("id, body, created, expires, delay_until, client_id, claim_id, claim_expires, "
            "claim_count, dlq_eligible, failures, dead_letter, marker")
# Candidates for claim and pop come from two index ranges merged by marker:
# never-delayed (and already-claimed-once) messages have delay_until = 0, an
# ordered range of the visibility index; matured delayed messages are the small
# range 0 < delay_until <= now. Still-delayed messages are never scanned.
_READY = ("delay_until = 0 AND marker > :marker AND expires > :now"
          " AND (claim_expires IS NULL OR claim_expires <= :now)")
_MATURED = ("delay_until > 0 AND delay_until <= :now AND marker > :marker AND expires > :now"
            " AND (claim_expires IS NULL OR claim_expires <= :now)")
_UNAVAILABLE_HINTS = ("locked", "unable to open", "disk i/o", "readonly", "busy")


def parse_uri(uri: str) -> tuple[str, dict[str, str]]:
    """Return the database path and the query options of a ``sqlite://`` URI."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "sqlite":
        raise ValueError(f"not a sqlite URI: {uri}")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not path:
        raise ValueError("a sqlite URI needs a path: sqlite:///relative.db or sqlite:////abs.db")
    return path, dict(urllib.parse.parse_qsl(parts.query))


def _row_to_message(row: sqlite3.Row) -> Message:
    return Message(
        id=row["id"], body=json.loads(row["body"]), created=row["created"], expires=row["expires"],
        delay_until=row["delay_until"], client_id=row["client_id"], claim_id=row["claim_id"],
        claim_expires=row["claim_expires"], claim_count=row["claim_count"],
        dlq_eligible=bool(row["dlq_eligible"]),
        failures=json.loads(row["failures"]) if row["failures"] else [],
        dead_letter=json.loads(row["dead_letter"]) if row["dead_letter"] else None,
        marker=row["marker"],
    )


class SqliteStorage(PlannedClaimStorage):
    """SQLite driver; connections are per process and per thread."""

    name = "sqlite"

    def __init__(self, uri: str) -> None:
        path, options = parse_uri(uri)
        self.path = path
        self._synchronous = options.get("synchronous", "full").upper()
        if self._synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError("sqlite synchronous must be full, normal or extra")
        if path != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self.transaction() as db:
            prepare_schema(db, path)

    def describe(self) -> str:
        """Return the absolute path of the database file."""
        return f"sqlite file {os.path.abspath(self.path)}"

    # -- plumbing -------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            try:
                conn = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                       check_same_thread=False)
                conn.row_factory = sqlite3.Row
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={self._synchronous}")
            except sqlite3.Error as exc:
                raise errors.StorageUnavailable(str(exc)) from exc
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextlib.contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            if any(hint in str(exc).lower() for hint in _UNAVAILABLE_HINTS):
                raise errors.StorageUnavailable(str(exc)) from exc
            raise

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a block in one ``BEGIN IMMEDIATE`` transaction, rolled back on any exception."""
        with self._translate_errors():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """Run reads in one deferred transaction so they see one consistent state."""
        with self._translate_errors():
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    # -- queues ---------------------------------------------------------------

    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        with self.transaction() as db:
            cur = db.execute("INSERT OR IGNORE INTO queues (project, name, metadata, created)"
                             " VALUES (?, ?, ?, ?)", (project, queue, json.dumps(metadata), now))
            return cur.rowcount == 1

    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        with self._translate_errors():
            row = self._connection().execute(
                "SELECT metadata FROM queues WHERE project=? AND name=?", (project, queue)).fetchone()
        return json.loads(row[0]) if row else None

    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        with self.transaction() as db:
            cur = db.execute("UPDATE queues SET metadata=? WHERE project=? AND name=?",
                             (json.dumps(metadata), project, queue))
            if cur.rowcount == 0:
                raise errors.QueueDoesNotExist(queue, project)

    def delete_queue(self, project: str, queue: str) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM queues WHERE project=? AND name=?", (project, queue))
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
            return self._connection().execute(
                "SELECT COUNT(*) FROM queues WHERE project=?", (project,)).fetchone()[0]

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

    # -- messages -------------------------------------------------------------

    @staticmethod
    def _insert(db: sqlite3.Connection, project: str, queue: str, messages: Sequence[Message],
                now: float) -> None:
        """Store messages under the queue's next markers, in order, creating the queue if missing."""
        if not messages:
            return
        last = db.execute(
            "INSERT INTO queues (project, name, metadata, created, last_marker) VALUES (?, ?, '{}', ?, ?)"
            " ON CONFLICT (project, name) DO UPDATE SET last_marker = last_marker + excluded.last_marker"
            " RETURNING last_marker", (project, queue, now, len(messages))).fetchall()[0][0]
        first = last - len(messages) + 1
        db.executemany(
            f"INSERT INTO messages ({MESSAGE_FIELDS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(m.id, project, queue, first + i, json.dumps(m.body), m.created, m.expires, m.delay_until,
              m.client_id, m.claim_id, m.claim_expires, m.claim_count, int(m.dlq_eligible),
              json.dumps(m.failures) if m.failures else None,
              json.dumps(m.dead_letter) if m.dead_letter else None) for i, m in enumerate(messages)])

    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float) -> None:
        with self.transaction() as db:
            self._insert(db, project, queue, messages, now)

    def _select(self, db: sqlite3.Connection, where: str, args: Mapping[str, Any],
                limit: int | None = None, index: str | None = None) -> list[Message]:
        table = f"messages INDEXED BY {index}" if index else "messages"
        sql = f"SELECT {_COLUMNS} FROM {table} WHERE project=:project AND queue=:queue AND {where}"
        sql += " ORDER BY marker" + (" LIMIT :limit" if limit is not None else "")
        return [_row_to_message(r) for r in db.execute(sql, {**args, "limit": limit})]

    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        where = ["marker > :marker", "expires > :now"]
        if not include_claimed:
            where.append("(claim_expires IS NULL OR claim_expires <= :now)")
        if not include_delayed:
            where.append("delay_until <= :now")
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
        names = {f"id{i}": v for i, v in enumerate(ids)}
        where = f"id IN ({','.join(':' + k for k in names)}) AND expires > :now"
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
        part = (f"SELECT * FROM (SELECT {_COLUMNS} FROM messages INDEXED BY messages_by_visibility"
                " WHERE project=:project AND queue=:queue AND {} ORDER BY marker LIMIT :limit)")
        sql = f"{part.format(_READY)} UNION ALL {part.format(_MATURED)} ORDER BY marker LIMIT :limit"
        return [_row_to_message(r) for r in db.execute(sql, {**args, "limit": limit})]

    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        with self.transaction() as db:
            popped = self._candidates(db, {"project": project, "queue": queue, "now": now, "marker": 0},
                                      limit)
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
                newest = db.execute(f"SELECT {_COLUMNS} FROM messages WHERE project=:project AND"
                                    " queue=:queue AND expires > :now ORDER BY marker DESC LIMIT 1",
                                    args).fetchone()
                ends.append([_row_to_message(newest)])
        return QueueStats(claimed=claimed, delayed=delayed, free=total - claimed - delayed,
                          oldest=ends[0][0] if total else None,
                          newest=ends[1][0] if total else None)

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
        return self._select(db, "claim_id = :claim AND claim_expires > :now AND expires > :now",
                            {"project": project, "queue": queue, "now": now, "claim": claim_id})

    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        with self.snapshot() as db:
            claim = self._live_claim(db, project, queue, claim_id, now)
            return claim, self._held(db, project, queue, claim_id, now)

    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        with self.transaction() as db:
            self._live_claim(db, project, queue, claim_id, now)
            db.execute("UPDATE claims SET ttl=?, grace=?, expires=? WHERE id=?",
                       (ttl, grace, now + ttl, claim_id))
            db.executemany("UPDATE messages SET claim_expires=?, expires=? WHERE id=?",
                           [(now + ttl, policy.claimed_expiry(m.expires, now, ttl, grace), m.id)
                            for m in self._held(db, project, queue, claim_id, now)])

    def release_claim(self, project: str, queue: str, claim_id: str, now: float) -> None:
        with self.transaction() as db:
            db.execute("UPDATE messages SET claim_expires=? WHERE claim_id=? AND project=? AND queue=?"
                       " AND claim_expires > ?", (now, claim_id, project, queue, now))
            db.execute("DELETE FROM claims WHERE id=? AND project=? AND queue=?", (claim_id, project, queue))

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
        # Claimed messages join the never-delayed index range; only matured ones move.
        taken = {m.id for m in plan.claimed}
        db.executemany("UPDATE messages SET delay_until=0 WHERE id=?",
                       [(m.id,) for m in read if m.delay_until and m.id in taken])
        db.executemany("DELETE FROM messages WHERE id=?", [(i,) for i in plan.deleted])
        self._rehome(db, project, dead_letter.queue or queue, plan.moved, now)
        return Applied(plan.claimed, len(plan.moved), len(plan.deleted))

    def _store_claim(self, project: str, queue: str, request: ClaimRequest) -> None:
        self._connection().execute("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?)", (
            request.claim_id, project, queue, request.ttl, request.grace, request.now,
            request.now + request.ttl))

    def _drop_lapsed_claims(self, project: str, queue: str, now: float) -> None:
        self._connection().execute("DELETE FROM claims WHERE project=? AND queue=? AND expires<=?",
                                   (project, queue, now))

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
        self._connection().execute("UPDATE messages SET claim_expires=?, failures=? WHERE id=?", (
            released.claim_expires, json.dumps(released.failures) or None, released.id))
        return True

    # -- versioned records ----------------------------------------------------

    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        with self._translate_errors():
            row = self._connection().execute(
                "SELECT key, value, version FROM records WHERE kind=? AND project=? AND key=?",
                (kind, project, key)).fetchone()
        return Record(row[0], json.loads(row[1]), row[2]) if row else None

    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        with self.transaction() as db:
            if expected_version is None:
                cur = db.execute("INSERT OR IGNORE INTO records VALUES (?, ?, ?, ?, 1)",
                                 (kind, project, key, json.dumps(value)))
            else:
                cur = db.execute("UPDATE records SET value=?, version=version+1"
                                 " WHERE kind=? AND project=? AND key=? AND version=?",
                                 (json.dumps(value), kind, project, key, expected_version))
            if cur.rowcount != 1:
                raise errors.Conflict(f"{kind} {key} was changed by someone else; read it again.")
        return 1 if expected_version is None else expected_version + 1

    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        sql = "DELETE FROM records WHERE kind=? AND project=? AND key=?"
        args: tuple[Any, ...] = (kind, project, key)
        if expected_version is not None:
            sql, args = sql + " AND version=?", (*args, expected_version)
        with self.transaction() as db:
            return db.execute(sql, args).rowcount == 1

    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        with self._translate_errors():
            rows = self._connection().execute(
                "SELECT key, value, version FROM records WHERE kind=? AND project=? AND key>?"
                " AND substr(key, 1, ?)=? ORDER BY key LIMIT ?",
                (kind, project, marker or "", len(prefix), prefix, limit)).fetchall()
        return [Record(r[0], json.loads(r[1]), r[2]) for r in rows]

    def record_projects(self, kind: str) -> list[str]:
        with self._translate_errors():
            return [r[0] for r in self._connection().execute(
                "SELECT DISTINCT project FROM records WHERE kind=?", (kind,))]

    def ping(self) -> bool:
        try:
            with self._translate_errors():
                self._connection().execute("SELECT 1").fetchone()
            return True
        except errors.StorageUnavailable:
            return False
