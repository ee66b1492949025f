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

from zaqar_lite.claims import dedup, groups
from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.claims.signatures import ID_LENGTH
from zaqar_lite.config import Limits
from zaqar_lite.errors import InvalidBody, ValidationFailed, sent
from zaqar_lite.models import RedriveFilter, RedriveRequest
from zaqar_lite.rules import signed_urls, topics

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
        raise InvalidBody("Every integer of the request body must fit in 64 bits "
                          "(from -9223372036854775808 to 9223372036854775807).")
    return value


def _checked_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidBody("A number of the request body is too large to be represented.")
    # Every float this large is a whole number, and JSON Schema counts it as an
    # integer: the same 64-bit bound holds for it, so one rule covers all numbers.
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidBody("Every number of the request body must be within the 64-bit integer range "
                          "(from -9223372036854775808 to 9223372036854775807).")
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


#: the JSON types of JSON Schema, as a refusal names them
TYPE_WORDS = {"object": "a JSON object", "array": "an array", "string": "a string", "integer": "an integer",
              "number": "a number", "boolean": "true or false", "null": "null"}
#: what the items of an array field are called in a refusal ("at most 20 messages per post")
ITEM_WORDS = {"messages": "messages per post", "filter.ids": "ids", "resource_types": "resource types",
              "": "operations"}
#: the longest unknown key a refusal names (a longer one is only called a key)
SHOWN_KEY_LENGTH = 64


def _location(error: jsonschema.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path.lstrip(".")


def _listed(words: list[str], last: str = "and") -> str:
    return f"{', '.join(words[:-1])} {last} {words[-1]}" if len(words) > 1 else "".join(words)


def _counts(error: jsonschema.ValidationError, field: str, where: str) -> str | None:
    """Word a refusal of a size: items of an array, characters of a string."""
    rule, value = error.validator_value, error.instance
    items = ITEM_WORDS.get(where, "items")
    size = len(value) if isinstance(value, (list, str)) else 0
    empty = f"{field} may not be empty."
    words = {
        "maxItems": f"{field} may hold at most {rule} {items}, got {size}.",
        "minItems": empty if rule == 1 else f"{field} must hold at least {rule} {items}.",
        "maxLength": f"{field} may be at most {rule} characters long, got {size}.",
        "minLength": empty if rule == 1 else f"{field} must be at least {rule} characters long.",
        "uniqueItems": f"{field} may not list the same value twice.",
    }
    return words.get(str(error.validator))


def _keys(error: jsonschema.ValidationError, field: str, where: str) -> str | None:
    """Word a refusal about an object's keys: one missing, one unknown, none given."""
    rule, value, known = error.validator_value, error.instance, list(error.schema.get("properties", {}))
    if error.validator == "required":
        missing = next(key for key in rule if key not in value)
        return f"{where + '.' if where else ''}{missing} is required."
    if error.validator == "additionalProperties":
        unknown = sorted(set(value) - set(known))[0]
        named = unknown if len(unknown) <= SHOWN_KEY_LENGTH and unknown.isprintable() else "a key"
        return f"{field} may only have the keys {_listed(known)}; {named} is not one of them."
    if error.validator == "minProperties":
        return f"{field} must hold at least one of {_listed(known)}."
    return None


def explain(error: jsonschema.ValidationError) -> str:
    """Return the refusal of a body that breaks its schema, in words: the field, the rule, the limit.

    The one rendering of every JSON Schema error: it never repeats the
    document (only a number or a boolean sent, :func:`~zaqar_lite.errors.sent`).
    A ``pattern`` is explained by its schema's ``description``.
    """
    where = _location(error)
    field = where or "The request body"
    rule, value = error.validator_value, error.instance
    bounds = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "more than",
              "exclusiveMaximum": "less than"}
    if error.validator == "type":
        kinds = [rule] if isinstance(rule, str) else list(rule)
        return f"{field} must be {' or '.join(TYPE_WORDS[kind] for kind in kinds)}, got {sent(value)}."
    if error.validator in bounds:
        return f"{field} must be {bounds[str(error.validator)]} {rule}, got {sent(value)}."
    if error.validator == "enum":
        choices = _listed([json.dumps(choice) for choice in rule], "or")
        return f"{field} must be one of {choices}, got {sent(value)}."
    if error.validator in ("pattern", "not"):
        return f"{field} must be {error.schema.get('description', 'in the documented form')}."
    words = _counts(error, field, where) or _keys(error, field, where)
    return words or f"{field} does not follow the rule {error.validator}."


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
            raise InvalidBody(explain(error))


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


@functools.cache
def _redrive_schema(limits: Limits) -> Schema:
    """A redrive body (SPEC 1.8)."""
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
                    "signature": {"type": "string", "pattern": f"^[0-9a-f]{{{ID_LENGTH}}}$",
                                  "description": f"{ID_LENGTH} lowercase hexadecimal digits"},
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


def message_post(document: Any, limits: Limits) -> list[dict[str, Any]]:
    """Check a message POST body and return its messages (``body``, ``ttl``, ``delay``, ...).

    ``ttl`` and ``delay`` are None when the client left them out, so the queue
    defaults apply.
    """
    _message_post_schema(limits).check(document)
    for index, item in enumerate(document["messages"]):
        for field, valid, rule in (("dedup_id", dedup.is_dedup_id, dedup.ID_RULE),
                                   ("group", groups.is_group, groups.RULE)):
            if field in item and not valid(item[field]):
                raise ValidationFailed(f"messages[{index}].{field} must be {rule}, "
                                       f"got {json.dumps(item[field])}.")
    return [
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


def redrive_body_size(limits: Limits) -> int:
    """Return the largest redrive body accepted: room for ``max_redrive_ids`` ids of 256 characters."""
    return 65536 + 260 * limits.max_redrive_ids


def redrive_request(document: Any, queue: str, limits: Limits) -> RedriveRequest:
    """Check a redrive body (SPEC 1.8) and return the request, defaults filled.

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
