"""The DLQ report: read dead letters, mine failure patterns, write report.json, report.html and id lists.

Run it as ``zaqar-lite dlq-report --storage URI [--out DIR] ...`` or, on any
Spark master, ``spark-submit spark_jobs/dlq_report.py --storage URI ...``
(``--help`` lists every option: :mod:`spark_jobs.options`). Stages:
:func:`extract` (a store through the ``zaqar_dlq`` data source, or an export
file), :func:`transform` (the pure transforms of :mod:`spark_jobs.transforms`,
their small results collected) and :func:`spark_jobs.output.load` (write the
files). The session is :mod:`spark_jobs.session`'s. Each stage prints a
progress line on stderr (:mod:`spark_jobs.progress`). The output is documented
in ``spark_jobs/README.rst``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark import StorageLevel  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from spark_jobs import class_archive, transforms  # noqa: E402
from spark_jobs.options import Options, parse_args  # noqa: E402
from spark_jobs.output import Tables, load  # noqa: E402
from spark_jobs.progress import Progress, since, stderr_progress  # noqa: E402
from spark_jobs.session import is_submitted, shuffle_partitions, spark_session  # noqa: E402
from spark_jobs.sources import is_export_file, read_export, read_store, store_reader  # noqa: E402
from spark_jobs.sources.plan import PausedSource, Target, dead_letter_queues, paused_sources  # noqa: E402
from zaqar_lite.rules.pools import masked_uri  # noqa: E402

__all__ = ["Options", "extract", "main", "parse_args", "run", "transform"]


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


def field_profile(
    enriched: DataFrame, shapes: Sequence[dict[str, Any]], rows: int, options: Options
) -> DataFrame | None:
    """Return the profile that picks the body paths whose values become items (None: no path at all).

    Every scalar path of the shapes is profiled on a sample of at most
    :data:`FIELD_SAMPLE_ROWS` dead letters; kept by default
    (:func:`transforms.categorical_fields`): paths with at most
    ``--max-field-values`` distinct values, each seen twice on average. With
    ``--fields``, the profile of every path (:func:`chosen_fields` reads it).
    """
    paths = transforms.scalar_paths(p for shape in shapes[:FIELD_SHAPES] for p in shape["paths"])
    if options.fields is not None:
        paths = sorted({*paths, *options.fields})
    if not paths:
        return None
    sample = enriched if rows <= FIELD_SAMPLE_ROWS else enriched.sample(FIELD_SAMPLE_ROWS / rows, seed=7)
    profile = transforms.body_field_profile(sample, paths, options.max_field_values)
    if options.fields is not None:
        return profile
    return transforms.categorical_fields(profile, options.max_field_values)


def chosen_fields(
    profiled: Sequence[dict[str, Any]], options: Options
) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """Return the body paths whose values become items, those that only restate the source, the negations.

    ``profiled`` is the collected :func:`field_profile`. The negations
    (:func:`transforms.negations`): the paths whose values seen in the
    sample also become negated items ``<path>!=<value>``.
    """
    listed = {r["field"]: r["listed"] for r in profiled}
    if options.fields is not None:
        levels = {r["field"]: r["queue_values"] <= 1 for r in profiled}
        fields = list(options.fields)
        source_fields = [f for f in fields if levels.get(f)]
    else:
        fields = [r["field"] for r in profiled]
        source_fields = [r["field"] for r in profiled if r["source_level"]]
    return fields, source_fields, transforms.negations(fields, listed, source_fields)


def mine_rules(
    enriched: DataFrame, rows: int, fields: Sequence[str], source_fields: Sequence[str], options: Options,
    negated: dict[str, list[str]] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Return the cause rules (collected) and how many items carried signal."""
    features = transforms.message_features(enriched, fields).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        signal = transforms.signal_items(
            _rows(transforms.signal_counts(features, negated or {})), options.min_rule_messages,
            options.min_confidence, negated=negated,
        )
        if not signal:  # no item separates a cause: every rule would conclude a cause from a cause
            return [], 0
        min_support = max(options.min_support, options.min_rule_messages / max(1, rows))
        source_items = (*transforms.SOURCE_ITEMS, *(f"{field}=" for field in source_fields))
        rules = transforms.association_rules(
            features, min_support, options.min_confidence, options.max_rule_items, signal, source_items,
            partitions=enriched.sparkSession.sparkContext.defaultParallelism,
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
    first: dict[str, list[dict[str, Any]]],
    options: Options,
    progress: Progress = lambda _: None,
) -> Tables:
    """Return every analysis of the :func:`transforms.enrich`\\ ed dead letters (cached by the caller).

    ``first`` holds what the query that filled the cache collected (:func:`first_tables`):
    the counts (the time chart's span) and the payload shapes (their paths
    are the candidate causes). Collected here in one query: the signatures,
    the time tables and the body-path profile; then the cause rules. The
    signatures' members stay lazy (the id files stream them).
    """
    started = time.monotonic()
    counts = first["counts"]
    rows = sum(r["messages"] for r in counts)
    bucket = transforms.time_bucket(
        min((r["first"] for r in counts), default=None), max((r["last"] for r in counts), default=None)
    )
    members = transforms.signature_members(enriched)
    shapes = transforms.shape_paths(first["shapes"])
    tables = {
        "signatures": transforms.failure_signatures(members),
        "over_time": transforms.dead_letters_over_time(enriched, bucket),
        "claim_counts": transforms.claim_count_distribution(enriched),
        "delays": transforms.time_to_dead_letter(enriched),
        "delay_stats": transforms.time_to_dead_letter_stats(enriched),
    }
    profile = field_profile(enriched, shapes, rows, options)
    small = _collect_tables(tables if profile is None else {**tables, "fields": profile})
    fields, source_fields, negated = chosen_fields(small.get("fields", []), options)
    progress(
        f"fields: {len(fields)} body paths as candidate causes {fields or ''}"
        + (f", {source_fields} only restate the source" if source_fields else "")
        + (f", {sorted(negated)} negated too" if negated else "")
        + f", with the signatures and time tables ({since(started)})"
    )
    started = time.monotonic()
    rules, signal = mine_rules(enriched, rows, fields, source_fields, options, negated) if rows else ([], 0)
    progress(f"rules: {len(rules)} cause rules from {signal} items with signal, {rows} dead letters "
             f"({since(started)})")
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


