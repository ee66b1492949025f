"""mailto: subscribers: mails through a real SMTP server on loopback, in order, retried, suspended, resumed.

A notifier (the real :class:`~zaqar_lite.notify.worker.Notifier`, in a thread)
serves subscriptions stored on a real store of each kind; the SMTP server is
aiosmtpd on a free 127.0.0.1 port (:mod:`tests.notify.smtp_sink`).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from email.message import EmailMessage

import pytest
import trustme

from tests.notify.conftest import ALLOW_LOOPBACK, running_notifier, wait_until
from tests.notify.smtp_sink import SmtpSink
from tests.notify.streams import post_numbered
from tests.storage.conftest import driver, driver_uri, storage_uri  # noqa: F401 - the fixtures, over every store
from zaqar_lite.config import NotifierSettings, Settings, SmtpSettings, load_settings
from zaqar_lite.notify import mail
from zaqar_lite.notify.outcome import Outcome
from zaqar_lite.service import Messaging
from zaqar_lite.service.subscriptions import Subscriptions
from zaqar_lite.storage import Storage

#: retry at once twice, then suspend
TWO_RETRIES = {"retries_with_no_delay": 2, "minimum_delay_retries": 0, "maximum_delay_retries": 0,
               "minimum_delay": 0, "maximum_delay": 0}
#: retry every second for a minute
EVERY_SECOND = {"retries_with_no_delay": 0, "minimum_delay_retries": 60, "maximum_delay_retries": 0,
                "minimum_delay": 1, "maximum_delay": 1}
FAST = NotifierSettings(lease_seconds=4.0, request_timeout=1.0, poll_interval=0.05, threads=2,
                        allowed_targets=ALLOW_LOOPBACK)


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    with SmtpSink() as running:
        yield running


def settings_for(sink: SmtpSink, **smtp: object) -> Settings:
    fields = {"host": "127.0.0.1", "port": sink.port, **smtp}
    return load_settings(None, storage_uri="sqlite:///unused.db").replace(
        notifier=FAST, smtp=SmtpSettings(**fields))  # type: ignore[arg-type]


def post(storage: Storage, settings: Settings, queue: str, bodies: list[object], ttl: int = 300) -> list[str]:
    messages = [{"body": b, "ttl": ttl, "delay": None, "dlq_eligible": True} for b in bodies]
    return Messaging(storage, settings).post("p", queue, "client", messages, 100)


def numbers(sink: SmtpSink) -> list[int]:
    return [json.loads(r.message.get_content())["body"]["n"] for r in sink.received()]


def delivery_of(service: Subscriptions, queue: str, subscription_id: str):
    return service.get("p", queue, subscription_id)[1]


# -- the mail -------------------------------------------------------------------


def test_a_mail_carries_the_notification_to_the_address_with_zaqars_headers(store, sink):
    settings = settings_for(sink, from_address="Queue Robot <robot@example.org>")
    service = Subscriptions(store, settings)
    plain, _ = service.create("p", "orders", {"subscriber": "mailto:ops@example.com"})
    styled, _ = service.create("p", "orders", {
        "subscriber": "mailto:sales%40example.com?subject=Commande%20re%C3%A7ue",
        "options": {"from": "Orders <orders@example.com>", "subject": "overridden by the URI"}})
    [message_id] = post(store, settings, "orders", [{"sku": "A-1", "qty": 2}], ttl=600)
    with running_notifier(store, settings):
        wait_until(lambda: len(sink.received()) == 2, 20, "two mails")
    by_recipient = {r.rcpt_tos[0]: r for r in sink.received()}
    assert set(by_recipient) == {"ops@example.com", "sales@example.com"}
    first, second = by_recipient["ops@example.com"], by_recipient["sales@example.com"]
    assert first.mail_from == "robot@example.org"
    assert first.message["To"] == "ops@example.com"
    assert first.message["From"] == "Queue Robot <robot@example.org>"
    assert first.message["Subject"] == ""
    assert first.message["Message-ID"] == f"<{message_id}.{plain}@zaqar-lite>"
    assert first.message["X-Zaqar-Lite-Message-Id"] == message_id
    assert first.message.get_content_type() == "text/plain"
    assert json.loads(first.message.get_content()) == {
        "body": {"sku": "A-1", "qty": 2}, "ttl": 600,
        "queue_name": "orders", "Message_Type": "Notification"}
    assert second.mail_from == "orders@example.com"
    assert second.message["To"] == "sales@example.com"
    assert second.message["From"] == "Orders <orders@example.com>"
    assert second.message["Subject"] == "Commande reçue"
    assert second.message["X-Zaqar-Lite-Subscription-Id"] == styled
    assert json.loads(second.message.get_content())["body"] == {"sku": "A-1", "qty": 2}
    assert delivery_of(service, "orders", plain).delivered == 1


def test_the_options_subject_is_used_when_the_uri_has_none(store, sink):
    settings = settings_for(sink)
    Subscriptions(store, settings).create("p", "q", {"subscriber": "mailto:ops@example.com",
                                                     "options": {"subject": "Queue q"}})
    post(store, settings, "q", [{"n": 0}])
    with running_notifier(store, settings):
        wait_until(lambda: sink.received(), 20, "one mail")
    [received] = sink.received()
    assert received.message["Subject"] == "Queue q"
    assert received.message["From"] == "zaqar-lite <no-reply@localhost>"
    assert received.mail_from == "no-reply@localhost"


def test_a_from_stored_before_the_operator_fixed_the_sender_gives_way_to_from_address(store, sink):
    Subscriptions(store, settings_for(sink)).create("p", "q", {"subscriber": "mailto:ops@example.com",
                                                               "options": {"from": "CEO <ceo@example.com>"}})
    fixed = settings_for(sink, from_address="Queue Robot <robot@example.org>", fixed_from=True)
    post(store, fixed, "q", [{"n": 0}])
    with running_notifier(store, fixed):
        wait_until(lambda: sink.received(), 20, "one mail")
    [received] = sink.received()
    assert received.message["From"] == "Queue Robot <robot@example.org>"
    assert received.mail_from == "robot@example.org"


def test_a_from_outside_the_allowed_senders_gives_way_to_from_address(store, sink):
    Subscriptions(store, settings_for(sink)).create("p", "q", {"subscriber": "mailto:ops@example.com",
                                                               "options": {"from": "ceo@evil.org"}})
    Subscriptions(store, settings_for(sink)).create("p", "q", {"subscriber": "mailto:dev@example.com",
                                                               "options": {"from": "Ops <ops@example.com>"}})
    restricted = settings_for(sink, allowed_from="example.com")
    post(store, restricted, "q", [{"n": 0}])
    with running_notifier(store, restricted):
        wait_until(lambda: len(sink.received()) == 2, 20, "two mails")
    senders = {r.rcpt_tos[0]: r.message["From"] for r in sink.received()}
    assert senders == {"ops@example.com": "zaqar-lite <no-reply@localhost>",
                       "dev@example.com": "Ops <ops@example.com>"}


@pytest.mark.slow
def test_mails_arrive_in_post_order_on_every_store(driver, sink):  # noqa: F811
    count = 5 if driver.name == "swift" else 30
    settings = settings_for(sink)
    Subscriptions(driver, settings).create("p", "stream", {"subscriber": "mailto:ops@example.com"})
    for first in range(0, count, 10):
        post(driver, settings, "stream", [{"n": n} for n in range(first, min(first + 10, count))])
    with running_notifier(driver, settings):
        wait_until(lambda: len(sink.received()) >= count, 60, f"{count} mails")
    assert numbers(sink) == list(range(count))


def test_a_notifier_process_mails_through_the_smtp_server_its_environment_names(api, notifiers, sink):
    notifiers.start(env={"ZAQAR_LITE_SMTP_HOST": "127.0.0.1", "ZAQAR_LITE_SMTP_PORT": str(sink.port),
                         "ZAQAR_LITE_SMTP_FROM_ADDRESS": "Ops Queue <queue@example.net>"})
    result = api.post("/v2/queues/e2e/subscriptions",
                      json={"subscriber": "mailto:ops@example.com?subject=From%20e2e", "ttl": 600})
    assert result.status_code == 201, result.text
    post_numbered(api, "e2e", 3)
    wait_until(lambda: len(sink.received()) == 3, 30, "three mails")
    assert numbers(sink) == [0, 1, 2]
    assert {(r.mail_from, r.message["From"], r.message["Subject"]) for r in sink.received()} == {
        ("queue@example.net", "Ops Queue <queue@example.net>", "From e2e")}


# -- failures -------------------------------------------------------------------


def test_mails_wait_while_the_smtp_server_is_down_and_arrive_in_order_once_it_is_up(store, sink):
    settings = settings_for(sink)
    service = Subscriptions(store, settings)
    subscription_id, _ = service.create("p", "q", {"subscriber": "mailto:ops@example.com",
                                                   "options": {"_retry_policy": EVERY_SECOND}})
    sink.stop()
    post(store, settings, "q", [{"n": n} for n in range(3)])
    with running_notifier(store, settings):
        wait_until(lambda: delivery_of(service, "q", subscription_id).attempts >= 2, 20,
                   "two failed attempts")
        failing = delivery_of(service, "q", subscription_id)
        assert failing.last_error.startswith("SMTP ConnectionRefusedError"), failing.last_error
        assert failing.suspended_at is None and failing.delivered == 0
        sink.start()
        wait_until(lambda: len(sink.received()) == 3, 20, "three mails after the server came back")
    assert numbers(sink) == [0, 1, 2]
    recovered = delivery_of(service, "q", subscription_id)
    assert recovered.delivered == 3 and recovered.attempts == 0


@pytest.mark.parametrize("reply", ["451 4.3.0 Mailbox busy, try later", "554 5.7.1 Message refused"])
def test_smtp_error_replies_are_retried_then_suspend_and_resume_sends_the_rest_in_order(store, sink, reply):
    settings = settings_for(sink)
    service = Subscriptions(store, settings)
    subscription_id, _ = service.create("p", "q", {"subscriber": "mailto:ops@example.com",
                                                   "options": {"_retry_policy": TWO_RETRIES}})
    sink.refuse(reply)
    post(store, settings, "q", [{"n": n} for n in range(3)])
    with running_notifier(store, settings):
        wait_until(lambda: delivery_of(service, "q", subscription_id).suspended, 20, "the suspension")
        time.sleep(0.3)
        assert sink.attempts == 3  # the first attempt and two retries, all on message 0
        suspended = delivery_of(service, "q", subscription_id)
        assert suspended.last_error == f"SMTP {reply}"
        assert suspended.delivered == 0
        sink.refuse(None)
        service.resume("p", "q", subscription_id)
        wait_until(lambda: len(sink.received()) == 3, 20, "three mails after the resume")
    assert numbers(sink) == [0, 1, 2]
    assert not delivery_of(service, "q", subscription_id).suspended


def test_a_refusal_then_acceptance_delivers_the_same_message_again_first(store, sink):
    settings = settings_for(sink)
    service = Subscriptions(store, settings)
    subscription_id, _ = service.create("p", "q", {"subscriber": "mailto:ops@example.com",
                                                   "options": {"_retry_policy": TWO_RETRIES}})
    sink.refuse("421 4.4.5 Too busy", times=2)
    post(store, settings, "q", [{"n": n} for n in range(2)])
    with running_notifier(store, settings):
        wait_until(lambda: len(sink.received()) == 2, 20, "two mails")
    assert numbers(sink) == [0, 1]
    assert sink.attempts == 4
    assert delivery_of(service, "q", subscription_id).last_error == "SMTP 421 4.4.5 Too busy"


# -- the SMTP session -----------------------------------------------------------


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def server_tls(authority: trustme.CA):
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    return context


def a_mail(to: str = "mailto:ops@example.com") -> EmailMessage:
    return mail.compose({"id": "m1", "body": {"n": 0}}, to, {}, "zaqar-lite <no-reply@localhost>",
                        "s1", "m1", 0)


def test_starttls_and_login_reach_a_server_that_requires_both(authority, tmp_path):
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    with SmtpSink(tls=server_tls(authority), login=("zaqar", "s3cret")) as secure:
        good = settings_for(secure, starttls=True, ca_file=str(ca_file), username="zaqar", password="s3cret")
        assert mail.send(good.smtp, a_mail(), 2.0) == Outcome(True)
        wrong = settings_for(secure, starttls=True, ca_file=str(ca_file), username="zaqar", password="nope")
        refused = mail.send(wrong.smtp, a_mail(), 2.0)
        assert not refused.acknowledged and refused.error.startswith("SMTP 535"), refused
        plain = settings_for(secure)
        refused = mail.send(plain.smtp, a_mail(), 2.0)
        assert not refused.acknowledged and refused.error.startswith("SMTP 530"), refused
        untrusted = settings_for(secure, starttls=True, username="zaqar", password="s3cret")
        refused = mail.send(untrusted.smtp, a_mail(), 2.0)
        assert not refused.acknowledged and "CERTIFICATE_VERIFY_FAILED" in refused.error, refused
        assert [r.rcpt_tos for r in secure.received()] == [["ops@example.com"]]


def test_ssl_speaks_tls_from_the_first_byte(authority, tmp_path):
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    with SmtpSink(tls=server_tls(authority), implicit_tls=True) as smtps:
        settings = settings_for(smtps, ssl=True, ca_file=str(ca_file))
        assert mail.send(settings.smtp, a_mail(), 2.0) == Outcome(True)
        assert len(smtps.received()) == 1


def test_a_server_that_never_greets_fails_the_attempt_after_the_timeout():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        smtp = SmtpSettings(host="127.0.0.1", port=silent.getsockname()[1])
        outcome = mail.send(smtp, a_mail(), 0.5)
    assert outcome == Outcome(False, "SMTP SMTPServerDisconnected: Connection unexpectedly closed: timed out")


@contextlib.contextmanager
def dripping_server() -> Iterator[int]:
    """A server that greets with an endless multi-line 220 reply, one line every 0.1 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def drip() -> None:
        connection, _ = listener.accept()
        with connection:
            while not done.is_set():
                try:
                    connection.sendall(b"220-still here\r\n")
                except OSError:
                    return
                time.sleep(0.1)

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        listener.close()
        thread.join(5)


