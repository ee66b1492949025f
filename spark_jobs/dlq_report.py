"""The DLQ report: read dead letters, mine failure patterns, write report.json, report.html and id lists.

Run it as ``zaqar-lite dlq-report --storage URI [--out DIR] ...`` or, on any
Spark master, ``spark-submit spark_jobs/dlq_report.py --storage URI ...``
(``--help`` lists every option). Stages: :func:`extract` (a store through the
``zaqar_dlq`` data source, or an export file), :func:`transform` (the pure
transforms of :mod:`spark_jobs.transforms`) and :func:`load` (collect the
small results, write the files). Each stage prints a progress line on stderr.
The output is documented in ``spark_jobs/README.rst``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark import StorageLevel  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from spark_jobs import report_html, transforms  # noqa: E402
from spark_jobs.sources import is_export_file, read_export, read_store, store_reader  # noqa: E402
from spark_jobs.sources.plan import dead_letter_queues  # noqa: E402
from zaqar_lite.config import load_settings  # noqa: E402

SCHEMA_VERSION = 1
APP_NAME = "zaqar-lite-dlq-report"
Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class Options:
    """Everything a report run is told (the command-line options of :func:`parse_args`)."""

    storage: str
    out: Path = Path("dlq-report")
    projects: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    since: float | None = None
    master: str | None = None
    fields: tuple[str, ...] | None = None
    max_field_values: int = 12
    min_support: float = 0.02
    min_confidence: float = 0.5
    min_rule_messages: int = 3
    max_rule_items: int = 2
    partitions: int | None = None
    shuffle_partitions: int = 8


@dataclasses.dataclass
class Tables:
    """What :func:`transform` computes: DataFrames (lazy) plus the parameters it settled on."""

    counts: DataFrame
    signatures: DataFrame
    members: DataFrame
    shapes: DataFrame
    rules: DataFrame
    rule_base: int
    fields: list[str]
    per_hour: DataFrame
    claim_counts: DataFrame
    delays: DataFrame
    delay_stats: DataFrame


# -- options ----------------------------------------------------------------------------------------


def _time(text: str) -> float:
    """Read ``--since``: ISO-8601 (UTC unless it says otherwise), POSIX seconds, or an age like ``24h``."""
    text = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text[-1:] in units and text[:-1].replace(".", "", 1).isdigit():
        return time.time() - float(text[:-1]) * units[text[-1]]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (ISO-8601, POSIX seconds or 24h/7d)") from exc
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def parser() -> argparse.ArgumentParser:
    """Return the command-line parser of the report."""
    p = argparse.ArgumentParser(
        prog="zaqar-lite dlq-report",
        description="Mine dead-letter queues for failure patterns; write report.json, report.html and "
        "per-signature message-id lists.",
    )
    p.add_argument(
        "--storage",
        help="storage URI (sqlite:////abs/zaqar.db, redis://..., mongodb://..., swift://...) or an "
        "export file (.jsonl or .parquet) from 'zaqar-lite export --dlq'; default: the store the "
        "server is configured with (--config, $ZAQAR_LITE_CONFIG, $ZAQAR_LITE_STORAGE_URI, else the "
        "SQLite file 'zaqar-lite serve' uses)",
    )
    p.add_argument("--config", help="the server's configuration file, to find its store")
    p.add_argument(
        "--out", type=Path, default=Path("dlq-report"), help="output directory (default dlq-report)"
    )
    p.add_argument("--project", action="append", default=[], help="only this project (repeatable)")
    p.add_argument(
        "--queue",
        action="append",
        default=[],
        help="only this DLQ (repeatable); default: every queue that is some queue's DLQ",
    )
    p.add_argument(
        "--since", type=_time, help="only messages dead-lettered since: ISO time, POSIX seconds, or 24h"
    )
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument(
        "--field",
        action="append",
        dest="fields",
        help="body field (JSON path like currency or customer.tier) whose values feed pattern "
        "mining (repeatable); default: top-level fields with few distinct values",
    )
    p.add_argument(
        "--max-field-values",
        type=int,
        default=12,
        help="most distinct values a body field may have to be chosen by default (12)",
    )
    p.add_argument("--min-support", type=float, default=0.02, help="FP-Growth minimum support (0.02)")
    p.add_argument("--min-confidence", type=float, default=0.5, help="minimum rule confidence (0.5)")
    p.add_argument(
        "--min-rule-messages",
        type=int,
        default=3,
        help="fewest dead letters a rule must cover, whatever the support (3)",
    )
    p.add_argument("--max-rule-items", type=int, default=2, help="most items on the left side of a rule (2)")
    p.add_argument(
        "--partitions", type=int, help="read partitions to aim for (default 2 x default parallelism)"
    )
    p.add_argument(
        "--shuffle-partitions", type=int, default=8, help="spark.sql.shuffle.partitions on a local master (8)"
    )
    return p


def parse_args(argv: Sequence[str] | None) -> Options:
    """Return the options of a command line."""
    command = parser()
    args = command.parse_args(argv)
    try:
        storage = args.storage or load_settings(args.config).storage_uri
    except ValueError as exc:  # a configuration mistake: one line, as the server says it
        command.exit(2, f"{command.prog}: error: {exc}\n")
    return Options(
        storage=storage,
        out=args.out,
        projects=tuple(args.project),
        queues=tuple(args.queue),
        since=args.since,
        master=args.master,
        fields=tuple(args.fields) if args.fields else None,
        max_field_values=args.max_field_values,
        min_support=args.min_support,
        min_confidence=args.min_confidence,
        min_rule_messages=args.min_rule_messages,
        max_rule_items=args.max_rule_items,
        partitions=args.partitions,
        shuffle_partitions=args.shuffle_partitions,
    )


# -- session ----------------------------------------------------------------------------------------


def _is_local(master: str) -> bool:
    return master.startswith("local")


def spark_session(options: Options) -> SparkSession:
    """Return the session: ``--master``, else spark-submit's, else ``local[*]``.

    Started here on a local master it binds to loopback, runs its Python
    workers with this interpreter, keeps the console quiet and uses few
    shuffle partitions. On a cluster, the job's own code (this package and
    ``zaqar_lite``) is shipped to the executors; their Python needs the
    client library of the store read (redis, pymongo, python-swiftclient).
    """
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ and SparkSession.getActiveSession() is None
    master = options.master or (None if submitted else "local[*]")
    builder = SparkSession.builder.appName(APP_NAME).config("spark.sql.session.timeZone", "UTC")
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    if master:
        builder = builder.master(master)
    if master and _is_local(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", str(options.shuffle_partitions))
            .config("spark.driver.memory", os.environ.get("ZAQAR_LITE_SPARK_DRIVER_MEMORY", "2g"))
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not _is_local(spark.sparkContext.master or "local"):
        _ship_code(spark)
    return spark


def _ship_code(spark: SparkSession) -> None:
    """Send ``spark_jobs`` and ``zaqar_lite`` to the executors as one zip."""
    import tempfile
    import zipfile

    import zaqar_lite

    roots = [Path(__file__).resolve().parent, Path(zaqar_lite.__file__).resolve().parent]
    archive = Path(tempfile.mkdtemp(prefix="zaqar-lite-")) / "zaqar_lite_jobs.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for root in roots:
            for path in root.rglob("*"):
                if path.is_file() and "__pycache__" not in path.parts:
                    zipped.write(path, path.relative_to(root.parent))
    spark.sparkContext.addPyFile(str(archive))


# -- extract ----------------------------------------------------------------------------------------


def extract(spark: SparkSession, options: Options) -> DataFrame:
    """Return the dead-letter rows of the store (or export file) the options name, not yet read."""
    if is_export_file(options.storage):
        return read_export(
            spark, options.storage, projects=options.projects, queues=options.queues, since=options.since
        )
    return read_store(
        spark,
        options.storage,
        projects=options.projects,
        queues=options.queues,
        since=options.since,
        partitions=options.partitions,
    )


# -- transform --------------------------------------------------------------------------------------


def transform(dead_letters: DataFrame, options: Options, progress: Progress = lambda _: None) -> Tables:
    """Return every analysis of the dead letters (lazy, except the pattern mining it has to run).

    ``dead_letters`` should be cached by the caller: each table reads it again.
    """
    started = time.monotonic()
    enriched = transforms.enrich(dead_letters).persist(StorageLevel.MEMORY_AND_DISK)
    if options.fields is not None:
        fields = list(options.fields)
    else:
        chosen = transforms.categorical_fields(
            transforms.body_field_values(dead_letters), options.max_field_values
        )
        fields = [row["field"] for row in chosen.collect()]
    features = transforms.message_features(enriched, fields).persist(StorageLevel.MEMORY_AND_DISK)
    rule_base = features.count()
    min_support = max(options.min_support, options.min_rule_messages / max(1, rule_base))
    rules = (
        transforms.association_rules(features, min_support, options.min_confidence, options.max_rule_items)
        if rule_base
        else dead_letters.sparkSession.createDataFrame(
            [],
            "antecedent array<string>, consequent array<string>, confidence double, lift double, "
            "support double",
        )
    )
    progress(
        f"patterns: FP-Growth over {rule_base} dead letters, body fields {fields or 'none'} "
        f"({time.monotonic() - started:.1f} s)"
    )
    return Tables(
        counts=transforms.dead_letter_counts(dead_letters),
        signatures=transforms.failure_signatures(dead_letters),
        members=transforms.signature_members(dead_letters),
        shapes=transforms.payload_shapes(enriched),
        rules=rules,
        rule_base=rule_base,
        fields=fields,
        per_hour=transforms.dead_letters_per_hour(dead_letters),
        claim_counts=transforms.claim_count_distribution(dead_letters),
        delays=transforms.time_to_dead_letter(dead_letters),
        delay_stats=transforms.time_to_dead_letter_stats(dead_letters),
    )


# -- load -------------------------------------------------------------------------------------------


def iso(seconds: float | None) -> str | None:
    """Format POSIX seconds as ISO-8601 UTC (``...Z``), keeping None."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def public_uri(uri: str) -> str:
    """Return a storage URI without its password."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.collect()]


def write_signature_ids(members: DataFrame, directory: Path) -> dict[str, int]:
    """Write ``<signature id>.txt`` files of message ids (sorted, one a line), streamed from Spark."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.txt"):
        old.unlink()
    written: dict[str, int] = {}
    handle: TextIO | None = None
    current = ""
    try:
        for row in members.orderBy("signature_id", "id").toLocalIterator(prefetchPartitions=True):
            if handle is None or row["signature_id"] != current:
                if handle is not None:
                    handle.close()
                current = str(row["signature_id"])
                handle = open(directory / f"{current}.txt", "w", encoding="utf-8")
                written[current] = 0
            handle.write(row["id"] + "\n")
            written[current] += 1
    finally:
        if handle is not None:
            handle.close()
    return written


