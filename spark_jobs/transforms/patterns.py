"""Frequent patterns: the items of each dead letter, and the rules that name a cause."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_jobs.transforms.fields import body_schema, path_items

#: kinds of items that name a cause: rules conclude one of these from the others
CAUSE_ITEMS = ("error_type=", "signature=")
NO_ERROR_TYPE = "(none)"
#: how much more often than in the rest of its queue a cause must come with an item that explains it
SEPARATION = 0.1
#: items that only say where a dead letter came from (source queue, payload shape, poster)
SOURCE_ITEMS = ("queue=", "shape=", "client=")
#: items about how or when a message failed rather than what it carried
CONTEXT_ITEMS = ("reason=", "hour=")
#: body paths that name the poster, tried in order: a ``client=`` item shows this label, not the Client-ID
CLIENT_LABEL_PATHS = ("producer", "client_name", "client.name")


def message_features(
    enriched: DataFrame, fields: Sequence[str] = (), client_labels: Sequence[str] = CLIENT_LABEL_PATHS
) -> DataFrame:
    """Return ``(id, project, source_queue, items)``: the items pattern mining sees in each dead letter.

    Items: ``queue=`` source queue, ``error_type=`` and ``signature=`` of its
    cause, ``shape=`` payload shape id, ``client=`` the poster (the first of
    ``client_labels`` the body carries as text, else its Client-ID), ``hour=``
    UTC hour of day it was posted, ``reason=``, and ``<path>=<value>`` for
    each of ``fields`` (body paths such as ``currency``, ``card.network`` or
    ``items[].sku``). The body is parsed once, by ``from_json``.
    """
    fields = [f for f in fields if f not in client_labels]
    parsed = F.col("parsed")  # a column of its own, parsed once (see body_field_profile)
    label = F.coalesce(*[_text(parsed, path) for path in client_labels], F.col("client_id"))
    hour = F.lpad(F.floor(F.col("first_posted_at") % 86400 / 3600).cast("int").cast("string"), 2, "0")
    items = F.array(
        F.concat(F.lit("queue="), F.col("source_queue")),
        F.concat(F.lit("error_type="), F.coalesce(F.col("cause_error_type"), F.lit(NO_ERROR_TYPE))),
        F.concat(F.lit("signature="), F.col("cause_signature_id")),
        F.concat(F.lit("shape="), F.col("shape_id")),
        F.when(F.coalesce(label, F.lit("")) != "", F.concat(F.lit("client="), label)),
        F.concat(F.lit("hour="), hour),
        F.concat(F.lit("reason="), F.col("reason")),
    )
    listed = F.concat(F.filter(items, lambda item: item.isNotNull()), path_items(parsed, fields))
    return enriched.select(
        "*", F.from_json("body", body_schema([*fields, *client_labels])).alias("parsed")
    ).select("id", "project", "source_queue", F.array_sort(F.array_distinct(listed)).alias("items"))


def _text(parsed: Column, path: str) -> Column:
    value = parsed
    for key in path.split("."):
        value = value.getField(key)
    return F.when(value.startswith("{") | value.startswith("[") | (value == ""), None).otherwise(value)


def _is_cause(item: Column) -> Column:
    condition = F.lit(False)
    for prefix in CAUSE_ITEMS:
        condition = condition | item.startswith(prefix)
    return condition


def _starts_with_any(item: Column, prefixes: Sequence[str]) -> Column:
    condition = F.lit(False)
    for prefix in prefixes:
        condition = condition | item.startswith(prefix)
    return condition


def signal_items(
    features: DataFrame, min_messages: int, min_confidence: float, separation: float = SEPARATION
) -> DataFrame:
    """Return ``(item)``: the items that can carry signal, the only ones mined further.

    ``features`` has project, source_queue and items (:func:`message_features`).
    In its source queue, an item must be on at least ``min_messages`` dead
    letters with one cause item (``error_type=`` or ``signature=``), at
    least ``min_confidence`` of the queue's dead letters with the item, and
    either separate that cause from the rest of the queue (its share of the
    cause is ``separation`` above the queue's) or, unless it is a
    :data:`CONTEXT_ITEMS` item, be on every dead letter of the queue (then it
    explains as much as the queue: the pruning of :func:`cause_rules` decides).
    One aggregation of (queue, item, error type, signature) counts; the rest
    works on its few rows.
    """
    queue = ["project", "source_queue"]
    exploded = features.select(
        *queue,
        F.explode(F.filter("items", lambda i: ~_is_cause(i))).alias("item"),
        F.filter("items", lambda i: i.startswith("error_type="))[0].alias("error_type"),
        F.filter("items", lambda i: i.startswith("signature="))[0].alias("signature"),
    )
    counted = exploded.groupBy(*queue, "item", "error_type", "signature").agg(F.count(F.lit(1)).alias("n"))
    per_cause = (
        counted.select(*queue, "item", "n", F.explode(F.array("error_type", "signature")).alias("cause"))
        .groupBy(*queue, "item", "cause")
        .agg(F.sum("n").alias("n"))
        .withColumn("total", F.sum(F.when(F.col("cause").startswith("error_type="), F.col("n"))).over(
            Window.partitionBy(*queue, "item")
        ))
    )
    queue_item = F.concat(F.lit("queue="), F.col("source_queue"))
    whole = per_cause.where(F.col("item") == queue_item).select(
        *queue, "cause", F.col("n").alias("queue_n"), F.col("total").alias("queue_total")
    )
    share = F.col("n") / F.col("total")
    separates = share - F.col("queue_n") / F.col("queue_total") >= separation
    whole_queue = F.col("total") == F.col("queue_total")
    return (
        per_cause.join(whole, [*queue, "cause"])
        .where(
            (F.col("n") >= min_messages)
            & (share >= min_confidence)
            & (separates | (whole_queue & ~_starts_with_any(F.col("item"), CONTEXT_ITEMS)))
        )
        .select("item")
        .distinct()
        .orderBy("item")
    )


def cause_rules(
    rules: DataFrame,
    itemsets: DataFrame,
    max_antecedent: int = 2,
    source_items: Sequence[str] = SOURCE_ITEMS,
) -> DataFrame:
    """Keep the association rules that point at a cause, without the redundant ones, best first.

    ``rules`` has FP-Growth's columns (antecedent, consequent, confidence,
    lift, support), ``itemsets`` its frequent itemsets (items, freq). Kept:
    one cause item concluded (an error type or a signature) from items that
    are not causes, with lift above 1 and at most ``max_antecedent`` items.
    Dropped, when another rule concludes the same at least as confidently
    and every message of the rule has the other's antecedent: a rule whose
    antecedent has a subset that does, a rule whose messages are a strict
    part of the other's (the broader rule explains it), and a rule whose
    antecedent only restates where the dead letters came from (every item
    starts with one of ``source_items``: queue, shape, client, a message
    type) when the other names a body field (an item neither of
    ``source_items`` nor of :data:`CONTEXT_ITEMS`); and a
    signature rule that says no more than the error-type rule with the same
    antecedent and support. Sorted by the share of dead letters a rule
    explains beyond the rate of its conclusion alone (support x (1 - 1/lift)),
    then confidence.
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
    restates = F.forall("antecedent", lambda i: _starts_with_any(i, source_items)) & F.exists(
        "other", lambda i: ~_starts_with_any(i, (*source_items, *CONTEXT_ITEMS))
    )
    redundant = counted.where(
        (subset | (F.col("others") > F.col("own")) | restates) & (F.col("shared") == F.col("own"))
    )
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
            F.desc(F.round(F.col("support") * (1 - 1 / F.col("lift")), 12)),
            F.desc("confidence"),
            F.col("antecedent").cast("string"),
            F.col("consequent").cast("string"),
        )
    )


