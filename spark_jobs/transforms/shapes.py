"""Payload shapes: each body's structure, and the enrichment every analysis starts from."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.signatures import NO_REASON, signature_id
from spark_jobs.transforms.failures import (
    _smallest_ids,
    mask_texts,
    readable_failures,
    short_hash,
    signature_hash,
    signature_of,
)

SHAPE_MAX_DEPTH = 6
SHAPE_MAX_PATHS = 100


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
    # (eleven regular expressions, the cost of this pass) are a column of their own, read by position;
    # a message that failed the same way again (the same text each claim) has its text masked once
    failures = readable_failures(F.col("failures"))  # a reason stored encrypted is never read
    errors = F.transform(failures, lambda f: F.coalesce(f["error"], F.lit("")))
    distinct_errors = dead_letters.select("*", F.array_distinct(errors).alias("texts"))
    masked_texts = distinct_errors.select("*", mask_texts(F.col("texts")).alias("masked"))
    masked = F.transform(
        failures,
        lambda f: F.struct(
            f["at"].alias("at"),
            F.trim(f["error_type"]).alias("error_type"),
            f["error"].alias("error"),
            F.trim(F.coalesce(f["error_type"], F.lit(""))).alias("kind"),
            F.element_at(
                "masked", F.array_position("texts", F.coalesce(f["error"], F.lit(""))).cast("int")
            ).alias("masked"),
        ),
    )
    signatures = masked_texts.select(
        *[c for c in dead_letters.columns if c not in ("failures", "last_claim_id")],
        F.transform(
            masked,
            lambda f: F.struct(
                f["at"].alias("at"),
                f["error_type"].alias("error_type"),
                f["error"].alias("error"),
                signature_of(f["kind"], f["masked"]).alias("signature"),
            ),
        ).alias("unhashed"),
    )
    signed = F.transform(
        "unhashed",
        lambda f: F.struct(
            f["at"].alias("at"),
            f["error_type"].alias("error_type"),
            f["error"].alias("error"),
            f["signature"].alias("signature"),
            signature_hash(f["signature"]).alias("signature_id"),
        ),
    )
    last = F.element_at(F.col("signed"), -1)
    has_failure = F.size("signed") > 0
    return (
        signatures.select("*", signed.alias("signed"))
        .drop("unhashed")
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


