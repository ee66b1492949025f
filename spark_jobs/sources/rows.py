"""The one row shape every dead-letter reader produces, and how a stored message becomes one.

A row is one dead-lettered message with its provenance (SPEC 2.3). Times are
POSIX seconds (doubles), so no transform depends on a session time zone; the
body stays JSON text, since bodies have no common schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
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
BATCH_ROWS = 1000


def arrow_schema() -> Any:
    """Return the pyarrow schema equal to :data:`DEAD_LETTER_DDL` (pyarrow comes with pyspark[sql])."""
    import pyarrow as pa

    failure = pa.struct(
        [
            ("at", pa.float64()),
            ("claim_count", pa.int32()),
            ("error_type", pa.string()),
            ("error", pa.string()),
        ]
    )
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


def _int(value: Any) -> int | None:
    return None if value is None or value == "" else int(value)


def failure_entries(failures: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Return a failure history (SPEC 1.8 entries) with its times as POSIX seconds."""
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
        dead_letter: the stored provenance record (``claims.policy.dead_lettered``).
    """
    return {
        "project": project,
        "queue": queue,
        "id": message_id,
        "source_queue": dead_letter.get("source_queue"),
        "reason": dead_letter.get("reason"),
        "dead_lettered_at": epoch(dead_letter.get("dead_lettered_at")),
        "first_posted_at": float(created),
        "claim_count": int(dead_letter.get("claim_count", claim_count) or 0),
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
