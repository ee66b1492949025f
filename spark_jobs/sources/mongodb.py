"""Read dead letters from a zaqar-lite MongoDB store, in marker ranges of each DLQ.

Layout (``zaqar_lite.storage.mongodb.layout``, imported): one ``messages`` collection with
``project``, ``queue`` and ``marker`` fields and the ``by_marker`` index on
them; bodies are JSON text, ``failures`` a list and ``dead_letter`` a
document. The planner finds the markers at equal rank steps (an index walk
with ``skip``); a partition runs one ``find`` over its range ``(after, upto]``
hinted to that index, and the cursor streams it in batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from spark_jobs.sources.plan import Target, contract_queues, cut_points, range_specs
from spark_jobs.sources.rows import BATCH_ROWS, StoredMessage
from zaqar_lite.storage.mongodb.layout import BY_MARKER, DEFAULT_DATABASE, REPORT_FIELDS


class MongoReader:
    """The MongoDB side of the dead-letter data source (see the module docstring)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._db: Any = None

    def database(self) -> Any:
        """Return the URI's database (default ``zaqar_lite``), connecting on first use in this process."""
        if self._db is None:
            import pymongo

            # a report's reads are long: not the server's short request timeouts
            client: Any = pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=5000)
            self._db = client.get_default_database(DEFAULT_DATABASE)
        return self._db

    def queues(self) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
        """Yield every queue with its metadata, through the storage contract."""
        return contract_queues(self.uri)

    def count(self, target: Target) -> int:
        """Return the number of messages in the queue."""
        return int(
            self.database().messages.count_documents(
                {"project": target.project, "queue": target.queue}, hint=BY_MARKER
            )
        )

    def plan(self, target: Target, pieces: int) -> list[dict[str, Any]]:
        """Cut the queue into marker ranges ``(after, upto]`` of about equal sizes."""
        scope = {"project": target.project, "queue": target.queue}
        total = self.count(target)

        def marker_at(rank: int) -> int | None:
            found = list(self.database().messages.find(scope, {"marker": 1}).sort("marker", 1)
                         .hint(BY_MARKER).skip(rank).limit(1))
            return found[0]["marker"] if found else None

        cuts = cut_points(total, pieces, marker_at)
        bounds: list[int | None] = [None, *cuts, None]
        return range_specs({
            "store": "mongodb",
            "uri": self.uri,
            "project": target.project,
            "queue": target.queue,
        }, bounds)

    def read(self, spec: Mapping[str, Any], now: float) -> Iterator[list[StoredMessage]]:
        """Stream the dead letters of one marker range, a cursor batch at a time."""
        marker: dict[str, Any] = {}
        if spec["after"] is not None:
            marker["$gt"] = spec["after"]
        if spec["upto"] is not None:
            marker["$lte"] = spec["upto"]
        query: dict[str, Any] = {"project": spec["project"], "queue": spec["queue"]}
        if marker:
            query["marker"] = marker
        cursor = (
            self.database().messages.find(query, REPORT_FIELDS).sort("marker", 1).hint(BY_MARKER)
            .batch_size(BATCH_ROWS)
        )
        page: list[StoredMessage] = []
        try:
            for doc in cursor:
                if doc.get("dead_letter") and doc["expires"] > now:
                    page.append((
                        doc["_id"],
                        doc["body"],
                        doc["created"],
                        doc.get("client_id"),
                        doc.get("claim_count", 0),
                        doc.get("failures"),
                        doc["dead_letter"],
                    ))
                if len(page) >= BATCH_ROWS:
                    yield page
                    page = []
            if page:
                yield page
        finally:
            cursor.close()
