"""The share body: what a pre-signed URL grants (Zaqar's ``/share``)."""

from __future__ import annotations

import functools
from typing import Any

from zaqar_lite.api.schemas.schema import Schema
from zaqar_lite.rules import signed_urls

#: the largest share body accepted (its longest valid form is a few hundred bytes)
SHARE_BODY_SIZE = 4096


@functools.cache
def _share_schema() -> Schema:
    """A pre-signed URL request (Zaqar's ``/share``): each field optional, null meaning its default."""
    return Schema({
        "type": "object",
        "properties": {
            "paths": {"type": ["array", "null"], "items": {"enum": list(signed_urls.SHAREABLE_PATHS)}},
            "methods": {"type": ["array", "null"], "items": {"enum": list(signed_urls.SHAREABLE_METHODS)}},
            "expires": {"type": ["string", "null"]},
        },
        "additionalProperties": False,
    })


def share_request(document: Any) -> dict[str, Any]:
    """Check a share body and return its ``paths``, ``methods`` and ``expires`` (None where left out)."""
    document = {} if document is None else document
    _share_schema().check(document)
    return {key: document.get(key) for key in ("paths", "methods", "expires")}
