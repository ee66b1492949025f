"""Candidate causes from the body: its scalar paths, their values, the fields worth mining."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.transforms.shapes import SCALAR_TYPES
from zaqar_lite.rules.encryption import ENVELOPE, ENVELOPE_TEXT

FIELD_VALUE_LENGTH = 40


def encrypted_body(body: Column) -> Column:
    """Return whether a row's body (JSON text) is encrypted at rest: the report never reads such a body."""
    return F.coalesce(body.rlike(ENVELOPE_TEXT), F.lit(False))


def scalar_paths(paths: Iterable[str]) -> list[str]:
    """Return the body paths with scalar values that pattern mining can read, sorted.

    ``paths`` are ``path:type`` entries (:func:`body_paths`). Left out: the
    root, paths under more than one array, keys that would not read back
    (``=``, ``!``, ``[`` or an empty key), and the fields of a body encrypted at rest
    (its key id, nonce and ciphertext say nothing of why it failed; the report
    does not decrypt).
    """
    found = set()
    for entry in paths:
        path, _, kind = entry.rpartition(":")
        if kind not in SCALAR_TYPES or path.startswith(("$", ENVELOPE)) or path.count("[]") > 1 \
                or "=" in path or "!" in path:
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


def path_values(parsed: Column, path: str) -> Column:
    """Return ``array<string>`` of the values of one path of a body parsed with :func:`body_schema`.

    A path under an array gives each distinct value once; values are cut to
    :data:`FIELD_VALUE_LENGTH` characters; objects and arrays met where a
    scalar was expected are left out.
    """
    value = parsed
    for part in path.split("."):
        value = value.getField(part.removesuffix("[]"))
    if "[]" in path:  # a body without the array has none of its items (not a null list)
        values = F.array_distinct(F.coalesce(value, F.array().cast("array<string>")))
    else:
        values = F.array(value)
    scalars = F.filter(values, lambda v: v.isNotNull() & ~v.startswith("{") & ~v.startswith("["))
    return F.transform(scalars, lambda v: F.substring(v, 1, FIELD_VALUE_LENGTH))


def path_items(parsed: Column, paths: Sequence[str]) -> Column:
    """Return ``array<string>`` of ``<path>=<value>`` items of a body parsed with :func:`body_schema`.

    One item per value of :func:`path_values`.
    """
    parts = [F.transform(path_values(parsed, path), _item_of(path)) for path in paths]
    return F.flatten(F.array(*parts)) if parts else F.array().cast("array<string>")


def _item_of(path: str) -> Callable[[Column], Column]:
    """Return the function making ``<path>=<value>`` of a value (a lambda of ``transform``: one argument)."""
    prefix = F.lit(path + "=")
    return lambda value: F.concat(prefix, value)


def body_field_profile(enriched: DataFrame, paths: Sequence[str], max_listed: int = 12) -> DataFrame:
    """Return per body path: messages with a value, distinct values, most distinct values in one queue.

    Columns: field, messages, values, queue_values, listed (the distinct
    values, sorted, when there are at most ``max_listed``, else null: the
    values a negated item ``<path>!=<value>`` can name). The report reads a sample
    and keeps the paths with few values (:func:`categorical_fields`); a path
    with one value in every source queue (a message type) only restates the source.
    Two small aggregations: per source queue and path (its messages and
    distinct values), then per path.
    """
    if not paths:
        return enriched.sparkSession.createDataFrame(
            [], "field string, messages long, values int, queue_values int, listed array<string>"
        )
    # the parsed body is a column of its own: referenced in a lambda, an expression runs once per reference
    parsed = F.col("parsed")
    per_path = F.array(
        *[F.struct(F.lit(path).alias("field"), path_values(parsed, path).alias("values")) for path in paths]
    )
    found = enriched.select(
        "project", "source_queue", F.from_json("body", body_schema(paths)).alias("parsed")
    ).select(
        "project", "source_queue", F.explode(F.filter(per_path, lambda p: F.size(p["values"]) > 0)).alias("p")
    )
    per_queue = found.groupBy("project", "source_queue", F.col("p.field").alias("field")).agg(
        F.count(F.lit(1)).alias("messages"),
        F.array_distinct(F.flatten(F.collect_list("p.values"))).alias("values"),
    )
    return (
        per_queue.groupBy("field")
        .agg(
            F.sum("messages").alias("messages"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("values")))).alias("distinct"),
            F.max(F.size("values")).alias("queue_values"),
        )
        .select(
            "field", "messages", F.size("distinct").alias("values"), "queue_values",
            F.when(F.size("distinct") <= max_listed, F.col("distinct")).alias("listed"),
        )
        .orderBy("field")
    )


def categorical_fields(profile: DataFrame, max_values: int) -> DataFrame:
    """Return ``(field, source_level, listed)`` of the :func:`body_field_profile` paths that look categorical.

    At most ``max_values`` distinct values, each seen twice on average: an id
    or an amount has about as many values as messages and predicts nothing.
    ``source_level``: one value in every source queue, so the field says no
    more than where the message came from. ``listed``: the profile's values.
    """
    return (
        profile.where((F.col("values") <= max_values) & (F.col("values") * 2 <= F.col("messages")))
        .select("field", (F.col("queue_values") <= 1).alias("source_level"), "listed")
        .orderBy("field")
    )


