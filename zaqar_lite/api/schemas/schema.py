"""The :class:`Schema` of a body, compiled once, and :func:`explain`, the words of its refusals."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import fastjsonschema
import jsonschema

from zaqar_lite.config import Limits
from zaqar_lite.errors import InvalidBody, sent

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
    reads the same either way. Each schema of the package is built once per ``Limits``.
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


def per_limits(build: Callable[[Limits], Schema]) -> Callable[[Limits], Schema]:
    """Build a schema once per ``Limits``, and find it again by the object's identity.

    The app holds one ``Limits`` for its life and looks its schemas up on every
    request: ``functools.cache`` alone would hash the frozen dataclass each time
    (all its fields: about 65 instructions). An equal ``Limits`` seen for the
    first time under another identity still gets the schema built for its value.
    """
    by_value = functools.cache(build)
    #: id(limits) -> (limits, its schema); the limits are kept, so their id is not reused
    seen: dict[int, tuple[Limits, Schema]] = {}

    @functools.wraps(build)
    def schema(limits: Limits) -> Schema:
        found = seen.get(id(limits))
        if found is not None and found[0] is limits:
            return found[1]
        built = by_value(limits)
        seen[id(limits)] = (limits, built)
        return built

    return schema
