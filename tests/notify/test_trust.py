"""trust+http(s) subscribers: webhooks to the URL without ``trust+``, carrying the creator's token.

Subscriptions are made through the API (falcon's TestClient over a real store
of each kind), so the token is the one the request authenticated with; a real
notifier in a thread delivers to the webhook receiver on loopback.
"""

from __future__ import annotations

import json
import uuid

import falcon.testing
import pytest

from tests.notify.conftest import ALLOW_LOOPBACK, running_notifier, wait_until
from zaqar_lite.api.app import create_app
from zaqar_lite.config import NotifierSettings, Settings, load_settings
from zaqar_lite.notify import state
from zaqar_lite.notify.state import Delivery
from zaqar_lite.storage import Storage

FAST = NotifierSettings(lease_seconds=4.0, request_timeout=1.0, poll_interval=0.05, threads=2,
                        allowed_targets=ALLOW_LOOPBACK)
TOKENS = {"tok-creator": ("p", "member"), "tok-other": ("p", "admin")}


def settings(auth: str) -> Settings:
    base = load_settings(None, storage_uri="sqlite:///unused.db").replace(notifier=FAST)
    return base.replace(auth_strategy="token", tokens=TOKENS) if auth == "token" else base


def client_for(store: Storage, config: Settings, token: str | None) -> falcon.testing.TestClient:
    headers = {"Client-ID": str(uuid.uuid4()), "X-Project-ID": "p"}
    if token:
        headers["X-Auth-Token"] = token
    return falcon.testing.TestClient(create_app(config, storage=store), headers=headers)


def subscribe(client: falcon.testing.TestClient, subscriber: str, **options: object) -> str:
    result = client.simulate_post("/v2/queues/q/subscriptions",
                                  json={"subscriber": subscriber, "options": options})
    assert result.status_code == 201, result.text
    return result.json["subscription_id"]


def post_one(client: falcon.testing.TestClient, n: int) -> str:
    result = client.simulate_post("/v2/queues/q/messages",
                                  json={"messages": [{"body": {"n": n}, "ttl": 300}]})
    assert result.status_code == 201, result.text
    return result.json["resources"][0].rsplit("/", 1)[1]


def test_a_trust_subscriber_gets_webhooks_with_the_creators_token_under_token_auth(store, receiver):
    config = settings("token")
    creator = client_for(store, config, "tok-creator")
    subscriber = "trust+" + receiver.url("trusted")
    subscription_id = subscribe(creator, subscriber, post_headers={"X-Auth-Token": "forged", "X-Trace": "t1"})
    message_id = post_one(creator, 0)
    with running_notifier(store, config):
        wait_until(lambda: receiver.acknowledged("trusted"), 20, "one webhook")
    [delivery] = receiver.deliveries("trusted")
    assert delivery.headers["X-Auth-Token"] == "tok-creator"
    assert delivery.headers["X-Trace"] == "t1"
    assert delivery.body == {"body": {"n": 0}, "ttl": 300, "queue_name": "q", "Message_Type": "Notification"}
    assert delivery.headers["X-Zaqar-Lite-Message-Id"] == message_id
    shown = creator.simulate_get(f"/v2/queues/q/subscriptions/{subscription_id}")
    assert shown.json["subscriber"] == subscriber
    assert "tok-creator" not in shown.text
    listed = client_for(store, config, "tok-other").simulate_get("/v2/queues/q/subscriptions")
    assert "tok-creator" not in listed.text


K1 = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
K2 = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="


def test_a_trust_token_is_stored_sealed_on_a_server_with_keys_and_still_delivered(store, receiver):
    config = settings("token").replace(encryption_keys=(K2, K1))
    creator = client_for(store, config, "tok-creator")
    subscription_id = subscribe(creator, "trust+" + receiver.url("sealed"))
    record = store.get_record("p", state.SUBSCRIPTION, state.key("q", subscription_id))
    assert "tok-creator" not in json.dumps(record.value)
    assert record.value["auth_token"] is None
    assert record.value["sealed_auth_token"]["zaqar_lite:encrypted"]["kid"] == "k2"
    shown = creator.simulate_get(f"/v2/queues/q/subscriptions/{subscription_id}").text
    assert "tok-creator" not in shown and "zaqar_lite:encrypted" not in shown
    post_one(creator, 0)
    with running_notifier(store, config):
        wait_until(lambda: receiver.acknowledged("sealed"), 20, "one webhook")
    assert [d.headers.get("X-Auth-Token") for d in receiver.deliveries("sealed")] == ["tok-creator"]


