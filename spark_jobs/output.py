"""The DLQ report's load stage: the collected tables into report.json, report.html and id files.

The output is documented in ``spark_jobs/README.rst``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs import report_html
from spark_jobs.options import Options
from spark_jobs.progress import Progress, since
from zaqar_lite.rules.pools import masked_uri

SCHEMA_VERSION = 2


@dataclasses.dataclass
class Tables:
    """What :func:`transform` computes: the small tables collected, the id lists (lazy), parameters."""

    counts: list[dict[str, Any]]
    signatures: list[dict[str, Any]]
    members: DataFrame
    shapes: list[dict[str, Any]]
    rules: list[dict[str, Any]]
    rule_base: int
    fields: list[str]
    source_fields: list[str]
    over_time: list[dict[str, Any]]
    bucket_seconds: int
    claim_counts: list[dict[str, Any]]
    delays: list[dict[str, Any]]
    delay_stats: list[dict[str, Any]]


def iso(seconds: float | None) -> str | None:
    """Format POSIX seconds as ISO-8601 UTC (``...Z``), keeping None."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ids_file(project: str, queue: str, signature_id: str) -> str:
    """Return the id file of a signature in a DLQ, relative to the output directory."""
    return f"signatures/{project}/{queue}/{signature_id}.txt"


def write_signature_ids(members: DataFrame, out: Path) -> dict[str, int]:
    """Write each DLQ's ``signatures/<project>/<DLQ>/<signature id>.txt``: message ids, sorted, one a line.

    ``members`` has project, queue, signature_id, id. One list per file is
    gathered and sorted by Spark and streamed to the driver a file at a time.
    Returns the files written (relative paths) with their line counts.
    """
    import shutil

    shutil.rmtree(out / "signatures", ignore_errors=True)
    grouped = members.groupBy("project", "queue", "signature_id").agg(
        F.array_sort(F.collect_list("id")).alias("ids")
    )
    written: dict[str, int] = {}
    for row in grouped.toLocalIterator(prefetchPartitions=True):
        name = ids_file(row["project"], row["queue"], row["signature_id"])
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{i}\n" for i in row["ids"]), encoding="utf-8")
        written[name] = len(row["ids"])
    return written


