"""Failure signatures: each dead letter's last failure masked, hashed and grouped."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.signatures import ID_LENGTH, MASK_NEEDLES, MASKS, MAX_LENGTH, NO_REASON, SCHEME, signature_id
from zaqar_lite.rules.encryption import SEALED_TEXT

#: what the report reads instead of a failure reason stored encrypted (the report is given no keys)
ENCRYPTED_REASON = "(reason encrypted at rest)"

EXAMPLES = 3



def readable_failures(failures: Column) -> Column:
    """Return a failure history whose reasons stored encrypted read :data:`ENCRYPTED_REASON`.

    A reason of a queue with ``_enable_encrypt_messages`` is stored sealed
    (``zaqar_lite.rules.encryption.SEALED_TEXT``); no signature, mask or
    example is ever made of its ciphertext. A null history reads as empty.
    """
    return F.transform(
        F.coalesce(failures, F.array()),
        lambda f: f.withField(
            "error", F.when(f["error"].startswith(SEALED_TEXT), F.lit(ENCRYPTED_REASON)).otherwise(f["error"])
        ),
    )

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


def signature_hash(text: Column) -> Column:
    """Return the id of a signature text (``signatures.signature_id``, in Spark: scheme and short hash)."""
    return F.concat(F.lit(SCHEME), short_hash(text))


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


