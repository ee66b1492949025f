"""Topic bodies: a queue's, without the metadata keys only claims read."""

from __future__ import annotations

import functools
from typing import Any

from zaqar_lite.api.schemas.queues import patch_operations
from zaqar_lite.api.schemas.schema import Schema
from zaqar_lite.errors import ValidationFailed
from zaqar_lite.rules import topics


@functools.cache
def _topic_metadata_schema() -> Schema:
    """A topic's metadata: a queue's, without the keys only claims read."""
    refused = {"not": {}, "description": "absent: a topic's messages are never claimed, so it "
                                         "takes no claim or dead-letter setting"}
    return Schema({
        "type": "object",
        "properties": {key: refused for key in topics.CLAIM_ONLY_KEYS},
    })


def topic_metadata(document: Any) -> dict[str, Any]:
    """Check a topic's metadata (its PUT body; None is none) and return it; the service checks the values."""
    if document is None:
        return {}
    _topic_metadata_schema().check(document)
    return dict(document)


def topic_patch_operations(document: Any) -> list[tuple[str, str, Any]]:
    """Check a topic JSON-patch body and return ``(op, key, value)`` triples (none sets a claim-only key)."""
    operations = patch_operations(document)
    for index, (op, key, _value) in enumerate(operations):
        if op != "remove" and key in topics.CLAIM_ONLY_KEYS:
            raise ValidationFailed(f"[{index}].path may not be /metadata/{key}: a topic's messages are "
                                   "never claimed, so it takes no claim or dead-letter setting.")
    return operations
