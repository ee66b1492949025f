"""Checks of a request's path, query and headers: each takes the raw value and returns it normalised.

Every failure raises :class:`~zaqar_lite.errors.ValidationFailed` whose text
names the offending parameter and the rule, so the client can fix its request.
"""

from __future__ import annotations

import uuid

from zaqar_lite.api.schemas import INT64_MAX
from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.config import Limits, Settings
from zaqar_lite.errors import ValidationFailed, sent

#: query booleans, compared in any letter case: Zaqar's words (falcon's) and ours
TRUE_VALUES = ("true", "t", "yes", "y", "1", "on")
FALSE_VALUES = ("false", "f", "no", "n", "0", "off")


def queue_name(name: str, limits: Limits) -> str:
    """Check a queue name (``^[a-zA-Z0-9_.-]+$``, 1..max chars, not ``.`` or ``..``)."""
    if not is_queue_name(name, limits):
        raise ValidationFailed(
            f"Queue names may not be more than {limits.max_queue_name_length} characters long, "
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
        try:
            uuid.UUID(value)
        except ValueError:
            raise ValidationFailed("Wrong UUID value: the Client-ID header must be a UUID.") from None
    elif not settings.min_length_client_id <= len(value) <= settings.max_length_client_id:
        raise ValidationFailed(
            f"The Client-ID header must be {settings.min_length_client_id} to "
            f"{settings.max_length_client_id} characters long.")
    return value


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
