"""Where the DLQ report's rows come from: every store, in parallel partitions, or an export file.

:class:`DeadLetterSource` is a PySpark Python data source (``pyspark.sql.datasource``,
Spark 4) named ``zaqar_dlq``::

    spark.dataSource.register(DeadLetterSource)
    df = (spark.read.format("zaqar_dlq").option("uri", "sqlite:////srv/zaqar.db")
          .option("queues", "orders-dlq").option("partitions", 8).load())

Options: ``uri`` (a storage URI, required), ``projects`` and ``queues``
(comma-separated; without ``queues``, every queue that some queue of its
project names as ``_dead_letter_queue``), ``since`` (POSIX seconds: only
messages dead-lettered then or later), ``partitions`` (the total to aim for;
default fitted to the rows and ``cores``, see
:func:`~spark_jobs.sources.plan.partitions_for`), ``cores`` (the cores the
read runs on, default 2), ``max_rows_per_partition`` (default 50000), ``now``
(POSIX seconds; messages expired by then are left out, default the planning
time).

The report reads through :func:`read_store` instead: the same plan and the
same partitions, read by ``mapInArrow``, which spares the Python processes
Spark starts to look a Python data source up, create and plan it.

Planning runs on the driver: it lists the queues through the storage
contract, counts each DLQ, then asks the store's reader (one module per store
here) to cut each into ranges of about equal sizes that the store can serve
independently. Each partition opens its own connection on an executor, reads
its range a page at a time and yields each page as one Arrow record batch
(:func:`~spark_jobs.sources.rows.dead_letter_batch`: columns built by Arrow,
not a Python object per field). Every row has the schema
:data:`~spark_jobs.sources.rows.DEAD_LETTER_DDL`.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from spark_jobs.sources.plan import StoreReader, Target, dead_letter_queues, partitions_for, pieces_per_target
from spark_jobs.sources.rows import (
    DEAD_LETTER_DDL,
    dead_letter_batch,
    export_line_row,
    record_batches,
    regrouped,
)

FORMAT = "zaqar_dlq"
#: URI scheme -> (module, reader class) of this package
READERS = {
    "sqlite": ("spark_jobs.sources.sqlite", "SqliteReader"),
    "redis": ("spark_jobs.sources.redis", "RedisReader"),
    "rediss": ("spark_jobs.sources.redis", "RedisReader"),
    "redis+cluster": ("spark_jobs.sources.redis", "RedisReader"),
    "rediss+cluster": ("spark_jobs.sources.redis", "RedisReader"),
    "mongodb": ("spark_jobs.sources.mongodb", "MongoReader"),
    "mongodb+srv": ("spark_jobs.sources.mongodb", "MongoReader"),
    "swift": ("spark_jobs.sources.swift", "SwiftReader"),
}
EXPORT_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet")
#: rows a read partition holds at most, unless told otherwise (a wave of 2 such tasks: a few seconds)
MAX_ROWS_PER_PARTITION = 50_000


def store_reader(uri: str) -> StoreReader:
    """Return the reader of the store a URI names.

    Raises:
        ValueError: no reader for that scheme (the message names the ones there are).
    """
    import importlib

    scheme = urllib.parse.urlsplit(uri).scheme
    if scheme not in READERS:
        known = ", ".join(sorted(READERS))
        raise ValueError(f"no dead-letter reader for {scheme!r} stores ({uri!r}); readers exist for: {known}")
    module, name = READERS[scheme]
    reader: StoreReader = getattr(importlib.import_module(module), name)(uri)
    return reader


def _listed(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


class DeadLetterReader(DataSourceReader):
    """Plans the partitions (driver) and reads one of them (executor)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        if not options.get("uri"):
            raise ValueError(f"the {FORMAT} data source needs the 'uri' option (a storage URI)")
        self.uri = options["uri"]
        self.projects = _listed(options.get("projects"))
        self.queues = _listed(options.get("queues"))
        self.since = float(options["since"]) if options.get("since") else None
        self.partitions_wanted = int(options["partitions"]) if options.get("partitions") else None
        self.cores = int(options.get("cores", 2))
        self.max_rows = int(options.get("max_rows_per_partition", MAX_ROWS_PER_PARTITION))
        self.now = float(options["now"]) if options.get("now") else time.time()

    def targets(self) -> list[Target]:
        """Return the DLQs this read covers."""
        return dead_letter_queues(store_reader(self.uri).queues(), self.projects, self.queues)

    def partitions(self) -> Sequence[InputPartition]:
        """Cut every DLQ into ranges its store can serve in parallel."""
        reader = store_reader(self.uri)
        targets = self.targets()
        counts = {t: reader.count(t) for t in targets}
        wanted = self.partitions_wanted or partitions_for(counts.values(), self.cores, self.max_rows)
        pieces = pieces_per_target(counts, wanted, self.max_rows)
        specs = [spec for t in targets for spec in reader.plan(t, pieces[t])]
        # Spark needs at least one partition; an empty spec reads nothing
        return [InputPartition(spec) for spec in specs] or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Stream one partition's rows as Arrow record batches."""
        spec = partition.value
        if spec is None:
            return iter(())
        return dead_letter_batches(store_reader(self.uri), spec, self.now, self.since)


