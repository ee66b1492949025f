"""Queues in Redis: their metadata and listings, and what a worker remembers of each queue.

Queue metadata. A post or a claim is planned (default ttl and delay, size limit,
dead-letter policy) from metadata the worker remembers from its last read of
that queue (``_metadata_text``), so it costs one round trip, not two. The
remembered JSON text travels with the script, which compares it with the stored
text before it changes anything and answers ``stale`` when another process
changed or deleted the queue meanwhile; the plan is then made again from a
fresh read (``_planned``), as is a plan refused on remembered metadata (only
what is stored refuses a request). This is the driver's own affair: the
contract (``post_planned``, ``claim_planned``,
:mod:`~zaqar_lite.storage.redis.driver`) only hands it the plan. A post to a
queue that existed when planned skips the SADD of its project (see the
layout): that project was registered before the queue was created.

What a worker remembers per queue (that metadata text, and the queue's key
names, built once) lives in two :class:`~zaqar_lite.storage.cache.LRUCache` of
``queue_cache_size`` entries each (``[storage] queue_cache_size``): touching
more queues than that forgets the least recently used ones, whose next post or
claim reads the metadata again (one more round trip) and builds the names again.
The sweep, which visits every queue, uses the names remembered but adds none.
Every script of a queue runs through ``_run``, which passes those names.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from zaqar_lite import errors
from zaqar_lite.config import QUEUE_CACHE_SIZE
from zaqar_lite.jsontext import stored_json
from zaqar_lite.storage.cache import LRUCache
from zaqar_lite.storage.redis.client import RedisConnected
from zaqar_lite.storage.redis.layout import PROJECTS, project_prefix, queue_keys, queue_prefix

LOG = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
#: plans of one post or claim before giving up on a queue whose metadata keeps changing
PLAN_ATTEMPTS = 5
#: a queue's key names: its project's prefix, its own prefix, its keys (layout.queue_keys)
QueueNames = tuple[str, str, tuple[str, ...]]
#: what post.lua and claim.lua answer when the queue's metadata is not the planned version
STALE = "stale"


class Stale(Exception):
    """post.lua or claim.lua found metadata other than the planned text stored; nothing was changed."""


class RedisQueues(RedisConnected):
    """The queue methods of the storage contract, the per-queue memory, and running a queue's script."""

    all_queues_page: int

    def __init__(self, uri: str, queue_cache_size: int = QUEUE_CACHE_SIZE) -> None:
        super().__init__(uri)
        #: (project, queue) -> the metadata text last read ('' for a missing queue)
        self._metadata: LRUCache[tuple[str, str], str] = LRUCache(queue_cache_size)
        #: (project, queue) -> (project prefix, queue prefix, queue keys) of the layout
        self._names: LRUCache[tuple[str, str], QueueNames] = LRUCache(queue_cache_size)

    def _queue_names(self, project: str, queue: str, remember: bool = True) -> QueueNames:
        """Return the project's key prefix, the queue's, and the queue's keys (built once per queue).

        ``remember=False`` (the sweep, which visits every queue) builds them on a
        miss without remembering them, so as not to push out the queues clients use.
        """
        key = (project, queue)
        names = self._names.get(key)
        if names is None:
            names = project_prefix(project), queue_prefix(project, queue), queue_keys(project, queue)
            if remember:
                self._names.put(key, names)
        return names

    def _run(self, script: str, project: str, queue: str, args: Sequence[Any],
             dead_letter_queue: str | None = None, register: bool = False, remember: bool = True) -> Any:
        """Run a queue script with the standard KEYS (the DLQ's last if given) and ARGV[1..2]."""
        project_ns, queue_ns, keys = self._queue_names(project, queue, remember)
        if dead_letter_queue is not None:  # the queue itself when it has none (a claim's, a sweep's)
            keys += (keys if dead_letter_queue == queue else
                     self._queue_names(project, dead_letter_queue, remember)[2])[:-1]
        return self._eval(script, keys, [project_ns, queue_ns, *args],
                          (PROJECTS, project) if register else None)

    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        # the project is registered before the queue exists, never after
        created = self._eval("create_queue", [queue_prefix(project, queue) + "meta",
                                              project_prefix(project) + "queues"],
                             [json.dumps(metadata), queue], (PROJECTS, project))
        self._metadata.pop((project, queue))
        return bool(created)

    def _metadata_text(self, project: str, queue: str, fresh: bool = False) -> tuple[str, bool]:
        """Return the queue's metadata JSON text ('' for a missing queue) and whether it was remembered.

        Answered from the worker's memory unless ``fresh`` or forgotten; a read is remembered.
        """
        key = (project, queue)
        text = None if fresh else self._metadata.get(key)
        if text is not None:
            return text, True
        with self._translate_errors():
            text = self.client.get(self._queue_names(project, queue)[1] + "meta") or ""
        self._metadata.put(key, text)
        return text, False

    def _planned(self, project: str, queue: str, plan: Callable[[dict[str, Any] | None], T],
                 write: Callable[..., R], *after: Any) -> R:
        """Plan from the metadata remembered (else read), then write with its text as the guard.

        ``write(project, queue, planned, text, *after)`` (the driver's ``_post`` or ``_claim``,
        with no closure made per request) raises :class:`Stale` when the script found other metadata
        stored: the plan is made again from a fresh read. A plan refused (a
        domain error) on remembered metadata is made again from a fresh read
        too: only what is stored refuses a request.
        """
        for attempt in range(PLAN_ATTEMPTS):
            text, remembered = self._metadata_text(project, queue, fresh=attempt > 0)
            try:
                planned = plan(stored_json(text) if text else None)
            except errors.ZaqarLiteError:
                if remembered:
                    continue
                raise
            try:
                return write(project, queue, planned, text, *after)
            except Stale:
                LOG.debug("metadata of %s/%s changed while planning; planning again", project, queue)
        raise errors.StorageUnavailable(f"the metadata of queue {queue} kept changing")

    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        with self._translate_errors():
            stored = self.client.get(self._queue_names(project, queue)[1] + "meta")
        return json.loads(stored) if stored is not None else None

    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        updated = self._eval("set_metadata", [queue_prefix(project, queue) + "meta"], [json.dumps(metadata)])
        self._metadata.pop((project, queue))
        if not updated:
            raise errors.QueueDoesNotExist(queue, project)

    def delete_queue(self, project: str, queue: str) -> None:
        self._run("purge", project, queue, [queue, "1"])
        self._metadata.pop((project, queue))

    def list_queues(self, project: str, *, marker: str | None, limit: int,
                    name_contains: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        index, names = project_prefix(project) + "queues", list[str]()
        lower = "(" + marker if marker else "-"
        with self._translate_errors():
            while len(names) < limit:
                batch = self.client.zrangebylex(index, lower, "+", start=0, num=max(limit, 100))
                names += [n for n in batch if not name_contains or name_contains in n]
                if len(batch) < max(limit, 100):
                    break
                lower = "(" + batch[-1]
            names = names[:limit]
            metas = self.client.mget([queue_prefix(project, n) + "meta" for n in names]) if names else []
        return [(n, json.loads(m)) for n, m in zip(names, metas, strict=True) if m is not None]

    def count_queues(self, project: str) -> int:
        with self._translate_errors():
            return int(self.client.zcard(project_prefix(project) + "queues"))

    def due_queues(self, now: float) -> Iterator[tuple[str, str, dict[str, Any]]]:
        with self._translate_errors():
            projects = sorted(self.client.sscan_iter(PROJECTS, count=500))
        for project in projects:
            # the names first: a queue swept while the set is paged leaves it, and would
            # shift the pages after it
            due, names = project_prefix(project) + "due", list[str]()
            while True:
                with self._translate_errors():
                    page = self.client.zrangebyscore(due, "-inf", repr(now), start=len(names),
                                                     num=self.all_queues_page)
                names += page
                if len(page) < self.all_queues_page:
                    break
            for first in range(0, len(names), self.all_queues_page):
                batch = names[first:first + self.all_queues_page]
                with self._translate_errors():
                    metas = self.client.mget([queue_prefix(project, n) + "meta" for n in batch])
                for name, meta in zip(batch, metas, strict=True):
                    if meta is not None:  # deleted since its name was read
                        yield project, name, json.loads(meta)

    def all_queues(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        with self._translate_errors():
            projects = sorted(self.client.sscan_iter(PROJECTS, count=500))
        for project in projects:
            index, lower = project_prefix(project) + "queues", "-"
            while True:
                with self._translate_errors():
                    names = self.client.zrangebylex(index, lower, "+", start=0, num=self.all_queues_page)
                    keys = [queue_prefix(project, n) + "meta" for n in names]
                    metas = self.client.mget(keys) if keys else []
                for name, meta in zip(names, metas, strict=True):
                    if meta is not None:  # deleted since its name was read
                        yield project, name, json.loads(meta)
                if len(names) < self.all_queues_page:
                    break
                lower = "(" + names[-1]
