"""Checks of request bodies: JSON parsing, then a JSON Schema per operation.

Each function takes the parsed body and returns normalised values; every
failure raises :class:`~zaqar_lite.errors.ValidationFailed` (or
:class:`~zaqar_lite.errors.InvalidBody`) whose text names the offending field
and the rule. Body structure is described by JSON Schemas (:class:`Schema`:
fastjsonschema accepts, :mod:`jsonschema` names what is wrong).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any

import fastjsonschema
import jsonschema

from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.claims.signatures import ID_LENGTH
from zaqar_lite.config import Limits
from zaqar_lite.errors import InvalidBody, ValidationFailed
from zaqar_lite.models import RedriveFilter, RedriveRequest

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: deepest nesting of arrays and objects a body may have: every reader (drivers, the
#: response encoder) must be able to follow it far below Python's recursion limit
MAX_JSON_DEPTH = 64
#: a JSON escape of a UTF-16 surrogate; only bodies containing one can hold a lone surrogate
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
#: what decides nesting in a JSON text: strings (whose brackets do not count) and brackets
NESTING_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


def _checked_int(text: str) -> int:
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidBody(f"Integer {text} does not fit in 64 bits.")
    return value


def _checked_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidBody(f"Number {text} is too large to be represented.")
    # Every float this large is a whole number, and JSON Schema counts it as an
    # integer: the same 64-bit bound holds for it, so one rule covers all numbers.
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidBody(f"Number {text} is outside the 64-bit integer range.")
    return value


def parse_json(raw: bytes) -> Any:
    """Parse a request body.

    The body must be UTF-8 without a byte order mark (RFC 8259 section 8.1);
    numbers outside the signed 64-bit range, non-finite numbers, lone UTF-16
    surrogates (which no response could encode) and nesting deeper than
    ``MAX_JSON_DEPTH`` are rejected.
    """
    # Judged before parsing: the parser recurses once per level, and near the
    # recursion limit the finalizers the garbage collector runs would fail too.
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and _nests_deeper_than(raw, MAX_JSON_DEPTH):
        raise InvalidBody(f"Request body may not nest arrays and objects more than {MAX_JSON_DEPTH} deep.")
    # A NUL byte is never part of UTF-8 JSON (not even inside a string): it is how
    # UTF-16 and UTF-32 texts of ASCII look, so they get the same answer.
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = "\x00"
    if "\x00" in text:
        raise InvalidBody("Request body must be JSON encoded in UTF-8 (RFC 8259).")
    if text.startswith("\ufeff"):
        raise InvalidBody("Request body must be JSON encoded in UTF-8 without a byte order mark (RFC 8259).")
    try:
        document = json.loads(text, parse_int=_checked_int, parse_float=_checked_float,
                              parse_constant=_reject_constant)
    except ValueError as exc:
        raise InvalidBody(f"Request body is not valid JSON: {exc}.") from None
    except RecursionError:
        raise InvalidBody("Request body is nested too deeply.") from None
    if SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(document, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidBody("Request body contains a lone UTF-16 surrogate escape.") from None
    return document


def _nests_deeper_than(raw: bytes, limit: int) -> bool:
    depth = 0
    for token in NESTING_TOKEN.finditer(raw):
        bracket = token.group()
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif bracket in (b"]", b"}"):
            depth -= 1
    return False


def _reject_constant(name: str) -> Any:
    raise InvalidBody(f"{name} is not a valid JSON number.")


def _location(error: jsonschema.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path.lstrip(".") or "body"


class Schema:
    """A JSON Schema compiled once.

    fastjsonschema accepts a valid document about 15x faster than jsonschema;
    jsonschema judges the rest and names the most relevant error, so a refusal
    reads the same either way. Each schema below is built once per ``Limits``.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self._accept: Callable[[Any], Any] = fastjsonschema.compile(schema)
        self._explain = jsonschema.Draft7Validator(schema)

    def check(self, document: Any) -> None:
        """Raise :class:`InvalidBody` naming the most relevant error, if the document has one."""
        try:
            self._accept(document)
            return
        except fastjsonschema.JsonSchemaException:
            pass
        error = jsonschema.exceptions.best_match(self._explain.iter_errors(document))
        if error is not None:
            raise InvalidBody(f"{_location(error)}: {error.message}.")