def test_a_trust_token_whose_key_is_gone_fails_the_attempt_and_sends_nothing(store, receiver):
    config = settings("token").replace(encryption_keys=(K2,))
    creator = client_for(store, config, "tok-creator")
    subscription_id = subscribe(creator, "trust+" + receiver.url("lost"))
    post_one(creator, 0)

    def delivery() -> Delivery:
        found = store.get_record("p", state.DELIVERY, state.key("q", subscription_id))
        return Delivery.from_record(found.value) if found else Delivery()

    with running_notifier(store, config.replace(encryption_keys=(K1,))):
        wait_until(lambda: delivery().last_error is not None, 20, "a failed attempt")
    why = "the subscription's token cannot be decrypted: it was encrypted with key k2"
    assert why in delivery().last_error
    assert receiver.deliveries("lost") == []


def test_a_trust_subscriber_gets_no_token_header_in_noauth_mode(store, receiver):
    config = settings("noauth")
    client = client_for(store, config, "tok-creator")  # a token sent in noauth mode counts for nothing
    subscription_id = subscribe(client, "trust+" + receiver.url("open"))
    post_one(client, 0)
    with running_notifier(store, config):
        wait_until(lambda: receiver.acknowledged("open"), 20, "one webhook")
    [delivery] = receiver.deliveries("open")
    assert {name.lower() for name in delivery.headers}.isdisjoint({"x-auth-token"})
    assert delivery.body["body"] == {"n": 0}
    record = store.get_record("p", state.SUBSCRIPTION, state.key("q", subscription_id))
    assert record.value["auth_token"] is None


def test_a_patched_subscriber_carries_the_token_of_whoever_set_it(store, receiver):
    # A notifier serving a subscription sees a PATCH at its next time slice (up to 2 s later),
    # so each phase runs a notifier of its own, started after the PATCH.
    config = settings("token")
    creator = client_for(store, config, "tok-creator")
    other = client_for(store, config, "tok-other")
    subscription_id = subscribe(creator, "trust+" + receiver.url("first"))
    phases = [("first", None), ("second", "trust+" + receiver.url("second")),
              ("third", receiver.url("third"))]
    for n, (name, new_subscriber) in enumerate(phases):
        if new_subscriber is not None:
            patched = other.simulate_patch(f"/v2/queues/q/subscriptions/{subscription_id}",
                                           json={"subscriber": new_subscriber})
            assert patched.status_code == 204, patched.text
        post_one(creator, n)
        with running_notifier(store, config):
            wait_until(lambda name=name: receiver.acknowledged(name), 20, f"the {name} webhook")
    assert [d.headers.get("X-Auth-Token") for d in receiver.deliveries("first")] == ["tok-creator"]
    assert [d.headers.get("X-Auth-Token") for d in receiver.deliveries("second")] == ["tok-other"]
    assert [d.headers.get("X-Auth-Token") for d in receiver.deliveries("third")] == [None]
    assert [d.body["body"]["n"] for name, _ in phases for d in receiver.deliveries(name)] == [0, 1, 2]


@pytest.mark.parametrize("subscriber", ["trust+http://example.com/hook", "trust+https://example.com/hook",
                                        "mailto:ops@example.com", "http://example.com/hook",
                                        "https://example.com/hook"])
def test_every_zaqar_subscriber_type_is_accepted_by_default(store, subscriber):
    client = client_for(store, settings("noauth"), None)
    subscription_id = subscribe(client, subscriber)
    shown = client.simulate_get(f"/v2/queues/q/subscriptions/{subscription_id}")
    assert shown.json["subscriber"] == subscriber


def test_subscriber_schemes_limits_the_types_with_a_400_that_lists_the_accepted_ones(store):
    config = settings("noauth").replace(notifier=NotifierSettings(subscriber_schemes=("https", "mailto")))
    client = client_for(store, config, None)
    result = client.simulate_post("/v2/queues/q/subscriptions",
                                  json={"subscriber": "trust+https://example.com/hook"})
    assert result.status_code == 400
    assert result.json["description"] == (
        'subscriber must be a URI of one of the accepted types (https:, mailto:), '
        'got "trust+https://example.com/hook".')
    assert subscribe(client, "mailto:ops@example.com")
