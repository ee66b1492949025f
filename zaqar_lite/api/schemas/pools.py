"""Pool and flavor bodies (``/v2/pools``, ``/v2/flavors``)."""

from __future__ import annotations

import functools
from typing import Any

from zaqar_lite.api.schemas.schema import Schema

#: a pool's fields as Zaqar's schema has them (``uri`` and ``weight`` required on PUT)
POOL_FIELDS: dict[str, Any] = {
    "uri": {"type": "string", "minLength": 1, "maxLength": 255},
    "weight": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
    "flavor": {"type": "string", "maxLength": 64},
    "options": {"type": "object"},
}


@functools.cache
def _pool_schema(whole: bool) -> Schema:
    """A pool's PUT body (``whole``: uri and weight required) or PATCH body (one field at least)."""
    return Schema({
        "type": "object",
        **({"required": ["uri", "weight"]} if whole else {"minProperties": 1}),
        "properties": POOL_FIELDS,
        "additionalProperties": False,
    })


def pool_body(document: Any, whole: bool) -> dict[str, Any]:
    """Check a pool PUT (``whole``) or PATCH body and return its fields."""
    _pool_schema(whole).check(document)
    return dict(document)


@functools.cache
def _flavor_schema() -> Schema:
    """A flavor's PUT or PATCH body: its pools (Zaqar's ``capabilities`` may come and are computed)."""
    return Schema({
        "type": "object",
        "required": ["pool_list"],
        "properties": {"pool_list": {"type": "array", "items": {"type": "string"}, "maxItems": 1000},
                       "capabilities": {"type": "object"}},
        "additionalProperties": False,
    })


def flavor_pools(document: Any) -> list[str]:
    """Check a flavor PUT or PATCH body and return its ``pool_list``."""
    _flavor_schema().check(document)
    return list(document["pool_list"])