def build_report(tables: Tables, options: Options, progress: Progress = lambda _: None) -> dict[str, Any]:
    """Collect the tables into the ``report.json`` document (schema in ``spark_jobs/README.rst``)."""
    started = time.monotonic()
    counts = _rows(tables.counts)
    by_reason: dict[str, int] = {}
    for row in counts:
        by_reason[row["reason"] or "unknown"] = by_reason.get(row["reason"] or "unknown", 0) + row["messages"]
    total = sum(row["messages"] for row in counts)
    summary = {
        "dead_letters": total,
        "source_queues": len({(r["project"], r["source_queue"]) for r in counts}),
        "by_reason": by_reason,
        "first_dead_lettered_at": iso(min((r["first"] for r in counts), default=None)),
        "last_dead_lettered_at": iso(max((r["last"] for r in counts), default=None)),
        "queues": [{**r, "first": iso(r["first"]), "last": iso(r["last"])} for r in counts],
    }
    signatures = [
        {
            "id": r["signature_id"],
            "project": r["project"],
            "source_queue": r["source_queue"],
            "signature": r["signature"],
            "error_type": r["error_type"],
            "messages": r["messages"],
            "failures": r["failures"],
            "first_seen": iso(r["first_seen"]),
            "last_seen": iso(r["last_seen"]),
            "example_error": r["example_error"],
            "examples": r["examples"],
            "ids_file": f"signatures/{r['signature_id']}.txt",
        }
        for r in _rows(tables.signatures)
    ]
    progress(
        f"signatures: {len(signatures)} in {summary['source_queues']} source queues "
        f"({time.monotonic() - started:.1f} s)"
    )
    started = time.monotonic()
    shapes = [
        {
            "id": r["shape_id"],
            "project": r["project"],
            "source_queue": r["source_queue"],
            "messages": r["messages"],
            "paths": r["paths"],
            "missing_paths": r["missing_paths"],
            "examples": r["examples"],
        }
        for r in _rows(tables.shapes)
    ]
    progress(f"shapes: {len(shapes)} payload shapes ({time.monotonic() - started:.1f} s)")
    started = time.monotonic()
    rules = [
        {
            "antecedent": r["antecedent"],
            "consequent": r["consequent"],
            "support": r["support"],
            "confidence": r["confidence"],
            "lift": r["lift"],
            "messages": int(round(r["support"] * tables.rule_base)),
        }
        for r in _rows(tables.rules)
    ]
    progress(f"rules: {len(rules)} cause rules ({time.monotonic() - started:.1f} s)")
    started = time.monotonic()
    time_section = {
        "per_hour": [
            {
                "project": r["project"],
                "source_queue": r["source_queue"],
                "hour": iso(r["hour"]),
                "hour_start": r["hour"],
                "messages": r["messages"],
            }
            for r in _rows(tables.per_hour)
        ],
        "claim_counts": _rows(tables.claim_counts),
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
            for r in _rows(tables.delays)
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
            for r in _rows(tables.delay_stats)
        ],
    }
    progress(f"time: {len(time_section['per_hour'])} queue-hours ({time.monotonic() - started:.1f} s)")
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": iso(time.time()),
        "source": {
            "storage": public_uri(options.storage),
            "projects": list(options.projects),
            "queues": list(options.queues),
            "since": iso(options.since),
        },
        "parameters": {
            "fields": tables.fields,
            "min_support": options.min_support,
            "min_rule_messages": options.min_rule_messages,
            "max_rule_items": options.max_rule_items,
            "min_confidence": options.min_confidence,
            "max_field_values": options.max_field_values,
        },
        "summary": summary,
        "signatures": signatures,
        "shapes": shapes,
        "rules": rules,
        "time": time_section,
    }


