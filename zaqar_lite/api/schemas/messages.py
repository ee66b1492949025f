"""Message bodies: a post, an edit (merge or JSON-patch form), a release, and a claim's create or renew."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from zaqar_lite.api.schemas.schema import Schema, per_limits
from zaqar_lite.claims import dedup, groups, schedule
from zaqar_lite.claims.policy import OUTCOMES, POSTPONE, REJECT, RETRY
from zaqar_lite.config import Limits
from zaqar_lite.errors import InvalidBody, ValidationFailed


@per_limits
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


@per_limits
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


@per_limits
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


@per_limits
def _release_schema(limits: Limits) -> Schema:
    """A release body: a failure reason and a delay, each optional."""
    return Schema({
        "type": "object",
        "properties": {
            "error": {"type": "string", "maxLength": 4096},
            "error_type": {"type": "string", "maxLength": 256},
            "delay": {"type": "integer", "minimum": 0, "maximum": limits.max_message_delay},
            "outcome": {"enum": list(OUTCOMES)},
        },
        "additionalProperties": False,
    })


#: the fields of a posted message checked beyond its schema: each with its rule, and the rule in words
_FIFO_FIELDS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("dedup_id", dedup.is_dedup_id, dedup.ID_RULE), ("group", groups.is_group, groups.RULE))


def message_post(document: Any, limits: Limits) -> list[dict[str, Any]]:
    """Check a message POST body and return its messages (``body``, ``ttl``, ``delay``, ...).

    ``ttl`` and ``delay`` are None when the client left them out, so the queue
    defaults apply. A ``deliver_at`` is returned as POSIX seconds (key absent
    when not given); the service checks it against the clock.
    """
    _message_post_schema(limits).check(document)
    for index, item in enumerate(document["messages"]):
        if "dedup_id" not in item and "group" not in item:  # most messages: neither to check
            continue
        for field, valid, rule in _FIFO_FIELDS:
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


def release_outcome(outcome: str, delay: int | None) -> str:
    """Check that a release's ``delay`` fits its ``outcome`` and return the outcome.

    A postpone needs a ``delay`` (how long not now is); a reject takes none
    (the message leaves the queue at once).
    """
    if outcome == POSTPONE and delay is None:
        raise ValidationFailed("outcome postpone needs a delay: the seconds before the message may be "
                               "claimed again, e.g. {\"outcome\": \"postpone\", \"delay\": 60}.")
    if outcome == REJECT and delay is not None:
        raise ValidationFailed("outcome reject takes no delay: the message is dead-lettered at once.")
    return outcome


def release_body(document: Any, limits: Limits) -> tuple[dict[str, Any] | None, int | None, str]:
    """Check a release body: optional ``error`` and ``error_type`` strings, a ``delay`` and an ``outcome``.

    Returns:
        The failure reason (None when the body gives neither string), the
        delay in seconds (None when not given) and the outcome (``retry``
        when not given; :func:`release_outcome`).
    """
    if document is None:
        return None, None, RETRY
    _release_schema(limits).check(document)
    delay = document.get("delay")
    outcome = release_outcome(document.get("outcome", RETRY), delay)
    if "error" not in document and "error_type" not in document:
        return None, delay, outcome
    return {"error": document.get("error"), "error_type": document.get("error_type")}, delay, outcome


def claim_release(outcome: str | None, delay: str | None, limits: Limits) -> tuple[str, int | None]:
    """Check the ``outcome`` and ``delay`` query parameters of a claim's release (``DELETE``).

    Both are optional and mean what they mean in a message's release body
    (:func:`release_body`), for every message the claim holds.

    Returns:
        The outcome (``retry`` when not given) and the delay (None when not given).
    """
    chosen = outcome or RETRY
    if chosen not in OUTCOMES:
        raise ValidationFailed(f"outcome must be one of {', '.join(OUTCOMES)}, got {json.dumps(outcome)}.")
    seconds = None
    if delay is not None and delay != "":
        if not (delay.isascii() and delay.isdigit()) or int(delay) > limits.max_message_delay:
            raise ValidationFailed(f"delay must be a whole number of seconds from 0 to "
                                   f"{limits.max_message_delay}, got {json.dumps(delay)}.")
        seconds = int(delay)
    return release_outcome(chosen, seconds), seconds
