"""The versioned-record part of the storage contract: whatever is kept beside queues and messages.

A record is a JSON object under (project, kind, key), written only by
compare-and-set on its version. Every driver implements it
(:class:`~zaqar_lite.storage.base.Storage` is one). A feature kept in records
is a class composed over a record store, ``<Feature>(records)``, that alone
knows its kinds, keys and values: the redrive tasks
(:class:`~zaqar_lite.storage.tasks.RedriveTasks`), the pools' catalog
(:mod:`zaqar_lite.storage.pools.catalog`), the queue templates, the
subscriptions and the console's sessions; the lease a holder takes on one record is
:class:`~zaqar_lite.storage.lease.RecordLease`.
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

