"""Versioned records in MongoDB: the ``records`` collection, written by compare-and-set on ``version``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pymongo.errors import DuplicateKeyError

from zaqar_lite import errors
from zaqar_lite.models import Record
from zaqar_lite.storage.mongodb.client import MongoConnected, translated
from zaqar_lite.storage.mongodb.layout import Document, record_from


class MongoRecords(MongoConnected):
    """The record methods of the storage contract (see :class:`~zaqar_lite.storage.base.Storage`)."""

    @translated
    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        """Return a record, or None if absent."""
        doc = self._database().records.find_one({"kind": kind, "project": project, "key": key})
        return record_from(doc) if doc else None

    @translated
    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        """Insert (``expected_version`` None) or update at the version read; return the new version."""
        records, scope = self._database().records, {"kind": kind, "project": project, "key": key}
        conflict = errors.Conflict(f"{kind} {key} was changed by someone else; read it again.")
        if expected_version is None:
            try:
                records.insert_one({**scope, "value": json.dumps(value), "version": 1})
            except DuplicateKeyError:
                raise conflict from None
            return 1
        if records.update_one({**scope, "version": expected_version},
                              {"$set": {"value": json.dumps(value)}, "$inc": {"version": 1}}).matched_count:
            return expected_version + 1
        raise conflict

    @translated
    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        """Delete a record (only at ``expected_version`` when given); return whether one was deleted."""
        query: Document = {"kind": kind, "project": project, "key": key}
        if expected_version is not None:
            query["version"] = expected_version
        return self._database().records.delete_one(query).deleted_count == 1

    @translated
    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        """Return up to ``limit`` records of a kind whose key starts with prefix and is > marker."""
        keys = {"$gt": marker or "", "$regex": "^" + re.escape(prefix)}
        found = self._database().records.find({"kind": kind, "project": project, "key": keys})
        return [record_from(doc) for doc in found.sort("key").limit(limit)]

    @translated
    def record_projects(self, kind: str) -> list[str]:
        """Return every project that has at least one record of a kind."""
        return sorted(self._database().records.distinct("project", {"kind": kind}))
