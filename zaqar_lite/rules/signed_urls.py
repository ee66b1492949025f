"""Pre-signed URLs (Zaqar's ``POST /v2/queues/{queue}/share``): what a signature grants and how it is checked.

A grant names full paths, HTTP methods, a project and an expiry time; its
signature is the hex HMAC-SHA256, under the server's secret key, of an
unambiguous encoding of the grant (:func:`canonical_text`: a version line and
canonical JSON), so that no two grants are signed over the same bytes. Zaqar
signs ``paths\nmethods\nproject\nexpires`` (``\n`` being two characters),
where a project named ``J\nvictim`` signs the same text as the project
``victim`` with ``\nJ`` added to its methods: zaqar-lite does not honour URLs
signed that way. A request that carries the signature in ``URL-Signature``
(with the grant in ``URL-Expires``, ``URL-Methods``, ``URL-Paths`` and the
project in ``X-Project-ID``) may use exactly those methods on those paths and
the resources under them, until the expiry time; its methods must be HTTP
methods a URL can be signed for, its paths paths of a queue's shareable
resources, and its expiry no further than the server's longest lifetime.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

from zaqar_lite.errors import Forbidden, ValidationFailed

#: the queue sub-resources a URL may be signed for (Zaqar's set)
SHAREABLE_PATHS = ("claims", "messages", "subscriptions")
#: the HTTP methods a URL may be signed for
SHAREABLE_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
#: what a share grants when its body leaves a field out, empty or null (as Zaqar)
DEFAULT_PATHS = ("messages",)
DEFAULT_METHODS = ("GET",)
DEFAULT_LIFETIME = timedelta(days=1)
#: how an expiry time is written in a grant (UTC, whole seconds, no zone: Zaqar's form)
EXPIRES_FORMAT = "%Y-%m-%dT%H:%M:%S"
#: the ISO 8601 date and time accepted for ``expires``: seconds, an optional fraction (dropped),
#: and an optional zone (``Z``, ``+02``, ``+0200``, ``+02:00``; none means UTC)
EXPIRES_PATTERN = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(Z|[+-]\d{2}(?::?\d{2})?)?")
EXPIRES_EXAMPLE = "2016-01-01T00:00:00"
#: a path a URL can be signed for: a queue's shareable resource
SIGNED_PATH = re.compile(r"/v2/queues/([A-Za-z0-9_.-]+)/(" + "|".join(SHAREABLE_PATHS) + ")")
#: the first line of the signed text: names the encoding, so that no other text signed with the key
#: (a Zaqar URL's) can be taken for a grant
ENCODING_LINE = b"zaqar-lite signed URL grant v2\n"
DISABLED = ("Signed URLs are not enabled on this server: its operator has not set "
            "[signed_urls] secret_key.")


@dataclasses.dataclass(frozen=True)
class Grant:
    """What a signature grants: full paths and methods (both sorted), a project and an expiry."""

    paths: tuple[str, ...]
    methods: tuple[str, ...]
    project: str
    #: UTC, in :data:`EXPIRES_FORMAT`
    expires: str


@dataclasses.dataclass(frozen=True)
class SignedRequest:
    """A request that carries a signature: its ``URL-*`` headers as sent, its method and path, its time."""

    signature: str
    expires: str | None
    methods: str | None
    paths: str | None
    method: str
    path: str
    #: POSIX seconds when the request arrived
    at: float


def canonical_text(grant: Grant) -> bytes:
    """Return the bytes a grant's signature is computed over: one for each grant, and no other's.

    :data:`ENCODING_LINE`, then the grant as JSON with sorted keys, no blanks
    and every non-ASCII character escaped (JSON quotes and escapes each string,
    so a field cannot end early or spill into the next, whatever it holds).
    """
    fields = {"expires": grant.expires, "methods": list(grant.methods), "paths": list(grant.paths),
              "project": grant.project}
    return ENCODING_LINE + json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("ascii")


def sign(key: str, grant: Grant) -> str:
    """Return the signature of a grant: the hex HMAC-SHA256 of its canonical text under ``key``."""
    return hmac.new(key.encode("utf-8"), canonical_text(grant), hashlib.sha256).hexdigest()


def parse_expires(text: str, field: str) -> datetime:
    """Return an ISO 8601 date and time as an aware UTC datetime, to the whole second.

    Raises:
        ValidationFailed: the text is not of the accepted form, or names no existing time.
    """
    match = EXPIRES_PATTERN.fullmatch(text)
    if match is None:
        raise ValidationFailed(f"{field} must be an ISO 8601 date and time such as {EXPIRES_EXAMPLE} "
                               "(UTC, or with a zone such as Z or +02:00).")
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=_zone(match.group(7)))
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValidationFailed(f"{field} names no existing date and time between the years 1 and 9999 "
                               "(a month, day, hour, minute, second or zone is out of range).") from None


def _zone(suffix: str | None) -> timezone:
    if suffix is None or suffix == "Z":
        return UTC
    digits = suffix[1:].replace(":", "")
    offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
    # timezone() refuses an offset of a day or more with ValueError, as an out-of-range zone
    return timezone(-offset if suffix[0] == "-" else offset)


def grant_for_share(queue: str, project: str, now: float, paths: Sequence[str] | None = None,
                    methods: Sequence[str] | None = None, expires: str | None = None,
                    max_lifetime: float = float("inf")) -> Grant:
    """Return the grant a share of a queue makes, Zaqar's defaults filled in.

    Args:
        queue: the queue shared (a valid name).
        project: the project the grant acts for.
        now: POSIX seconds.
        paths: some of :data:`SHAREABLE_PATHS` (default ``messages``).
        methods: some of :data:`SHAREABLE_METHODS` (default ``GET``).
        expires: an ISO 8601 time later than ``now`` (default one day from now, or
            ``max_lifetime`` if that is shorter).
        max_lifetime: the most seconds after ``now`` the grant may expire
            (``[signed_urls] max_lifetime``).

    Raises:
        ValidationFailed: a path or method outside its set, or an expiry not in
            the future or further than ``max_lifetime``.
    """
    unknown = sorted(set(paths or ()) - set(SHAREABLE_PATHS))
    if unknown:
        raise ValidationFailed(f"paths may hold only {', '.join(SHAREABLE_PATHS)}; "
                               f"{', '.join(unknown)} cannot be shared.")
    unknown = sorted(set(methods or ()) - set(SHAREABLE_METHODS))
    if unknown:
        raise ValidationFailed(f"methods may hold only {', '.join(SHAREABLE_METHODS)} (in capitals); "
                               f"{', '.join(unknown)} is not one of them.")
    if expires is None:
        lifetime = min(DEFAULT_LIFETIME.total_seconds(), max_lifetime)
        moment = datetime.fromtimestamp(int(now + lifetime), UTC)
    else:
        moment = parse_expires(expires, "expires")
        if moment.timestamp() <= now:
            raise ValidationFailed(f"expires must be later than now ({_written(now)}); "
                                   "a signed URL that has already expired grants nothing.")
        if moment.timestamp() - now > max_lifetime:
            raise ValidationFailed(f"expires may be at most {max_lifetime:g} seconds from now "
                                   f"({_written(now + max_lifetime)}), the longest a signed URL is valid "
                                   "on this server ([signed_urls] max_lifetime).")
    return Grant(paths=tuple(sorted(f"/v2/queues/{queue}/{path}" for path in set(paths or DEFAULT_PATHS))),
                 methods=tuple(sorted(set(methods or DEFAULT_METHODS))),
                 project=project, expires=written(moment))


def written(moment: datetime) -> str:
    """Return a UTC time as a grant writes it: :data:`EXPIRES_FORMAT`, the year in four digits."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


