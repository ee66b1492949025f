"""Checks of subscription request bodies; each failure names the offending field.

A subscription body is ``{"subscriber": url, "ttl": seconds, "options": {...}}``.
Options are free-form as in Zaqar, except the keys zaqar-lite acts on:
``_retry_policy`` (see :mod:`zaqar_lite.rules.delivery_retry`), ``post_data`` (a JSON
text, or a JSON value, in which ``"$zaqar_message$"`` stands for the
notification), ``post_headers`` (extra request headers) and ``secret`` (the key
of the ``X-Zaqar-Lite-Signature`` HMAC); and, for a ``mailto:`` subscriber,
``from`` and ``subject`` (checked as mail headers by :func:`for_subscriber`).

Subscribers are Zaqar's types: ``http(s)://`` and ``trust+http(s)://`` URLs
with a host, and ``mailto:name@domain[?subject=...]``; ``[notifier]
subscriber_schemes`` says which of them a deployment accepts.
"""

from __future__ import annotations

import datetime
import json
import re
import urllib.parse
from typing import Any

from zaqar_lite.config import Limits, NotifierSettings, SmtpSettings
from zaqar_lite.errors import InvalidBody, ValidationFailed
from zaqar_lite.notify import mail, webhook
from zaqar_lite.rules import delivery_retry, egress

MAX_SUBSCRIBER_LENGTH = 2048
MAX_SECRET_LENGTH = 1024
#: longest subscription ttl, about 3,000 years: a fixed bound, stated in docs/openapi.yaml
MAX_SUBSCRIPTION_TTL = 100_000_000_000
#: an RFC 9110 header name
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
CREATE_KEYS = ("subscriber", "ttl", "options")
#: what a GET shows in place of a secret option value; sent back unchanged, it keeps the secret
MASK = "********"
#: post_headers whose values are credentials, by name (Authorization, X-Auth-Token, X-Api-Key, ...)
SECRET_HEADER = re.compile(r"auth|token|secret|key|password|cookie|credential|signature", re.IGNORECASE)


def masked(value: dict[str, Any]) -> dict[str, Any]:
    """Return options as a GET shows them: ``secret`` and credential headers replaced by :data:`MASK`.

    The signing secret and credentials given to send to a subscriber are
    written once, by the creator, and never read back (Zaqar shows every
    option; its own trust credentials are the ``trust_id`` it adds).
    """
    shown = dict(value)
    if "secret" in shown:
        shown["secret"] = MASK
    headers = shown.get("post_headers")
    if isinstance(headers, dict):
        shown["post_headers"] = {name: MASK if SECRET_HEADER.search(name) else text
                                 for name, text in headers.items()}
    return shown