def load(tables: Tables, options: Options, progress: Progress = lambda _: None) -> dict[str, Any]:
    """Write report.json, report.html and signatures/<id>.txt into the output directory; return the report."""
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(tables, options, progress)
    started = time.monotonic()
    written = write_signature_ids(tables.members, out / "signatures")
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    (out / "report.html").write_text(report_html.render(report), encoding="utf-8")
    progress(
        f"write: report.json, report.html and {len(written)} id lists in {out} "
        f"({time.monotonic() - started:.1f} s)"
    )
    return report


# -- main -------------------------------------------------------------------------------------------


def stderr_progress(line: str) -> None:
    """Print one progress line on stderr."""
    print(f"dlq-report: {line}", file=sys.stderr, flush=True)


def run(spark: SparkSession, options: Options, progress: Progress = stderr_progress) -> dict[str, Any]:
    """Run extract, transform and load on a session; return the report document."""
    started = time.monotonic()
    if not is_export_file(options.storage):
        # on the driver, before Spark: a wrong URI or an unreachable store fails here, plainly
        targets = dead_letter_queues(store_reader(options.storage).queues(), options.projects, options.queues)
        progress(
            f"plan: {len(targets)} DLQs: "
            + ", ".join(f"{t.project}/{t.queue}" for t in targets[:10])
            + (" ..." if len(targets) > 10 else "")
        )
    dead_letters = extract(spark, options).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        total = dead_letters.count()
        progress(
            f"extract: {total} dead letters in "
            f"{dead_letters.rdd.getNumPartitions()} partitions ({time.monotonic() - started:.1f} s)"
        )
        tables = transform(dead_letters, options, progress)
        return load(tables, options, progress)
    finally:
        dead_letters.unpersist()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the report from a command line; return the exit status."""
    options = parse_args(argv)
    started = time.monotonic()
    stderr_progress(f"start: {public_uri(options.storage)} -> {options.out}")
    from zaqar_lite.errors import StorageUnavailable

    try:
        if not is_export_file(options.storage):
            list(store_reader(options.storage).queues())  # a wrong URI fails now, not after Spark starts
        spark = spark_session(options)
        stderr_progress(
            f"spark: {spark.version} on {spark.sparkContext.master} ({time.monotonic() - started:.1f} s)"
        )
        report = run(spark, options)
    except (ValueError, FileNotFoundError, StorageUnavailable) as exc:
        stderr_progress(f"failed: {exc}")
        return 2
    summary = report["summary"]
    stderr_progress(
        f"done: {summary['dead_letters']} dead letters, {len(report['signatures'])} signatures, "
        f"{len(report['rules'])} rules in {time.monotonic() - started:.1f} s; "
        f"open {options.out / 'report.html'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