def _written(now: float) -> str:
    return written(datetime.fromtimestamp(now, UTC))


def _listed(header: str) -> tuple[str, ...]:
    """Return the items of a comma-separated header, blanks around them dropped (RFC 9110 lists)."""
    return tuple(sorted(item.strip() for item in header.split(",")))


def authorise(key: str, request: SignedRequest, project: str, max_lifetime: float = float("inf")) -> None:
    """Check that a signed request may do what it asks: the one rule of every signed request.

    The grant must name only methods and paths a URL can be signed for, its
    signature must be the grant's (compared in constant time), then the grant
    must not have expired nor expire more than ``max_lifetime`` seconds after
    the request, and must list the request's method and a path that is the
    request's path or one of its ancestors.

    Raises:
        Forbidden: signed URLs are not enabled, a header is missing or malformed,
            the signature does not match, the grant expired or lasts too long, or
            it does not cover the method or the path (the message says which).
    """
    grant = _presented_grant(key, request, project)
    # bytes, so that a header of any characters is compared in constant time too
    if not hmac.compare_digest(sign(key, grant).encode("ascii"),
                               request.signature.strip().encode("utf-8", "surrogateescape")):
        raise Forbidden("The URL-Signature does not match the URL-Paths, URL-Methods, URL-Expires and "
                        "X-Project-ID of the request: the signed URL was altered, or signed for "
                        "another project or by another key.")
    if _timestamp(grant.expires) <= request.at:
        raise Forbidden(f"The signed URL expired at {grant.expires}Z.")
    if _timestamp(grant.expires) - request.at > max_lifetime:
        raise Forbidden(f"The signed URL is valid until {grant.expires}Z, more than the {max_lifetime:g} "
                        "seconds this server allows ([signed_urls] max_lifetime).")
    if request.method not in grant.methods:
        raise Forbidden(f"The signed URL allows {', '.join(grant.methods)}; "
                        f"it does not allow {request.method}.")
    if not any(request.path == path or request.path.startswith(path + "/") for path in grant.paths):
        raise Forbidden(f"The signed URL covers {', '.join(grant.paths)} and what lies under them; "
                        f"it does not cover {request.path}.")


