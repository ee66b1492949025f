"""Message bodies: a post, an edit (merge or JSON-patch form), a release, and a claim's create or renew."""

from __future__ import annotations

import functools
import json
from typing import Any

from zaqar_lite.api.schemas.schema import Schema
from zaqar_lite.claims import dedup, groups, schedule
from zaqar_lite.config import Limits
from zaqar_lite.errors import InvalidBody, ValidationFailed


@functools.cache
def _message_post_schema(limits: Limits) -> Schema:
    """A message POST body."""
    return Schema({
        "type": "object",
        "required": ["messages"],
        "properties": {
            "messages": {
                "type": "array",
                "minItems": 1,
                "maxItems": limits.max_messages_per_page,
                "items": {
                    "type": "object",
                    "required": ["body"],
                    "properties": {
                        "ttl": {"type": "integer", "minimum": limits.min_message_ttl,
                                "maximum": limits.max_message_ttl},
                        "delay": {"type": "integer", "minimum": 0,
                                  "maximum": limits.max_message_delay},
                        "deliver_at": {"type": ["string", "number"]},
                        "dlq_eligible": {"type": "boolean"},
                        "dedup_id": {"type": "string"},
                        "group": {"type": "string"},
                    },
                },
            },
        },
    })


@functools.cache
def _message_edit_schema(limits: Limits) -> Schema:
    """A message PATCH body: any of a post's ``body``, ``ttl`` and ``delay``, nothing else."""
    return Schema({
        "type": "object",
        "minProperties": 1,
        "properties": {
            "body": {},
            "ttl": {"type": "integer", "minimum": limits.min_message_ttl, "maximum": limits.max_message_ttl},
            "delay": {"type": "integer", "minimum": 0, "maximum": limits.max_message_delay},
        },
        "additionalProperties": False,
    })


@functools.cache
def _message_edit_patch_schema() -> Schema:
    """A message PATCH body in Zaqar's JSON-patch form: ``replace`` of ``/body``, ``/ttl``, ``/delay``."""
    return Schema({
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["op", "path"],
            "properties": {
                "op": {"type": "string", "pattern": "^replace$",
                       "description": "replace (a message is edited by replacing its body, ttl or delay)"},
                "path": {"type": "string", "pattern": "^/(body|ttl|delay)$",
                         "description": "/body, /ttl or /delay"},
                "value": {},
            },
            "additionalProperties": False,
        },
    })


@functools.cache
def _claim_schema(limits: Limits) -> Schema:
    """A claim create or renew body."""
    return Schema({
        "type": "object",
        "properties": {
            "ttl": {"type": "integer", "minimum": limits.min_claim_ttl, "maximum": limits.max_claim_ttl},
            "grace": {"type": "integer", "minimum": limits.min_claim_grace,
                      "maximum": limits.max_claim_grace},
        },
    })


@functools.cache
def _release_schema(limits: Limits) -> Schema:
    """A release body: a failure reason and a delay, each optional."""
    return Schema({
        "type": "object",
        "properties": {
            "error": {"type": "string", "maxLength": 4096},
            "error_type": {"type": "string", "maxLength": 256},
            "delay": {"type": "integer", "minimum": 0, "maximum": limits.max_message_delay},
        },
        "additionalProperties": False,
    })


def message_post(document: Any, limits: Limits) -> list[dict[str, Any]]:
    """Check a message POST body and return its messages (``body``, ``ttl``, ``delay``, ...).

    ``ttl`` and ``delay`` are None when the client left them out, so the queue
    defaults apply. A ``deliver_at`` is returned as POSIX seconds (key absent
    when not given); the service checks it against the clock.
    """
    _message_post_schema(limits).check(document)
    for index, item in enumerate(document["messages"]):
        for field, valid, rule in (("dedup_id", dedup.is_dedup_id, dedup.ID_RULE),
                                   ("group", groups.is_group, groups.RULE)):
            if field in item and not valid(item[field]):
                raise ValidationFailed(f"messages[{index}].{field} must be {rule}, "
                                       f"got {json.dumps(item[field])}.")
    messages = [
        {
            "body": item["body"],
            "ttl": int(item["ttl"]) if "ttl" in item else None,
            "delay": int(item["delay"]) if "delay" in item else None,
            "dlq_eligible": item.get("dlq_eligible", True),
            "dedup_id": item.get("dedup_id"),
            "group": item.get("group"),
        }
        for item in document["messages"]
    ]
    for index, item in enumerate(document["messages"]):
        if "deliver_at" in item:  # a long schedule: rare, so looked for only here
            where = f"messages[{index}]"
            if "delay" in item:
                raise ValidationFailed(f"{where} gives both delay and deliver_at; give one of them.")
            messages[index]["deliver_at"] = schedule.instant(item["deliver_at"], f"{where}.deliver_at")
    return messages


def message_edit(document: Any, limits: Limits) -> dict[str, Any]:
    """Check a message PATCH body and return the changes: any of ``body``, ``ttl`` and ``delay``.

    ``ttl`` and ``delay`` follow a post's rules and count from the edit.
    """
    if document is None:
        raise InvalidBody("The request body must hold any of body, ttl and delay: {\"delay\": 0}.")
    _message_edit_schema(limits).check(document)
    return {key: int(value) if key in ("ttl", "delay") else value for key, value in document.items()}


def message_edit_patch(document: Any, limits: Limits) -> dict[str, Any]:
    """Check a message PATCH body in Zaqar's JSON-patch form and return the changes, as :func:`message_edit`.

    The operations apply in order (a path replaced twice keeps the last value);
    the values then follow the merge body's rules.
    """
    if document is None:
        raise InvalidBody("The request body must list replace operations on /body, /ttl or /delay: "
                          "[{\"op\": \"replace\", \"path\": \"/delay\", \"value\": 0}].")
    _message_edit_patch_schema().check(document)
    for index, item in enumerate(document):
        if "value" not in item:
            raise InvalidBody(f"[{index}].value is required: replace needs a value.")
    return message_edit({item["path"][1:]: item["value"] for item in document}, limits)


def claim_options(document: Any, limits: Limits) -> tuple[int, int]:
    """Check a claim create/renew body and return ``(ttl, grace)`` with defaults filled.

    A null ``ttl`` or ``grace`` means the default (python-zaqarclient sends nulls
    when its caller gives neither).
    """
    document = {} if document is None else document
    if isinstance(document, dict):
        document = {k: v for k, v in document.items() if v is not None}
    _claim_schema(limits).check(document)
    return (int(document.get("ttl", limits.default_claim_ttl)),
            int(document.get("grace", limits.default_claim_grace)))


def release_body(document: Any, limits: Limits) -> tuple[dict[str, Any] | None, int | None]:
    """Check a release body: optional ``error`` and ``error_type`` strings and a ``delay``.

    Returns:
        The failure reason (None when the body gives neither string) and the
        delay in seconds (None when not given).
    """
    if document is None:
        return None, None
    _release_schema(limits).check(document)
    delay = document.get("delay")
    if "error" not in document and "error_type" not in document:
        return None, delay
    return {"error": document.get("error"), "error_type": document.get("error_type")}, delay
