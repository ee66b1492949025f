"""One webhook request: the notification body, its headers and signature, and the outcome.

The body is the message exactly as Zaqar's notifier sends it (Zaqar's own
API suite compares it whole)::

    {"body": ..., "ttl": ..., "queue_name": ..., "Message_Type": "Notification"}

The message id travels in the ``X-Zaqar-Lite-Message-Id`` header, which a
subscriber uses to recognise a redelivery (delivery is at least once).

or, when the subscription has ``options.post_data``, that template with
``"$zaqar_message$"`` (quotes included) replaced by the notification. Headers:
``Content-Type: application/json``, then ``options.post_headers``, then ours:
``X-Zaqar-Lite-Message-Id``, ``X-Zaqar-Lite-Subscription-Id`` and, when
``options.secret`` is set, ``X-Zaqar-Lite-Signature: sha256=<hex HMAC-SHA256
of the exact body bytes keyed by the secret>``.

A ``trust+http(s)://`` subscriber is a webhook to the URL without ``trust+``
that carries, in ``X-Auth-Token``, the token its creator authenticated with
(Zaqar sends a token obtained through a Keystone trust; zaqar-lite's tokens
are static, so the creator's own token stands for it). It is set after
``post_headers``, which cannot replace it; in ``noauth`` mode there is no token
and no such header.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

import requests

from zaqar_lite.models import Message
from zaqar_lite.notify.outcome import Outcome, failed

MESSAGE_PLACEHOLDER = '"$zaqar_message$"'
SIGNATURE_HEADER = "X-Zaqar-Lite-Signature"
MESSAGE_ID_HEADER = "X-Zaqar-Lite-Message-Id"
SUBSCRIPTION_ID_HEADER = "X-Zaqar-Lite-Subscription-Id"
TOKEN_HEADER = "X-Auth-Token"
TRUST_PREFIX = "trust+"


def target_url(subscriber: str) -> str:
    """Return the URL a subscriber's webhooks go to: the subscriber without ``trust+``."""
    if subscriber[:len(TRUST_PREFIX)].lower() == TRUST_PREFIX:
        return subscriber[len(TRUST_PREFIX):]
    return subscriber


def is_trust(subscriber: str) -> bool:
    """Return whether a subscriber is a ``trust+http(s)`` one (delivered with its creator's token)."""
    return subscriber[:len(TRUST_PREFIX)].lower() == TRUST_PREFIX


def notification(message: Message, queue: str) -> dict[str, Any]:
    """Return the notification document of one message: Zaqar's fields, no others."""
    return {
        "body": message.body,
        "ttl": message.ttl(),
        "queue_name": queue,
        "Message_Type": "Notification",
    }


def render_body(document: Mapping[str, Any], options: Mapping[str, Any]) -> bytes:
    """Return the request body: the notification, or the ``post_data`` template filled with it."""
    encoded = json.dumps(document, ensure_ascii=False)
    template = options.get("post_data")
    if template is None:
        return encoded.encode()
    if not isinstance(template, str):
        template = json.dumps(template, ensure_ascii=False)
    return template.replace(MESSAGE_PLACEHOLDER, encoded).encode()


def signature(secret: str, body: bytes) -> str:
    """Return the signature header value of a body: ``sha256=<hex digest>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def request_headers(body: bytes, options: Mapping[str, Any], subscription_id: str,
                    message_id: str, token: str | None = None) -> dict[str, str]:
    """Return the headers of one delivery (``token``: the trust subscriber's ``X-Auth-Token``)."""
    headers = {"Content-Type": "application/json"}
    headers.update(options.get("post_headers") or {})
    headers[MESSAGE_ID_HEADER] = message_id
    headers[SUBSCRIPTION_ID_HEADER] = subscription_id
    if options.get("secret"):
        headers[SIGNATURE_HEADER] = signature(options["secret"], body)
    if token:
        for name in [n for n in headers if n.lower() == TOKEN_HEADER.lower()]:
            del headers[name]
        headers[TOKEN_HEADER] = token
    return headers


def post(session: requests.Session, url: str, body: bytes, headers: Mapping[str, str],
         timeout: float) -> Outcome:
    """POST one notification; only a 2xx answer acknowledges it.

    Redirects are not followed (a 3xx is a failure like any other non-2xx).
    """
    try:
        response = session.post(url, data=body, headers=dict(headers), timeout=(timeout, timeout),
                                allow_redirects=False)
    except requests.Timeout as exc:
        return failed(f"timeout after {timeout:g} s: {exc}")
    except requests.RequestException as exc:
        return failed(f"{type(exc).__name__}: {exc}")
    with response:
        if 200 <= response.status_code < 300:
            return Outcome(True)
        return failed(f"HTTP {response.status_code} {response.reason or ''}".strip())
