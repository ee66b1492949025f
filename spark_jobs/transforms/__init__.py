"""The DLQ report's analyses: pure DataFrame transforms of dead-letter rows.

Each public function takes DataFrames and returns a DataFrame; none reads or
writes anything, so each is tested on a few literal rows. The input is the
row shape of :data:`spark_jobs.sources.rows.DEAD_LETTER_DDL`, enriched once by
:func:`enrich` with each message's cause (its last failure) and payload shape.
Times stay POSIX seconds; ``hour`` columns are the POSIX second an hour starts.

The transforms live by stage: :mod:`~spark_jobs.transforms.failures`,
:mod:`~spark_jobs.transforms.shapes`, :mod:`~spark_jobs.transforms.fields`,
:mod:`~spark_jobs.transforms.patterns`, :mod:`~spark_jobs.transforms.timeline`.
"""

from __future__ import annotations

from spark_jobs.transforms.failures import (
    ENCRYPTED_REASON,
    EXAMPLES,
    failure_events,
    failure_signatures,
    mask_texts,
    masked_error,
    readable_failures,
    short_hash,
    signature_hash,
    signature_members,
    signature_of,
    signature_text,
)
from spark_jobs.transforms.fields import (
    FIELD_VALUE_LENGTH,
    body_field_profile,
    body_schema,
    categorical_fields,
    encrypted_body,
    path_items,
    path_values,
    scalar_paths,
)
from spark_jobs.transforms.patterns import (
    CAUSE_ITEMS,
    CLIENT_LABEL_PATHS,
    CONTEXT_ITEMS,
    NO_ERROR_TYPE,
    SEPARATION,
    SOURCE_ITEMS,
    association_rules,
    cause_rules,
    message_features,
    signal_counts,
    signal_items,
)
from spark_jobs.transforms.shapes import (
    SCALAR_TYPES,
    SHAPE_MAX_DEPTH,
    SHAPE_MAX_PATHS,
    body_paths,
    body_structure,
    enrich,
    payload_shapes,
    shape_paths,
)
from spark_jobs.transforms.timeline import (
    DELAY_BUCKETS,
    TIME_BUCKETS,
    TIME_BUCKETS_MAX,
    claim_count_distribution,
    dead_letter_counts,
    dead_letters_over_time,
    time_bucket,
    time_to_dead_letter,
    time_to_dead_letter_stats,
)

__all__ = [
    "CAUSE_ITEMS",
    "CLIENT_LABEL_PATHS",
    "CONTEXT_ITEMS",
    "DELAY_BUCKETS",
    "ENCRYPTED_REASON",
    "EXAMPLES",
    "FIELD_VALUE_LENGTH",
    "NO_ERROR_TYPE",
    "SCALAR_TYPES",
    "SEPARATION",
    "SHAPE_MAX_DEPTH",
    "SHAPE_MAX_PATHS",
    "SOURCE_ITEMS",
    "TIME_BUCKETS",
    "TIME_BUCKETS_MAX",
    "association_rules",
    "body_field_profile",
    "body_paths",
    "body_schema",
    "body_structure",
    "categorical_fields",
    "cause_rules",
    "claim_count_distribution",
    "dead_letter_counts",
    "dead_letters_over_time",
    "encrypted_body",
    "enrich",
    "failure_events",
    "failure_signatures",
    "mask_texts",
    "masked_error",
    "message_features",
    "path_items",
    "path_values",
    "payload_shapes",
    "readable_failures",
    "scalar_paths",
    "shape_paths",
    "short_hash",
    "signature_hash",
    "signal_counts",
    "signal_items",
    "signature_members",
    "signature_of",
    "signature_text",
    "time_bucket",
    "time_to_dead_letter",
    "time_to_dead_letter_stats",
]
