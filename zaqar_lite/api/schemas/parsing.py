"""Parsing a request body: UTF-8 JSON within 64-bit numbers and ``MAX_JSON_DEPTH`` levels."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from zaqar_lite.errors import InvalidBody

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
        document = _parsed(text)
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


#: the one decoder of every request body (``json.loads`` with these hooks would build one per call)
_DECODER = json.JSONDecoder(parse_int=_checked_int, parse_float=_checked_float,
                            parse_constant=_reject_constant)
#: its C scanner of one value, called directly by :func:`_parsed`
_SCAN_VALUE: Any = _DECODER.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__


def _parsed(text: str) -> Any:
    """Return ``_DECODER.decode(text)``: a body that is one value and nothing around it (what clients
    send) in one call of json's C scanner, without ``decode``'s and ``raw_decode``'s Python (about 60
    instructions); anything else by ``decode``, whose refusal, words and position, stands as it was.
    """
    try:
        document, end = _SCAN_VALUE(text, 0)
    except StopIteration:
        return _DECODER.decode(text)
    return document if end == len(text) else _DECODER.decode(text)
