"""Read dead letters from a zaqar-lite Swift store, in name ranges of each DLQ's pseudo-folder.

Layout (``zaqar_lite.storage.swift.layout``): a container per project; a
message is the object ``m/<queue>/<marker:020d>_<id>`` whose JSON body is its
whole state, and markers are post times in microseconds (x 1000), so names
sort in post order. The planner lists a DLQ's names once (never a body: a
listing page holds 1000 names, and only their markers are kept, 8 bytes
each) and cuts them into ranges of equal counts; a partition lists its range
with ``marker``/``end_marker`` (skipping expired objects by their listing
hint) and GETs the bodies a few at a time on the driver client's thread pool.
"""

from __future__ import annotations

import array
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from spark_jobs.sources.plan import Target, contract_queues, cut_points, range_specs
from spark_jobs.sources.rows import StoredMessage
from zaqar_lite.storage.swift import layout

PAGE = 1000


class SwiftReader:
    """The Swift side of the dead-letter data source (see the module docstring)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.options = layout.parse_uri(uri)
        self._objects: Any = None
        self._listed: dict[Target, array.array] = {}

    def objects(self) -> Any:
        """Return the driver's object client (auth, retries, StorageUnavailable), made on first use."""
        if self._objects is None:
            from zaqar_lite.storage.swift.client import SwiftObjects

            self._objects = SwiftObjects(self.options)
        return self._objects

    def _container(self, project: str) -> str:
        return layout.project_container(self.options.prefix, project)

    def queues(self) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
        """Yield every queue with its metadata, through the storage contract."""
        return contract_queues(self.uri)

    def _markers(self, target: Target) -> array.array:
        """Return the markers of the queue's unexpired messages, listed once (names only) and kept."""
        if target not in self._listed:
            found = array.array("q")
            now = time.time()
            for name, hint in self.objects().rows(self._container(target.project),
                                                  layout.message_prefix(target.queue)):
                if hint.expires > now:
                    found.append(layout.marker_of(name))
            self._listed[target] = found
        return self._listed[target]

    def count(self, target: Target) -> int:
        """Return the number of unexpired messages in the queue (a listing of names)."""
        return len(self._markers(target))

    def plan(self, target: Target, pieces: int) -> list[dict[str, Any]]:
        """Cut the queue's names into ``pieces`` marker ranges ``(after, upto]`` of equal counts."""
        markers = self._markers(target)
        total = len(markers)
        cuts = cut_points(total, pieces, markers.__getitem__)
        bounds: list[int | None] = [None, *cuts, None]
        return range_specs({
            "store": "swift",
            "uri": self.uri,
            "container": self._container(target.project),
            "project": target.project,
            "queue": target.queue,
        }, bounds)

    def _names(self, spec: Mapping[str, Any], now: float) -> Iterator[list[str]]:
        from swiftclient.exceptions import ClientException

        prefix, queue = layout.message_prefix(spec["queue"]), spec["queue"]
        marker = layout.after_marker(queue, spec["after"])
        end = layout.after_marker(queue, spec["upto"])

        while True:
            try:
                _, page = self.objects().call(
                    "get_container",
                    spec["container"],
                    prefix=prefix,
                    marker=marker,
                    end_marker=end,
                    limit=PAGE,
                )
            except ClientException as exc:
                if exc.http_status == 404:
                    return
                raise
            yield [
                row["name"]
                for row in page
                if layout.parse_hint(row.get("content_type", "")).expires > now
            ]
            if len(page) < PAGE:
                return
            marker = page[-1]["name"]

    def read(self, spec: Mapping[str, Any], now: float) -> Iterator[list[StoredMessage]]:
        """Stream the dead letters of one span, a listing page at a time."""
        objects = self.objects()
        for names in self._names(spec, now):
            read = objects.map(lambda name: (name, objects.read(spec["container"], name)), names)
            # an object deleted since it was listed reads as None
            messages = (layout.message_from(name, found[0]) for name, found in read if found is not None)
            yield [
                (m.id, json.dumps(m.body), m.created, m.client_id, m.claim_count, m.failures, m.dead_letter)
                for m in messages
                if m.dead_letter and m.expires > now
            ]
