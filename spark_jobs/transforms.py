"""The DLQ report's analyses: pure DataFrame transforms of dead-letter rows.

Each public function takes DataFrames and returns a DataFrame; none reads or
writes anything, so each is tested on a few literal rows. The input is the
row shape of :data:`spark_jobs.sources.rows.DEAD_LETTER_DDL`, enriched once by
:func:`enrich` with each message's cause (its last failure) and payload shape.
Times stay POSIX seconds; ``hour`` columns are the POSIX second an hour starts.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.signatures import ID_LENGTH, MASK_NEEDLES, MASKS, MAX_LENGTH, NO_REASON, signature_id
from zaqar_lite.claims.encryption import ENVELOPE

EXAMPLES = 3
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


def _mask(pattern: str, replacement: str) -> Callable[[Column], Column]:
    """Return the function applying one mask to a text (a lambda of ``transform``: one argument)."""
    needles = MASK_NEEDLES.get(pattern)
    if not needles:
        return lambda text: F.regexp_replace(text, pattern, replacement)
    # a plain substring test is far cheaper than a regular expression that finds nothing
    return lambda text: F.when(
        functools.reduce(operator.or_, [text.contains(n) for n in needles]),
        F.regexp_replace(text, pattern, replacement),
    ).otherwise(text)


def mask_texts(texts: Column) -> Column:
    """Return an ``array<string>`` of error texts with their variable parts masked (``mask_error``).

    One pass over the array per mask, so that each mask reads its text as a
    lambda variable: a mask whose literal needle (:data:`MASK_NEEDLES`) is
    absent costs a substring search, not a regular expression.
    """
    for pattern, replacement in MASKS:
        texts = F.transform(texts, _mask(pattern, replacement))
    return F.transform(texts, lambda text: F.substring(F.trim(text), 1, MAX_LENGTH))


def masked_error(error: Column) -> Column:
    """Return the error text with its variable parts masked (``signatures.mask_error``, in Spark)."""
    return mask_texts(F.array(error))[0]


def signature_of(kind: Column, masked: Column) -> Column:
    """Return a signature from a trimmed error type and a masked error text (both never null).

    Each argument is read twice: pass columns or lambda variables, not the
    masking itself, which would then run once per reference.
    """
    text = F.concat_ws(": ", F.when(kind != "", kind), F.when(masked != "", masked))
    return F.when(text == "", F.lit(NO_REASON)).otherwise(text)


def signature_text(error_type: Column, error: Column) -> Column:
    """Return the signature of a failure (``signatures.signature``, in Spark).

    The masked text is bound once by a one-element ``transform``, so its
    regular expressions run once per failure.
    """
    kind = F.trim(F.coalesce(error_type, F.lit("")))
    masked = F.array(masked_error(F.coalesce(error, F.lit(""))))
    return F.transform(masked, lambda m: signature_of(kind, m))[0]


def short_hash(text: Column) -> Column:
    """Return the first hex digits of the SHA-1 of a text (``signatures.signature_id``, in Spark)."""
    return F.substring(F.sha1(text), 1, ID_LENGTH)


def failure_events(enriched: DataFrame) -> DataFrame:
    r"""Return one row per recorded failure of the :func:`enrich`\ ed rows, with its signature.

    A dead letter without any failure (claims that lapsed, releases without a
    reason, expiry) counts as one failure with no reason at its dead-lettering time.
    """
    exploded = enriched.select(
        "project", "queue", "source_queue", "id", "dead_lettered_at", F.explode_outer("signed").alias("f")
    )
    return exploded.select(
        "project",
        "queue",
        "source_queue",
        "id",
        F.coalesce(F.col("f.at"), F.col("dead_lettered_at")).alias("at"),
        F.col("f.error_type").alias("error_type"),
        F.col("f.error").alias("error"),
        F.coalesce(F.col("f.signature"), F.lit(NO_REASON)).alias("signature"),
        F.coalesce(F.col("f.signature_id"), F.lit(signature_id(NO_REASON))).alias("signature_id"),
    )


def signature_members(enriched: DataFrame) -> DataFrame:
    """Return one row per dead letter and signature it failed with (for id files and signatures).

    Columns: project, queue (the DLQ), source_queue, signature_id, id,
    signature, error_type, failures (how often that message failed so),
    first_seen, last_seen, example_error (the smallest original text).
    """
    keys = ["project", "queue", "source_queue", "signature_id", "id"]
    return failure_events(enriched).groupBy(*keys).agg(
        F.min("signature").alias("signature"),
        F.min("error_type").alias("error_type"),
        F.count(F.lit(1)).alias("failures"),
        F.min("at").alias("first_seen"),
        F.max("at").alias("last_seen"),
        F.min("error").alias("example_error"),
    )


def _smallest_ids(count: int = EXAMPLES) -> Column:
    return F.slice(F.array_sort(F.collect_list("id")), 1, count)


def failure_signatures(members: DataFrame) -> DataFrame:
    """Return the failure signatures of each DLQ and source queue, most widespread first.

    ``members`` is :func:`signature_members`. Columns: project, queue,
    source_queue, signature_id, signature, error_type, failures (occurrences
    in the histories), messages (dead letters that failed that way at least
    once), first_seen, last_seen, example_error (one original text),
    examples (the smallest message ids).
    """
    keys = ["project", "queue", "source_queue", "signature_id"]
    return (
        members.groupBy(*keys)
        .agg(
            F.min("signature").alias("signature"),
            F.min("error_type").alias("error_type"),
            F.sum("failures").alias("failures"),
            F.count(F.lit(1)).alias("messages"),
            F.min("first_seen").alias("first_seen"),
            F.max("last_seen").alias("last_seen"),
            F.min("example_error").alias("example_error"),
            _smallest_ids().alias("examples"),
        )
        .orderBy(F.desc("messages"), F.desc("failures"), *keys)
    )


# -- payload shapes -------------------------------------------------------------------------------


#: Python type -> JSON type name, in the order they are tried (bool is an int)
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"), (int, "integer"), (float, "number"),
    (str, "string"), (dict, "object"), (list, "array"),
)
#: the scalar JSON types: a body path of one of these becomes a pattern-mining candidate
SCALAR_TYPES = ("string", "integer", "number", "boolean")
#: Spark's variant types as JSON names them (``schema_of_variant`` says ``DECIMAL(5,2)`` for 1.25)
_VARIANT_TYPES = (
    (r"DECIMAL\(\d+,\s*\d+\)|DOUBLE|FLOAT", "NUMBER"),
    (r"BIGINT|INT|SMALLINT|TINYINT", "INTEGER"),
)


def _json_type(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "null")


def body_paths(body: str | None) -> list[str]:
    """Return the sorted ``path:type`` entries of a JSON text (``$`` the root, ``a.b``, ``items[]``).

    Paths below :data:`SHAPE_MAX_DEPTH` are left out and at most
    :data:`SHAPE_MAX_PATHS` are kept; text that is not JSON reads ``$:invalid``.
    Plain Python: the report runs it on the driver, on one example body per shape.
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