def dead_letter_batches(
    reader: StoreReader, spec: Mapping[str, Any], now: float, since: float | None = None
) -> Iterator[Any]:
    """Yield one partition's dead letters (dead-lettered at ``since`` or later) as Arrow record batches."""
    import pyarrow.compute as pc

    for page in regrouped(reader.read(spec, now)):
        batch = dead_letter_batch(spec["project"], spec["queue"], page)
        if since is not None:
            batch = batch.filter(pc.greater_equal(pc.fill_null(batch.column("dead_lettered_at"), 0.0), since))
        if batch.num_rows:
            yield batch


class DeadLetterSource(DataSource):
    """The ``zaqar_dlq`` data source: dead-lettered messages straight from a store (module docstring)."""

    @classmethod
    def name(cls) -> str:
        """Return the format name used with ``spark.read.format``."""
        return FORMAT

    def schema(self) -> str:
        """Return the dead-letter row schema."""
        return DEAD_LETTER_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        """Return the reader for these options."""
        return DeadLetterReader(self.options)


def is_export_file(source: str) -> bool:
    """Return whether ``source`` names an export file (or folder) rather than a storage URI."""
    scheme = urllib.parse.urlsplit(source).scheme
    return scheme in ("", "file") or source.lower().endswith(EXPORT_SUFFIXES) and scheme not in READERS


class PlannedRead:
    """Reads the planned partitions whose indexes it is given: the executor side of :func:`read_store`."""

    def __init__(self, reader: DeadLetterReader, partitions: Sequence[InputPartition]) -> None:
        self.reader = reader
        self.partitions = list(partitions)

    def __call__(self, indexes: Iterable[Any]) -> Iterator[Any]:
        """Yield the record batches of every partition named in batches of indexes (``mapInArrow``)."""
        for batch in indexes:
            for index in batch.column(0).to_pylist():
                yield from self.reader.read(self.partitions[index])


def read_store(
    spark: SparkSession,
    uri: str,
    *,
    projects: Sequence[str] = (),
    queues: Sequence[str] = (),
    since: float | None = None,
    partitions: int | None = None,
    max_rows_per_partition: int | None = None,
) -> DataFrame:
    """Return the dead letters of a store as a DataFrame, planned and read as :class:`DeadLetterSource` does.

    The partitions are planned here, in the driver's Python, and read by
    ``mapInArrow`` over one index a partition: the same rows in the same
    partitions as ``spark.read.format("zaqar_dlq")``, without the three
    Python processes that Spark starts, one after the other, to look the
    source up, create it and plan it (1 to 4 s each on 2 busy cores).
    """
    options = {"uri": uri, "now": repr(time.time()), "cores": str(spark.sparkContext.defaultParallelism)}
    if projects:
        options["projects"] = ",".join(projects)
    if queues:
        options["queues"] = ",".join(queues)
    if since is not None:
        options["since"] = repr(float(since))
    if partitions:
        options["partitions"] = str(partitions)
    if max_rows_per_partition:
        options["max_rows_per_partition"] = str(max_rows_per_partition)
    reader = DeadLetterReader(options)
    planned = reader.partitions()
    indexes = spark.range(0, len(planned), 1, numPartitions=len(planned))
    return indexes.mapInArrow(PlannedRead(reader, planned), DEAD_LETTER_DDL)


def from_export_lines(lines: DataFrame) -> DataFrame:
    """Return the report rows of a DataFrame of export JSON lines (one ``value`` column of text)."""

    def convert(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            rows = (export_line_row(json.loads(text)) for text in batch.column(0).to_pylist() if text.strip())
            yield from record_batches(rows)

    return lines.mapInArrow(convert, DEAD_LETTER_DDL)


def read_export(
    spark: SparkSession,
    path: str,
    *,
    projects: Sequence[str] = (),
    queues: Sequence[str] = (),
    since: float | None = None,
) -> DataFrame:
    """Return the dead letters of an export: Parquet rows as they are, JSON lines mapped to rows."""
    from pyspark.sql import functions as F

    if path.lower().rstrip("/").endswith(".parquet"):
        df = spark.read.schema(DEAD_LETTER_DDL).parquet(path)
    else:
        df = from_export_lines(spark.read.text(path))
    if projects:
        df = df.where(F.col("project").isin(list(projects)))
    if queues:
        df = df.where(F.col("queue").isin(list(queues)))
    if since is not None:
        df = df.where(F.col("dead_lettered_at") >= F.lit(float(since)))
    return df


__all__ = [
    "FORMAT",
    "DeadLetterSource",
    "dead_letter_batches",
    "is_export_file",
    "read_export",
    "read_store",
    "store_reader",
]
