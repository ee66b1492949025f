"""The SQL of the SQLite driver's message paths, each statement a string made once.

The statement cache of :mod:`sqlite3` finds a statement by its text: a string
made once is found by identity with its hash kept, where a string built per
call is hashed and compared in full, a cost every claim and delete would pay.
Statements whose text depends on a call's shape (a listing's conditions, the
number of ids asked for) are made once per shape.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

from zaqar_lite.jsontext import stored_json
from zaqar_lite.storage.sqlite.layout import MESSAGE_COLUMNS, MESSAGE_FIELDS

# Candidates for claim and pop come from two index ranges merged by marker:
# never-delayed (and already-claimed-once) messages have delay_until = 0, an
# ordered range of the visibility index; matured delayed messages are the small
# range 0 < delay_until <= now. Still-delayed messages are never scanned. Together
# they are the visibility rule, policy.visible_at, in SQL: a prefilter the claim
# loop (storage.base) checks every candidate against again.
READY = ("delay_until = 0 AND marker > :marker AND expires > :now"
         " AND (claim_expires IS NULL OR claim_expires <= :now)")
MATURED = ("delay_until > 0 AND delay_until <= :now AND marker > :marker AND expires > :now"
           " AND (claim_expires IS NULL OR claim_expires <= :now)")
#: a grouped candidate must have no message of its group ahead of it that is not visible (claims.groups),
#: found in messages_by_group: the scan passes the rest of a held run by itself instead of handing it
#: to the claim loop (which applies the whole rule)
HEAD = ("(group_name IS NULL OR NOT EXISTS (SELECT 1 FROM messages AS g INDEXED BY messages_by_group"
        " WHERE g.project = :project AND g.queue = :queue AND g.group_name = messages.group_name"
        " AND g.marker < messages.marker AND (g.expires <= :now OR g.delay_until > :now"
        " OR g.claim_expires > :now)))")
CANDIDATE_PART = (f"SELECT * FROM (SELECT {MESSAGE_COLUMNS} FROM messages INDEXED BY messages_by_visibility"
                  f" WHERE project=:project AND queue=:queue AND {{}} AND {HEAD}"
                  " ORDER BY marker LIMIT :limit)")
#: the candidates of a claim or pop: both ranges, merged by marker
CANDIDATES = (f"{CANDIDATE_PART.format(READY)} UNION ALL {CANDIDATE_PART.format(MATURED)}"
              " ORDER BY marker LIMIT :limit")
QUEUE_METADATA = "SELECT metadata FROM queues WHERE project=? AND name=?"
INSERT_MESSAGE = f"INSERT INTO messages ({MESSAGE_FIELDS}) VALUES ({', '.join('?' * 18)})"


@functools.cache
def select_sql(where: str, limited: bool, index: str | None) -> str:
    """Return the SELECT of a queue's messages matching ``where``, FIFO, made once per shape."""
    table = f"messages INDEXED BY {index}" if index else "messages"
    return (f"SELECT {MESSAGE_COLUMNS} FROM {table} WHERE project=:project AND queue=:queue AND {where}"
            " ORDER BY marker" + (" LIMIT :limit" if limited else ""))


@functools.lru_cache(maxsize=64)
def id_names(count: int) -> tuple[str, ...]:
    """Return the parameter names of ``count`` message ids: ``id0``, ``id1``..."""
    return tuple(f"id{i}" for i in range(count))


@functools.lru_cache(maxsize=64)
def ids_where(count: int) -> str:
    """Return the condition of ``_get`` (the driver's read by ids) for ``count`` ids, made once per count."""
    return f"id IN ({','.join(':' + name for name in id_names(count))}) AND expires > :now"


def stored_metadata(db: sqlite3.Connection, project: str, queue: str) -> dict[str, Any] | None:
    """Return a queue's stored metadata, None for a missing queue."""
    row = db.execute(QUEUE_METADATA, (project, queue)).fetchone()
    return stored_json(row[0]) if row else None
