"""The one row shape every dead-letter reader produces, and how stored messages become rows.

A row is one dead-lettered message with its provenance (docs/api.rst, "Provenance"). Times are
POSIX seconds (doubles), so no transform depends on a session time zone; the
body stays JSON text, since bodies have no common schema.

A store's reader hands over :data:`StoredMessage` tuples a page at a time and
:func:`dead_letter_batch` turns a page into one Arrow record batch. Failure
histories and provenance stored as JSON text (SQLite, Redis) are decoded by
Arrow's JSON reader and their times parsed by Arrow, column by column in C:
on a 2-core machine the Python reader of 10^5 dead letters took 4 s of CPU
row by row, most of it ``json.loads`` and ``datetime.fromisoformat`` calls.
Anything the server does not write that way (decoded documents, another type
or time format) goes row by row through :func:`dead_letter_row`, the
reference for what every field means.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

#: Spark DDL of a dead-letter row (``spark.read...schema(DEAD_LETTER_DDL)``)
DEAD_LETTER_DDL = (
    "project STRING, queue STRING, id STRING, source_queue STRING, reason STRING, "
    "dead_lettered_at DOUBLE, first_posted_at DOUBLE, claim_count INT, last_claim_id STRING, "
    "client_id STRING, body STRING, "
    "failures ARRAY<STRUCT<at: DOUBLE, claim_count: INT, error_type: STRING, error: STRING>>"
)
COLUMNS = (
    "project",
    "queue",
    "id",
    "source_queue",
    "reason",
    "dead_lettered_at",
    "first_posted_at",
    "claim_count",
    "last_claim_id",
    "client_id",
    "body",
    "failures",
)
#: rows per Arrow record batch handed to Spark by a reader
BATCH_ROWS = 4096
#: one stored message as a reader hands it over: ``(id, body JSON text, created, client_id,
#: claim_count, failures, dead_letter)``, the last two as stored (JSON text) or decoded
StoredMessage = tuple[str, str, float, "str | None", int, Any, Any]
#: the length of a time as ``zaqar_lite.clock.iso_utc`` writes it (``2026-01-31T12:00:00Z``)
ISO_UTC_LENGTH = 20


def _failure_struct(at: Any) -> Any:
    """Return the Arrow struct of one failure entry whose time ``at`` is of Arrow type ``at``."""
    import pyarrow as pa

    return pa.struct(
        [("at", at), ("claim_count", pa.int32()), ("error_type", pa.string()), ("error", pa.string())]
    )


def arrow_schema() -> Any:
    """Return the pyarrow schema equal to :data:`DEAD_LETTER_DDL` (pyarrow comes with pyspark[sql])."""
    import pyarrow as pa

    failure = _failure_struct(pa.float64())
    return pa.schema(
        [
            ("project", pa.string()),
            ("queue", pa.string()),
            ("id", pa.string()),
            ("source_queue", pa.string()),
            ("reason", pa.string()),
            ("dead_lettered_at", pa.float64()),
            ("first_posted_at", pa.float64()),
            ("claim_count", pa.int32()),
            ("last_claim_id", pa.string()),
            ("client_id", pa.string()),
            ("body", pa.string()),
            ("failures", pa.list_(failure)),
        ]
    )


def epoch(value: Any) -> float | None:
    """Return POSIX seconds from a stored time: a number, or ISO-8601 UTC (``...Z``) text."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().replace("Z", "+00:00")
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _first_set(value: Any, default: Any) -> Any:
    return default if value is None else value


def _int(value: Any) -> int | None:
    return None if value is None or value == "" else int(value)