def test_a_server_that_answers_too_slowly_is_cut_off_at_twice_the_timeout():
    with dripping_server() as port:
        outcome = mail.send(SmtpSettings(host="127.0.0.1", port=port), a_mail(), 0.5)
    assert outcome == Outcome(False, "SMTP timeout: the session took longer than 1 s")


# -- settings -------------------------------------------------------------------


def test_smtp_settings_come_from_the_smtp_section_and_the_environment(tmp_path, monkeypatch):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[smtp]\nhost = mail.example.com\nport = 587\nstarttls = true\nusername = zaqar\n"
                    "password = from-the-file\nfrom_address = Queues <queues@example.com>\n")
    monkeypatch.setenv("ZAQAR_LITE_SMTP_PASSWORD", "from-the-environment")
    assert load_settings(conf).smtp == SmtpSettings(
        host="mail.example.com", port=587, starttls=True, ssl=False, ca_file="", username="zaqar",
        password="from-the-environment", from_address="Queues <queues@example.com>")


@pytest.mark.parametrize(("text", "error"), [
    ("port = 0", "[smtp] port must be a whole number from 1 to 65535, got '0'"),
    ("port = smtp", "[smtp] port must be a whole number from 1 to 65535, got 'smtp'"),
    ("starttls = yes", "[smtp] starttls must be true or false, got 'yes'"),
    ("starttls = true\nssl = true", "[smtp] starttls and ssl exclude each other"),
    ("from_address = nobody", "[smtp] from_address must be a mail address"),
    ("host =", "[smtp] host must be a host name or address (not empty), got ''"),
])
def test_a_bad_smtp_setting_is_refused_with_a_message_that_names_it(tmp_path, text, error):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text(f"[smtp]\n{text}\n")
    with pytest.raises(ValueError, match=re.escape(error)):
        load_settings(conf)


def test_subscriber_schemes_take_any_of_zaqars_types_and_nothing_else(tmp_path):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[notifier]\nsubscriber_schemes = https, mailto, trust+https\n")
    assert load_settings(conf).notifier.subscriber_schemes == ("https", "mailto", "trust+https")
    conf.write_text("[notifier]\nsubscriber_schemes = https, ftp\n")
    with pytest.raises(ValueError, match="subscriber_schemes must be some of http, https, mailto"):
        load_settings(conf)
