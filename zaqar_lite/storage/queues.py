"""The queue part of the storage contract: queues and their metadata."""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping
from typing import Any


class QueueStore(abc.ABC):
    """Queues of a project with their metadata; every method may raise StorageUnavailable."""

    #: queues :meth:`all_queues` reads from the store at a time (a sweep holds one page, not every queue)
    all_queues_page: int = 1000

    @abc.abstractmethod
    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        """Create a queue with its metadata.

        Atomic: two concurrent creates make one queue; the loser leaves the
        existing metadata unchanged.

        Returns:
            True if the queue was created, False if it already existed.
        """

    @abc.abstractmethod
    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        """Return the stored metadata of a queue, or None if the queue does not exist."""

    @abc.abstractmethod
    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        """Replace the metadata of an existing queue.

        Raises:
            QueueDoesNotExist: no such queue.
        """

    @abc.abstractmethod
    def delete_queue(self, project: str, queue: str) -> None:
        """Delete a queue with all its messages and claims; absent queues are fine."""

    @abc.abstractmethod
    def list_queues(
        self, project: str, *, marker: str | None, limit: int, name_contains: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Return up to ``limit`` ``(name, metadata)`` pairs with name > marker, by name."""

    @abc.abstractmethod
    def count_queues(self, project: str) -> int:
        """Return the number of queues of a project."""

    @abc.abstractmethod
    def all_queues(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield ``(project, queue, metadata)`` for every queue of every project.

        Reads at most :attr:`all_queues_page` queues from the store at a time, so
        that the memory of a sweep does not grow with the number of queues.
        """