def body_structure(body: Column) -> Column:
    """Return a body's structure as text: keys and JSON types, values left out (``INVALID`` if not JSON).

    Spark's own ``schema_of_variant`` (no Python on the executors), with its
    numeric types folded into JSON's ``NUMBER`` and ``INTEGER`` so that 1.5
    and 12.25 have one structure.
    """
    structure = F.schema_of_variant(F.try_parse_json(body))
    for pattern, name in _VARIANT_TYPES:
        structure = F.regexp_replace(structure, rf"(^|[:<]\s?)(?:{pattern})(?![A-Z])", rf"$1{name}")
    return F.coalesce(structure, F.lit("INVALID"))


def enrich(dead_letters: DataFrame) -> DataFrame:
    """Sign each failure once and add each message's cause and payload shape; the report caches the result.

    ``failures`` becomes ``signed``: per failure at, error_type (trimmed),
    error, signature and signature_id, masked once here by a higher-order
    function (every later table reads them). New columns: cause_error_type
    and cause_signature / cause_signature_id (of the last failure, the one
    that used up the message's last claim; see :func:`failure_events` for
    messages without one) and shape_id (short hash of :func:`body_structure`).
    ``last_claim_id`` is left out.
    """
    # every expression once per failure: a lambda's body is not deduplicated, so the masked texts
    # (eleven regular expressions, the cost of this pass) are a column of their own, read by index
    failures = F.coalesce(F.col("failures"), F.array())
    masked_texts = dead_letters.select(
        "*", mask_texts(F.transform(failures, lambda f: F.coalesce(f["error"], F.lit("")))).alias("masked")
    )
    masked = F.transform(
        failures,
        lambda f, i: F.struct(
            f["at"].alias("at"),
            F.trim(f["error_type"]).alias("error_type"),
            f["error"].alias("error"),
            F.trim(F.coalesce(f["error_type"], F.lit(""))).alias("kind"),
            F.col("masked")[i].alias("masked"),
        ),
    )
    texts = masked_texts.select(
        *[c for c in dead_letters.columns if c not in ("failures", "last_claim_id")],
        F.transform(
            masked,
            lambda f: F.struct(
                f["at"].alias("at"),
                f["error_type"].alias("error_type"),
                f["error"].alias("error"),
                signature_of(f["kind"], f["masked"]).alias("signature"),
            ),
        ).alias("texts"),
    )
    signed = F.transform(
        "texts",
        lambda f: F.struct(
            f["at"].alias("at"),
            f["error_type"].alias("error_type"),
            f["error"].alias("error"),
            f["signature"].alias("signature"),
            short_hash(f["signature"]).alias("signature_id"),
        ),
    )
    last = F.element_at(F.col("signed"), -1)
    has_failure = F.size("signed") > 0
    return (
        texts.select("*", signed.alias("signed"))
        .drop("texts")
        .select(
            "*",
            F.when(has_failure, last["error_type"]).alias("cause_error_type"),
            F.when(has_failure, last["signature"]).otherwise(F.lit(NO_REASON)).alias("cause_signature"),
            F.when(has_failure, last["signature_id"])
            .otherwise(F.lit(signature_id(NO_REASON)))
            .alias("cause_signature_id"),
            short_hash(body_structure(F.col("body"))).alias("shape_id"),
        )
    )


