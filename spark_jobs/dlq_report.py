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
import functools
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark import StorageLevel  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from spark_jobs import report_html, transforms  # noqa: E402
from spark_jobs.sources import is_export_file, read_export, read_store, store_reader  # noqa: E402
from spark_jobs.sources.plan import catalog_pools, dead_letter_queues  # noqa: E402
from zaqar_lite.config import load_settings  # noqa: E402

SCHEMA_VERSION = 2
APP_NAME = "zaqar-lite-dlq-report"
#: how the report names the ``[storage] uri`` store of a deployment with pools
DEFAULT_STORE = "[storage] uri"
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
    min_confidence: float = 0.8
    min_rule_messages: int = 3
    max_rule_items: int = 2
    partitions: int | None = None
    shuffle_partitions: int | None = None
    #: ``(name, uri)`` of a deployment's pools, read beside ``storage`` (its ``[storage] uri`` store)
    pools: tuple[tuple[str, str], ...] = ()
    #: ``(project, queue, pool)`` of each dead-letter queue read (filled by :func:`run` with pools)
    dlq_pools: tuple[tuple[str, str, str], ...] = ()

    def stores(self) -> list[tuple[str, str]]:
        """Return ``(name, uri)`` of every store to read: the ``storage`` store, then the pools."""
        return [(DEFAULT_STORE if self.pools else "", self.storage), *self.pools]


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
        help="body path (currency, card.network, items[].sku) whose values feed pattern mining "
        "(repeatable); default: every scalar path of the bodies with few distinct values",
    )
    p.add_argument(
        "--max-field-values",
        type=int,
        default=12,
        help="most distinct values a body path may have to be chosen by default (12)",
    )
    p.add_argument("--min-support", type=float, default=0.02, help="FP-Growth minimum support (0.02)")
    p.add_argument("--min-confidence", type=float, default=0.8, help="minimum rule confidence (0.8)")
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
        "--shuffle-partitions",
        type=int,
        help="spark.sql.shuffle.partitions (default: sized to the dead letters, from the default "
        "parallelism up to four times it)",
    )
    return p