def failure_entries(failures: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Return a failure history with its times as POSIX seconds.

    Its entries are those of docs/api.rst, "Release one message (zaqar-lite extension)".
    """
    return [
        {
            "at": epoch(f.get("at")),
            "claim_count": _int(f.get("claim_count")),
            "error_type": f.get("error_type"),
            "error": f.get("error"),
        }
        for f in failures or ()
    ]


def dead_letter_row(
    project: str,
    queue: str,
    message_id: str,
    body_json: str,
    created: float,
    client_id: str | None,
    claim_count: int,
    failures: Iterable[Mapping[str, Any]] | None,
    dead_letter: Mapping[str, Any],
) -> dict[str, Any]:
    """Return the row of one message found in a DLQ, from the fields every driver stores.

    Args:
        body_json: the body as JSON text (as stored; never re-encoded).
        created: the post time (the provenance's ``first_posted_at``).
        dead_letter: the stored provenance record (``claims.policy.dead_lettered``); without a
            claim count of its own, the message's counts.
    """
    return {
        "project": project,
        "queue": queue,
        "id": message_id,
        "source_queue": dead_letter.get("source_queue"),
        "reason": dead_letter.get("reason"),
        "dead_lettered_at": epoch(dead_letter.get("dead_lettered_at")),
        "first_posted_at": float(created),
        "claim_count": int(_first_set(dead_letter.get("claim_count"), claim_count) or 0),
        "last_claim_id": dead_letter.get("last_claim_id"),
        "client_id": client_id or None,
        "body": body_json,
        "failures": failure_entries(failures),
    }


def export_line_row(line: Mapping[str, Any]) -> dict[str, Any]:
    """Return the row of one line of ``zaqar-lite export --dlq`` (see :mod:`spark_jobs.export`)."""
    provenance = line.get("dead_letter") or {}
    return dead_letter_row(
        line.get("project", ""),
        line.get("queue", ""),
        line["id"],
        json.dumps(line.get("body")),
        epoch(provenance.get("first_posted_at")) or 0.0,
        line.get("client_id"),
        int(provenance.get("claim_count") or 0),
        provenance.get("failures"),
        {**provenance, "dead_lettered_at": provenance.get("dead_lettered_at")},
    )


def record_batches(rows: Iterable[Mapping[str, Any]], batch_rows: int = BATCH_ROWS) -> Iterator[Any]:
    """Group rows into Arrow record batches of :func:`arrow_schema` (what a reader yields to Spark)."""
    import pyarrow as pa

    schema = arrow_schema()
    batch: list[Mapping[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= batch_rows:
            yield pa.RecordBatch.from_pylist(batch, schema=schema)
            batch = []
    if batch:
        yield pa.RecordBatch.from_pylist(batch, schema=schema)


def _decoded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and value else value


def _stored_json_schema() -> Any:
    """Return the Arrow schema of a stored message's provenance ``d`` and failures ``f`` as JSON."""
    import pyarrow as pa

    provenance = pa.struct(
        [
            ("source_queue", pa.string()),
            ("reason", pa.string()),
            ("dead_lettered_at", pa.float64()),
            ("claim_count", pa.int32()),
            ("last_claim_id", pa.string()),
        ]
    )
    failure = _failure_struct(pa.string())  # times as stored: parsed by iso_seconds
    return pa.schema([("d", provenance), ("f", pa.list_(failure))])


def iso_seconds(texts: Any) -> Any:
    """Return POSIX seconds of an Arrow array of times written by ``iso_utc``, as :func:`epoch` gives them.

    Raises:
        pyarrow.ArrowInvalid: a time of another form (then :func:`epoch` says what it means).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    # UTC seconds (Arrow's parser reads every such text as fromisoformat does): a test a
    # hundred times cheaper than a regular expression, then Arrow's parse checks the rest
    written = pc.and_(pc.equal(pc.utf8_length(texts), ISO_UTC_LENGTH), pc.ends_with(texts, "Z"))
    if pc.all(pc.fill_null(written, True)).as_py() is False:
        raise pa.ArrowInvalid("a time not of the form iso_utc writes")
    micros = pc.cast(pc.cast(texts, pa.timestamp("us", tz="UTC")), pa.int64())
    # exact: micros / 10**6 correctly rounded, as datetime.timestamp() computes it
    return pc.divide(pc.cast(micros, pa.float64()), 1e6)


def _batch_from_json(project: str, queue: str, messages: Sequence[StoredMessage]) -> Any:
    """Return the record batch of messages whose failures and provenance are JSON text (module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pa_json

    ids, bodies, created, clients, counts, failures, provenances = zip(*messages, strict=True)
    # one JSON object a line (stored JSON holds no raw newline: one that does fails here, then
    # takes the row-by-row path)
    lines = "\n".join(
        f'{{"d":{d or "null"},"f":{f or "null"}}}' for f, d in zip(failures, provenances, strict=True)
    ).encode()
    table = pa_json.read_json(
        io.BytesIO(lines),
        read_options=pa_json.ReadOptions(use_threads=False, block_size=len(lines) + 1),
        parse_options=pa_json.ParseOptions(
            explicit_schema=_stored_json_schema(), unexpected_field_behavior="ignore"
        ),
    )
    provenance = table.column("d").combine_chunks()
    history = table.column("f").combine_chunks()
    schema = arrow_schema()
    failure_type = schema.field("failures").type
    entries = history.values
    entry_columns = [
        iso_seconds(entries.field("at")),
        entries.field("claim_count"),
        entries.field("error_type"),
        entries.field("error"),
    ]
    # offsets without validity: no stored history reads as an empty list, as failure_entries() gives
    signed = pa.ListArray.from_arrays(
        history.offsets,
        pa.StructArray.from_arrays(entry_columns, fields=list(failure_type.value_type)),
        type=failure_type,
    )
    rows = len(messages)
    claim_count = pc.fill_null(
        pc.coalesce(provenance.field("claim_count"), pa.array(counts, pa.int32())), 0
    )
    columns = [
        pa.repeat(pa.scalar(project, pa.string()), rows),
        pa.repeat(pa.scalar(queue, pa.string()), rows),
        pa.array(ids, pa.string()),
        provenance.field("source_queue"),
        provenance.field("reason"),
        provenance.field("dead_lettered_at"),
        pa.array(created, pa.float64()),
        claim_count,
        provenance.field("last_claim_id"),
        pa.array([c or None for c in clients], pa.string()),
        pa.array(bodies, pa.string()),
        signed,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def dead_letter_batch(project: str, queue: str, messages: Sequence[StoredMessage]) -> Any:
    """Return the rows of stored messages of one DLQ as one Arrow record batch of :func:`arrow_schema`.

    Failures and provenance as JSON text take Arrow's JSON reader; decoded
    ones, or text of another type or time format than the server writes,
    take :func:`dead_letter_row` row by row (the module docstring says why).
    """
    import pyarrow as pa

    if messages and all(
        isinstance(m[5], str | None) and isinstance(m[6], str | None) for m in messages
    ):
        try:
            return _batch_from_json(project, queue, messages)
        except pa.ArrowException:
            pass  # not as the server writes it: the reference path says what it means, or fails
    return pa.RecordBatch.from_pylist(
        [
            dead_letter_row(project, queue, m[0], m[1], m[2], m[3], m[4], _decoded(m[5]), _decoded(m[6]))
            for m in messages
        ],
        schema=arrow_schema(),
    )


def regrouped(
    pages: Iterable[Sequence[StoredMessage]], rows: int = BATCH_ROWS
) -> Iterator[list[StoredMessage]]:
    """Join a reader's pages into groups of at least ``rows`` messages (the last one fewer)."""
    pending: list[StoredMessage] = []
    for page in pages:
        pending.extend(page)
        if len(pending) >= rows:
            yield pending
            pending = []
    if pending:
        yield pending