def payload_shapes(enriched: DataFrame) -> DataFrame:
    """Return the payload shapes of each source queue, most common first.

    Columns: project, source_queue, shape_id, messages, example_body (the
    smallest body of the shape), examples (the smallest message ids).
    :func:`shape_paths` lists each shape's paths from its example, on the driver.
    """
    keys = ["project", "source_queue", "shape_id"]
    return (
        enriched.groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.min("body").alias("example_body"),
            _smallest_ids().alias("examples"),
        )
        .orderBy(F.desc("messages"), *keys)
    )


def shape_paths(shapes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return :func:`payload_shapes` rows with ``paths`` and ``missing_paths`` instead of the example body.

    ``missing_paths``: paths other shapes of the same source queue have and this one lacks.
    """
    listed = [{**row, "paths": body_paths(row["example_body"])} for row in shapes]
    every: dict[tuple[str, str], set[str]] = {}
    for row in listed:
        every.setdefault((row["project"], row["source_queue"]), set()).update(row["paths"])
    return [
        {
            **{k: v for k, v in row.items() if k != "example_body"},
            "missing_paths": sorted(every[(row["project"], row["source_queue"])] - set(row["paths"])),
        }
        for row in listed
    ]


# -- candidate causes from the body -----------------------------------------------------------------


def scalar_paths(paths: Iterable[str]) -> list[str]:
    """Return the body paths with scalar values that pattern mining can read, sorted.

    ``paths`` are ``path:type`` entries (:func:`body_paths`). Left out: the
    root, paths under more than one array, keys that would not read back
    (``=``, ``[`` or an empty key), and the fields of a body encrypted at rest
    (its key id, nonce and ciphertext say nothing of why it failed; the report
    does not decrypt).
    """
    found = set()
    for entry in paths:
        path, _, kind = entry.rpartition(":")
        if kind not in SCALAR_TYPES or path.startswith(("$", ENVELOPE)) or path.count("[]") > 1 \
                or "=" in path:
            continue
        keys = [part.removesuffix("[]") for part in path.split(".")]
        if all(key and "[" not in key and "]" not in key for key in keys):
            found.add(path)
    return sorted(found)


def _tree(paths: Iterable[str]) -> dict[str, tuple[bool, dict[str, Any]]]:
    tree: dict[str, tuple[bool, dict[str, Any]]] = {}
    for path in paths:
        node = tree
        for part in path.split("."):
            key = part.removesuffix("[]")
            is_array, children = node.get(key, (False, {}))
            node[key] = (is_array or part.endswith("[]"), children)
            node = children
    return tree


def _struct(tree: dict[str, tuple[bool, dict[str, Any]]]) -> T.StructType:
    fields = []
    for key, (is_array, children) in sorted(tree.items()):
        kind: T.DataType = _struct(children) if children else T.StringType()
        fields.append(T.StructField(key, T.ArrayType(kind) if is_array else kind))
    return T.StructType(fields)


def body_schema(paths: Iterable[str]) -> T.StructType:
    """Return the ``from_json`` schema that reads every path of ``paths`` (scalars read as text)."""
    return _struct(_tree(paths))


def path_items(parsed: Column, paths: Sequence[str]) -> Column:
    """Return ``array<string>`` of ``<path>=<value>`` items of a body parsed with :func:`body_schema`.

    A path under an array gives one item per distinct value; values are cut
    to :data:`FIELD_VALUE_LENGTH` characters; objects and arrays met where a
    scalar was expected are left out.
    """
    parts = []
    for path in paths:
        value = parsed
        for part in path.split("."):
            value = value.getField(part.removesuffix("[]"))
        if "[]" in path:  # a body without the array has none of its items (not a null list)
            values = F.array_distinct(F.coalesce(value, F.array().cast("array<string>")))
        else:
            values = F.array(value)
        scalars = F.filter(values, lambda v: v.isNotNull() & ~v.startswith("{") & ~v.startswith("["))
        parts.append(F.transform(scalars, _item_of(path)))
    return F.flatten(F.array(*parts)) if parts else F.array().cast("array<string>")


def _item_of(path: str) -> Callable[[Column], Column]:
    """Return the function making ``<path>=<value>`` of a value (a lambda of ``transform``: one argument)."""
    prefix = F.lit(path + "=")
    return lambda value: F.concat(prefix, F.substring(value, 1, FIELD_VALUE_LENGTH))


def body_field_profile(enriched: DataFrame, paths: Sequence[str]) -> DataFrame:
    """Return per body path: messages with a value, distinct values, most distinct values in one queue.

    Columns: field, messages, values, queue_values. The report reads a sample
    and keeps the paths with few values (:func:`categorical_fields`); a path
    with one value in every source queue (a message type) only restates the source.
    """
    # the parsed body is a column of its own: referenced in a lambda, an expression runs once per reference
    items = enriched.select(
        "project", "source_queue", "id", F.from_json("body", body_schema(paths)).alias("parsed")
    ).select(
        "project",
        "source_queue",
        "id",
        F.explode(path_items(F.col("parsed"), paths)).alias("item"),
    ).select(
        "project",
        "source_queue",
        "id",
        F.substring_index("item", "=", 1).alias("field"),
        F.expr("substr(item, instr(item, '=') + 1)").alias("value"),
    )
    per_queue = items.groupBy("project", "source_queue", "field").agg(
        F.countDistinct("value").alias("queue_values")
    )
    overall = items.groupBy("field").agg(
        F.countDistinct("id").alias("messages"), F.countDistinct("value").alias("values")
    )
    return (
        overall.join(per_queue.groupBy("field").agg(F.max("queue_values").alias("queue_values")), "field")
        .select("field", "messages", "values", "queue_values")
        .orderBy("field")
    )


def categorical_fields(profile: DataFrame, max_values: int) -> DataFrame:
    """Return ``(field, source_level)`` of the :func:`body_field_profile` paths that look categorical.

    At most ``max_values`` distinct values, each seen twice on average: an id
    or an amount has about as many values as messages and predicts nothing.
    ``source_level``: one value in every source queue, so the field says no
    more than where the message came from.
    """
    return (
        profile.where((F.col("values") <= max_values) & (F.col("values") * 2 <= F.col("messages")))
        .select("field", (F.col("queue_values") <= 1).alias("source_level"))
        .orderBy("field")
    )


# -- frequent patterns ----------------------------------------------------------------------------


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


# -- time ----------------------------------------------------------------------------------------


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