# -- schemas, built and compiled once ---------------------------------------------

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
                        "dlq_eligible": {"type": "boolean"},
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
                "path": {"type": "string", "pattern": "^/metadata/.+"},
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


@functools.cache
def _redrive_schema(limits: Limits) -> Schema:
    """A redrive body (SPEC 1.8)."""
    text = {"type": "string", "minLength": 1, "maxLength": 256}
    return Schema({
        "type": "object",
        "properties": {
            "destination": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": limits.max_redrive_messages},
            "dry_run": {"type": "boolean"},
            "max_per_second": {"type": "number", "exclusiveMinimum": 0},
            "filter": {
                "type": "object",
                "properties": {
                    "source_queue": text,
                    "error_type": text,
                    "signature": {"type": "string", "pattern": f"^[0-9a-f]{{{ID_LENGTH}}}$"},
                    "ids": {"type": "array", "items": text, "minItems": 1,
                            "maxItems": limits.max_redrive_ids},
                },
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    })


def message_post(document: Any, limits: Limits) -> list[dict[str, Any]]:
    """Check a message POST body and return its messages (``body``, ``ttl``, ``delay``, ...).

    ``ttl`` and ``delay`` are None when the client left them out, so the queue
    defaults apply.
    """
    _message_post_schema(limits).check(document)
    return [
        {
            "body": item["body"],
            "ttl": int(item["ttl"]) if "ttl" in item else None,
            "delay": int(item["delay"]) if "delay" in item else None,
            "dlq_eligible": item.get("dlq_eligible", True),
        }
        for item in document["messages"]
    ]


def message_edit(document: Any, limits: Limits) -> dict[str, Any]:
    """Check a message PATCH body and return the changes: any of ``body``, ``ttl`` and ``delay``.

    ``ttl`` and ``delay`` follow a post's rules and count from the edit.
    """
    if document is None:
        raise InvalidBody("The request body must hold any of body, ttl and delay: {\"delay\": 0}.")
    _message_edit_schema(limits).check(document)
    return {key: int(value) if key in ("ttl", "delay") else value for key, value in document.items()}


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


def patch_operations(document: Any) -> list[tuple[str, str, Any]]:
    """Check a queue JSON-patch body and return ``(op, key, value)`` triples."""
    _patch_schema().check(document)
    operations = []
    for index, item in enumerate(document):
        if item["op"] != "remove" and "value" not in item:
            raise ValidationFailed(f"[{index}]: '{item['op']}' needs a 'value'.")
        key = item["path"][len("/metadata/"):].replace("~1", "/").replace("~0", "~")
        operations.append((item["op"], key, item.get("value")))
    return operations


def purge_resource_types(document: Any) -> list[str]:
    """Check a purge body and return the resource types to purge."""
    if document is None:
        return ["messages", "subscriptions"]
    _purge_schema().check(document)
    return list(document.get("resource_types", ["messages", "subscriptions"]))


def redrive_body_size(limits: Limits) -> int:
    """Return the largest redrive body accepted: room for ``max_redrive_ids`` ids of 256 characters."""
    return 65536 + 260 * limits.max_redrive_ids


def redrive_request(document: Any, queue: str, limits: Limits) -> RedriveRequest:
    """Check a redrive body (SPEC 1.8) and return the request, defaults filled.

    Every key is optional; an empty body redrives every dead letter of the
    queue (up to ``max_redrive_messages``) to its source queue.
    """
    document = {} if document is None else document
    _redrive_schema(limits).check(document)
    destination = document.get("destination")
    if destination is not None:
        if not is_queue_name(destination, limits):
            raise ValidationFailed(f"destination must be a valid queue name, got {json.dumps(destination)}.")
        if destination == queue:
            raise ValidationFailed(f"destination cannot be the queue redriven from ({queue}).")
    wanted = document.get("filter", {})
    rate = document.get("max_per_second")
    return RedriveRequest(
        limit=int(document.get("limit", limits.max_redrive_messages)),
        destination=destination,
        filter=RedriveFilter(source_queue=wanted.get("source_queue"), error_type=wanted.get("error_type"),
                             signature=wanted.get("signature"),
                             ids=frozenset(wanted["ids"]) if "ids" in wanted else None),
        dry_run=document.get("dry_run", False),
        max_per_second=float(rate) if rate is not None else None,
    )
