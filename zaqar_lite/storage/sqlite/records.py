"""Versioned records in SQLite: the ``records`` table, written by compare-and-set on ``version``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zaqar_lite import errors
from zaqar_lite.models import Record
from zaqar_lite.storage.sqlite.client import SqliteConnected


class SqliteRecords(SqliteConnected):
    """The record methods of the storage contract (see :class:`~zaqar_lite.storage.base.Storage`)."""

    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        """Return a record, or None if absent."""
        with self._translate_errors():
            row = self._connection().execute(
                "SELECT key, value, version FROM records WHERE kind=? AND project=? AND key=?",
                (kind, project, key)).fetchone()
        return Record(row[0], json.loads(row[1]), row[2]) if row else None

    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        """Insert (``expected_version`` None) or update at the version read; return the new version."""
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
        """Delete a record (only at ``expected_version`` when given); return whether one was deleted."""
        sql = "DELETE FROM records WHERE kind=? AND project=? AND key=?"
        args: tuple[Any, ...] = (kind, project, key)
        if expected_version is not None:
            sql, args = sql + " AND version=?", (*args, expected_version)
        with self.transaction() as db:
            return db.execute(sql, args).rowcount == 1

    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        """Return up to ``limit`` records of a kind whose key starts with prefix and is > marker."""
        with self._translate_errors():
            rows = self._connection().execute(
                "SELECT key, value, version FROM records WHERE kind=? AND project=? AND key>?"
                " AND substr(key, 1, ?)=? ORDER BY key LIMIT ?",
                (kind, project, marker or "", len(prefix), prefix, limit)).fetchall()
        return [Record(r[0], json.loads(r[1]), r[2]) for r in rows]

    def record_projects(self, kind: str) -> list[str]:
        """Return every project that has at least one record of a kind."""
        with self._translate_errors():
            return [r[0] for r in self._connection().execute(
                "SELECT DISTINCT project FROM records WHERE kind=?", (kind,))]
