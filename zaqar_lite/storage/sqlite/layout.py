"""How zaqar-lite lays out its data in an SQLite file: tables, indexes, and their versions.

``queues`` holds each queue's metadata and ``last_marker``, the last marker
handed out in it: a queue's markers count its own posts and moves only; and
``due``, when the sweeper next has something to do in it (NULL: nothing until
a write; ``queues_by_due`` finds the due queues, see
:meth:`~zaqar_lite.storage.base.Storage.due_queues`).
``messages`` holds every message with its queue's marker (unique per queue:
``messages_by_queue``, FIFO order) and its id (unique: ``messages_by_id``, how
rows are addressed); ``claims`` the live claims; ``records`` the versioned
records; ``dedup`` the ``dedup_id`` each queue remembers, with the message id a
duplicate is answered with and when it may be forgotten (``dedup_by_expiry``
finds those to drop). Bodies, metadata, failures and provenance are JSON text. The Spark
reader (``spark_jobs/sources/sqlite.py``) reads ``queues`` and ``messages``
through ``messages_by_queue``, with this module's URI parsing and decoders.

The layout's number is the file's ``PRAGMA user_version``. Layout 0 (up to
cfa1139) had one AUTOINCREMENT marker, the rowid, shared by every queue;
layout 1 had no ``dedup`` table, ``messages.dedup_id`` nor ``messages.group_name``
(indexed by ``messages_by_group``, which holds grouped messages only); layout 2
had no ``messages.trace`` (a message's W3C trace context, JSON text, NULL when it
was posted without one); layout 3 had no ``queues.due`` (a file of an older
layout gets it as 0 for every queue: the first sweep visits each once). The driver
migrates such a file when it opens it
(:func:`prepare_schema`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
from collections.abc import Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.jsontext import stored_json
from zaqar_lite.models import Message, stored_message
from zaqar_lite.rules.pools import masked_uri

#: the layout this driver writes, kept in ``PRAGMA user_version``; 0 is the layout
#: before per-queue markers, migrated on open (:func:`migrate_from_global_markers`)
SCHEMA_VERSION = 4
_QUEUES = """CREATE TABLE queues (
    project TEXT NOT NULL, name TEXT NOT NULL, metadata TEXT NOT NULL, created REAL NOT NULL,
    last_marker INTEGER NOT NULL DEFAULT 0, due REAL, PRIMARY KEY (project, name)) WITHOUT ROWID"""
#: the queues the sweeper has something to do in (added by layout 4); idle ones are not in it
_DUE_INDEX = "CREATE INDEX queues_by_due ON queues (due) WHERE due IS NOT NULL"
_MESSAGES = """CREATE TABLE {table} (
    id TEXT NOT NULL, project TEXT NOT NULL, queue TEXT NOT NULL, marker INTEGER NOT NULL,
    body TEXT NOT NULL, created REAL NOT NULL, expires REAL NOT NULL,
    delay_until REAL NOT NULL DEFAULT 0, client_id TEXT NOT NULL,
    claim_id TEXT, claim_expires REAL, claim_count INTEGER NOT NULL DEFAULT 0,
    dlq_eligible INTEGER NOT NULL DEFAULT 1, failures TEXT, dead_letter TEXT, dedup_id TEXT,
    group_name TEXT, trace TEXT)"""
#: the heads of message groups (added by layout 2); messages without a group are not in it
_GROUP_INDEX = ("CREATE INDEX messages_by_group ON messages (project, queue, group_name, marker)"
                " WHERE group_name IS NOT NULL")
_MESSAGE_INDEXES = (
    "CREATE UNIQUE INDEX messages_by_id ON messages (id)",
    "CREATE UNIQUE INDEX messages_by_queue ON messages (project, queue, marker)",
    "CREATE INDEX messages_by_visibility ON messages (project, queue, delay_until, marker)",
    "CREATE INDEX messages_by_expiry ON messages (project, queue, expires)",
    "CREATE INDEX messages_by_claim ON messages (claim_id)",
    _GROUP_INDEX,
)
#: the ``dedup_id`` a queue remembers (added by layout 2)
_DEDUP = (
    """CREATE TABLE dedup (
    project TEXT NOT NULL, queue TEXT NOT NULL, dedup_id TEXT NOT NULL, message_id TEXT NOT NULL,
    expires REAL NOT NULL, PRIMARY KEY (project, queue, dedup_id)) WITHOUT ROWID""",
    "CREATE INDEX dedup_by_expiry ON dedup (project, queue, expires)",
)
SCHEMA = (
    _QUEUES,
    _DUE_INDEX,
    *_DEDUP,
    _MESSAGES.format(table="messages"),
    *_MESSAGE_INDEXES,
    """CREATE TABLE claims (
    id TEXT PRIMARY KEY, project TEXT NOT NULL, queue TEXT NOT NULL,
    ttl INTEGER NOT NULL, grace INTEGER NOT NULL, created REAL NOT NULL, expires REAL NOT NULL)""",
    "CREATE INDEX claims_by_queue ON claims (project, queue, expires)",
    """CREATE TABLE records (
    kind TEXT NOT NULL, project TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    version INTEGER NOT NULL, PRIMARY KEY (kind, project, key)) WITHOUT ROWID""",
)
#: the columns of layouts 0 and 1 (copied by :func:`migrate_from_global_markers`)
LAYOUT1_FIELDS = ("id, project, queue, marker, body, created, expires, delay_until, client_id,"
                  " claim_id, claim_expires, claim_count, dlq_eligible, failures, dead_letter")
MESSAGE_FIELDS = LAYOUT1_FIELDS + ", dedup_id, group_name, trace"


#: the columns :func:`message_from_row` reads, in a SELECT of ``messages``
MESSAGE_COLUMNS = ("id, body, created, expires, delay_until, client_id, claim_id, claim_expires, "
                   "claim_count, dlq_eligible, failures, dead_letter, marker, dedup_id, group_name, trace")


def parse_uri(uri: str) -> tuple[str, dict[str, str]]:
    """Return the database path and the query options of a ``sqlite://`` URI."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "sqlite":
        raise ValueError(f"not a sqlite URI: {masked_uri(uri)}")
    if not uri.startswith("sqlite://") or parts.netloc:
        # sqlite:/x and sqlite:x would open x in the working directory, sqlite://host/x too
        meant = parts.path if parts.path.startswith("/") and not parts.netloc else os.path.abspath(parts.path)
        raise ValueError(
            f"{masked_uri(uri)} is not a sqlite URI zaqar-lite reads: a sqlite URI has no host and "
            f"starts with sqlite:/// then the path; for the file {meant} write sqlite:///{meant} "
            "(sqlite:///relative.db is a file in the working directory)")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not path:
        raise ValueError("a sqlite URI needs a path: sqlite:///relative.db or sqlite:////abs.db")
    return path, dict(urllib.parse.parse_qsl(parts.query))


