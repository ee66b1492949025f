"""How one message reaches one subscriber, by the subscriber's scheme.

The delivery loop (:mod:`zaqar_lite.notify.delivery`) is the same for every
subscriber: order, cursor, retries, suspension and the lease. Only the last
step differs, and it is a :class:`Transport`:

==========================  =============================================
scheme                      transport
==========================  =============================================
``http``, ``https``         :class:`Webhook`: a POST of the notification
``trust+http(s)``           :class:`Webhook` to the URL without ``trust+``,
                            with the creator's ``X-Auth-Token``
``mailto``                  :class:`Mail`: one mail through ``[smtp]``
==========================  =============================================
"""

from __future__ import annotations

import urllib.parse
from typing import Protocol

import requests

from zaqar_lite.clock import Clock
from zaqar_lite.config import Settings
from zaqar_lite.models import Message
from zaqar_lite.notify import mail, webhook
from zaqar_lite.notify.outcome import Outcome, failed
from zaqar_lite.notify.state import Subscription


class Transport(Protocol):
    """Makes one delivery attempt of one message to one subscriber."""

    #: the longest one attempt may take, in seconds (the lease must outlast it)
    attempt_seconds: float

    def send(self, subscription: Subscription, message: Message) -> Outcome:
        """Try to hand the message over once; never raise for a failure of the subscriber's side."""


class Webhook:
    """POSTs the notification to an ``http(s)`` or ``trust+http(s)`` subscriber."""

    def __init__(self, session: requests.Session, timeout: float) -> None:
        self.session = session
        self.timeout = timeout
        self.attempt_seconds = 2 * timeout

    def send(self, subscription: Subscription, message: Message) -> Outcome:
        """POST one notification; only a 2xx answer acknowledges it."""
        body = webhook.render_body(webhook.notification(message, subscription.queue), subscription.options)
        token = subscription.auth_token if webhook.is_trust(subscription.subscriber) else None
        headers = webhook.request_headers(body, subscription.options, subscription.id, message.id, token)
        return webhook.post(self.session, webhook.target_url(subscription.subscriber), body, headers,
                            self.timeout)


class Mail:
    """Mails the notification to a ``mailto:`` subscriber through the ``[smtp]`` server."""

    def __init__(self, settings: Settings, clock: Clock) -> None:
        self.smtp = settings.smtp
        self.clock = clock
        self.timeout = settings.notifier.request_timeout
        self.attempt_seconds = 2 * self.timeout

    def send(self, subscription: Subscription, message: Message) -> Outcome:
        """Send one mail; the SMTP server's acceptance acknowledges it."""
        try:
            composed = mail.compose(webhook.notification(message, subscription.queue),
                                    subscription.subscriber, subscription.options,
                                    mail.sender(subscription.options, self.smtp),
                                    subscription.id, message.id, self.clock())
        except ValueError as exc:  # a header email refuses (BadAddress is one too)
            return failed(f"the mail cannot be written: {exc}")
        return mail.send(self.smtp, composed, self.timeout)


class Transports:
    """The transport of each subscriber scheme, for one notifier thread."""

    def __init__(self, settings: Settings, session: requests.Session, clock: Clock) -> None:
        hooks = Webhook(session, settings.notifier.request_timeout)
        mails = Mail(settings, clock)
        self._by_scheme: dict[str, Transport] = {
            "http": hooks, "https": hooks, "trust+http": hooks, "trust+https": hooks, "mailto": mails}

    def for_subscriber(self, subscriber: str) -> Transport:
        """Return the transport of a subscriber URI; an unknown scheme gets one that always fails."""
        scheme = urllib.parse.urlsplit(subscriber).scheme.lower()
        return self._by_scheme.get(scheme) or _Unsupported(scheme)


class _Unsupported:
    """Stands for a scheme no transport serves (a subscription stored by a newer version)."""

    attempt_seconds = 0.0

    def __init__(self, scheme: str) -> None:
        self.scheme = scheme

    def send(self, subscription: Subscription, message: Message) -> Outcome:
        return failed(f"no transport for {self.scheme!r} subscribers")
