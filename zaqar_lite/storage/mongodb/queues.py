"""Queue records in MongoDB: the ``queues`` collection (metadata, and the counter markers are reserved from).

Deleting a queue also deletes its messages and remembered ids, so
``delete_queue`` stays with the messages in
:mod:`~zaqar_lite.storage.mongodb.driver`.

A queue's ``due`` is when the sweep next has something to do in it (infinity:
nothing until a write; index ``by_due``). A write that may give the sweep work
lowers it (``$min``) after its own write, bumping ``due_version``; the sweep
of a queue sets the next one only if ``due_version`` is still the one read
before it looked at the messages and claims, so a write it did not see leaves
the due time it lowered. A crash between a write and its ``$min`` leaves a due
time late: the message is still removed by the TTL index an hour after its
expiry (``layout.PURGE_MARGIN``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from pymongo import ASCENDING, ReturnDocument
from pymongo.errors import DuplicateKeyError

from zaqar_lite import errors
from zaqar_lite.storage.mongodb.client import MongoConnected, translated
from zaqar_lite.storage.mongodb.layout import BY_EXPIRY, Document

#: the due time of a queue where the sweep has nothing to do until a write
IDLE = float("inf")


class MongoQueues(MongoConnected):
    """The queue methods of the storage contract, and the marker reservation of posts and moves."""

    all_queues_page: int

    @translated
    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        """Create a queue unless it exists; return whether this call created it."""
        try:
            result = self._database().queues.update_one(
                {"project": project, "name": queue},
                {"$setOnInsert": {"metadata": json.dumps(metadata), "created": now, "counter": 0,
                                  "due": IDLE}},
                upsert=True)
        except DuplicateKeyError:  # a concurrent create won
            return False
        return result.upserted_id is not None

    @translated
    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        """Return a queue's metadata, or None when it does not exist."""
        doc = self._database().queues.find_one({"project": project, "name": queue}, {"metadata": 1})
        return json.loads(doc["metadata"]) if doc else None

    @translated
    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        """Replace a queue's metadata.

        Raises:
            QueueDoesNotExist: no such queue.
        """
        # due at once: a new policy may make the sweep move messages it left so far
        result = self._database().queues.update_one({"project": project, "name": queue}, {
            "$set": {"metadata": json.dumps(metadata), "due": 0.0}, "$inc": {"due_version": 1}})
        if result.matched_count == 0:
            raise errors.QueueDoesNotExist(queue, project)

    @translated
    def list_queues(self, project: str, *, marker: str | None, limit: int,
                    name_contains: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """Return up to ``limit`` queues of a project after ``marker``, by name, with their metadata."""
        query: Document = {"project": project, "name": {"$gt": marker or ""}}
        if name_contains:
            query["name"]["$regex"] = re.escape(name_contains)
        found = self._database().queues.find(query, {"name": 1, "metadata": 1}).sort("name").limit(limit)
        return [(doc["name"], json.loads(doc["metadata"])) for doc in found]

    @translated
    def count_queues(self, project: str) -> int:
        """Return how many queues a project has."""
        return self._database().queues.count_documents({"project": project})

    def all_queues(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield ``(project, queue, metadata)`` of every queue, one page of the store at a time."""
        after: tuple[str, str] | None = None
        while True:
            page = self._queue_page(after)
            yield from page
            if len(page) < self.all_queues_page:
                return
            after = page[-1][0], page[-1][1]

    def due_queues(self, now: float) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield the queues whose due time has come, one page of the store at a time (index by_due)."""
        after: tuple[str, str] | None = None
        while True:
            page = self._queue_page(after, {"due": {"$lte": now}})
            yield from page
            if len(page) < self.all_queues_page:
                return
            after = page[-1][0], page[-1][1]

    @translated
    def _due_by(self, project: str, queue: str, when: float) -> None:
        """Make a queue due at ``when`` at the latest; called after the write that needs it."""
        self._database().queues.update_one({"project": project, "name": queue},
                                           {"$min": {"due": when}, "$inc": {"due_version": 1}})

    @translated
    def _record_next_due(self, project: str, queue: str, now: float) -> None:
        database, key = self._database(), {"project": project, "name": queue}
        read = database.queues.find_one(key, {"due_version": 1})
        if read is None:
            return
        scope = {"project": project, "queue": queue}
        firsts = [doc["expires"] for found in (database.messages, database.claims)
                  for doc in found.find(scope, {"expires": 1}).sort("expires", ASCENDING).limit(1)
                  .hint(BY_EXPIRY)]
        database.queues.update_one({**key, "due_version": read.get("due_version")},
                                   {"$set": {"due": min(firsts, default=IDLE)}})

    @translated
    def _queue_page(self, after: tuple[str, str] | None,
                    only: Document | None = None) -> list[tuple[str, str, dict[str, Any]]]:
        """Return up to all_queues_page queues matching ``only`` after ``(project, name)``, in order."""
        query: Document = {} if after is None else {"$or": [
            {"project": {"$gt": after[0]}}, {"project": after[0], "name": {"$gt": after[1]}}]}
        if only:
            query = {**only, **query}
        found = self._database().queues.find(query, {"project": 1, "name": 1, "metadata": 1}).sort(
            [("project", ASCENDING), ("name", ASCENDING)]).limit(self.all_queues_page)
        return [(doc["project"], doc["name"], json.loads(doc["metadata"])) for doc in found]

    def _reserve_markers(self, project: str, queue: str, count: int, now: float) -> int:
        """Reserve ``count`` consecutive markers of a queue, creating it if missing; return the first."""
        try:
            doc = self._database().queues.find_one_and_update(
                {"project": project, "name": queue},
                {"$inc": {"counter": count}, "$setOnInsert": {"metadata": "{}", "created": now, "due": IDLE}},
                projection={"counter": 1}, upsert=True, return_document=ReturnDocument.AFTER)
        except DuplicateKeyError:  # a concurrent upsert created the queue: now it exists
            return self._reserve_markers(project, queue, count, now)
        assert doc is not None  # an upsert returning the document after the update
        return int(doc["counter"]) - count + 1