def failures_from(text: str | None) -> list[dict[str, Any]]:
    """Decode a ``failures`` column: a JSON list, NULL when empty."""
    return json.loads(text) if text else []


def json_or_none(text: str | None) -> Any:
    """Decode a nullable JSON column (``dead_letter``)."""
    return json.loads(text) if text else None


def message_from_row(row: Sequence[Any]) -> Message:
    """Rebuild a message from a row of :data:`MESSAGE_COLUMNS`, in that order.

    Unpacked by position: a lookup by column name compares names, a cost every
    claimed, deleted and listed message would pay.
    """
    (message_id, body, created, expires, delay_until, client_id, claim_id, claim_expires, claim_count,
     dlq_eligible, failures, dead_letter, marker, dedup_id, group, trace) = row
    return stored_message({
        "id": message_id, "body": stored_json(body), "created": created, "expires": expires,
        "delay_until": delay_until, "client_id": client_id, "claim_id": claim_id,
        "claim_expires": claim_expires, "claim_count": claim_count, "dlq_eligible": bool(dlq_eligible),
        "failures": stored_json(failures) if failures else [],
        "dead_letter": stored_json(dead_letter) if dead_letter else None, "marker": marker,
        "dedup_id": dedup_id, "dedup_until": 0.0, "group": group,
        "trace": stored_json(trace) if trace else None})


def prepare_schema(db: sqlite3.Connection, path: str) -> None:
    """Create the tables in a new file, or bring a file of an older layout to this one."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise errors.StorageUnavailable(f"{path} has layout {version}, made by a newer zaqar-lite;"
                                        f" this one reads layout {SCHEMA_VERSION}")
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='messages'").fetchone():
        for statement in SCHEMA:
            db.execute(statement)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        return
    if version == 0:
        migrate_from_global_markers(db)  # the table it builds has layout 3's columns
        for statement in _DEDUP:
            db.execute(statement)
    elif version in (1, 2):
        if version == 1:
            add_dedup_and_groups(db)
        db.execute("ALTER TABLE messages ADD COLUMN trace TEXT")  # layout 2 to 3
    add_due_times(db)  # layout 3 to 4
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def add_due_times(db: sqlite3.Connection) -> None:
    """Bring a layout-3 file to layout 4: each queue's due time, 0 (due at once: the first sweep sets it)."""
    db.execute("ALTER TABLE queues ADD COLUMN due REAL")
    db.execute("UPDATE queues SET due = 0")
    db.execute(_DUE_INDEX)


def add_dedup_and_groups(db: sqlite3.Connection) -> None:
    """Bring a layout-1 file to layout 2: a message's ``dedup_id`` and group, and the ``dedup`` table."""
    db.execute("ALTER TABLE messages ADD COLUMN dedup_id TEXT")
    db.execute("ALTER TABLE messages ADD COLUMN group_name TEXT")
    db.execute(_GROUP_INDEX)
    for statement in _DEDUP:
        db.execute(statement)


def migrate_from_global_markers(db: sqlite3.Connection) -> None:
    """Give a layout-0 file (one AUTOINCREMENT marker shared by all queues) per-queue markers.

    Messages keep their markers, which already increase within each queue; the
    messages table is rebuilt, as its marker was its rowid. Every queue's counter
    starts at the highest marker the file ever handed out, so that a marker a
    client or a subscription cursor holds stays below every marker given later.
    A queue a message is in but that has no row gets one (empty metadata).
    """
    db.execute("ALTER TABLE queues ADD COLUMN last_marker INTEGER NOT NULL DEFAULT 0")
    db.execute("INSERT OR IGNORE INTO queues (project, name, metadata, created)"
               " SELECT project, queue, '{}', MIN(created) FROM messages GROUP BY project, queue")
    db.execute("UPDATE queues SET last_marker = MAX("
               "(SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'messages'),"
               " (SELECT COALESCE(MAX(marker), 0) FROM messages))")
    db.execute(_MESSAGES.format(table="messages_per_queue"))
    db.execute(f"INSERT INTO messages_per_queue ({LAYOUT1_FIELDS}) SELECT {LAYOUT1_FIELDS} FROM messages")
    db.execute("DROP TABLE messages")
    db.execute("ALTER TABLE messages_per_queue RENAME TO messages")
    for statement in _MESSAGE_INDEXES:
        db.execute(statement)