def association_rules(
    features: DataFrame,
    min_support: float,
    min_confidence: float,
    max_antecedent: int = 2,
    items: Sequence[str] | None = None,
    source_items: Sequence[str] = SOURCE_ITEMS,
) -> DataFrame:
    """Mine the features with FP-Growth and return :func:`cause_rules` of its association rules.

    ``items``: the non-cause items to mine (:func:`signal_items`); the others
    are left out of each transaction first (every transaction stays, so
    supports remain shares of all dead letters). Columns: antecedent,
    consequent, confidence, lift, support.
    """
    from pyspark.ml.fpm import FPGrowth

    if items is not None:
        keep = F.array(*[F.lit(i) for i in items]) if items else F.array().cast("array<string>")
        features = features.select(
            "id", F.filter("items", lambda i: _is_cause(i) | F.array_contains(keep, i)).alias("items")
        )
    model = FPGrowth(itemsCol="items", minSupport=min_support, minConfidence=min_confidence).fit(features)
    # the model's rules are recomputed from the mined RDD on every action: materialise them once
    return cause_rules(
        model.associationRules.localCheckpoint(eager=True),
        model.freqItemsets.where(F.size("items") <= max_antecedent * 2).localCheckpoint(eager=True),
        max_antecedent,
        source_items,
    )


