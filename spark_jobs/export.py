"""``zaqar-lite export --dlq``: dead-lettered messages written out through the storage contract.

JSON lines (the default): one dead-lettered message a line, as the API shows
it inside a DLQ plus where it lives::

    {"project": "p", "queue": "orders-dlq", "id": "...", "client_id": "...",
     "body": {...}, "ttl": 3600, "claim_count": 3,
     "dead_letter": {"source_queue": "orders", "reason": "max_claims",
                     "dead_lettered_at": "2025-01-01T10:00:00Z", "claim_count": 3,
                     "first_posted_at": "...", "last_claim_id": "...", "failures": [...]}}

A path ending in ``.parquet`` gets Parquet instead, in the report's row
schema (:data:`spark_jobs.sources.rows.DEAD_LETTER_DDL`), written with pyarrow.
Either can be given to ``zaqar-lite dlq-report --storage FILE`` for offline
analysis, without the store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from spark_jobs.sources.plan import Target, dead_letter_queues
from spark_jobs.sources.rows import dead_letter_row, export_line_row, record_batches

PAGE = 1000


def dead_letters(store: Any, targets: Sequence[Target], now: float) -> Iterator[tuple[Target, Any]]:
    """Yield ``(target, message)`` for every dead-lettered message of the targets, FIFO, page by page."""
    for target in targets:
        marker = None
        while True:
            page = store.list_messages(
                target.project,
                target.queue,
                now=now,
                marker=marker,
                limit=PAGE,
                include_claimed=True,
                include_delayed=True,
                exclude_client_id=None,
            )
            for message in page:
                if message.dead_letter is not None:
                    yield target, message
            if len(page) < PAGE:
                break
            marker = page[-1].marker


def export_line(target: Target, message: Any) -> dict[str, Any]:
    """Return the JSON-lines record of one dead-lettered message (module docstring)."""
    from zaqar_lite.claims.policy import provenance

    return {
        "project": target.project,
        "queue": target.queue,
        "id": message.id,
        "client_id": message.client_id,
        "body": message.body,
        "ttl": message.ttl(),
        "claim_count": message.claim_count,
        "dead_letter": provenance(message),
    }


def write_json_lines(out: TextIO, store: Any, targets: Sequence[Target], now: float) -> int:
    """Write every dead letter of the targets as JSON lines; return how many."""
    written = 0
    for target, message in dead_letters(store, targets, now):
        out.write(json.dumps(export_line(target, message), separators=(",", ":")) + "\n")
        written += 1
    return written


def write_parquet(path: Path, store: Any, targets: Sequence[Target], now: float) -> int:
    """Write every dead letter of the targets as a Parquet file of report rows; return how many."""
    import pyarrow.parquet as pq

    from spark_jobs.sources.rows import arrow_schema

    written = 0
    with pq.ParquetWriter(str(path), arrow_schema()) as writer:
        rows = (
            dead_letter_row(
                t.project,
                t.queue,
                m.id,
                json.dumps(m.body),
                m.created,
                m.client_id,
                m.claim_count,
                m.failures,
                m.dead_letter,
            )
            for t, m in dead_letters(store, targets, now)
        )
        for batch in record_batches(rows, batch_rows=10_000):
            writer.write_batch(batch)
            written += batch.num_rows
    return written


def export(
    storage_uri: str,
    out: str,
    projects: Sequence[str] = (),
    queues: Sequence[str] = (),
    now: float | None = None,
) -> tuple[int, list[Target]]:
    """Export a store's dead letters to ``out`` (``-``: stdout); return the count and the DLQs read."""
    import sys

    from zaqar_lite.storage import open_storage

    store = open_storage(storage_uri)
    try:
        targets = dead_letter_queues(store.all_queues(), projects, queues)
        now = time.time() if now is None else now
        if out.lower().endswith(".parquet"):
            return write_parquet(Path(out), store, targets, now), targets
        if out == "-":
            return write_json_lines(sys.stdout, store, targets, now), targets
        with open(out, "w", encoding="utf-8") as handle:
            return write_json_lines(handle, store, targets, now), targets
    finally:
        store.close()


def from_export_lines(lines: Any) -> Any:
    """Return the report rows of a DataFrame of export JSON lines (one ``value`` column of text)."""
    from spark_jobs.sources.rows import DEAD_LETTER_DDL

    def convert(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            rows = (export_line_row(json.loads(text)) for text in batch.column(0).to_pylist() if text.strip())
            yield from record_batches(rows)

    return lines.mapInArrow(convert, DEAD_LETTER_DDL)
