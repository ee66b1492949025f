"""Read dead letters from a zaqar-lite SQLite file, in marker ranges, each opened read-only.

Layout, URI and encodings: :mod:`zaqar_lite.storage.sqlite.layout`. The
planner counts a DLQ's rows and finds the markers that cut it into pieces of
equal size through the ``messages_by_queue`` index ``(project, queue, marker)``;
each partition then opens the file with ``mode=ro`` (WAL lets it read while
the server writes) and streams its range with ``fetchmany``, whose rows are
already the stored messages the batch builder takes (JSON columns left as
text). Nothing is loaded whole, on the driver or in a partition.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from spark_jobs.sources.plan import Target, cut_points, range_specs
from spark_jobs.sources.rows import BATCH_ROWS, StoredMessage
from zaqar_lite.storage.sqlite import layout

#: the columns of a StoredMessage, in its order
_SELECT = (
    "SELECT id, body, created, client_id, claim_count, failures, dead_letter FROM messages"
    " WHERE project=? AND queue=? AND marker > ? AND marker <= ? AND dead_letter IS NOT NULL"
    " AND expires > ? ORDER BY marker"
)
_NO_END = 2**63 - 1


def database_path(uri: str) -> str:
    """Return the file of ``sqlite:///relative.db`` or ``sqlite:////abs.db`` URI, as the driver reads it."""
    try:
        path = layout.parse_uri(uri)[0]
    except ValueError:
        path = ":memory:"
    if path == ":memory:":
        raise ValueError(f"the report needs a sqlite file URI (sqlite:////abs/path.db), got {uri!r}")
    return str(Path(path).expanduser().resolve())


def connect_read_only(path: str) -> sqlite3.Connection:
    """Open the database read-only; a missing file is an error, never a new empty database."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no zaqar-lite database at {path}")
    conn = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro", uri=True, timeout=30)
    conn.execute("PRAGMA query_only=1")
    return conn


class SqliteReader:
    """The SQLite side of the dead-letter data source (see the module docstring)."""

    def __init__(self, uri: str) -> None:
        self.path = database_path(uri)

    def queues(self) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
        """Yield every queue with its metadata."""
        with connect_read_only(self.path) as conn:
            rows = conn.execute("SELECT project, name, metadata FROM queues").fetchall()
        for project, name, metadata in rows:
            yield project, name, json.loads(metadata)

    def count(self, target: Target) -> int:
        """Return the number of messages in the queue."""
        with connect_read_only(self.path) as conn:
            return conn.execute(
                "SELECT COUNT(*) FROM messages WHERE project=? AND queue=?", (target.project, target.queue)
            ).fetchone()[0]

    def plan(self, target: Target, pieces: int) -> list[dict[str, Any]]:
        """Cut the queue into ``pieces`` marker ranges ``(after, upto]`` of about equal row counts."""
        with connect_read_only(self.path) as conn:
            total = conn.execute(
                "SELECT COUNT(*) FROM messages WHERE project=? AND queue=?", (target.project, target.queue)
            ).fetchone()[0]

            def marker_at(rank: int) -> int | None:
                row = conn.execute(
                    "SELECT marker FROM messages WHERE project=? AND queue=?"
                    " ORDER BY marker LIMIT 1 OFFSET ?",
                    (target.project, target.queue, rank),
                ).fetchone()
                return None if row is None else row[0]

            cuts = cut_points(total, pieces, marker_at)
        # open ends: messages moved in after planning still land in the last range
        bounds = [0, *cuts, _NO_END]
        return range_specs({
            "store": "sqlite",
            "path": self.path,
            "project": target.project,
            "queue": target.queue,
        }, bounds)

    def read(self, spec: Mapping[str, Any], now: float) -> Iterator[list[StoredMessage]]:
        """Stream the dead letters of one marker range, a page of rows at a time."""
        conn = connect_read_only(spec["path"])
        try:
            cursor = conn.execute(_SELECT, (spec["project"], spec["queue"], spec["after"], spec["upto"], now))
            while page := cursor.fetchmany(BATCH_ROWS):
                yield page
        finally:
            conn.close()
