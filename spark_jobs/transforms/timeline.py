"""Time and counts: dead letters over time, claim counts, time to dead-lettering, totals."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.transforms.fields import encrypted_body

#: time from first post to dead-lettering: (label, lower bound, upper bound or None) in seconds
DELAY_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("< 1 s", 0, 1),
    ("1-10 s", 1, 10),
    ("10 s-1 min", 10, 60),
    ("1-10 min", 60, 600),
    ("10 min-1 h", 600, 3600),
    ("1-6 h", 3600, 21600),
    ("6-24 h", 21600, 86400),
    ("1-7 d", 86400, 604800),
    ("> 7 d", 604800, None),
)

#: bucket widths of the dead-letters-over-time chart, seconds: the smallest giving at most TIME_BUCKETS_MAX
TIME_BUCKETS = (60, 300, 900, 3600, 3 * 3600, 6 * 3600, 86400, 7 * 86400)
TIME_BUCKETS_MAX = 96


def time_bucket(first: float | None, last: float | None) -> int:
    """Return the bucket width (seconds) for a span: minutes for an hour, hours for days, days for months."""
    span = 0.0 if first is None or last is None else last - first
    return next((width for width in TIME_BUCKETS if span / width < TIME_BUCKETS_MAX), TIME_BUCKETS[-1])


def dead_letters_over_time(dead_letters: DataFrame, bucket_seconds: int) -> DataFrame:
    """Return ``(project, source_queue, start, messages)``: dead letters per bucket of dead-lettering time."""
    start = (F.floor(F.col("dead_lettered_at") / bucket_seconds) * bucket_seconds).cast("long")
    return (
        dead_letters.groupBy("project", "source_queue", start.alias("start"))
        .agg(F.count(F.lit(1)).alias("messages"))
        .orderBy("project", "source_queue", "start")
    )


def claim_count_distribution(dead_letters: DataFrame) -> DataFrame:
    """Return ``(project, source_queue, claim_count, messages)``: how often dead letters were handed out."""
    return (
        dead_letters.groupBy("project", "source_queue", "claim_count")
        .agg(F.count(F.lit(1)).alias("messages"))
        .orderBy("project", "source_queue", "claim_count")
    )


def _delay(dead_letters: DataFrame) -> DataFrame:
    return dead_letters.withColumn(
        "seconds", F.greatest(F.lit(0.0), F.col("dead_lettered_at") - F.col("first_posted_at"))
    )


def time_to_dead_letter(dead_letters: DataFrame) -> DataFrame:
    """Return the distribution of time from first post to dead-lettering, in :data:`DELAY_BUCKETS`.

    Columns: project, source_queue, bucket (its index), label, lower, upper
    (seconds; upper null for the last), messages. Empty buckets are left out.
    """
    index: Column = F.lit(len(DELAY_BUCKETS) - 1)
    for i, (_, _, upper) in reversed(list(enumerate(DELAY_BUCKETS))):
        if upper is not None:
            index = F.when(F.col("seconds") < upper, F.lit(i)).otherwise(index)
    buckets = F.array(
        *[
            F.struct(
                F.lit(label).alias("label"),
                F.lit(lower).alias("lower"),
                F.lit(upper).cast("int").alias("upper"),
            )
            for label, lower, upper in DELAY_BUCKETS
        ]
    )
    counted = (
        _delay(dead_letters)
        .groupBy("project", "source_queue", index.alias("bucket"))
        .agg(F.count(F.lit(1)).alias("messages"))
    )
    return (
        counted.select("project", "source_queue", "bucket", buckets[F.col("bucket")].alias("b"), "messages")
        .select("project", "source_queue", "bucket", "b.label", "b.lower", "b.upper", "messages")
        .orderBy("project", "source_queue", "bucket")
    )


def time_to_dead_letter_stats(dead_letters: DataFrame) -> DataFrame:
    """Return per source queue: messages, median, 90th percentile and max seconds to dead-lettering."""
    quantiles = F.percentile_approx("seconds", [0.5, 0.9], 10000)
    return (
        _delay(dead_letters)
        .groupBy("project", "source_queue")
        .agg(F.count(F.lit(1)).alias("messages"), quantiles.alias("q"), F.max("seconds").alias("max"))
        .select(
            "project",
            "source_queue",
            "messages",
            F.col("q")[0].alias("p50"),
            F.col("q")[1].alias("p90"),
            "max",
        )
        .orderBy("project", "source_queue")
    )


# -- summary -------------------------------------------------------------------------------------


def dead_letter_counts(dead_letters: DataFrame) -> DataFrame:
    """Return ``(project, queue, source_queue, reason, messages, first, last, encrypted)``.

    ``first`` and ``last`` are dead-lettering times; ``encrypted`` counts the
    messages whose body is encrypted at rest (:func:`~spark_jobs.transforms.fields.encrypted_body`).
    """
    return (
        dead_letters.groupBy("project", "queue", "source_queue", "reason")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.min("dead_lettered_at").alias("first"),
            F.max("dead_lettered_at").alias("last"),
            F.sum(encrypted_body(F.col("body")).cast("int")).alias("encrypted"),
        )
        .orderBy("project", "queue", "source_queue", "reason")
    )