def parse_args(argv: Sequence[str] | None) -> Options:
    """Return the options of a command line."""
    command = parser()
    args = command.parse_args(argv)
    pools: tuple[tuple[str, str], ...] = ()
    try:
        storage = args.storage
        if storage is None:
            settings = load_settings(args.config)
            storage = settings.storage_uri
            if settings.pools.enabled:  # every pool of the catalog, beside the [storage] uri store
                pools = tuple(catalog_pools(settings.pools.catalog or storage))
    except ValueError as exc:  # a configuration mistake: one line, as the server says it
        command.exit(2, f"{command.prog}: error: {exc}\n")
    return Options(
        pools=pools,
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


#: Spark's log configuration of a driver started here: warnings and errors, no routine notices
LOG_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"
#: the JVM of a driver started here: the client compiler only (the optimising one spent as much CPU
#: compiling as the whole report on 10^4 dead letters), one garbage-collector thread, on 2 cores, and
#: no bytecode verification of the installation's own jars (loading Spark's classes is a tenth of the
#: CPU of a report on 10^4 dead letters, their verification much of that)
DRIVER_JAVA_OPTIONS = (
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:-BytecodeVerificationRemote",
)
#: dead letters per shuffle partition to aim for (see :func:`shuffle_partitions`)
ROWS_PER_SHUFFLE_PARTITION = 250_000


def shuffle_partitions(rows: int, parallelism: int) -> int:
    """Return spark.sql.shuffle.partitions for a number of dead letters: a wave of tasks, more for more."""
    waves = max(1, min(4, -(-rows // (ROWS_PER_SHUFFLE_PARTITION * max(1, parallelism)))))
    return max(1, parallelism) * waves


def spark_session(options: Options) -> SparkSession:
    """Return the session: ``--master``, else spark-submit's, else ``local[*]``.

    A driver started here starts fast and quietly: no web UI, no Hive
    catalog, Spark's log at WARN from the first line (:data:`LOG_CONFIG`, so
    no banner and no native-Hadoop notice), its JVM tuned for a short job
    (:data:`DRIVER_JAVA_OPTIONS`); on a local master it binds to
    loopback and runs its Python workers with this interpreter. Shuffle
    partitions are sized to the data once it is read (:func:`run`). On a
    cluster, the job's own code (this package and ``zaqar_lite``) is shipped
    to the executors; their Python needs the client library of the store
    read (redis, pymongo, python-swiftclient).
    """
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ and SparkSession.getActiveSession() is None
    master = options.master or (None if submitted else "local[*]")
    builder = SparkSession.builder.appName(APP_NAME)
    for key, value in {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.adaptive.enabled": "true",
    }.items():
        builder = builder.config(key, value)
    if not submitted:
        builder = builder.config(
            "spark.driver.extraJavaOptions",
            " ".join((f"-Dlog4j2.configurationFile={LOG_CONFIG}", *DRIVER_JAVA_OPTIONS)),
        )
    if master:
        builder = builder.master(master)
    if master and (_is_local(master) or master.startswith("spark://127.0.0.1")):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.driver.host", "127.0.0.1")
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
    if master and _is_local(master):
        builder = builder.config(
            "spark.driver.memory", os.environ.get("ZAQAR_LITE_SPARK_DRIVER_MEMORY", "2g")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
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
    frames = [
        read_store(
            spark,
            uri,
            projects=options.projects,
            queues=options.queues,
            since=options.since,
            partitions=options.partitions,
        )
        for _, uri in options.stores()
    ]
    # one DataFrame: Spark reads every store's partitions side by side
    combined = frames[0]
    for frame in frames[1:]:
        combined = combined.unionByName(frame)
    return combined


# -- transform --------------------------------------------------------------------------------------


#: rows of the sample that decides which body paths are candidate causes
FIELD_SAMPLE_ROWS = 20_000
#: shapes (most common first) whose paths are candidate causes
FIELD_SHAPES = 200


def _since(started: float) -> str:
    return f"{time.monotonic() - started:.1f} s"


def choose_fields(
    enriched: DataFrame, shapes: Sequence[dict[str, Any]], rows: int, options: Options
) -> tuple[list[str], list[str]]:
    """Return the body paths whose values become items, and those of them that only restate the source.

    Every scalar path of the shapes is profiled on a sample of at most
    :data:`FIELD_SAMPLE_ROWS` dead letters; kept by default: paths with at
    most ``--max-field-values`` distinct values, each seen twice on average.
    """
    paths = transforms.scalar_paths(p for shape in shapes[:FIELD_SHAPES] for p in shape["paths"])
    if options.fields is not None:
        paths = sorted({*paths, *options.fields})
    if not paths:
        return [], []
    sample = enriched if rows <= FIELD_SAMPLE_ROWS else enriched.sample(FIELD_SAMPLE_ROWS / rows, seed=7)
    profile = transforms.body_field_profile(sample, paths)
    if options.fields is not None:
        levels = {r["field"]: r["queue_values"] <= 1 for r in profile.collect()}
        fields = list(options.fields)
        return fields, [f for f in fields if levels.get(f)]
    chosen = transforms.categorical_fields(profile, options.max_field_values).collect()
    return [r["field"] for r in chosen], [r["field"] for r in chosen if r["source_level"]]


def mine_rules(enriched: DataFrame, rows: int, fields: Sequence[str], source_fields: Sequence[str],
               options: Options) -> tuple[list[dict[str, Any]], int]:
    """Return the cause rules (collected) and how many items carried signal."""
    features = transforms.message_features(enriched, fields).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        signal = transforms.signal_items(
            _rows(transforms.signal_counts(features)), options.min_rule_messages, options.min_confidence
        )
        if not signal:  # no item separates a cause: every rule would conclude a cause from a cause
            return [], 0
        min_support = max(options.min_support, options.min_rule_messages / max(1, rows))
        source_items = (*transforms.SOURCE_ITEMS, *(f"{field}=" for field in source_fields))
        rules = transforms.association_rules(
            features, min_support, options.min_confidence, options.max_rule_items, signal, source_items
        )
        return rules, len(signal)
    finally:
        features.unpersist()


def _collect_tables(tables: dict[str, DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """Collect small DataFrames in one query: each row as JSON, tagged with its table, in one union.

    One plan and one set of jobs instead of one per table; each table keeps
    its own order (a union concatenates its inputs' partitions).
    """
    names = list(tables)
    union = functools.reduce(
        DataFrame.unionAll,
        [
            df.select(F.lit(i).alias("table"), F.to_json(F.struct(*df.columns)).alias("row"))
            for i, df in enumerate(tables.values())
        ],
    )
    collected: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for row in union.collect():
        name = names[row["table"]]
        values = json.loads(row["row"])  # to_json leaves out null fields
        collected[name].append({column: values.get(column) for column in tables[name].columns})
    return collected


def transform(
    enriched: DataFrame,
    counts: list[dict[str, Any]],
    options: Options,
    progress: Progress = lambda _: None,
) -> Tables:
    """Return every analysis of the :func:`transforms.enrich`\\ ed dead letters (cached by the caller).

    ``counts`` are the collected :func:`transforms.dead_letter_counts` (the
    time chart's span). Collected here in one query: the payload shapes
    (their paths are the candidate causes), the signatures and the time
    tables; then the cause rules. The signatures' members stay lazy (the id
    files stream them).
    """
    started = time.monotonic()
    rows = sum(r["messages"] for r in counts)
    first = min((r["first"] for r in counts), default=None)
    last = max((r["last"] for r in counts), default=None)
    bucket = transforms.time_bucket(first, last)
    members = transforms.signature_members(enriched)
    small = _collect_tables(
        {
            "shapes": transforms.payload_shapes(enriched),
            "signatures": transforms.failure_signatures(members),
            "over_time": transforms.dead_letters_over_time(enriched, bucket),
            "claim_counts": transforms.claim_count_distribution(enriched),
            "delays": transforms.time_to_dead_letter(enriched),
            "delay_stats": transforms.time_to_dead_letter_stats(enriched),
        }
    )
    shapes = transforms.shape_paths(small["shapes"])
    progress(
        f"shapes: {len(shapes)} payload shapes in {len(counts)} source queues, with the signatures and "
        f"time tables ({_since(started)})"
    )
    started = time.monotonic()
    fields, source_fields = choose_fields(enriched, shapes, rows, options)
    progress(
        f"fields: {len(fields)} body paths as candidate causes {fields or ''}"
        + (f", {source_fields} only restate the source" if source_fields else "")
        + f" ({_since(started)})"
    )
    started = time.monotonic()
    rules, signal = mine_rules(enriched, rows, fields, source_fields, options) if rows else ([], 0)
    progress(f"rules: {len(rules)} cause rules from {signal} items with signal, {rows} dead letters "
             f"({_since(started)})")
    return Tables(
        counts=counts,
        signatures=small["signatures"],
        members=members.select("project", "queue", "signature_id", "id"),
        shapes=shapes,
        rules=rules,
        rule_base=rows,
        fields=fields,
        source_fields=source_fields,
        over_time=small["over_time"],
        bucket_seconds=bucket,
        claim_counts=small["claim_counts"],
        delays=small["delays"],
        delay_stats=small["delay_stats"],
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
    listed = []
    for r in tables.rules:
        messages = int(round(r["support"] * tables.rule_base))
        listed.append(
            {
                "antecedent": r["antecedent"],
                "consequent": r["consequent"],
                "support": r["support"],
                "confidence": r["confidence"],
                "lift": r["lift"],
                "messages": messages,
                "explained": int(round(messages * (1 - 1 / r["lift"]))),
            }
        )
    return listed


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


def build_report(tables: Tables, options: Options, progress: Progress = lambda _: None) -> dict[str, Any]:
    """Collect the tables into the ``report.json`` document (schema in ``spark_jobs/README.rst``)."""
    started = time.monotonic()
    summary = _summary(tables.counts)
    signatures = _signatures(tables)
    summary["signatures"] = len({s["ids_file"] for s in signatures})
    progress(
        f"signatures: {summary['signatures']} in {summary['source_queues']} source queues, "
        f"{len(signatures)} rows ({_since(started)})"
    )
    started = time.monotonic()
    time_section = _time_section(tables)
    progress(
        f"time: {len(time_section['over_time'])} buckets of {tables.bucket_seconds} s "
        f"({_since(started)})"
    )
    if options.pools:
        _name_pools(summary["queues"], signatures, options)
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": iso(time.time()),
        "source": {
            **({"pools": {name: public_uri(uri) for name, uri in options.stores()}} if options.pools else {}),
            "storage": public_uri(options.storage),
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
        f"({_since(started)})"
    )
    return report


# -- main -------------------------------------------------------------------------------------------


def stderr_progress(line: str) -> None:
    """Print one progress line on stderr."""
    print(f"dlq-report: {line}", file=sys.stderr, flush=True)


def run(spark: SparkSession, options: Options, progress: Progress = stderr_progress) -> dict[str, Any]:
    """Run extract, transform and load on a session; return the report document.

    The dead letters are read once, signed and shaped (:func:`transforms.enrich`)
    and cached; every table reads the cache.
    """
    started = time.monotonic()
    if not is_export_file(options.storage):
        # on the driver, before Spark: a wrong URI or an unreachable store fails here, plainly
        placed = [
            (target, name)
            for name, uri in options.stores()
            for target in dead_letter_queues(store_reader(uri).queues(), options.projects, options.queues)
        ]
        if options.pools:
            options = dataclasses.replace(
                options, dlq_pools=tuple((t.project, t.queue, name) for t, name in placed)
            )
        progress(
            f"plan: {len(placed)} DLQs: "
            + ", ".join(f"{t.project}/{t.queue}" + (f" ({name})" if name else "") for t, name in placed[:10])
            + (" ..." if len(placed) > 10 else "")
        )
    parallelism = spark.sparkContext.defaultParallelism
    dead_letters = extract(spark, options)
    # an export file smaller than a block is one partition: spread it over the cores, one partition
    # each (every later stage reads the cache with a task per partition: more would be idle overhead)
    if is_export_file(options.storage) and dead_letters.rdd.getNumPartitions() < parallelism:
        dead_letters = dead_letters.repartition(parallelism)
    enriched = transforms.enrich(dead_letters).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # the first query reads, enriches and caches every dead letter; its aggregation is a few rows
        spark.conf.set("spark.sql.shuffle.partitions", str(options.shuffle_partitions or max(1, parallelism)))
        counts = _rows(transforms.dead_letter_counts(enriched))
        total = sum(r["messages"] for r in counts)
        partitions = options.shuffle_partitions or shuffle_partitions(total, parallelism)
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
        progress(
            f"extract: {total} dead letters in {enriched.rdd.getNumPartitions()} partitions, "
            f"{partitions} shuffle partitions ({_since(started)})"
        )
        tables = transform(enriched, counts, options, progress)
        return load(tables, options, progress)
    finally:
        enriched.unpersist()


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
        stderr_progress(f"spark: {spark.version} on {spark.sparkContext.master} ({_since(started)})")
        report = run(spark, options)
    except (ValueError, FileNotFoundError, StorageUnavailable) as exc:
        stderr_progress(f"failed: {exc}")
        return 2
    summary = report["summary"]
    stderr_progress(
        f"done: {summary['dead_letters']} dead letters, {summary['signatures']} signatures, "
        f"{len(report['rules'])} cause rules in {_since(started)}; report {options.out / 'report.html'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