def unmasked(new: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """Return new options where each :data:`MASK` a GET showed keeps the stored secret it stands for.

    A client that reads a subscription, changes one option and sends the
    options back then keeps its secret instead of setting it to the mask.
    """
    kept = dict(new)
    if kept.get("secret") == MASK and "secret" in stored:
        kept["secret"] = stored["secret"]
    headers, old = kept.get("post_headers"), stored.get("post_headers")
    if isinstance(headers, dict) and isinstance(old, dict):
        kept["post_headers"] = {name: old[name] if text == MASK and name in old else text
                                for name, text in headers.items()}
    return kept


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def subscriber(value: Any, settings: NotifierSettings, field: str = "subscriber") -> str:
    """Check a subscriber URI: of an accepted scheme, and valid for its scheme."""
    if not isinstance(value, str) or not value:
        raise ValidationFailed(f"{field} must be a non-empty string, got {_show(value)}.")
    if len(value) > MAX_SUBSCRIBER_LENGTH:
        raise ValidationFailed(f"{field} may not be longer than {MAX_SUBSCRIBER_LENGTH} characters.")
    scheme = value.partition(":")[0].lower() if ":" in value else ""
    if scheme not in settings.subscriber_schemes:
        accepted = ", ".join(f"{s}:" for s in settings.subscriber_schemes)
        raise ValidationFailed(f"{field} must be a URI of one of the accepted types ({accepted}), "
                               f"got {_show(value)}.")
    if scheme == "mailto":
        try:
            mail.parse_mailto(value)
        except mail.BadAddress as exc:
            raise ValidationFailed(
                f"{field} is not a valid mailto: URI ({exc}), got {_show(value)}.") from None
        return value
    _web_url(webhook.target_url(value), value, field)
    return value


def _web_url(url: str, value: str, field: str) -> None:
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise ValidationFailed(f"{field} is not a valid URL: {_show(value)}.") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        raise ValidationFailed(f"{field} must be an absolute URL with a host, got {_show(value)}.")


def target(subscriber_uri: str, settings: NotifierSettings, field: str = "subscriber") -> None:
    """Check that a webhook subscriber's host is a target this server delivers to (no lookup made).

    An address literal or ``localhost`` is judged here; a name is judged again at
    each delivery, on the addresses it resolves to (:mod:`zaqar_lite.rules.egress`).
    """
    if subscriber_uri.lower().startswith("mailto:"):
        return
    host = urllib.parse.urlsplit(webhook.target_url(subscriber_uri)).hostname or ""
    rule = egress.TargetRule.from_settings(settings.allowed_targets, settings.denied_targets)
    if not rule.allows_host(host):
        raise ValidationFailed(f"{field} is refused: {egress.TARGET_REFUSED}.")


def for_subscriber(subscriber_uri: str, value: dict[str, Any], smtp: SmtpSettings) -> None:
    """Check the options that apply to this kind of subscriber: ``from`` and ``subject`` of a mailto: one."""
    if not subscriber_uri.lower().startswith("mailto:"):
        return
    for key, check in (("from", mail.check_sender), ("subject", mail.check_subject)):
        if key not in value:
            continue
        if not isinstance(value[key], str):
            raise ValidationFailed(f"options.{key} must be a string, got {_show(value[key])}.")
        try:
            check(value[key])
        except mail.BadAddress as exc:
            raise ValidationFailed(f"options.{key} is not valid: {exc}.") from None
    if "from" in value:
        refusal = mail.sender_refusal(value["from"], smtp)
        if refusal is not None:
            raise ValidationFailed(f"options.from is refused: {refusal}.")


def ttl(value: Any, limits: Limits, now: float) -> int:
    """Check a subscription ttl: an integer of at least ``min_subscription_ttl`` seconds."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed(f"ttl must be an integer number of seconds, got {_show(value)}.")
    if value < limits.min_subscription_ttl:
        raise ValidationFailed(f"ttl must be at least {limits.min_subscription_ttl} seconds, got {value}.")
    if value > MAX_SUBSCRIPTION_TTL:
        raise ValidationFailed(f"ttl may not be more than {MAX_SUBSCRIPTION_TTL} seconds, got {value}.")
    try:
        datetime.datetime.fromtimestamp(now + value, tz=datetime.UTC)
    except (OverflowError, ValueError, OSError):
        raise ValidationFailed(f"ttl {value} puts the expiry beyond the largest date.") from None
    return value


def options(value: Any) -> dict[str, Any]:
    """Check the options object and the keys zaqar-lite acts on."""
    if not isinstance(value, dict):
        raise ValidationFailed(f"options must be a JSON object, got {_show(value)}.")
    if delivery_retry.RETRY_POLICY in value:
        delivery_retry.check_policy(value[delivery_retry.RETRY_POLICY],
                                    f"options.{delivery_retry.RETRY_POLICY}")
    if "post_data" in value and not isinstance(value["post_data"], (str, dict, list)):
        raise ValidationFailed("options.post_data must be a JSON text or a JSON object or array, "
                               f"got {_show(value['post_data'])}.")
    if "post_headers" in value:
        _post_headers(value["post_headers"])
    if "secret" in value:
        secret = value["secret"]
        if not isinstance(secret, str) or not 1 <= len(secret) <= MAX_SECRET_LENGTH:
            raise ValidationFailed(f"options.secret must be a string of 1 to {MAX_SECRET_LENGTH} characters.")
    return dict(value)


def _post_headers(headers: Any) -> None:
    if not isinstance(headers, dict):
        raise ValidationFailed(f"options.post_headers must be a JSON object, got {_show(headers)}.")
    for name, text in headers.items():
        if not HEADER_NAME.match(name):
            raise ValidationFailed(f"options.post_headers: {_show(name)} is not a valid header name.")
        if not isinstance(text, str) or "\r" in text or "\n" in text:
            raise ValidationFailed(
                f"options.post_headers.{name} must be a one-line string, got {_show(text)}.")
        refusal = egress.header_refusal(name, text)
        if refusal is not None:
            raise ValidationFailed(f"options.post_headers: {refusal}.")


def _document(document: Any, empty: str) -> dict[str, Any]:
    if document is None or document == {}:
        raise InvalidBody(empty)
    if not isinstance(document, dict):
        raise InvalidBody(f"The request body must be a JSON object, got {_show(document)}.")
    unknown = sorted(set(document) - set(CREATE_KEYS))
    if unknown:
        raise InvalidBody(f"{unknown[0]} is not a subscription field; known: {', '.join(CREATE_KEYS)}.")
    return document


def creation(document: Any, limits: Limits, settings: NotifierSettings, smtp: SmtpSettings,
             now: float) -> dict[str, Any]:
    """Check a subscription POST body; return ``subscriber``, ``ttl`` and ``options`` with defaults."""
    document = _document(document, "subscriber is required: send "
                         '{"subscriber": "https://...", "ttl": seconds, "options": {...}}.')
    if "subscriber" not in document:
        raise InvalidBody("subscriber is required.")
    fields: dict[str, Any] = {
        "subscriber": subscriber(document["subscriber"], settings),
        "ttl": ttl(document.get("ttl", limits.default_subscription_ttl), limits, now),
        "options": options(document.get("options", {})),
    }
    target(fields["subscriber"], settings)
    for_subscriber(fields["subscriber"], fields["options"], smtp)
    return fields


def update(document: Any, limits: Limits, settings: NotifierSettings, now: float) -> dict[str, Any]:
    """Check a subscription PATCH body; return only the fields it changes."""
    document = _document(document, f"Name at least one of {', '.join(CREATE_KEYS)} to update.")
    changes: dict[str, Any] = {}
    if "subscriber" in document:
        changes["subscriber"] = subscriber(document["subscriber"], settings)
        target(changes["subscriber"], settings)
    if "ttl" in document:
        changes["ttl"] = ttl(document["ttl"], limits, now)
    if "options" in document:
        changes["options"] = options(document["options"])
    return changes


def confirmation(document: Any) -> bool:
    """Check a confirm body ``{"confirmed": bool}`` and return the flag."""
    if not isinstance(document, dict) or not isinstance(document.get("confirmed"), bool):
        raise InvalidBody("confirmed must be true or false: send {\"confirmed\": true}.")
    return bool(document["confirmed"])


def resume_request(document: Any, settings: NotifierSettings) -> str:
    """Check a project-wide resume body ``{"subscriber": url}`` and return the URL."""
    if not isinstance(document, dict) or "subscriber" not in document:
        raise InvalidBody("subscriber is required: send {\"subscriber\": \"https://...\"}.")
    return subscriber(document["subscriber"], settings)
