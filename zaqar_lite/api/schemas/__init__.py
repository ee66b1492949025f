"""Checks of request bodies: JSON parsing, then a JSON Schema per operation.

Each function takes the parsed body and returns normalised values; every
failure raises :class:`~zaqar_lite.errors.ValidationFailed` (or
:class:`~zaqar_lite.errors.InvalidBody`) whose text names the offending field
and the rule. Body structure is described by JSON Schemas (:class:`Schema`:
fastjsonschema accepts, :mod:`jsonschema` names what is wrong).

Where each part lives (every name is imported from ``zaqar_lite.api.schemas``):

``parsing.py``
    :func:`parse_json`: UTF-8 JSON, 64-bit numbers, ``MAX_JSON_DEPTH``.
``schema.py``
    :class:`Schema` (compiled once) and :func:`explain`, the one rendering of
    a schema's refusal.
``messages.py``
    a message post, edit (merge or JSON-patch form) and release, a claim's
    create or renew.
``queues.py``
    a queue's metadata JSON-patch, a purge, a queue template.
``topics.py``
    a topic's metadata and JSON-patch.
``redrive.py``
    a redrive request and the largest redrive body.
``share.py``
    a pre-signed URL request.
``pools.py``
    a pool's and a flavor's bodies.
"""

from __future__ import annotations

from zaqar_lite.api.schemas.messages import (
    claim_options,
    claim_release,
    message_edit,
    message_edit_patch,
    message_post,
    release_body,
)
from zaqar_lite.api.schemas.parsing import (
    INT64_MAX,
    INT64_MIN,
    MAX_JSON_DEPTH,
    NESTING_TOKEN,
    SURROGATE_ESCAPE,
    parse_json,
)
from zaqar_lite.api.schemas.pools import POOL_FIELDS, flavor_pools, pool_body
from zaqar_lite.api.schemas.queues import patch_operations, purge_resource_types, queue_template
from zaqar_lite.api.schemas.redrive import redrive_body_size, redrive_request
from zaqar_lite.api.schemas.schema import ITEM_WORDS, SHOWN_KEY_LENGTH, TYPE_WORDS, Schema, explain
from zaqar_lite.api.schemas.share import SHARE_BODY_SIZE, share_request
from zaqar_lite.api.schemas.topics import topic_metadata, topic_patch_operations

__all__ = [
    "INT64_MAX", "INT64_MIN", "ITEM_WORDS", "MAX_JSON_DEPTH", "NESTING_TOKEN", "POOL_FIELDS",
    "SHARE_BODY_SIZE", "SHOWN_KEY_LENGTH", "SURROGATE_ESCAPE", "TYPE_WORDS", "Schema", "claim_options",
    "claim_release",
    "explain", "flavor_pools", "message_edit", "message_edit_patch", "message_post", "parse_json",
    "patch_operations", "pool_body", "purge_resource_types", "queue_template", "redrive_body_size",
    "redrive_request", "release_body", "share_request", "topic_metadata", "topic_patch_operations",
]