def _summary(counts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    by_reason: dict[str, int] = {}
    for row in counts:
        by_reason[row["reason"] or "unknown"] = by_reason.get(row["reason"] or "unknown", 0) + row["messages"]
    return {
        "dead_letters": sum(row["messages"] for row in counts),
        # bodies encrypted at rest: counted, never decrypted, no field of theirs mined
        "encrypted_dead_letters": sum(row.get("encrypted") or 0 for row in counts),
        "source_queues": len({(r["project"], r["source_queue"]) for r in counts}),
        "by_reason": by_reason,
        "first_dead_lettered_at": iso(min((r["first"] for r in counts), default=None)),
        "last_dead_lettered_at": iso(max((r["last"] for r in counts), default=None)),
        "queues": [{**r, "first": iso(r["first"]), "last": iso(r["last"])} for r in counts],
    }


def _signatures(tables: Tables) -> list[dict[str, Any]]:
    return [
        {
            "id": r["signature_id"],
            "project": r["project"],
            "queue": r["queue"],
            "source_queue": r["source_queue"],
            "signature": r["signature"],
            "error_type": r["error_type"],
            "messages": r["messages"],
            "failures": r["failures"],
            "first_seen": iso(r["first_seen"]),
            "last_seen": iso(r["last_seen"]),
            "example_error": r["example_error"],
            "examples": r["examples"],
            "ids_file": ids_file(r["project"], r["queue"], r["signature_id"]),
        }
        for r in tables.signatures
    ]


def _rules(tables: Tables) -> list[dict[str, Any]]:
    return [
        {
            "antecedent": r["antecedent"],
            "consequent": r["consequent"],
            "support": r["support"],
            "confidence": r["confidence"],
            "lift": r["lift"],
            **report_html.rule_counts(r["support"], r["confidence"], r["lift"], tables.rule_base),
        }
        for r in tables.rules
    ]


def _time_section(tables: Tables) -> dict[str, Any]:
    return {
        "bucket_seconds": tables.bucket_seconds,
        "over_time": [
            {
                "project": r["project"],
                "source_queue": r["source_queue"],
                "start": iso(r["start"]),
                "start_seconds": r["start"],
                "messages": r["messages"],
            }
            for r in tables.over_time
        ],
        "claim_counts": tables.claim_counts,
        "time_to_dead_letter": [
            {
                "project": r["project"],
                "source_queue": r["source_queue"],
                "bucket": r["bucket"],
                "label": r["label"],
                "lower_seconds": r["lower"],
                "upper_seconds": r["upper"],
                "messages": r["messages"],
            }
            for r in tables.delays
        ],
        "time_to_dead_letter_stats": [
            {
                "project": r["project"],
                "source_queue": r["source_queue"],
                "messages": r["messages"],
                "p50_seconds": r["p50"],
                "p90_seconds": r["p90"],
                "max_seconds": r["max"],
            }
            for r in tables.delay_stats
        ],
    }


def _name_pools(queues: list[dict[str, Any]], signatures: list[dict[str, Any]], options: Options) -> None:
    """Say in each queue's and signature's row which pool its dead letters were read from.

    A dead-letter queue lives in one pool, so its queue names the pool of each of its dead letters.
    """
    pools = {(project, queue): pool for project, queue, pool in options.dlq_pools}
    for row in (*queues, *signatures):
        row["pool"] = pools.get((row["project"], row["queue"]))


def _paused(options: Options) -> list[dict[str, Any]]:
    """Return the paused source queues of the DLQs read: who paused each, its record, in words."""
    pools = {(project, queue): pool for project, queue, pool in options.dlq_pools}
    return [
        {
            "project": p.project,
            "queue": p.queue,
            "source_queue": p.source_queue,
            **({"pool": pools.get((p.project, p.queue))} if options.pools else {}),
            "by": p.by,
            "paused_by": p.paused_by(),
            "text": report_html.pause_text(p.source_queue, p.by, p.paused_by()),
        }
        for p in options.paused
    ]


def build_report(tables: Tables, options: Options, progress: Progress = lambda _: None) -> dict[str, Any]:
    """Collect the tables into the ``report.json`` document (schema in ``spark_jobs/README.rst``)."""
    started = time.monotonic()
    summary = _summary(tables.counts)
    signatures = _signatures(tables)
    summary["signatures"] = len({s["ids_file"] for s in signatures})
    progress(
        f"signatures: {summary['signatures']} in {summary['source_queues']} source queues, "
        f"{len(signatures)} rows ({since(started)})"
    )
    started = time.monotonic()
    time_section = _time_section(tables)
    progress(
        f"time: {len(time_section['over_time'])} buckets of {tables.bucket_seconds} s "
        f"({since(started)})"
    )
    if options.pools:
        _name_pools(summary["queues"], signatures, options)
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": iso(time.time()),
        "source": {
            **({"pools": {name: masked_uri(uri) for name, uri in options.stores()}} if options.pools else {}),
            "storage": masked_uri(options.storage),
            "projects": list(options.projects),
            "queues": list(options.queues),
            "since": iso(options.since),
        },
        "parameters": {
            "fields": tables.fields,
            "source_fields": tables.source_fields,
            "min_support": options.min_support,
            "min_rule_messages": options.min_rule_messages,
            "max_rule_items": options.max_rule_items,
            "min_confidence": options.min_confidence,
            "max_field_values": options.max_field_values,
        },
        "summary": summary,
        "rules": _rules(tables),
        "paused": _paused(options),
        "signatures": signatures,
        "shapes": [
            {
                "id": r["shape_id"],
                "project": r["project"],
                "source_queue": r["source_queue"],
                "messages": r["messages"],
                "paths": r["paths"],
                "missing_paths": r["missing_paths"],
                "examples": r["examples"],
            }
            for r in tables.shapes
        ],
        "time": time_section,
    }


def load(tables: Tables, options: Options, progress: Progress = lambda _: None) -> dict[str, Any]:
    """Write report.json, report.html and the signatures' id files into ``--out``; return the report."""
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(tables, options, progress)
    started = time.monotonic()
    written = write_signature_ids(tables.members, out)
    missing = {s["ids_file"] for s in report["signatures"]} - set(written)
    if missing:  # the signatures and their id files are one computation: this is a bug, not bad input
        raise RuntimeError(f"signatures without id files: {sorted(missing)}")
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    (out / "report.html").write_text(report_html.render(report), encoding="utf-8")
    progress(
        f"write: report.json, report.html and {len(written)} id files, {sum(written.values())} ids "
        f"({since(started)})"
    )
    return report
