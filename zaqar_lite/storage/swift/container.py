"""What a project's Swift container holds, read and written: queue records and message objects.

Object names, bodies and listing hints: :mod:`~zaqar_lite.storage.swift.layout`.

Listed before acknowledged: claims, listings and lookups by id all find
messages through the container listing, and Swift may answer a PUT before the
listing has the object (the object server waits ``container_update_timeout``,
1 s by default, for the container server to take the update, then answers
201 anyway and keeps trying in the background for up to ``node_timeout``, 3 s,
before saving the update for the object updater). So a post returns only once
its messages are listed, and a move deletes its source only once the copy is
listed (:meth:`SwiftContainer._await_listed`): an acknowledged message is
claimable at once. A write whose listing never comes within ``LISTING_WAIT``
fails as unavailable (the post then deletes what it wrote, the move keeps its
source).

Deduplicated posts: a post remembers each ``dedup_id`` first, in an object
``d/<queue>/<dedup id>`` created with ``If-None-Match: *`` and ``X-Delete-At``
at the window's end, then settled and read back, and stores its messages
after. Swift 2.30's object server checks ``If-None-Match`` before it writes
the body and takes no lock, so two concurrent creates both succeed (39 races
in 40 on the test Swift): the one with the later timestamp stands, whatever
the order the writes land in, and the other post finds it. A write slower
than ``settle`` may land after a competitor kept its own: then both store
(a duplicate, each answering its own href), never neither. No Swift request
can make this exact: it has no compare-and-swap. So a post with a
``dedup_id`` takes ``settle`` seconds more; a failed store forgets the ids
it remembered, but a process dying in between leaves the id answering with
a message never stored until its window ends. Message groups: each
message's listing hint carries a hash of its group and its state, so a claim
finds the held groups and each group's run in the listing it reads anyway
(:meth:`SwiftContainer._candidate_rows`).
"""

from __future__ import annotations

import itertools
import json
import math
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import groups
from zaqar_lite.models import Message
from zaqar_lite.storage.base import CHANGE_ATTEMPTS
from zaqar_lite.storage.swift import layout
from zaqar_lite.storage.swift.client import PAGE
from zaqar_lite.storage.swift.layout import SwiftOptions
from zaqar_lite.storage.swift.records import SwiftRecordsMixin

#: seconds a write waits for its object to be listed: Swift's default ``conn_timeout`` (0.5)
#: and ``node_timeout`` (3) bound the object server's own tries at the container update
LISTING_WAIT = 5.0
#: seconds between two reads of a listing that does not show a new object yet
LISTING_POLL = 0.05


