"""One mail to a ``mailto:`` subscriber: the address, the mail as Zaqar writes it, and the SMTP session.

Zaqar's mailto task (``zaqar/notification/tasks/mailto.py``) writes a
notification mail as a ``text/plain`` part whose text is the JSON notification
(the same document a webhook receives), with

* ``To``: the address of the ``mailto:`` URI (its path);
* ``From``: the subscription's ``options.from`` (zaqar-lite falls back to
  ``[smtp] from_address`` where Zaqar would send an empty ``From``, and uses it
  whatever the option says when the operator fixed the sender with ``[smtp]
  fixed_from`` or the option is not in ``[smtp] allowed_from``);
* ``Subject``: the URI's ``subject`` field (``mailto:ops@example.com?subject=Orders``),
  else ``options.subject``, else empty.

zaqar-lite adds ``Date``, a ``Message-ID`` that is the same for every attempt
of one message to one subscription (so a mail delivered twice, which
at-least-once allows, can be recognised), and the webhook's
``X-Zaqar-Lite-Message-Id``/``X-Zaqar-Lite-Subscription-Id`` headers.

Zaqar mails a confirmation request only when its ``require_confirmation`` is
on, with a signed confirmation URL; zaqar-lite has neither (as Zaqar by
default), so it sends notification mails only, to confirmed and unconfirmed
subscriptions alike, as webhooks.

The mail counts as delivered once the SMTP server has accepted it (``250``
after ``DATA``). A refused connection, a timeout, a TLS or login failure and
any 4xx or 5xx reply are failures, retried by the subscription's retry policy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.errors
import email.policy
import email.utils
import json
import smtplib
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Mapping
from email.headerregistry import Address
from email.message import EmailMessage
from typing import Any

from zaqar_lite.config import SmtpSettings
from zaqar_lite.notify.outcome import Outcome, failed
from zaqar_lite.notify.webhook import MESSAGE_ID_HEADER, SUBSCRIPTION_ID_HEADER
from zaqar_lite.rules import egress

#: the only ``mailto:`` header field acted on (RFC 6068 calls them hfields)
SUBJECT_FIELD = "subject"
MAX_HEADER_LENGTH = 998


class BadAddress(ValueError):
    """A mail address or a ``mailto:`` URI that cannot be used; the text says why."""


@dataclasses.dataclass(frozen=True)
class Mailto:
    """A parsed ``mailto:`` subscriber: one recipient and, maybe, a subject."""

    address: str
    subject: str | None


def _addr_spec(text: str) -> str:
    """Return ``text`` if it is one plain ``local@domain`` address."""
    if not text or any(c.isspace() or ord(c) < 32 for c in text):
        raise BadAddress(f"{text!r} is not a mail address")
    try:
        address = Address(addr_spec=text)
    except (ValueError, IndexError, email.errors.HeaderParseError):
        raise BadAddress(f"{text!r} is not a mail address of the form name@domain") from None
    if not address.username or not address.domain:
        raise BadAddress(f"{text!r} is not a mail address of the form name@domain")
    return text


def parse_mailto(uri: str) -> Mailto:
    """Parse a ``mailto:name@domain[?subject=...]`` subscriber.

    Raises:
        BadAddress: no address, more than one, an invalid one, or a field other than ``subject``.
    """
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme.lower() != "mailto":
        raise BadAddress(f"{uri!r} is not a mailto: URI")
    if parts.netloc or parts.fragment:
        raise BadAddress("a mailto: URI is mailto:name@domain, without // or #")
    address = urllib.parse.unquote(parts.path)
    if not address:
        raise BadAddress("mailto: needs an address: mailto:name@domain")
    if "," in address:
        raise BadAddress("mailto: takes one address; subscribe each address on its own")
    subject = None
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() != SUBJECT_FIELD:
            raise BadAddress(f"mailto: field {name!r} is not supported; only subject is")
        subject = _header_text(value, "the mailto: subject")
    return Mailto(_addr_spec(address), subject)


def _header_text(value: str, what: str) -> str:
    if "\r" in value or "\n" in value:
        raise BadAddress(f"{what} must be one line")
    refusal = egress.mail_text_refusal(value)
    if refusal is not None:
        raise BadAddress(f"{what} is refused: {refusal}")
    if len(value) > MAX_HEADER_LENGTH:
        raise BadAddress(f"{what} may not be longer than {MAX_HEADER_LENGTH} characters")
    return value


def check_subject(value: str) -> str:
    """Check an ``options.subject``: one line of at most ``MAX_HEADER_LENGTH`` characters."""
    return _header_text(value, "the subject")


def check_sender(value: str) -> str:
    """Check an ``options.from``: one address, with or without a display name (``Ops <ops@x.org>``)."""
    _header_text(value, "from")
    found = email.utils.getaddresses([value])
    if len(found) != 1 or not found[0][1]:
        raise BadAddress(f"{value!r} is not one mail address")
    _addr_spec(found[0][1])
    return value


def sender_refusal(value: str, settings: SmtpSettings) -> str | None:
    """Return why the operator does not let a subscription send From this address, or None."""
    if settings.fixed_from:
        return f"this server sends every mail From {settings.from_address} ([smtp] fixed_from)"
    address = email.utils.parseaddr(value)[1]
    if not egress.sender_allowed(address, settings.allowed_from.split(",")):
        return f"{address} is not among the senders this server allows ([smtp] allowed_from)"
    return None


def sender(options: Mapping[str, Any], settings: SmtpSettings) -> str:
    """Return the ``From`` of a subscription's mails: its ``from`` option if the operator allows it.

    A ``from`` stored before the operator fixed or restricted senders gives way
    to ``[smtp] from_address``.
    """
    chosen = options.get("from")
    if not chosen or sender_refusal(chosen, settings) is not None:
        return settings.from_address
    return str(chosen)


def compose(document: Mapping[str, Any], subscriber: str, options: Mapping[str, Any], sender: str,
            subscription_id: str, message_id: str, now: float) -> EmailMessage:
    """Return the notification mail of one message from ``sender`` (see the module docstring)."""
    mailto = parse_mailto(subscriber)
    mail = EmailMessage(policy=email.policy.SMTP)
    mail["To"] = mailto.address
    mail["From"] = sender
    mail["Subject"] = mailto.subject if mailto.subject is not None else options.get("subject", "")
    mail["Date"] = email.utils.formatdate(now, localtime=False, usegmt=True)
    mail["Message-ID"] = f"<{message_id}.{subscription_id}@zaqar-lite>"
    mail[MESSAGE_ID_HEADER] = message_id
    mail[SUBSCRIPTION_ID_HEADER] = subscription_id
    mail.set_content(json.dumps(dict(document)))
    return mail


def tls_context(settings: SmtpSettings) -> ssl.SSLContext:
    """Return the TLS context that verifies the SMTP server (against ``ca_file`` when set)."""
    return ssl.create_default_context(cafile=settings.ca_file or None)


class _Watchdog:
    """Cuts an SMTP session's connection when its time is up, whatever it is waiting for.

    Each read and write already waits at most ``timeout``; a server that answers
    slowly but steadily (a reply dripped line by line) would still hold the
    notifier past its lease without this.
    """

    def __init__(self, session: smtplib.SMTP, seconds: float) -> None:
        self.session = session
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        self.expired = True
        sock = getattr(self.session, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def send(settings: SmtpSettings, mail: EmailMessage, timeout: float) -> Outcome:
    """Send one mail in one SMTP session of at most ``2 * timeout`` seconds; accepted is acknowledged."""
    sender = email.utils.parseaddr(str(mail["From"]))[1]
    recipient = str(mail["To"])
    session = (smtplib.SMTP_SSL(timeout=timeout, context=tls_context(settings)) if settings.ssl
               else smtplib.SMTP(timeout=timeout))
    # Connecting outside the constructor lets the watchdog cover the greeting too; the
    # constructor is then also not where smtplib learns the host name TLS verifies.
    session._host = settings.host  # type: ignore[attr-defined]
    with _Watchdog(session, 2 * timeout) as watchdog:
        try:
            session.connect(settings.host, settings.port)
            if settings.starttls:
                session.starttls(context=tls_context(settings))
            if settings.username:
                session.login(settings.username, settings.password)
            session.send_message(mail, from_addr=sender, to_addrs=[recipient])
        except smtplib.SMTPRecipientsRefused as exc:
            code, reply = exc.recipients.get(recipient, (0, b""))
            outcome = failed(f"SMTP {code} {_text(reply)} (recipient {recipient} refused)")
        except smtplib.SMTPResponseException as exc:
            outcome = failed(f"SMTP {exc.smtp_code} {_text(exc.smtp_error)}")
        except (smtplib.SMTPException, OSError) as exc:
            if watchdog.expired:
                outcome = failed(f"SMTP timeout: the session took longer than {2 * timeout:g} s")
            else:
                outcome = failed(f"SMTP {type(exc).__name__}: {exc}")
        else:
            outcome = Outcome(True)
            with contextlib.suppress(smtplib.SMTPException, OSError):
                session.quit()  # the mail is accepted whatever the answer to QUIT
        finally:
            session.close()
    return outcome


def _text(reply: bytes | str) -> str:
    return reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
