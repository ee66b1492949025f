"""One webhook request: the notification body, its headers and signature, and the outcome.

The body is the message exactly as Zaqar's notifier sends it (Zaqar's own
API suite compares it whole)::

    {"body": ..., "ttl": ..., "queue_name": ..., "Message_Type": "Notification"}

or, when the subscription has ``options.post_data``, that template with
``"$zaqar_message$"`` (quotes included) replaced by the notification. Headers:
``Content-Type: application/json``, then ``options.post_headers``, then ours:
``X-Zaqar-Lite-Message-Id``, ``X-Zaqar-Lite-Subscription-Id`` and, when
``options.secret`` is set, ``X-Zaqar-Lite-Signature: sha256=<hex HMAC-SHA256
of the exact body bytes keyed by the secret>``.

The message id travels in the ``X-Zaqar-Lite-Message-Id`` header, which a
subscriber uses to recognise a redelivery (delivery is at least once).

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
import ipaddress
import json
import socket
from collections.abc import Mapping
from typing import Any

import requests
import requests.adapters
import urllib3
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection as urllib3_connection

from zaqar_lite.models import Message
from zaqar_lite.notify.outcome import Outcome, failed
from zaqar_lite.rules import egress

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
    # A subscription stored before a header was forbidden still never sends it.
    headers.update({name: value for name, value in (options.get("post_headers") or {}).items()
                    if egress.header_refusal(name, value) is None})
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
        if _refused_target(exc):
            return failed(egress.TARGET_REFUSED)
        return failed(f"{type(exc).__name__}: {exc}")
    with response:
        if 200 <= response.status_code < 300:
            return Outcome(True)
        return failed(f"HTTP {response.status_code} {response.reason or ''}".strip())


class TargetRefused(NewConnectionError):
    """The webhook's host resolved to no address the target rule allows: nothing was connected to."""


def _refused_target(exc: requests.RequestException) -> bool:
    """Return whether a requests error stands for a :class:`TargetRefused`.

    requests wraps urllib3's ``MaxRetryError``, whose ``reason`` is the error
    the connection raised.
    """
    cause = exc.args[0] if exc.args else None
    return isinstance(getattr(cause, "reason", None), TargetRefused)


def allowed_addresses(host: str, port: int, rule: egress.TargetRule) -> list[tuple[Any, ...]]:
    """Resolve a host and return the ``getaddrinfo`` entries the rule allows, in their order.

    Raises:
        socket.gaierror: the name does not resolve.
    """
    found = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    return [entry for entry in found
            if rule.allows(ipaddress.ip_address(str(entry[4][0]).partition("%")[0]))]


class _GuardedConnection(urllib3.connection.HTTPConnection):
    """Connects only to an address its target rule allows: the very address it checked.

    The name is resolved once, here; the socket is opened to a checked address,
    so a name that resolves elsewhere a moment later (DNS rebinding) changes
    nothing. TLS still verifies the certificate against the URL's host name.
    """

    target_rule = egress.TargetRule()

    def _new_conn(self) -> socket.socket:
        try:
            entries = allowed_addresses(self._dns_host, self.port, self.target_rule)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        if not entries:
            raise TargetRefused(self, egress.TARGET_REFUSED)
        failure: Exception | None = None
        for entry in entries:
            try:
                return urllib3_connection.create_connection(
                    (str(entry[4][0]), self.port), self.timeout, source_address=self.source_address,
                    socket_options=self.socket_options)
            except TimeoutError as exc:
                failure = ConnectTimeoutError(
                    self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})")
                failure.__cause__ = exc
            except OSError as exc:
                failure = NewConnectionError(self, f"Failed to establish a new connection: {exc}")
                failure.__cause__ = exc
        assert failure is not None
        raise failure


class _GuardedHTTPSConnection(_GuardedConnection, urllib3.connection.HTTPSConnection):
    """:class:`_GuardedConnection` speaking TLS."""


class GuardedAdapter(requests.adapters.HTTPAdapter):
    """A transport adapter whose connections go only to targets the rule allows."""

    def __init__(self, rule: egress.TargetRule) -> None:
        self.rule = rule
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        """Make the pool manager open guarded connections (a class bound to this rule per scheme)."""
        super().init_poolmanager(*args, **kwargs)
        plain = type("Connection", (_GuardedConnection,), {"target_rule": self.rule})
        secure = type("HTTPSConnection", (_GuardedHTTPSConnection,), {"target_rule": self.rule})
        self.poolmanager.pool_classes_by_scheme = {
            "http": type("Pool", (urllib3.HTTPConnectionPool,), {"ConnectionCls": plain}),
            "https": type("HTTPSPool", (urllib3.HTTPSConnectionPool,), {"ConnectionCls": secure}),
        }


def guarded_session(rule: egress.TargetRule) -> requests.Session:
    """Return the session webhooks are sent with: guarded connections, nothing from the environment.

    A proxy would make the request on the notifier's behalf to an address the
    rule never sees, so webhooks go straight to their target; nor are the
    operator's ``~/.netrc`` credentials offered to a tenant's host.
    """
    session = requests.Session()
    session.trust_env = False
    adapter = GuardedAdapter(rule)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
