"""The DLQ report's analyses: pure DataFrame transforms of dead-letter rows.

Each public function takes DataFrames and returns a DataFrame; none reads or
writes anything, so each is tested on a few literal rows. The input is the
row shape of :data:`spark_jobs.sources.rows.DEAD_LETTER_DDL`, enriched once by
:func:`enrich` with each message's cause (its last failure) and payload shape.
Times stay POSIX seconds; ``hour`` columns are the POSIX second an hour starts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.signatures import ID_LENGTH, MASKS, MAX_LENGTH, NO_REASON

EXAMPLES = 3
#: kinds of items that name a cause: rules conclude one of these from the others
CAUSE_ITEMS = ("error_type=", "signature=")
NO_ERROR_TYPE = "(none)"
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
SHAPE_MAX_DEPTH = 6
SHAPE_MAX_PATHS = 100
FIELD_VALUE_LENGTH = 40


# -- failure signatures ---------------------------------------------------------------------------


def masked_error(error: Column) -> Column:
    """Return the error text with its variable parts masked (``signatures.mask_error``, in Spark)."""
    for pattern, replacement in MASKS:
        error = F.regexp_replace(error, pattern, replacement)
    return F.substring(F.trim(error), 1, MAX_LENGTH)


def signature_text(error_type: Column, error: Column) -> Column:
    """Return the signature of a failure (``signatures.signature``, in Spark)."""
    kind = F.trim(F.coalesce(error_type, F.lit("")))
    masked = masked_error(F.coalesce(error, F.lit("")))
    text = F.concat_ws(": ", F.when(kind != "", kind), F.when(masked != "", masked))
    return F.when(text == "", F.lit(NO_REASON)).otherwise(text)


def short_hash(text: Column) -> Column:
    """Return the first hex digits of the SHA-1 of a text (``signatures.signature_id``, in Spark)."""
    return F.substring(F.sha1(text), 1, ID_LENGTH)


def failure_events(dead_letters: DataFrame) -> DataFrame:
    """Return one row per recorded failure, with its signature.

    A dead letter without any failure (claims that lapsed, releases without a
    reason, expiry) counts as one failure with no reason at its dead-lettering time.
    """
    exploded = dead_letters.select(
        "project", "source_queue", "id", "dead_lettered_at", F.explode_outer("failures").alias("f")
    )
    text = signature_text(F.col("f.error_type"), F.col("f.error"))
    return exploded.select(
        "project",
        "source_queue",
        "id",
        F.coalesce(F.col("f.at"), F.col("dead_lettered_at")).alias("at"),
        F.trim(F.col("f.error_type")).alias("error_type"),
        F.col("f.error").alias("error"),
        text.alias("signature"),
        short_hash(text).alias("signature_id"),
    )


def _first_ids(rows: DataFrame, keys: Sequence[str], count: int = EXAMPLES) -> DataFrame:
    """Return ``keys`` plus ``examples``: the ``count`` smallest distinct message ids of each group."""
    window = Window.partitionBy(*keys).orderBy("id")
    firsts = (
        rows.select(*keys, "id")
        .distinct()
        .withColumn("rank", F.row_number().over(window))
        .where(F.col("rank") <= count)
    )
    return firsts.groupBy(*keys).agg(F.sort_array(F.collect_list("id")).alias("examples"))


def failure_signatures(dead_letters: DataFrame) -> DataFrame:
    """Return the failure signatures of each source queue, most widespread first.

    Columns: project, source_queue, signature_id, signature, error_type,
    failures (occurrences in the histories), messages (dead letters that
    failed that way at least once), first_seen, last_seen, example_error (one
    original text), examples (message ids).
    """
    events = failure_events(dead_letters)
    keys = ["project", "source_queue", "signature_id"]
    grouped = events.groupBy(*keys).agg(
        F.min("signature").alias("signature"),
        F.min("error_type").alias("error_type"),
        F.count(F.lit(1)).alias("failures"),
        F.countDistinct("id").alias("messages"),
        F.min("at").alias("first_seen"),
        F.max("at").alias("last_seen"),
        F.min("error").alias("example_error"),
    )
    return grouped.join(_first_ids(events, keys), keys).orderBy(
        F.desc("messages"), F.desc("failures"), "project", "source_queue", "signature_id"
    )


def signature_members(dead_letters: DataFrame) -> DataFrame:
    """Return ``(signature_id, id)``: every dead letter that failed with each signature, once."""
    return failure_events(dead_letters).select("signature_id", "id").distinct()


# -- payload shapes -------------------------------------------------------------------------------


#: Python type -> JSON type name, in the order they are tried (bool is an int)
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"), (int, "integer"), (float, "number"),
    (str, "string"), (dict, "object"), (list, "array"),
)


def _json_type(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "null")


def body_paths(body: str | None) -> list[str]:
    """Return the sorted ``path:type`` entries of a JSON text (``$`` the root, ``a.b``, ``items[]``).

    Paths below :data:`SHAPE_MAX_DEPTH` are left out and at most
    :data:`SHAPE_MAX_PATHS` are kept; text that is not JSON reads ``$:invalid``.
    """
    try:
        value = json.loads(body) if body is not None else None
    except ValueError:
        return ["$:invalid"]
    found: set[str] = set()

    def walk(node: Any, path: str, depth: int) -> None:
        found.add(f"{path or '$'}:{_json_type(node)}")
        if depth >= SHAPE_MAX_DEPTH:
            return
        if isinstance(node, dict):
            for key, child in node.items():
                walk(child, f"{path}.{key}" if path else str(key), depth + 1)
        elif isinstance(node, list):
            for child in node:
                walk(child, f"{path or '$'}[]", depth + 1)

    walk(value, "", 0)
    return sorted(found)[:SHAPE_MAX_PATHS]


_body_paths = F.udf(body_paths, T.ArrayType(T.StringType()), useArrow=True)


def enrich(dead_letters: DataFrame) -> DataFrame:
    """Add each message's cause and payload shape to the dead-letter rows.

    New columns: cause_error_type and cause_signature / cause_signature_id
    (of the last failure, the one that used up the message's last claim;
    see :func:`failure_events` for messages without one), shape_paths
    (:func:`body_paths`) and shape_id (short hash of those paths).
    """
    last = F.element_at(F.col("failures"), -1)
    has_failure = F.size(F.coalesce(F.col("failures"), F.array())) > 0
    text = signature_text(F.when(has_failure, last["error_type"]), F.when(has_failure, last["error"]))
    return dead_letters.select(
        "*",
        F.when(has_failure, F.trim(last["error_type"])).alias("cause_error_type"),
        text.alias("cause_signature"),
        short_hash(text).alias("cause_signature_id"),
        _body_paths("body").alias("shape_paths"),
    ).withColumn("shape_id", short_hash(F.concat_ws("\n", "shape_paths")))


def payload_shapes(enriched: DataFrame) -> DataFrame:
    """Return the payload shapes of each source queue, most common first.

    Columns: project, source_queue, shape_id, paths, messages, missing_paths
    (paths other shapes of the same source queue have and this one lacks),
    examples (message ids).
    """
    keys = ["project", "source_queue", "shape_id"]
    grouped = enriched.groupBy(*keys).agg(
        F.min("shape_paths").alias("paths"), F.count(F.lit(1)).alias("messages")
    )
    every_path = grouped.groupBy("project", "source_queue").agg(
        F.array_distinct(F.flatten(F.collect_list("paths"))).alias("every_path")
    )
    return (
        grouped.join(every_path, ["project", "source_queue"])
        .withColumn("missing_paths", F.array_sort(F.array_except("every_path", "paths")))
        .drop("every_path")
        .join(_first_ids(enriched, keys), keys)
        .select("project", "source_queue", "shape_id", "paths", "messages", "missing_paths", "examples")
        .orderBy(F.desc("messages"), "project", "source_queue", "shape_id")
    )


# -- frequent patterns ----------------------------------------------------------------------------


def body_field_values(dead_letters: DataFrame) -> DataFrame:
    """Return each top-level body field with scalar values: how many messages have it and distinct values.

    Columns: field, messages, values. The report turns the fields with few
    distinct values (categories, flags, versions) into pattern-mining items
    (:func:`categorical_fields`).
    """
    fields = dead_letters.select(
        "id", F.explode(F.from_json("body", "map<string,string>")).alias("field", "value")
    )
    scalars = fields.where(
        F.col("value").isNotNull() & ~F.col("value").startswith("{") & ~F.col("value").startswith("[")
    )
    return (
        scalars.groupBy("field")
        .agg(F.countDistinct("id").alias("messages"), F.countDistinct("value").alias("values"))
        .orderBy("field")
    )


def categorical_fields(field_values: DataFrame, max_values: int) -> DataFrame:
    """Return the ``field`` names of :func:`body_field_values` that look categorical.

    At most ``max_values`` distinct values, each seen twice on average: an id
    or an amount has about as many values as messages and predicts nothing.
    """
    return (
        field_values.where((F.col("values") <= max_values) & (F.col("values") * 2 <= F.col("messages")))
        .select("field")
        .orderBy("field")
    )


def message_features(enriched: DataFrame, fields: Sequence[str] = ()) -> DataFrame:
    """Return ``(id, items)``: the items pattern mining sees in each dead letter.

    Items: ``queue=`` source queue, ``error_type=`` and ``signature=`` of its
    cause, ``shape=`` payload shape id, ``client=`` id of the poster, ``hour=``
    UTC hour of day it was posted, ``reason=``, and ``<field>=<value>`` for each
    of ``fields`` (JSON paths such as ``currency`` or ``customer.tier``) with a
    scalar value.
    """
    hour = F.lpad(F.floor(F.col("first_posted_at") % 86400 / 3600).cast("int").cast("string"), 2, "0")
    items = [
        F.concat(F.lit("queue="), F.col("source_queue")),
        F.concat(F.lit("error_type="), F.coalesce(F.col("cause_error_type"), F.lit(NO_ERROR_TYPE))),
        F.concat(F.lit("signature="), F.col("cause_signature_id")),
        F.concat(F.lit("shape="), F.col("shape_id")),
        F.when(
            F.coalesce(F.col("client_id"), F.lit("")) != "", F.concat(F.lit("client="), F.col("client_id"))
        ),
        F.concat(F.lit("hour="), hour),
        F.concat(F.lit("reason="), F.col("reason")),
    ]
    for field in fields:
        value = F.get_json_object(F.col("body"), "$." + field)
        scalar = value.isNotNull() & ~value.startswith("{") & ~value.startswith("[")
        items.append(F.when(scalar, F.concat(F.lit(field + "="), F.substring(value, 1, FIELD_VALUE_LENGTH))))
    listed = F.filter(F.array(*items), lambda item: item.isNotNull())
    return enriched.select("id", F.array_sort(F.array_distinct(listed)).alias("items"))


def _is_cause(item: Column) -> Column:
    condition = F.lit(False)
    for prefix in CAUSE_ITEMS:
        condition = condition | item.startswith(prefix)
    return condition


def cause_rules(rules: DataFrame, itemsets: DataFrame, max_antecedent: int = 2) -> DataFrame:
    """Keep the association rules that point at a cause, without the redundant ones.

    ``rules`` has FP-Growth's columns (antecedent, consequent, confidence,
    lift, support), ``itemsets`` its frequent itemsets (items, freq). Kept:
    one cause item concluded (an error type or a signature) from items that
    are not causes, with lift above 1 and at most ``max_antecedent`` items
    (longer rules mostly combine items that always go together, such as a
    queue and its body type, and their number grows exponentially with those
    items). Dropped, when another rule concludes
    the same at least as confidently: a rule whose antecedent has a subset
    that does, and a rule whose messages are a strict part of the other's
    (every message with its antecedent also has the other's, and the other
    covers more), since the broader rule explains it; and a signature rule
    that says no more than the error-type rule with the same antecedent and
    support (an error type with a single signature). Sorted by confidence,
    lift, then support.
    """
    candidates = rules.where(
        (F.size("consequent") == 1)
        & _is_cause(F.col("consequent")[0])
        & ~F.exists("antecedent", _is_cause)
        & (F.col("lift") > 1.0)
        & (F.size("antecedent") <= max_antecedent)
    ).select(F.array_sort("antecedent").alias("antecedent"), "consequent", "confidence", "lift", "support")
    # rules and itemsets are few (thousands): broadcast joins keep this to a stage or two
    freq = F.broadcast(itemsets.select(F.array_sort("items").alias("items"), "freq"))
    a, b = candidates.alias("a"), F.broadcast(candidates.alias("b"))
    pairs = a.join(
        b,
        (F.col("a.consequent") == F.col("b.consequent"))
        & (F.col("a.antecedent") != F.col("b.antecedent"))
        & (F.col("b.confidence") >= F.col("a.confidence") - 1e-9),
    ).select(
        F.col("a.antecedent").alias("antecedent"),
        F.col("a.consequent").alias("consequent"),
        F.col("b.antecedent").alias("other"),
        F.array_sort(F.array_union("a.antecedent", "b.antecedent")).alias("both"),
    )
    counted = (
        pairs.join(
            freq.withColumnRenamed("items", "antecedent").withColumnRenamed("freq", "own"), "antecedent"
        )
        .join(freq.withColumnRenamed("items", "other").withColumnRenamed("freq", "others"), "other")
        .join(freq.withColumnRenamed("items", "both").withColumnRenamed("freq", "shared"), "both")
    )
    subset = F.size(F.array_except("other", "antecedent")) == 0
    redundant = counted.where((subset | (F.col("others") > F.col("own"))) & (F.col("shared") == F.col("own")))
    kept = candidates.join(
        F.broadcast(redundant.select("antecedent", "consequent").distinct()),
        ["antecedent", "consequent"],
        "left_anti",
    )
    by_type = kept.where(F.col("consequent")[0].startswith("error_type=")).select(
        "antecedent", F.col("support").alias("type_support")
    )
    repeated = (
        kept.where(F.col("consequent")[0].startswith("signature="))
        .join(F.broadcast(by_type), "antecedent")
        .where(F.abs(F.col("support") - F.col("type_support")) < 1e-12)
        .select("antecedent", "consequent")
    )
    return (
        kept.join(F.broadcast(repeated), ["antecedent", "consequent"], "left_anti")
        .select("antecedent", "consequent", "confidence", "lift", "support")
        .orderBy(
            F.desc("confidence"),
            F.desc("lift"),
            F.desc("support"),
            F.col("antecedent").cast("string"),
            F.col("consequent").cast("string"),
        )
    )


def association_rules(
    features: DataFrame, min_support: float, min_confidence: float, max_antecedent: int = 2
) -> DataFrame:
    """Mine the features with FP-Growth and return :func:`cause_rules` of its association rules.

    Columns: antecedent, consequent, confidence, lift, support (share of all
    dead letters that have every item of the rule).
    """
    from pyspark.ml.fpm import FPGrowth

    model = FPGrowth(itemsCol="items", minSupport=min_support, minConfidence=min_confidence).fit(features)
    # the model's rules are recomputed from the mined RDD on every action: materialise them once
    return cause_rules(
        model.associationRules.localCheckpoint(eager=True),
        model.freqItemsets.where(F.size("items") <= max_antecedent * 2).localCheckpoint(eager=True),
        max_antecedent,
    )


# -- time ----------------------------------------------------------------------------------------


def dead_letters_per_hour(dead_letters: DataFrame) -> DataFrame:
    """Return ``(project, source_queue, hour, messages)``: dead letters per hour of dead-lettering."""
    hour = (F.floor(F.col("dead_lettered_at") / 3600) * 3600).cast("long")
    return (
        dead_letters.groupBy("project", "source_queue", hour.alias("hour"))
        .agg(F.count(F.lit(1)).alias("messages"))
        .orderBy("project", "source_queue", "hour")
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
    """Return ``(project, queue, source_queue, reason, messages, first, last)`` (dead-lettering times)."""
    return (
        dead_letters.groupBy("project", "queue", "source_queue", "reason")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.min("dead_lettered_at").alias("first"),
            F.max("dead_lettered_at").alias("last"),
        )
        .orderBy("project", "queue", "source_queue", "reason")
    )
