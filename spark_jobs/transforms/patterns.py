"""Frequent patterns: the items of each dead letter, and the rules that name a cause."""

from __future__ import annotations

import decimal
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
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
#: what sits between a body path and a value in a negated item: ``card.network!=amex``
NEGATION = "!="
#: fewest listed values a body path needs for its negated items (with two, a negation is the other value)
NEGATED_MIN_VALUES = 3
#: share of one cause's dead letters in its queue that an item not predictive alone must be on to be mined
CONJUNCT_COVERAGE = 0.5


def negations(
    fields: Sequence[str], listed: Mapping[str, Sequence[str] | None], source_fields: Sequence[str] = ()
) -> dict[str, list[str]]:
    """Return the body paths whose values are also negated items, each with those values.

    ``listed``: each path's values (``None``: too many to list). A path that
    only restates the source, or has fewer than :data:`NEGATED_MIN_VALUES`
    values, has none: ``<path>!=<value>`` would say what another item says;
    nor has a path named as an item the report makes itself (``queue``, ``client``...).
    """
    own = {prefix.removesuffix("=") for prefix in (*CAUSE_ITEMS, *SOURCE_ITEMS, *CONTEXT_ITEMS)}
    return {
        field: sorted(listed[field] or ())
        for field in fields
        if field not in source_fields and field not in own
        and len(listed.get(field) or ()) >= NEGATED_MIN_VALUES
    }


def is_negated(item: str) -> bool:
    """Say whether an item is a negated one (``<path>!=<value>``): no body path has ``=`` or ``!``."""
    path, equals, _ = item.partition("=")
    return bool(equals) and path.endswith("!")


def item_path(item: str) -> str:
    """Return what an item is about: ``card.network`` of ``card.network=amex`` and ``card.network!=visa``."""
    return item.partition("=")[0].removesuffix("!")


def message_features(
    enriched: DataFrame, fields: Sequence[str] = (), client_labels: Sequence[str] = CLIENT_LABEL_PATHS
) -> DataFrame:
    """Return ``(id, project, source_queue, items)``: the items pattern mining sees in each dead letter.

    Items: ``queue=`` source queue, ``error_type=`` and ``signature=`` of its
    cause, ``shape=`` payload shape id, ``client=`` the poster (the first of
    ``client_labels`` the body carries as text, else its Client-ID), ``hour=``
    UTC hour of day it was posted, ``reason=``, and ``<path>=<value>`` for
    each of ``fields`` (body paths such as ``currency``, ``card.network`` or
    ``items[].sku``). The body is parsed once, by ``from_json``. Negated
    items are not listed: :func:`signal_counts` counts them from these and
    :func:`association_rules` adds those with signal.
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


def _has_path(items: Column, path: str) -> Column:
    """Return whether a dead letter's items name a value of a body path."""
    return F.exists(items, lambda i: i.startswith(path + "="))


def negated_items(items: Column, negated: Iterable[str]) -> Column:
    """Return ``array<string>`` of the negated items (``<path>!=<value>``) of ``negated`` that hold.

    One holds when the dead letter's items name a value of the path and not
    that one (a body without the path has none of its negations).
    """
    held = [
        F.when(_has_path(items, item_path(item)) & ~F.array_contains(items, item.replace(NEGATION, "=", 1)),
               F.lit(item))
        for item in sorted(negated)
    ]
    if not held:
        return F.array().cast("array<string>")
    return F.filter(F.array(*held), lambda item: item.isNotNull())


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