def _presented_grant(key: str, request: SignedRequest, project: str) -> Grant:
    """Return the grant a signed request's headers name, or refuse headers that name none."""
    if not key:
        raise Forbidden(DISABLED)
    values = {}
    for name, value in (("URL-Signature", request.signature), ("URL-Expires", request.expires),
                        ("URL-Methods", request.methods), ("URL-Paths", request.paths)):
        if value is None or not value.strip():
            raise Forbidden(f"A signed request needs the URL-Signature, URL-Expires, URL-Methods and "
                            f"URL-Paths headers; {name} is missing or empty.")
        values[name] = value.strip()
    try:
        expires = parse_expires(values["URL-Expires"], "URL-Expires")
    except ValidationFailed as exc:
        raise Forbidden(str(exc)) from None
    methods, paths = _listed(values["URL-Methods"]), _listed(values["URL-Paths"])
    unknown = [method for method in methods if method not in SHAREABLE_METHODS]
    if unknown:
        raise Forbidden(f"URL-Methods may hold only {', '.join(SHAREABLE_METHODS)}; "
                        f"{unknown[0]!r} is not one of them.")
    unknown = [path for path in paths if not _signable_path(path)]
    if unknown:
        raise Forbidden(f"URL-Paths may hold only paths /v2/queues/QUEUE/RESOURCE with RESOURCE one of "
                        f"{', '.join(SHAREABLE_PATHS)}; {unknown[0]!r} is not one of them.")
    return Grant(paths=paths, methods=methods, project=project, expires=written(expires))


def _signable_path(path: str) -> bool:
    found = SIGNED_PATH.fullmatch(path)
    return found is not None and found.group(1) not in (".", "..")


def _timestamp(expires: str) -> float:
    return datetime.fromisoformat(expires).replace(tzinfo=UTC).timestamp()