def first_tables(enriched: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Collect, in the query that reads and caches every dead letter, its counts and payload shapes.

    Both are a few rows; the shapes' paths decide which body paths the next
    query profiles, so they are known one query earlier.
    """
    return _collect_tables(
        {"counts": transforms.dead_letter_counts(enriched), "shapes": transforms.payload_shapes(enriched)}
    )


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.collect()]


# -- main -------------------------------------------------------------------------------------------


def run(spark: SparkSession, options: Options, progress: Progress = stderr_progress) -> dict[str, Any]:
    """Run extract, transform and load on a session; return the report document.

    The dead letters are read once, signed and shaped (:func:`transforms.enrich`)
    and cached; every table reads the cache.
    """
    started = time.monotonic()
    if not is_export_file(options.storage):
        # on the driver, before Spark: a wrong URI or an unreachable store fails here, plainly
        placed: list[tuple[Target, str]] = []
        paused: list[PausedSource] = []
        for name, uri in options.stores():
            listed = list(store_reader(uri).queues())
            targets = dead_letter_queues(listed, options.projects, options.queues)
            placed += [(target, name) for target in targets]
            paused += paused_sources(listed, targets)
        if options.pools:
            options = dataclasses.replace(
                options, dlq_pools=tuple((t.project, t.queue, name) for t, name in placed)
            )
        if paused:
            options = dataclasses.replace(options, paused=tuple(paused))
        progress(
            f"plan: {len(placed)} DLQs: "
            + ", ".join(f"{t.project}/{t.queue}" + (f" ({name})" if name else "") for t, name in placed[:10])
            + (" ..." if len(placed) > 10 else "")
            + (f"; {len(paused)} paused source queues" if paused else "")
        )
    parallelism = spark.sparkContext.defaultParallelism
    dead_letters = extract(spark, options)
    # an export file smaller than a block is one partition: spread it over the cores, one partition
    # each (every later stage reads the cache with a task per partition: more would be idle overhead)
    if is_export_file(options.storage) and dead_letters.rdd.getNumPartitions() < parallelism:
        dead_letters = dead_letters.repartition(parallelism)
    enriched = transforms.enrich(dead_letters).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # the first query reads, enriches and caches every dead letter; its aggregations are a few rows
        spark.conf.set("spark.sql.shuffle.partitions", str(options.shuffle_partitions or max(1, parallelism)))
        first = first_tables(enriched)
        total = sum(r["messages"] for r in first["counts"])
        sources = len({(r["project"], r["source_queue"]) for r in first["counts"]})
        partitions = options.shuffle_partitions or shuffle_partitions(total, parallelism)
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
        progress(
            f"extract: {total} dead letters in {enriched.rdd.getNumPartitions()} partitions, "
            f"{partitions} shuffle partitions; {len(first['shapes'])} payload shapes in "
            f"{sources} source queues ({since(started)})"
        )
        tables = transform(enriched, first, options, progress)
        return load(tables, options, progress)
    finally:
        enriched.unpersist()


#: bytes of an export file per dead letter of the synthetic model, about (Parquet a third of JSON lines)
EXPORT_BYTES_PER_DEAD_LETTER = {".parquet": 190, "": 600}


def expected_dead_letters(options: Options) -> int | None:
    """Return about how many dead letters the options name, known on the driver before Spark starts.

    A store's DLQs are listed and counted (the plan's own counts); an export
    file's (or folder's) size is divided by :data:`EXPORT_BYTES_PER_DEAD_LETTER`.
    None when a store cannot count cheaply or the export is elsewhere than on this machine.
    """
    if is_export_file(options.storage):
        path = Path(urllib.parse.urlsplit(options.storage).path)
        if not path.exists():
            return None
        files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        size = sum(p.stat().st_size for p in files)
        suffix = path.suffix.lower() if path.suffix.lower() == ".parquet" else ""
        return size // EXPORT_BYTES_PER_DEAD_LETTER[suffix]
    total = 0
    for _, uri in options.stores():
        reader = store_reader(uri)
        for target in dead_letter_queues(reader.queues(), options.projects, options.queues):
            count = reader.count(target)
            if count is None:
                return None
            total += count
    return total


def main(argv: Sequence[str] | None = None) -> int:
    """Run the report from a command line; return the exit status."""
    options = parse_args(argv)
    started = time.monotonic()
    stderr_progress(f"start: {masked_uri(options.storage)} -> {options.out}")
    from zaqar_lite.errors import StorageUnavailable

    archive = None if is_submitted() else class_archive.class_archive()
    spark = None
    try:
        # a wrong URI fails now, not after Spark starts; the count sizes Spark's JVM
        spark = spark_session(options, expected_dead_letters(options), archive)
        stderr_progress(f"spark: {spark.version} on {spark.sparkContext.master}"
                        f"{class_archive.describe(spark, archive)} "
                        f"({since(started)})")
        report = run(spark, options)
    except (ValueError, FileNotFoundError, StorageUnavailable) as exc:
        stderr_progress(f"failed: {exc}")
        return 2
    else:
        summary = report["summary"]
        stderr_progress(
            f"done: {summary['dead_letters']} dead letters, {summary['signatures']} signatures, "
            f"{len(report['rules'])} cause rules in {since(started)}; report {options.out / 'report.html'}"
        )
    finally:
        if spark is not None and archive is not None:
            class_archive.finish(spark, archive, stderr_progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