def signal_counts(features: DataFrame, negated_paths: Iterable[str] = ()) -> DataFrame:
    """Return how many dead letters of each source queue carry each item with each cause.

    ``features`` has project, source_queue and items (:func:`message_features`).
    Columns: project, source_queue, item (not a cause item), error_type and
    signature (the message's cause items), n. One aggregation; its rows are
    few at any size (queues x items x causes), so :func:`signal_items`
    finishes on the driver. For each of ``negated_paths``, the item
    ``<path>!=`` counts the dead letters with a value of the path: less those
    with one value, they are those without it (:func:`signal_items`), so a
    dead letter carries one item per path, not one per value it has not.
    """
    queue = ["project", "source_queue"]
    present = [
        F.when(_has_path(F.col("items"), path), F.lit(path + NEGATION)) for path in sorted(negated_paths)
    ]
    listed = F.filter("items", lambda i: ~_is_cause(i))
    if present:
        listed = F.concat(listed, F.filter(F.array(*present), lambda i: i.isNotNull()))
    exploded = features.select(
        *queue,
        F.explode(listed).alias("item"),
        F.filter("items", lambda i: i.startswith("error_type="))[0].alias("error_type"),
        F.filter("items", lambda i: i.startswith("signature="))[0].alias("signature"),
    )
    return exploded.groupBy(*queue, "item", "error_type", "signature").agg(F.count(F.lit(1)).alias("n"))


def negated_counts(
    counts: Iterable[Mapping[str, Any]], negated: Mapping[str, Sequence[str]]
) -> list[dict[str, Any]]:
    """Return :func:`signal_counts` rows with each ``<path>!=`` row made one row per negated item.

    ``<path>!=<value>``: the dead letters with a value of the path (the
    ``<path>!=`` row) less those with that value (the ``<path>=<value>`` row
    of the same queue and causes); none is listed for none.
    """
    rows = [dict(row) for row in counts]
    key = ("project", "source_queue", "error_type", "signature")
    with_value = {(*(row[k] for k in key), row["item"]): row["n"] for row in rows}
    listed = []
    for row in rows:
        path = row["item"].removesuffix(NEGATION)
        if not row["item"].endswith(NEGATION) or path not in negated:
            listed.append(row)
            continue
        for value in negated[path]:
            n = row["n"] - with_value.get((*(row[k] for k in key), f"{path}={value}"), 0)
            if n > 0:
                listed.append({**row, "item": f"{path}{NEGATION}{value}", "n": n})
    return listed


