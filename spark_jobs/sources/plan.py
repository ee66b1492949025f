"""Which queues a report reads, and how many partitions each gets: the same for every store."""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from spark_jobs.sources.rows import StoredMessage
from zaqar_lite.claims.metadata import DEAD_LETTER_QUEUE
from zaqar_lite.claims.pause import BY_BREAKER, PAUSED_BY, is_paused


@dataclasses.dataclass(frozen=True, order=True)
class Target:
    """One dead-letter queue to read: a queue of a project."""

    project: str
    queue: str


class StoreReader(Protocol):
    """What a store's reader offers the data source (one module per store in this package)."""

    def queues(self) -> Iterable[tuple[str, str, Mapping[str, Any]]]:
        """Yield ``(project, queue, metadata)`` of every queue (driver side)."""

    def count(self, target: Target) -> int | None:
        """Return how many messages the queue holds, or None when that is costly to know."""

    def plan(self, target: Target, pieces: int) -> list[dict[str, Any]]:
        """Return up to ``pieces`` picklable partition specs that together cover the queue."""

    def read(self, spec: Mapping[str, Any], now: float) -> Iterable[Sequence[StoredMessage]]:
        """Yield one partition's dead letters unexpired at ``now``, a page of stored messages at a time."""


def dead_letter_queues(
    queues: Iterable[tuple[str, str, Mapping[str, Any]]],
    projects: Sequence[str] = (),
    names: Sequence[str] = (),
) -> list[Target]:
    """Return the queues to report on, sorted.

    Without ``names`` these are the queues that some queue of the same project
    names as its ``_dead_letter_queue``; with ``names``, the existing queues of
    that name (a DLQ whose source queue was reconfigured is still read when
    named). ``projects`` limits both to those projects.
    """
    wanted_projects = set(projects)
    existing: set[Target] = set()
    named: set[Target] = set()
    for project, queue, metadata in queues:
        if wanted_projects and project not in wanted_projects:
            continue
        existing.add(Target(project, queue))
        dlq = (metadata or {}).get(DEAD_LETTER_QUEUE)
        if isinstance(dlq, str) and dlq:
            named.add(Target(project, dlq))
    if names:
        wanted = set(names)
        return sorted(t for t in existing if t.queue in wanted)
    # a DLQ that no message has reached yet may not exist: nothing to read there
    return sorted(named & existing)


@dataclasses.dataclass(frozen=True)
class PausedSource:
    """A paused queue that feeds a reported DLQ, with why it is paused."""

    project: str
    #: the DLQ it feeds
    queue: str
    source_queue: str
    #: ``dead_letter_breaker`` or ``operator``
    by: str
    #: its ``_paused_by`` record as stored (empty when an operator paused it without one)
    record: tuple[tuple[str, Any], ...] = ()

    def paused_by(self) -> dict[str, Any]:
        """Return the ``_paused_by`` record."""
        return dict(self.record)


def paused_sources(
    queues: Iterable[tuple[str, str, Mapping[str, Any]]], targets: Iterable[Target]
) -> list[PausedSource]:
    """Return the paused queues whose ``_dead_letter_queue`` is one of ``targets``, sorted.

    ``by`` is ``dead_letter_breaker`` when the queue's breaker paused it
    (``_paused_by.by``), else ``operator``. Queues that are not paused cost a
    lookup each; none paused, none returned.
    """
    wanted = set(targets)
    found = []
    for project, queue, metadata in queues:
        if not is_paused(metadata):
            continue
        dlq = metadata.get(DEAD_LETTER_QUEUE)
        if not isinstance(dlq, str) or Target(project, dlq) not in wanted:
            continue
        record = metadata.get(PAUSED_BY)
        record = record if isinstance(record, dict) else {}
        by = BY_BREAKER if record.get("by") == BY_BREAKER else "operator"
        found.append(PausedSource(project, dlq, queue, by, tuple(sorted(record.items()))))
    return sorted(found, key=lambda p: (p.project, p.queue, p.source_queue))


def partitions_for(counts: Iterable[int | None], cores: int, max_rows: int) -> int:
    """Return how many partitions to read queues of these sizes in, on ``cores`` cores.

    A multiple of the cores, so that every wave of tasks keeps them all busy,
    at least two waves (a slow task then holds one core, not all), and
    enough for no queue's pieces to exceed ``max_rows`` rows (a queue of
    unknown size counts as one piece).
    """
    cores = max(1, cores)
    least = sum(max(1, math.ceil((count or 0) / max(1, max_rows))) for count in counts)
    return cores * max(2, math.ceil(least / cores))


def pieces_per_target(
    counts: Mapping[Target, int | None], partitions: int, max_rows: int
) -> dict[Target, int]:
    """Share ``partitions`` among queues by size, giving no piece more than ``max_rows`` rows.

    Each piece goes to the queue whose pieces are largest, so that the pieces
    of all queues are about equal (one queue's rows cannot hold up a whole
    wave). A queue of unknown size gets an equal share, an empty one a piece.
    """
    share = max(1, partitions // max(1, len(counts)))
    result = {t: share if c is None else max(1, math.ceil(c / max(1, max_rows))) for t, c in counts.items()}
    sized = {t: c for t, c in counts.items() if c}
    left = partitions - sum(result[t] for t in sized)
    largest = [(-c / result[t], t) for t, c in sized.items() if result[t] < c]
    heapq.heapify(largest)
    while left > 0 and largest:
        _, target = heapq.heappop(largest)
        result[target] += 1
        left -= 1
        if result[target] < sized[target]:
            heapq.heappush(largest, (-sized[target] / result[target], target))
    return result


def contract_queues(uri: str) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """Yield every queue of a store with its metadata, through the storage contract."""
    from zaqar_lite.storage import open_storage

    store = open_storage(uri)
    try:
        yield from store.all_queues()
    finally:
        store.close()


def catalog_pools(catalog_uri: str) -> list[tuple[str, str]]:
    """Return ``(name, uri)`` of every pool a deployment's catalog records, by name."""
    from zaqar_lite.storage import open_storage
    from zaqar_lite.storage.pools.catalog import Catalog

    store = open_storage(catalog_uri)
    try:
        return [(pool.name, pool.uri) for pool in Catalog(store).pools()]
    finally:
        store.close()


def cut_points(total: int, pieces: int, position_at: Callable[[int], Any]) -> list[Any]:
    """Return the increasing positions that cut ``total`` rows into ``pieces`` about equal ranges.

    ``position_at(rank)`` gives the marker (or score) of the row of that rank, or None.
    """
    cuts: list[Any] = []
    for i in range(1, max(1, min(pieces, total))):
        position = position_at(i * total // pieces - 1)
        if position is not None and (not cuts or position > cuts[-1]):
            cuts.append(position)
    return cuts


def range_specs(base: Mapping[str, Any], bounds: Sequence[Any]) -> list[dict[str, Any]]:
    """Return one partition spec ``base`` + ``(after, upto]`` per pair of consecutive bounds."""
    return [{**base, "after": lo, "upto": hi} for lo, hi in zip(bounds, bounds[1:], strict=False)]
