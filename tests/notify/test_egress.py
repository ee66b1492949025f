"""What a subscription can make this server send: targets, headers, fan-out and mail fields.

The API is the real app; deliveries are real HTTP requests to the suite's
receiver on loopback, which the default target rule refuses and the operator's
``[notifier] allowed_targets`` opens.
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import falcon.testing
import pytest

from tests.conftest import free_port
from tests.notify.conftest import ALLOW_LOOPBACK, running_notifier, wait_until
from tests.notify.receiver import Receiver
from zaqar_lite.api.app import create_app
from zaqar_lite.config import Limits, NotifierSettings, Settings, SmtpSettings, load_settings
from zaqar_lite.notify import state, webhook
from zaqar_lite.notify.outcome import Outcome
from zaqar_lite.rules import egress
from zaqar_lite.storage import Storage

BASE = "/v2/queues/q/subscriptions"
REFUSED = egress.TARGET_REFUSED
FAST = {"lease_seconds": 4.0, "request_timeout": 1.0, "poll_interval": 0.05, "threads": 2}


def settings_with(store_uri: str = "sqlite:///unused.db", **notifier: Any) -> Settings:
    return load_settings(None, storage_uri=store_uri).replace(notifier=NotifierSettings(**notifier))


@pytest.fixture
def default_client(tmp_path) -> falcon.testing.TestClient:
    """A client of an app with the default target rule (nothing but public addresses)."""
    app = create_app(settings_with(f"sqlite:///{tmp_path}/zaqar.db?synchronous=normal"))
    return falcon.testing.TestClient(app, headers={"Client-ID": str(uuid.uuid4()), "X-Project-ID": "p"})


def client_with(tmp_path, **changes: Any) -> falcon.testing.TestClient:
    settings = settings_with(f"sqlite:///{tmp_path}/zaqar.db?synchronous=normal").replace(**changes)
    return falcon.testing.TestClient(create_app(settings),
                                     headers={"Client-ID": str(uuid.uuid4()), "X-Project-ID": "p"})


def refusal(result: falcon.testing.Result, status: int = 400) -> str:
    assert result.status_code == status, result.text
    return str(result.json["description"])


# -- subscribe time -------------------------------------------------------------------------


@pytest.mark.parametrize("subscriber", [
    "http://127.0.0.1:8888/v2/queues/q/messages", "http://127.0.0.1:6379/", "http://127.1:6379/",
    "http://2130706433/", "http://localhost:8888/", "http://[::1]:8888/", "https://169.254.169.254/latest/",
    "http://10.0.0.5/", "http://192.168.1.1/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0:22/",
    "trust+http://127.0.0.1:8888/v2/queues/q/messages",
])
def test_loopback_private_and_link_local_subscribers_are_refused_by_default(default_client, subscriber):
    description = refusal(default_client.simulate_post(BASE, json={"subscriber": subscriber}))
    assert description == f"subscriber is refused: {REFUSED}."


def test_a_public_subscriber_is_accepted_by_default(default_client):
    assert default_client.simulate_post(BASE, json={"subscriber": "https://8.8.8.8/hook"}).status_code == 201
    named = default_client.simulate_post(BASE, json={"subscriber": "https://hooks.example.com/"})
    assert named.status_code == 201


def test_an_update_to_a_loopback_subscriber_is_refused(default_client):
    created = default_client.simulate_post(BASE, json={"subscriber": "https://hooks.example.com/"})
    href = f"{BASE}/{created.json['subscription_id']}"
    result = default_client.simulate_patch(href, json={"subscriber": "http://127.0.0.1:6379/"})
    assert refusal(result) == f"subscriber is refused: {REFUSED}."
    assert default_client.simulate_get(href).json["subscriber"] == "https://hooks.example.com/"


def test_loopback_is_accepted_when_the_operator_allows_it(tmp_path):
    client = client_with(tmp_path, notifier=NotifierSettings(allowed_targets=("127.0.0.0/8",)))
    assert client.simulate_post(BASE, json={"subscriber": "http://127.0.0.1:9/"}).status_code == 201


def test_a_denied_network_is_refused_even_when_public(tmp_path):
    client = client_with(tmp_path, notifier=NotifierSettings(denied_targets=("8.8.8.0/24",)))
    result = client.simulate_post(BASE, json={"subscriber": "https://8.8.8.8/hook"})
    assert refusal(result) == f"subscriber is refused: {REFUSED}."


@pytest.mark.parametrize("name", ["Host", "Transfer-Encoding", "Content-Length", "Connection", "TE",
                                  "Proxy-Authorization", "Upgrade"])
def test_post_headers_that_frame_or_route_the_request_are_refused(default_client, name):
    result = default_client.simulate_post(BASE, json={"subscriber": "https://hooks.example.com/",
                                                      "options": {"post_headers": {name: "chunked"}}})
    assert refusal(result).startswith(f"options.post_headers: {name} is set by the server for each request")


@pytest.mark.parametrize("value", ["a\x00b", "a\x0bb", "a\u2028b", "a\x85b", "\u20ac"])
def test_post_headers_with_control_characters_are_refused(default_client, value):
    result = default_client.simulate_post(BASE, json={"subscriber": "https://hooks.example.com/",
                                                      "options": {"post_headers": {"X-Trace": value}}})
    assert refusal(result).startswith("options.post_headers: the value of X-Trace holds the character U+")


def test_post_headers_may_carry_an_authorization_for_the_receiver(default_client):
    result = default_client.simulate_post(BASE, json={"subscriber": "https://hooks.example.com/", "options": {
        "post_headers": {"Authorization": "Bearer abc"}}})
    assert result.status_code == 201


# -- fan-out ---------------------------------------------------------------------------------


def test_a_queue_takes_at_most_max_subscriptions_per_queue_with_a_409_naming_the_setting(tmp_path):
    limits = dataclasses.replace(Limits(), max_subscriptions_per_queue=3)
    client = client_with(tmp_path, limits=limits)
    for n in range(3):
        created = client.simulate_post(BASE, json={"subscriber": f"https://h{n}.example.com/"})
        assert created.status_code == 201
    result = client.simulate_post(BASE, json={"subscriber": "https://h3.example.com/"})
    assert refusal(result, 409) == (
        "The queue q already has 3 subscriptions, the most this server allows "
        "([limits] max_subscriptions_per_queue); delete one to add another.")
    again = client.simulate_post(BASE, json={"subscriber": "https://h0.example.com/"})
    assert again.status_code == 201  # an existing subscriber answers as before
    other = client.simulate_post("/v2/queues/other/subscriptions", json={"subscriber": "https://h3.example.com/"})
    assert other.status_code == 201
    listed = client.simulate_get(BASE).json["subscriptions"]
    client.simulate_delete(f"{BASE}/{listed[0]['id']}")
    assert client.simulate_post(BASE, json={"subscriber": "https://h3.example.com/"}).status_code == 201


def test_the_default_cap_is_one_hundred_subscriptions(default_client):
    def create(n: int) -> int:
        return default_client.simulate_post(BASE, json={"subscriber": f"https://h{n}.example.com/"}).status_code

    assert [create(n) for n in range(100)] == [201] * 100
    assert create(100) == 409


# -- delivery time ---------------------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


def send(rule: egress.TargetRule, url: str, options: dict[str, Any] | None = None) -> Outcome:
    body = b'{"n": 0}'
    headers = webhook.request_headers(body, options or {}, "s1", "m1")
    with webhook.guarded_session(rule) as session:
        return webhook.post(session, url, body, headers, 2.0)


def test_loopback_is_refused_at_delivery_by_default_and_nothing_reaches_it(receiver):
    assert send(egress.TargetRule(), receiver.url("inside")) == Outcome(False, REFUSED)
    assert receiver.deliveries("inside") == []


def test_a_refused_target_reads_the_same_whether_its_port_is_open_or_closed(receiver):
    closed = f"http://127.0.0.1:{free_port()}/x"
    assert send(egress.TargetRule(), receiver.url("open")) == send(egress.TargetRule(), closed)


def test_loopback_allowed_by_the_operator_is_delivered(receiver):
    rule = egress.TargetRule.from_settings(ALLOW_LOOPBACK, [])
    assert send(rule, receiver.url("allowed")) == Outcome(True)
    assert len(receiver.acknowledged("allowed")) == 1


@pytest.fixture
def rebinding_dns(monkeypatch) -> list[str]:
    """``rebind.test`` resolves to 127.0.0.1 the first time and to 127.0.0.2 after (an attacker's DNS)."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        asked.append(host)
        answer = "127.0.0.1" if len(asked) == 1 else "127.0.0.2"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answer, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_name_is_resolved_once_and_the_address_checked_is_the_one_connected_to(receiver, rebinding_dns):
    rule = egress.TargetRule.from_settings(["127.0.0.1/32"], [])
    url = receiver.url("named").replace("127.0.0.1", "rebind.test")
    assert send(rule, url) == Outcome(True)
    assert rebinding_dns == ["rebind.test"]
    assert len(receiver.acknowledged("named")) == 1
    assert send(rule, url) == Outcome(False, REFUSED)  # the next connection resolves again: 127.0.0.2


def test_a_name_resolving_to_loopback_is_refused_at_delivery(receiver, rebinding_dns):
    url = receiver.url("named").replace("127.0.0.1", "rebind.test")
    assert send(egress.TargetRule(), url) == Outcome(False, REFUSED)
    assert receiver.deliveries("named") == []


def test_a_forbidden_header_stored_before_the_rule_is_not_sent(receiver):
    rule = egress.TargetRule.from_settings(ALLOW_LOOPBACK, [])
    options = {"post_headers": {"Transfer-Encoding": "chunked", "Host": "internal", "X-Trace": "t1",
                                "X-Bad": "a\x00b"}}
    assert send(rule, receiver.url("stored"), options) == Outcome(True)
    [delivery] = receiver.deliveries("stored")
    names = {name.lower() for name in delivery.headers}
    assert "transfer-encoding" not in names and "x-bad" not in names
    assert delivery.headers["Content-Length"] == "8"
    assert delivery.headers["Host"] == f"127.0.0.1:{receiver.port}"
    assert delivery.headers["X-Trace"] == "t1"


def test_the_notifier_of_a_server_that_does_not_allow_loopback_records_a_refusal(store: Storage, receiver):
    allowing = settings_with(**FAST, allowed_targets=ALLOW_LOOPBACK)
    client = falcon.testing.TestClient(create_app(allowing, storage=store),
                                       headers={"Client-ID": str(uuid.uuid4()), "X-Project-ID": "p"})
    created = client.simulate_post(BASE, json={"subscriber": receiver.url("inside")})
    subscription_id = created.json["subscription_id"]
    client.simulate_post("/v2/queues/q/messages", json={"messages": [{"body": 1, "ttl": 300}]})

    def last_error() -> str | None:
        record = store.get_record("p", state.DELIVERY, state.key("q", subscription_id))
        return record.value.get("last_error") if record else None

    with running_notifier(store, settings_with(**FAST)):
        wait_until(lambda: last_error() is not None, 20, "a recorded failure")
    assert last_error() == REFUSED
    assert receiver.deliveries("inside") == []


# -- mail ------------------------------------------------------------------------------------


@pytest.mark.parametrize("subject", ["a\u2028b", "a\u2029b", "a\x85b", "a\x0bb", "a\x0cb", "a\x00b"])
def test_a_mail_subject_with_a_line_break_or_control_character_is_refused(default_client, subject):
    result = default_client.simulate_post(BASE, json={"subscriber": "mailto:ops@example.com",
                                                      "options": {"subject": subject}})
    assert refusal(result).startswith("options.subject is not valid: the subject is refused: it holds the "
                                      "character U+")


def test_a_mailto_subject_with_a_line_separator_is_refused(default_client):
    subscriber = "mailto:ops@example.com?subject=a%E2%80%A8b"
    result = default_client.simulate_post(BASE, json={"subscriber": subscriber})
    assert "the mailto: subject is refused: it holds the character U+2028" in refusal(result)


def test_a_fixed_sender_refuses_every_from_option(tmp_path):
    client = client_with(tmp_path, smtp=SmtpSettings(fixed_from=True))
    result = client.simulate_post(BASE, json={"subscriber": "mailto:ops@example.com",
                                              "options": {"from": "ceo@example.com"}})
    assert refusal(result) == ("options.from is refused: this server sends every mail From "
                               "zaqar-lite <no-reply@localhost> ([smtp] fixed_from).")
    assert client.simulate_post(BASE, json={"subscriber": "mailto:ops@example.com"}).status_code == 201


def test_allowed_senders_refuse_another_domain(tmp_path):
    client = client_with(tmp_path, smtp=SmtpSettings(allowed_from="example.com, alerts@example.org"))
    ok = client.simulate_post(BASE, json={"subscriber": "mailto:ops@example.com",
                                          "options": {"from": "Ops <ops@example.com>"}})
    assert ok.status_code == 201
    result = client.simulate_post(BASE, json={"subscriber": "mailto:dev@example.com",
                                              "options": {"from": "ceo@evil.org"}})
    assert refusal(result) == ("options.from is refused: ceo@evil.org is not among the senders this server "
                               "allows ([smtp] allowed_from).")


@pytest.fixture
def tls_receiver(tmp_path) -> Iterator[tuple[int, str]]:
    """An HTTPS server on loopback with a certificate for ``localhost``; yields its port and CA file."""
    import http.server
    import ssl
    import threading

    import trustme

    authority = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost").configure_cert(context)

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the signature of the base
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    try:
        yield server.server_address[1], str(ca_file)
    finally:
        server.shutdown()
        server.server_close()


def test_https_checks_the_certificate_against_the_url_host_while_connecting_to_the_checked_address(
        tls_receiver):
    port, ca_file = tls_receiver
    with webhook.guarded_session(egress.TargetRule.from_settings(ALLOW_LOOPBACK, [])) as session:
        session.verify = ca_file
        assert webhook.post(session, f"https://localhost:{port}/x", b"{}", {}, 2.0) == Outcome(True)
        wrong_name = webhook.post(session, f"https://127.0.0.1:{port}/x", b"{}", {}, 2.0)
        assert wrong_name.error is not None and "CERTIFICATE_VERIFY_FAILED" in wrong_name.error
    with webhook.guarded_session(egress.TargetRule()) as session:
        session.verify = ca_file
        assert webhook.post(session, f"https://localhost:{port}/x", b"{}", {}, 2.0) == Outcome(False, REFUSED)