class SwiftContainer(SwiftRecordsMixin):
    """Queue records and message objects of :class:`~zaqar_lite.storage.swift.driver.SwiftStorage`."""

    options: SwiftOptions
    all_queues_page: int

    def _load(self, container: str, name: str) -> tuple[Message, str] | None:
        got = self.objects.read(container, name)
        return None if got is None else (layout.message_from(name, got[0]), got[1])

    def _store(self, container: str, name: str, message: Message,
               headers: Mapping[str, str] | None = None) -> None:
        self.objects.write(container, name, layout.message_body(message), layout.message_type(message),
                           {**layout.delete_at(message.expires), **(headers or {})})

    def _remembered(self, container: str, queue: str, message: Message, now: float) -> str | None:
        """Return the id a live ``dedup_id`` object names, or remember it with ``message.id``.

        Swift's ``If-None-Match: *`` is no lock (see the driver), so the write
        is settled and read back as a queue's creation is: of concurrent
        writers the last one stands, and the others find its object the next
        time round. A lapsed object is overwritten the same way. A write
        slower than ``settle`` is not kept at once, but found standing the
        next time round it is this post's: its message is stored (a competitor
        may have kept its own write before this one landed, and stored too),
        never left answering with a message nobody stores.
        """
        if message.dedup_id is None:
            return None
        name = layout.dedup_object(queue, message.dedup_id)
        writer = uuid.uuid4().hex
        body = json.dumps({"message_id": message.id, "expires": message.dedup_until,
                           "writer": writer}).encode()
        headers = {"X-Delete-At": str(math.ceil(message.dedup_until))} \
            if message.dedup_until > time.time() + 1 else {}
        for _ in range(CHANGE_ATTEMPTS):
            live = self.objects.read_json(container, name)
            if live is not None and live.get("writer") == writer:
                return None
            if live is not None and live["expires"] > now:
                return str(live["message_id"])
            started = time.monotonic()
            if live is None:
                sent = self.objects.create(container, name, body, layout.QUEUE_TYPE, headers)
            else:
                sent = self.objects.write(container, name, body, layout.QUEUE_TYPE, headers)
            if sent is not None and self.objects.kept(container, name, writer, started, time.monotonic()):
                return None
        raise errors.StorageUnavailable(f"the dedup_id {message.dedup_id} of queue {queue} kept changing")

    def _await_listed(self, container: str, queue: str, names: Iterable[str]) -> None:
        """Return once the queue's listing shows every named message object (see the module).

        Raises:
            StorageUnavailable: some were still not listed after ``LISTING_WAIT`` seconds.
        """
        missing = set(names)
        deadline = time.monotonic() + LISTING_WAIT
        while missing:
            first, last = min(missing), max(missing)
            after = layout.after_marker(queue, layout.marker_of(first) - 1)
            page = len(missing) + 10  # a few concurrent posts' objects may lie between ours
            for name, _ in self.objects.rows(container, layout.message_prefix(queue), after, page):
                if name > last:
                    break
                missing.discard(name)
            if missing and time.monotonic() > deadline:
                raise errors.StorageUnavailable(
                    f"Swift stored {len(missing)} message(s) of queue {queue} but does not list them")
            if missing:
                time.sleep(LISTING_POLL)

    def _candidate_rows(self, container: str, queue: str, now: float) -> Iterator[tuple[str, str]]:
        """Yield the (name, group hash or '') of the messages a claim may take: a prefilter from the hints.

        FIFO up to the first grouped row, read page by page; from there on the
        rest of the listing is read at once and ordered by the group rule
        (:func:`zaqar_lite.claims.groups.listing_order`: every listed row
        counts, whatever its state), so a queue without groups reads no more
        than it takes.
        """
        rows = self.objects.rows(container, layout.message_prefix(queue))
        for name, hint in rows:
            if hint.group:
                rest = itertools.chain([(name, hint)], rows)
                yield from groups.listing_order(
                    ((n, h.group), h.group or None, h.visible(now), h.claim_expires > now, h.claim_count > 0,
                     max(h.delay_until, h.claim_expires)) for n, h in rest)
                return
            if hint.visible(now):
                yield name, ""

    def _forget(self, container: str, queue: str, messages: Sequence[Message]) -> None:
        """Delete the dedup objects remembered for ``messages`` (a post that stored nothing)."""
        for message in messages:
            if message.dedup_id is None:
                continue
            name = layout.dedup_object(queue, message.dedup_id)
            record = self.objects.read_json(container, name)
            if record is not None and record["message_id"] == message.id:
                self.objects.delete(container, name)

    @staticmethod
    def _queue_record(project: str, queue: str, metadata: Mapping[str, Any], now: float) -> dict[str, Any]:
        return {"project": project, "name": queue, "metadata": dict(metadata), "created": now,
                "writer": uuid.uuid4().hex}

    def _ensure_queue(self, container: str, project: str, queue: str, now: float) -> None:
        record = self._queue_record(project, queue, {}, now)
        body = json.dumps(record).encode()
        self.objects.create(container, layout.queue_object(queue), body, layout.QUEUE_TYPE)

    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        container, name = self._container(project), layout.queue_object(queue)
        record = self._queue_record(project, queue, metadata, now)
        sent = self.objects.create(container, name, json.dumps(record).encode(), layout.QUEUE_TYPE)
        if sent is None:
            return False
        return self.objects.kept(container, name, record["writer"], sent, time.monotonic())

    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        record = self.objects.read_json(self._container(project), layout.queue_object(queue))
        return None if record is None else record["metadata"]

    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        container, name = self._container(project), layout.queue_object(queue)
        record = self.objects.read_json(container, name)
        if record is None:
            raise errors.QueueDoesNotExist(queue, project)
        record["metadata"] = dict(metadata)
        self.objects.write(container, name, json.dumps(record).encode(), layout.QUEUE_TYPE)

    def _queue_names(self, container: str, marker: str | None = None, page_size: int = PAGE) -> Iterator[str]:
        after = None if marker is None else layout.queue_object(marker)
        for name, _ in self.objects.rows(container, "q/", after, page_size):
            yield layout.queue_name_of(name)

    def _queue_records(self, container: str, names: Iterable[str]) -> list[dict[str, Any]]:
        found = self.objects.map(lambda n: self.objects.read_json(container, layout.queue_object(n)), names)
        return [record for record in found if record is not None]

    def list_queues(self, project: str, *, marker: str | None, limit: int,
                    name_contains: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        container = self._container(project)
        names = (n for n in self._queue_names(container, marker) if not name_contains or name_contains in n)
        records = self._queue_records(container, itertools.islice(names, limit))
        return [(r["name"], r["metadata"]) for r in records]

    def count_queues(self, project: str) -> int:
        return sum(1 for _ in self._queue_names(self._container(project)))

    def all_queues(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        for container in self.objects.containers(f"{self.options.prefix}."):
            names = self._queue_names(container, page_size=self.all_queues_page)
            for page in iter(lambda: list(itertools.islice(names, self.all_queues_page)), []):  # noqa: B023
                for record in self._queue_records(container, page):
                    yield record["project"], record["name"], record["metadata"]

    def _alive(self, container: str, names: Iterable[str], now: float) -> list[tuple[str, Message]]:
        """Read messages by name, FIFO, leaving out absent and expired ones."""
        loaded = self.objects.map(lambda n: (n, self._load(container, n)), sorted(names))
        return [(n, got[0]) for n, got in loaded if got is not None and got[0].expires > now]

    def _locate(self, container: str, queue: str, ids: Sequence[str], known: Iterable[str] = ()) -> list[str]:
        """Return the names of messages by id: from ``known`` names (a claim's), else by listing the queue."""
        wanted = set(ids)
        found = {layout.message_id_of(n): n for n in known if layout.message_id_of(n) in wanted}
        if wanted - found.keys():
            for name, _ in self.objects.rows(container, layout.message_prefix(queue)):
                if layout.message_id_of(name) in wanted:
                    found[layout.message_id_of(name)] = name
        return list(found.values())
