"""The redrive body: what to move, where, and whether as a task."""

from __future__ import annotations

from typing import Any

from zaqar_lite.api.schemas.parsing import INT64_MAX
from zaqar_lite.api.schemas.schema import Schema, per_limits
from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.claims.signatures import ID_LENGTH, ID_PATTERN, SCHEME
from zaqar_lite.config import Limits
from zaqar_lite.errors import ValidationFailed, sent
from zaqar_lite.models import RedriveFilter, RedriveRequest


@per_limits
def _redrive_schema(limits: Limits) -> Schema:
    """A redrive body (docs/api.rst, "Redrive (zaqar-lite extension)")."""
    text = {"type": "string", "minLength": 1, "maxLength": 256}
    return Schema({
        "type": "object",
        "properties": {
            "destination": {"type": "string"},
            "create_destination": {"type": "boolean"},
            "limit": {"type": "integer", "minimum": 1, "maximum": INT64_MAX},
            "dry_run": {"type": "boolean"},
            "async": {"type": "boolean"},
            "max_per_second": {"type": "number", "exclusiveMinimum": 0},
            "filter": {
                "type": "object",
                "properties": {
                    "source_queue": text,
                    "error_type": text,
                    "signature": {"type": "string", "pattern": ID_PATTERN,
                                  "description": f"{SCHEME} and {ID_LENGTH} lowercase hexadecimal digits "
                                                 f"(or {ID_LENGTH} alone: an id of the first scheme)"},
                    "ids": {"type": "array", "items": text, "minItems": 1,
                            "maxItems": limits.max_redrive_ids},
                },
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
        # a blocking redrive moves at most max_redrive_messages; a task (async) any number
        "if": {"not": {"required": ["async"], "properties": {"async": {"const": True}}}},
        "then": {"properties": {"limit": {"maximum": limits.max_redrive_messages}}},
    })


def redrive_body_size(limits: Limits) -> int:
    """Return the largest redrive body accepted: room for ``max_redrive_ids`` ids of 256 characters."""
    return 65536 + 260 * limits.max_redrive_ids


def redrive_request(document: Any, queue: str, limits: Limits) -> RedriveRequest:
    """Check a redrive body and return the request, defaults filled.

    docs/api.rst, "Redrive (zaqar-lite extension)" and "Redrive tasks".

    Every key is optional; an empty body redrives every dead letter of the
    queue (up to ``max_redrive_messages``) to its source queue. With
    ``async`` the request is a task's: no ``dry_run``, any ``limit`` (none by
    default: 0), and ``max_per_second`` at most ``max_redrive_rate`` (its default).
    """
    document = {} if document is None else document
    _redrive_schema(limits).check(document)
    as_task = document.get("async", False)
    _check_redrive_mode(document, as_task, limits)
    destination = document.get("destination")
    if destination is not None:
        if not is_queue_name(destination, limits):
            raise ValidationFailed(
                f"destination must be a queue name: ASCII letters, digits, _ - and ., 1 to "
                f"{limits.max_queue_name_length} characters, not . or .. (got {sent(destination)}).")
        if destination == queue:
            raise ValidationFailed(f"destination cannot be the queue redriven from ({queue}).")
    wanted = document.get("filter", {})
    rate = document.get("max_per_second", limits.max_redrive_rate if as_task else None)
    return RedriveRequest(
        limit=int(document.get("limit", 0 if as_task else limits.max_redrive_messages)),
        destination=destination,
        filter=RedriveFilter(source_queue=wanted.get("source_queue"), error_type=wanted.get("error_type"),
                             signature=wanted.get("signature"),
                             ids=frozenset(wanted["ids"]) if "ids" in wanted else None),
        dry_run=document.get("dry_run", False),
        max_per_second=float(rate) if rate is not None else None,
        as_task=as_task,
        create_destination=document.get("create_destination", False),
    )


def _check_redrive_mode(document: dict[str, Any], as_task: bool, limits: Limits) -> None:
    """Check the fields of a task whose rule OpenAPI 3.0 cannot state: ``max_per_second``, ``dry_run``."""
    if not as_task:
        return
    if document.get("dry_run", False):
        raise ValidationFailed("dry_run and async exclude each other: a dry run moves nothing, "
                               "so there is no task to run.")
    if document.get("max_per_second", 0) > limits.max_redrive_rate:
        raise ValidationFailed(f"max_per_second may be at most {limits.max_redrive_rate} "
                               "(max_redrive_rate) when async is true.")
