"""Checks of a request's path, query and headers: each takes the raw value and returns it normalised.

Every failure raises :class:`~zaqar_lite.errors.ValidationFailed` whose text
names the offending parameter and the rule, so the client can fix its request.
"""

from __future__ import annotations

import functools
import re
import uuid

from zaqar_lite.api.schemas import INT64_MAX
from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.config import Limits, Settings
from zaqar_lite.errors import ValidationFailed, sent

#: query booleans, compared in any letter case: Zaqar's words (falcon's) and ours
TRUE_VALUES = ("true", "t", "yes", "y", "1", "on")
FALSE_VALUES = ("false", "f", "no", "n", "0", "off")
#: W3C Trace Context: version, trace-id, parent-id and flags, lower-case hex (a version above
#: 00 may append fields after a dash, which a receiver of version 00 must accept)
TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
#: one list-member of a W3C tracestate: a key (simple or tenant@system) = a value
TRACESTATE_MEMBER = re.compile(
    r"(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
#: W3C limits of a tracestate: list-members, characters
TRACESTATE_MEMBERS, TRACESTATE_LENGTH = 32, 512


def queue_name(name: str, limits: Limits, kind: str = "Queue") -> str:
    """Check a queue name (``^[a-zA-Z0-9_.-]+$``, 1..max chars, not ``.`` or ``..``); topics follow it too."""
    if not is_queue_name(name, limits):
        raise ValidationFailed(
            f"{kind} names may not be more than {limits.max_queue_name_length} characters long, "
            "may only contain ASCII letters, digits, underscores, dashes and periods, "
            "and may not be . or .. (which URL clients rewrite).")
    return name


def client_id(value: str | None, settings: Settings) -> str:
    """Check the ``Client-ID`` header as Zaqar does (``[transport]`` options of the same names).

    ``client_id_uuid_safe = strict`` wants a UUID in any form :class:`uuid.UUID`
    parses; ``off`` any string of ``min_length_client_id`` to
    ``max_length_client_id`` characters.
    """
    if not value:
        raise ValidationFailed("The Client-ID header is required.")
    if settings.client_id_uuid_safe == "strict":
        if not is_uuid(value):
            raise ValidationFailed("Wrong UUID value: the Client-ID header must be a UUID.")
    elif not settings.min_length_client_id <= len(value) <= settings.max_length_client_id:
        raise ValidationFailed(
            f"The Client-ID header must be {settings.min_length_client_id} to "
            f"{settings.max_length_client_id} characters long.")
    return value


@functools.lru_cache(maxsize=4096)
def is_uuid(value: str) -> bool:
    """Return whether :class:`uuid.UUID` reads ``value``; a client sends the same few ids over and over,
    so each is parsed once (the answers of the 4096 latest distinct ids are kept)."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


#: what the WSGI server makes of a header sent twice: the values joined by commas
HEADER_JOIN = ","


def project_id(value: str | None, limits: Limits) -> str:
    """Check the ``X-Project-ID`` header: one value of printable ASCII, not empty, not too long.

    A header sent twice reaches the application joined by a comma, so a comma
    is refused rather than read as one project named after both; so are
    characters outside printable ASCII, which WSGI decodes as latin-1 and which
    no Keystone project id contains.
    """
    if value is None:
        raise ValidationFailed("The X-Project-ID header is required.")
    if not value.strip():
        raise ValidationFailed("The X-Project-ID header cannot be empty.")
    if HEADER_JOIN in value:
        raise ValidationFailed("Send one X-Project-ID header, without commas.")
    if not (value.isascii() and value.isprintable()):
        raise ValidationFailed("The X-Project-ID header may only contain printable ASCII characters.")
    if len(value) > limits.max_project_id_length:
        raise ValidationFailed(
            f"The X-Project-ID header may not be longer than {limits.max_project_id_length} characters.")
    return value


def page_limit(raw: str | None, maximum: int, default: int, name: str = "limit") -> int:
    """Check a ``limit``-like query parameter: ASCII digits making an integer in 1..maximum."""
    if raw is None:
        return min(default, maximum)
    if not (raw.isascii() and raw.isdigit()):
        raise ValidationFailed(f"{name} must be a whole number from 1 to {maximum}, in ASCII digits.")
    # no int() of a thousand digits: it is out of range whatever it says
    value = int(raw) if len(raw) <= len(str(INT64_MAX)) else INT64_MAX
    if not 1 <= value <= maximum:
        raise ValidationFailed(f"{name} must be a whole number from 1 to {maximum}, got {sent(value)}.")
    return value


#: a redrive task listing's marker (``claims.redrive.task_marker``): microseconds, a dash, a task id
TASK_MARKER = re.compile(r"([0-9]{1,20})-([A-Za-z0-9_.-]{1,64})")


def task_marker(raw: str | None) -> tuple[int, str] | None:
    """Check a redrive task listing's ``marker``: the one of its ``next`` link, or None (the first page)."""
    if raw is None:
        return None
    found = TASK_MARKER.fullmatch(raw)
    if found is None:
        raise ValidationFailed("marker must be the one of the listing's next link "
                               "(<microseconds>-<task id>).")
    return int(found.group(1)), found.group(2)


def wait_seconds(raw: str | None, maximum: int) -> int | None:
    """Check a claim's ``wait`` query parameter: None (no wait) or whole seconds in 1..maximum."""
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise ValidationFailed(
            f"wait must be a whole number of seconds written in ASCII digits, got {raw!r}.")
    value = int(raw)
    if not 1 <= value <= maximum:
        raise ValidationFailed(f"wait must be between 1 and {maximum} seconds, got {value}.")
    return value


def boolean(raw: str | None, name: str, default: bool = False) -> bool:
    """Check a boolean query parameter (true/t/yes/y/1/on or false/f/no/n/0/off, any letter case)."""
    if raw is None or raw == "":
        return default
    lowered = raw.lower()
    if lowered in TRUE_VALUES:
        return True
    if lowered in FALSE_VALUES:
        return False
    raise ValidationFailed(f"{name} must be true or false (or yes/no, on/off, 1/0, t/f, y/n).")


def marker(raw: str | None) -> int | None:
    """Read a message listing marker (an opaque non-negative integer).

    A marker this server never gave out answers an empty page, as in Zaqar:
    it is read as a position past every message.
    """
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or int(raw) > INT64_MAX:
        return INT64_MAX
    return int(raw)


def id_list(raw: str | None, name: str, maximum: int) -> list[str]:
    """Check a comma-separated id list: 1..maximum non-empty ids."""
    ids = [i for i in (raw or "").split(",") if i]
    if not ids:
        raise ValidationFailed(f"{name} must list at least one id.")
    if len(ids) > maximum:
        raise ValidationFailed(f"{name} may list at most {maximum} ids, got {len(ids)}.")
    return ids


def _traceparent(value: str) -> str:
    match = TRACEPARENT.fullmatch(value)
    rule = "version-traceid-parentid-flags in lower-case hex (00-<32 hex>-<16 hex>-<2 hex>)"
    if match is None:
        raise ValidationFailed(f"traceparent must be W3C Trace Context {rule}, got {value!r}.")
    version, trace_id, parent_id, _, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        raise ValidationFailed(f"traceparent must be W3C Trace Context {rule}; version {version} "
                               f"{'is invalid' if version == 'ff' else 'has exactly four fields'}, "
                               f"got {value!r}.")
    if trace_id == "0" * 32 or parent_id == "0" * 16:
        field = "trace-id" if trace_id == "0" * 32 else "parent-id"
        raise ValidationFailed(f"traceparent: an all-zero {field} is invalid (W3C Trace Context), "
                               f"got {value!r}.")
    return value


def _tracestate(value: str) -> str:
    if len(value) > TRACESTATE_LENGTH:
        raise ValidationFailed(f"tracestate may not exceed {TRACESTATE_LENGTH} characters, got {len(value)}.")
    members = [m.strip(" \t") for m in value.split(",")]
    members = [m for m in members if m]
    if len(members) > TRACESTATE_MEMBERS:
        raise ValidationFailed(f"tracestate may hold at most {TRACESTATE_MEMBERS} list-members, "
                               f"got {len(members)}.")
    for member in members:
        if TRACESTATE_MEMBER.fullmatch(member) is None:
            raise ValidationFailed(f"tracestate list-member {member!r} is not key=value as W3C Trace Context "
                                   "allows (key: lower-case letters, digits, _-*/ and one @; value: "
                                   "printable ASCII but , and =).")
    return ",".join(members)


def trace_context(traceparent: str | None, tracestate: str | None) -> dict[str, str] | None:
    """Check the W3C ``traceparent`` and ``tracestate`` headers of a post; return what a message keeps.

    None when neither is sent. A ``tracestate`` alone is refused: it means
    nothing without the ``traceparent`` it belongs to.
    """
    if traceparent is None:
        if tracestate is not None:
            raise ValidationFailed("tracestate needs a traceparent header (W3C Trace Context).")
        return None
    context = {"traceparent": _traceparent(traceparent)}
    if tracestate is not None and tracestate.strip(" \t"):
        context["tracestate"] = _tracestate(tracestate)
    return context
