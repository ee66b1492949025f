"""``zaqar-lite export --dlq``: dead-lettered messages written out for offline analysis.

JSON lines (the default) go through the storage contract, on purpose: they
are the API's view, one dead-lettered message a line, as the API shows it
inside a DLQ plus where it lives::

    {"project": "p", "queue": "orders-dlq", "id": "...", "client_id": "...",
     "body": {...}, "body_encrypted": false, "ttl": 3600, "claim_count": 3,
     "dead_letter": {"source_queue": "orders", "reason": "max_claims",
                     "dead_lettered_at": "2025-01-01T10:00:00Z", "claim_count": 3,
                     "first_posted_at": "...", "last_claim_id": "...", "failures": [...]}}

A path ending in ``.parquet`` gets Parquet instead, in the report's row
schema (:data:`spark_jobs.sources.rows.DEAD_LETTER_DDL`): the very rows the
DLQ report reads from the store. The store's own dead-letter reader
(:func:`spark_jobs.sources.store_reader`, the report's) lists and selects
the DLQs as the report does, reads each DLQ as one range, a page at a time,
and each page becomes one Arrow record batch
(:func:`spark_jobs.sources.dead_letter_batches`) handed to pyarrow's
``ParquetWriter``: no Python object per message and no Spark. A store
without such a reader (an in-memory SQLite URI, ``sqlite:///:memory:``) is
written through the storage contract instead, row by row, in the same
schema. Neither path decrypts: a body encrypted at rest is written as
stored (its JSON line says ``"body_encrypted": true``), the export counts
such bodies (:class:`Exported`) and the command says how many, and both read
only the ``[storage] uri`` store, never the pools of a catalog.

Either file can be given to ``zaqar-lite dlq-report --storage FILE`` for
offline analysis, without the store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from spark_jobs.sources import dead_letter_batches, store_reader
from spark_jobs.sources.plan import StoreReader, Target, dead_letter_queues
from spark_jobs.sources.rows import arrow_schema, dead_letter_row, record_batches
from zaqar_lite.rules.encryption import ENVELOPE_TEXT, is_envelope

PAGE = 1000
#: rows of a Parquet row group written from a store's reader (its pages hold 4096 each)
ROW_GROUP_ROWS = 65_536


class Exported(NamedTuple):
    """What an export wrote: how many dead letters, from which DLQs, how many of them encrypted at rest."""

    count: int
    targets: list[Target]
    encrypted: int = 0


class Written(NamedTuple):
    """The dead letters one writer wrote, and how many of their bodies are encrypted at rest (as stored)."""

    count: int
    encrypted: int


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
        "body_encrypted": is_envelope(message.body),
        "ttl": message.ttl(),
        "claim_count": message.claim_count,
        "dead_letter": provenance(message),
    }


def write_json_lines(out: TextIO, store: Any, targets: Sequence[Target], now: float) -> Written:
    """Write every dead letter of the targets as JSON lines; return how many, and how many encrypted."""
    written = encrypted = 0
    for target, message in dead_letters(store, targets, now):
        line = export_line(target, message)
        out.write(json.dumps(line, separators=(",", ":")) + "\n")
        written += 1
        encrypted += line["body_encrypted"]
    return Written(written, encrypted)


def encrypted_bodies(batch: Any) -> int:
    """Return how many rows of an Arrow record batch of the report's rows have a body encrypted at rest."""
    import pyarrow.compute as pc

    found = pc.sum(pc.match_substring_regex(batch.column("body"), ENVELOPE_TEXT)).as_py()
    return int(found or 0)


def write_parquet(path: Path, reader: StoreReader, targets: Sequence[Target], now: float) -> Written:
    """Write every dead letter of the targets as the report reads it from the store's reader; return how many.

    Each DLQ is read as one range of the reader's plan; its pages, one Arrow
    record batch each, are gathered into row groups of about
    :data:`ROW_GROUP_ROWS` rows.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema()
    batches = (
        batch
        for target in targets
        for spec in reader.plan(target, 1)
        for batch in dead_letter_batches(reader, spec, now)
    )
    written = grouped = encrypted = 0
    with pq.ParquetWriter(str(path), schema) as writer:
        pending: list[Any] = []
        for batch in batches:
            pending.append(batch)
            written += batch.num_rows
            encrypted += encrypted_bodies(batch)
            if written - grouped >= ROW_GROUP_ROWS:
                writer.write_table(pa.Table.from_batches(pending, schema=schema))
                pending, grouped = [], written
        if pending:
            writer.write_table(pa.Table.from_batches(pending, schema=schema))
    return Written(written, encrypted)


def write_parquet_through_contract(path: Path, store: Any, targets: Sequence[Target], now: float) -> Written:
    """Write every dead letter of the targets as Parquet rows made from contract messages; return how many.

    The path of a store without a dead-letter reader (module docstring).
    """
    import pyarrow.parquet as pq

    written = encrypted = 0
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
            encrypted += encrypted_bodies(batch)
    return Written(written, encrypted)


def dead_letter_reader(storage_uri: str) -> StoreReader | None:
    """Return the store's dead-letter reader (the report's), or None when it has none."""
    try:
        return store_reader(storage_uri)
    except ValueError:  # no reader for the scheme, or an in-memory SQLite URI
        return None


def export(
    storage_uri: str,
    out: str,
    projects: Sequence[str] = (),
    queues: Sequence[str] = (),
    now: float | None = None,
) -> Exported:
    """Export a store's dead letters to ``out`` (``-``: stdout); return the counts and the DLQs read.

    Parquet comes from the store's dead-letter reader when it has one, the
    rest through the storage contract (module docstring).
    """
    import sys

    from zaqar_lite.storage import open_storage

    now = time.time() if now is None else now
    parquet = out.lower().endswith(".parquet")
    reader = dead_letter_reader(storage_uri) if parquet else None
    if reader is not None:
        targets = dead_letter_queues(reader.queues(), projects, queues)
        return _exported(write_parquet(Path(out), reader, targets, now), targets)
    store = open_storage(storage_uri)
    try:
        targets = dead_letter_queues(store.all_queues(), projects, queues)
        if parquet:
            return _exported(write_parquet_through_contract(Path(out), store, targets, now), targets)
        if out == "-":
            return _exported(write_json_lines(sys.stdout, store, targets, now), targets)
        with open(out, "w", encoding="utf-8") as handle:
            return _exported(write_json_lines(handle, store, targets, now), targets)
    finally:
        store.close()


def _exported(written: Written, targets: list[Target]) -> Exported:
    return Exported(written.count, targets, written.encrypted)

