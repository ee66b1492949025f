"""A real SMTP server under test (aiosmtpd): records every mail it accepts, refuses on demand.

It listens on a free 127.0.0.1 port in a thread of the test process. Each
mail it accepts is kept as received (:class:`Received`: the envelope and the
parsed message). :meth:`SmtpSink.refuse` makes it answer ``DATA`` with an
error reply; :meth:`SmtpSink.stop` and :meth:`SmtpSink.start` take it down and
bring it back on the same port. With ``tls`` it offers STARTTLS (or speaks TLS
from the first byte with ``implicit_tls``) with a certificate of a test CA,
and with ``login`` it requires AUTH with that user name and password.
"""

from __future__ import annotations

import dataclasses
import email
import email.message
import email.policy
import ssl
import threading
import time
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.conftest import free_port


@dataclasses.dataclass(frozen=True)
class Received:
    """One accepted mail: envelope sender and recipients, the parsed message and its raw bytes."""

    mail_from: str
    rcpt_tos: list[str]
    message: email.message.EmailMessage
    raw: bytes


class SmtpSink:
    """The SMTP server; use as a context manager or call :meth:`start` and :meth:`stop`."""

    def __init__(self, tls: ssl.SSLContext | None = None, implicit_tls: bool = False,
                 login: tuple[str, str] | None = None) -> None:
        self.port = free_port()
        self._tls = tls
        self._implicit_tls = implicit_tls
        self._login = login
        self._lock = threading.Lock()
        self._received: list[Received] = []
        self._refusals: list[str] = []
        self._refuse_all: str | None = None
        self.attempts = 0
        self._controller: Controller | None = None

    def __enter__(self) -> SmtpSink:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Listen (again) on the sink's port."""
        options: dict[str, Any] = {}
        if self._tls is not None and self._implicit_tls:
            options["ssl_context"] = self._tls
        elif self._tls is not None:
            options.update(tls_context=self._tls, require_starttls=True)
        if self._login is not None:
            options.update(auth_required=True, authenticator=self._authenticate)
        for _ in range(50):  # the port of a sink just stopped may take a moment to be free
            controller = Controller(self, hostname="127.0.0.1", port=self.port, **options)
            try:
                controller.start()
            except (OSError, RuntimeError):
                time.sleep(0.1)
                continue
            self._controller = controller
            return
        raise RuntimeError(f"the SMTP sink cannot listen on port {self.port}")

    def stop(self) -> None:
        """Stop listening: connections are refused until :meth:`start`."""
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def refuse(self, reply: str | None, times: int | None = None) -> None:
        """Answer ``DATA`` with ``reply`` (``451 4.3.0 Later``) ``times`` times, or always; None: accept."""
        with self._lock:
            if times is None:
                self._refuse_all, self._refusals = reply, []
            else:
                self._refuse_all, self._refusals = None, [reply or "250 OK"] * times

    def received(self) -> list[Received]:
        """Return every accepted mail, in order."""
        with self._lock:
            return list(self._received)

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str,
                      auth_data: Any) -> AuthResult:
        assert self._login is not None
        good = isinstance(auth_data, LoginPassword) and (
            auth_data.login.decode(), auth_data.password.decode()) == self._login
        return AuthResult(success=good, handled=False)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        """Accept the mail, or answer the refusal the test asked for."""
        with self._lock:
            self.attempts += 1
            if self._refuse_all is not None:
                return self._refuse_all
            if self._refusals:
                return self._refusals.pop(0)
            raw = envelope.original_content or envelope.content
            message = email.message_from_bytes(raw, policy=email.policy.default)
            self._received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message, raw))
        return "250 OK"
