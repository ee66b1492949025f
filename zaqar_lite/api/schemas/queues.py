"""Queue bodies: a metadata JSON-patch, a purge, and a queue template's PUT."""

from __future__ import annotations

import functools
from typing import Any

from zaqar_lite.api.schemas.schema import Schema
from zaqar_lite.errors import ValidationFailed


@functools.cache
def _patch_schema() -> Schema:
    """A queue JSON-patch body."""
    return Schema({
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["op", "path"],
            "properties": {
                "op": {"enum": ["add", "remove", "replace"]},
                "path": {"type": "string", "pattern": "^/metadata/.+",
                         "description": "/metadata/ followed by the key"},
            },
        },
    })


@functools.cache
def _purge_schema() -> Schema:
    """A purge body."""
    return Schema({
        "type": "object",
        "properties": {
            "resource_types": {
                "type": "array", "minItems": 1, "uniqueItems": True,
                "items": {"enum": ["messages", "subscriptions"]},
            },
        },
    })


def patch_operations(document: Any) -> list[tuple[str, str, Any]]:
    """Check a queue JSON-patch body and return ``(op, key, value)`` triples."""
    _patch_schema().check(document)
    operations = []
    for index, item in enumerate(document):
        if item["op"] != "remove" and "value" not in item:
            raise ValidationFailed(f"[{index}].value is required: {item['op']} needs a value.")
        key = item["path"][len("/metadata/"):].replace("~1", "/").replace("~0", "~")
        operations.append((item["op"], key, item.get("value")))
    return operations


@functools.cache
def _template_schema() -> Schema:
    """A queue template PUT body: its name pattern and its reserved metadata."""
    return Schema({
        "type": "object",
        "required": ["pattern", "metadata"],
        "properties": {"pattern": {"type": "string"}, "metadata": {"type": "object"}},
        "additionalProperties": False,
    })


def queue_template(document: Any) -> tuple[str, dict[str, Any]]:
    """Check a queue template body and return its pattern and metadata (checked by the service)."""
    _template_schema().check(document)
    return document["pattern"], document["metadata"]


def purge_resource_types(document: Any) -> list[str]:
    """Check a purge body and return the resource types to purge."""
    if document is None:
        return ["messages", "subscriptions"]
    _purge_schema().check(document)
    return list(document.get("resource_types", ["messages", "subscriptions"]))
