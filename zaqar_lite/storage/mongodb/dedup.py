"""Remembered ``dedup_id`` in MongoDB: the ``dedup`` collection, one guarded upsert per id."""

from __future__ import annotations

from collections.abc import Sequence

from pymongo.errors import DuplicateKeyError

from zaqar_lite import errors
from zaqar_lite.models import Message
from zaqar_lite.storage.base import CHANGE_ATTEMPTS
from zaqar_lite.storage.mongodb.client import MongoConnected
from zaqar_lite.storage.mongodb.layout import purge_at


class MongoDedup(MongoConnected):
    """The dedup primitives of :class:`~zaqar_lite.storage.mongodb.driver.MongoStorage`'s post."""

    def _remembered(self, project: str, queue: str, message: Message, now: float) -> str | None:
        """Return the id a live entry of ``message.dedup_id`` names, or remember it with ``message.id``.

        One guarded upsert: it replaces a lapsed entry or inserts one; a live
        entry makes it insert a second, which the unique index refuses.
        """
        if message.dedup_id is None:
            return None
        entry = {"project": project, "queue": queue, "dedup_id": message.dedup_id}
        for _ in range(CHANGE_ATTEMPTS):
            try:
                self._database().dedup.update_one(
                    {**entry, "expires": {"$lte": now}},
                    {"$set": {"message_id": message.id, "expires": message.dedup_until,
                              "purge_at": purge_at(message.dedup_until)}}, upsert=True)
                return None
            except DuplicateKeyError:
                live = self._database().dedup.find_one({**entry, "expires": {"$gt": now}})
                if live is not None:  # else it lapsed since: try again
                    return str(live["message_id"])
        raise errors.StorageUnavailable(f"the dedup_id {message.dedup_id} of queue {queue} kept changing")

    def _forget(self, project: str, queue: str, messages: Sequence[Message]) -> None:
        """Forget the ids remembered for ``messages`` (a post that stored nothing)."""
        self._database().dedup.delete_many({"project": project, "queue": queue, "message_id": {
            "$in": [m.id for m in messages if m.dedup_id is not None]}})

    def _forget_queue(self, project: str, queue: str) -> None:
        """Forget every id a queue remembers (the queue is deleted)."""
        self._database().dedup.delete_many({"project": project, "queue": queue})