def signal_items(
    counts: Iterable[Mapping[str, Any]],
    min_messages: int,
    min_confidence: float,
    separation: float = SEPARATION,
    negated: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """Return the items that can carry signal, sorted: the only ones mined further.

    ``counts`` are the rows of :func:`signal_counts`. In its source queue, an
    item must be on at least ``min_messages`` dead letters with one cause
    item (``error_type=`` or ``signature=``), at least ``min_confidence`` of
    the queue's dead letters with the item, and either separate that cause
    from the rest of the queue (its share of the cause is ``separation``
    above the queue's) or, unless it is a :data:`CONTEXT_ITEMS` or a negated
    item, be on every dead letter of the queue (then it explains as much as
    the queue: the pruning of :func:`cause_rules` decides). An item below
    ``min_confidence`` that separates a cause is kept too when it is on at
    least :data:`CONJUNCT_COVERAGE` of the cause's dead letters in the queue:
    with another it may name the cause (``currency=GBP`` and
    ``card.network!=amex``), as MacroBase combines the attributes frequent
    among the outliers and keeps the combinations of high risk ratio.
    ``negated``: the values of each path counted as negated items
    (:func:`negations`, :func:`negated_counts`).
    """
    if negated:
        counts = negated_counts(counts, negated)
    per_cause: dict[tuple[str, str, str, str], int] = {}
    totals: dict[tuple[str, str, str], int] = {}
    for row in counts:
        key = (row["project"], row["source_queue"], row["item"])
        for cause in (row["error_type"], row["signature"]):
            if cause is not None:
                per_cause[(*key, cause)] = per_cause.get((*key, cause), 0) + row["n"]
        if row["error_type"] is not None:  # each dead letter has one error type: its messages with the item
            totals[key] = totals.get(key, 0) + row["n"]
    found = set()
    for (project, source_queue, item, cause), n in per_cause.items():
        queue_item = (project, source_queue, f"queue={source_queue}")
        total, queue_total = totals.get((project, source_queue, item)), totals.get(queue_item)
        queue_n = per_cause.get((*queue_item, cause))
        if total is None or queue_total is None or queue_n is None:
            continue
        separates = n / total - queue_n / queue_total >= separation
        whole_queue = total == queue_total and not item.startswith(CONTEXT_ITEMS) and not is_negated(item)
        predicts = n / total >= min_confidence and (separates or whole_queue)
        conjunct = separates and n / queue_n >= CONJUNCT_COVERAGE
        if n >= min_messages and (predicts or conjunct):
            found.add(item)
    return sorted(found)


def _explained(rule: Mapping[str, Any]) -> float:
    """Return support x (1 - 1/lift) rounded half up to 12 places, as Spark's ``round`` of a double."""
    value = rule["support"] * (1 - 1 / rule["lift"])
    return float(decimal.Decimal(repr(value)).quantize(decimal.Decimal("1e-12"), decimal.ROUND_HALF_UP))


def _array_text(items: Sequence[str]) -> str:
    """Return an item list as Spark casts an ``array<string>`` to text (the rules' last sort keys)."""
    return "[" + ", ".join(items) + "]"


def _candidate(rule: Mapping[str, Any], max_antecedent: int, source_items: tuple[str, ...]) -> bool:
    consequent, antecedent = rule["consequent"], rule["antecedent"]
    negated_paths = [item_path(i) for i in antecedent if is_negated(i)]
    not_values = (*source_items, *CONTEXT_ITEMS)
    values = [i for i in antecedent if not is_negated(i) and not i.startswith(not_values)]
    return (
        len(consequent) == 1
        and consequent[0].startswith(CAUSE_ITEMS)
        and not any(i.startswith(CAUSE_ITEMS) for i in antecedent)
        and rule["lift"] > 1.0
        and len(antecedent) <= max_antecedent
        # a path both negated and named again: one value of it, or a few values of one path, says it
        and not any(sum(item_path(i) == path for i in antecedent) > 1 for path in negated_paths)
        # a negation qualifies a value of the body: alone it names what the dead letters are not
        and (not negated_paths or bool(values))
    )


def _is_redundant(
    rule: Mapping[str, Any], other: Mapping[str, Any], freq: Mapping[tuple[str, ...], int],
    source_items: tuple[str, ...],
) -> bool:
    """Say whether ``other`` makes ``rule`` redundant (see :func:`cause_rules`)."""
    own, others = freq.get(rule["antecedent"]), freq.get(other["antecedent"])
    shared = freq.get(tuple(sorted({*rule["antecedent"], *other["antecedent"]})))
    if own is None or others is None or shared is None or shared != own:
        return False
    subset = set(other["antecedent"]) <= set(rule["antecedent"])
    restates = all(i.startswith(source_items) for i in rule["antecedent"]) and any(
        not i.startswith((*source_items, *CONTEXT_ITEMS)) for i in other["antecedent"]
    )
    return subset or others > own or restates


def cause_rules(
    rules: Iterable[Mapping[str, Any]],
    itemsets: Iterable[Mapping[str, Any]],
    max_antecedent: int = 2,
    source_items: Sequence[str] = SOURCE_ITEMS,
) -> list[dict[str, Any]]:
    """Keep the association rules that point at a cause, without the redundant ones, best first.

    ``rules`` have FP-Growth's fields (antecedent, consequent, confidence,
    lift, support), ``itemsets`` its frequent itemsets (items, freq); both
    are few (hundreds), so this runs on the driver. Kept:
    one cause item concluded (an error type or a signature) from items that
    are not causes, with lift above 1 and at most ``max_antecedent`` items,
    no path of a negated item named twice, and a negated item only beside a
    body value (``currency=GBP card.network!=amex``; an item neither of
    ``source_items`` nor of :data:`CONTEXT_ITEMS`).
    Dropped: a rule whose antecedent has a part that concludes the same on
    its own (only the smallest explanations are listed, as MacroBase's are:
    ``card.network=amex`` and not also ``card.network=amex currency=GBP``); and,
    when another rule concludes the same at least as confidently
    and every message of the rule has the other's antecedent: a rule whose
    antecedent has a subset that does, a rule whose messages are a strict
    part of the other's (the broader rule explains it), and a rule whose
    antecedent only restates where the dead letters came from (every item
    starts with one of ``source_items``: queue, shape, client, a message
    type) when the other names a body field (an item neither of
    ``source_items`` nor of :data:`CONTEXT_ITEMS`); and a
    signature rule that says no more than the error-type rule with the same
    antecedent and support. Sorted by the share of dead letters a rule
    explains beyond the rate of its conclusion alone (support x (1 - 1/lift),
    to 12 places), then confidence, antecedent and consequent.
    Returns dicts of antecedent (sorted), consequent, confidence, lift, support.
    """
    freq = {tuple(sorted(row["items"])): row["freq"] for row in itemsets}
    candidates = [
        {
            "antecedent": tuple(sorted(r["antecedent"])),
            "consequent": tuple(r["consequent"]),
            **{k: r[k] for k in ("confidence", "lift", "support")},
        }
        for r in rules
        if _candidate(r, max_antecedent, tuple(source_items))
    ]
    sources = tuple(source_items)
    concluding: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for rule in candidates:
        concluding.setdefault(rule["consequent"], []).append(rule)
    kept = [
        rule
        for rule in candidates
        if not any(
            other["antecedent"] != rule["antecedent"]
            and (
                set(other["antecedent"]) < set(rule["antecedent"])
                or other["confidence"] >= rule["confidence"] - 1e-9
                and _is_redundant(rule, other, freq, sources)
            )
            for other in concluding[rule["consequent"]]
        )
    ]
    type_supports: dict[tuple[str, ...], list[float]] = {}
    for rule in kept:
        if rule["consequent"][0].startswith("error_type="):
            type_supports.setdefault(rule["antecedent"], []).append(rule["support"])
    listed = [
        rule
        for rule in kept
        if not (
            rule["consequent"][0].startswith("signature=")
            and any(abs(rule["support"] - s) < 1e-12 for s in type_supports.get(rule["antecedent"], ()))
        )
    ]
    listed.sort(key=lambda r: (_array_text(r["antecedent"]), _array_text(r["consequent"])))
    listed.sort(key=lambda r: (_explained(r), r["confidence"]), reverse=True)
    return [
        {"antecedent": list(r["antecedent"]), "consequent": list(r["consequent"]),
         **{k: r[k] for k in ("confidence", "lift", "support")}}
        for r in listed
    ]


def association_rules(
    features: DataFrame,
    min_support: float,
    min_confidence: float,
    max_antecedent: int = 2,
    items: Sequence[str] | None = None,
    source_items: Sequence[str] = SOURCE_ITEMS,
    partitions: int | None = None,
) -> list[dict[str, Any]]:
    """Mine the features with FP-Growth and return :func:`cause_rules` of its association rules.

    ``items``: the non-cause items to mine (:func:`signal_items`), negated
    ones among them (added to the dead letters they hold for); the others
    are left out of each transaction first (every transaction stays, so
    supports remain shares of all dead letters). FP-Growth's rules and its
    itemsets of up to ``2 x max_antecedent`` items are collected (few);
    the pruning runs on the driver. ``partitions``: FP-Growth's own (each
    grows a tree of every transaction holding one of its items: with few
    items, one per core; default the features' partitions). Returns dicts of
    antecedent, consequent, confidence, lift, support.
    """
    from pyspark.ml.fpm import FPGrowth

    if items is not None:
        keep = F.array(*[F.lit(i) for i in items]) if items else F.array().cast("array<string>")
        features = features.select(
            "id",
            F.concat(
                F.filter("items", lambda i: _is_cause(i) | F.array_contains(keep, i)),
                negated_items(F.col("items"), [i for i in items if is_negated(i)]),
            ).alias("items"),
        )
    growth = FPGrowth(itemsCol="items", minSupport=min_support, minConfidence=min_confidence)
    if partitions:
        growth = growth.setNumPartitions(partitions)
    model = growth.fit(features)
    rules = [row.asDict() for row in model.associationRules.collect()]
    itemsets = [
        row.asDict() for row in model.freqItemsets.where(F.size("items") <= max_antecedent * 2).collect()
    ]
    return cause_rules(rules, itemsets, max_antecedent, source_items)
