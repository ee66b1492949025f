"""The versioned-record part of the storage contract: whatever is kept beside queues and messages.

A record is a JSON object under (project, kind, key), written only by
compare-and-set on its version. What is built on them lives with its users:
subscriptions, delivery cursors and leases in :mod:`zaqar_lite.notify`,
redrive tasks in :mod:`zaqar_lite.storage.tasks`, the operator's queue
templates in :mod:`zaqar_lite.service.templates`, the console's sessions in
:mod:`zaqar_lite.service.operations`, the pools' catalog in
:mod:`zaqar_lite.storage.pools.catalog`.
Every driver implements it (:class:`~zaqar_lite.storage.base.Storage` is one);
a store around another (encryption at rest, the pools' router) hands its
records on (:class:`RecordsKeptElsewhere`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from zaqar_lite.models import Record


class RecordStore(abc.ABC):
    """Versioned records, each method atomic; every method may raise StorageUnavailable."""

    @abc.abstractmethod
    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        """Return a record, or None if absent."""

    @abc.abstractmethod
    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        """Write a record by compare-and-set, atomically.

        Args:
            expected_version: None to create (fails if the record exists), else
                the version read (fails if it changed since).

        Returns:
            The new version.

        Raises:
            Conflict: the record exists (create) or its version changed (update).
        """

    @abc.abstractmethod
    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        """Delete a record (only at ``expected_version`` when given); return whether one was deleted."""

    @abc.abstractmethod
    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        """Return up to ``limit`` records of a kind whose key starts with prefix and is > marker, by key."""

    @abc.abstractmethod
    def record_projects(self, kind: str) -> list[str]:
        """Return every project that has at least one record of a kind."""


class RecordsKeptElsewhere(RecordStore):
    """The records of a store that keeps them in another (a wrapper's inner store, the pools' default)."""

    #: the store holding the records
    record_store: RecordStore

    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        return self.record_store.get_record(project, kind, key)

    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        return self.record_store.put_record(project, kind, key, value, expected_version)

    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        return self.record_store.delete_record(project, kind, key, expected_version)

    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        return self.record_store.list_records(project, kind, prefix=prefix, marker=marker, limit=limit)

    def record_projects(self, kind: str) -> list[str]:
        return self.record_store.record_projects(kind)
