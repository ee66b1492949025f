"""Deliveries of an encrypted queue: subscribers get plaintext; a body without its key is a failed attempt.

An in-process notifier on SQLite (the store does not matter here: the bodies
are opened above the driver, as the conformance suite checks on every store).
"""

from __future__ import annotations

import pytest

from tests.notify.conftest import ALLOW_LOOPBACK, running_notifier, wait_until
from zaqar_lite.config import NotifierSettings, Settings, load_settings
from zaqar_lite.notify import state
from zaqar_lite.notify.state import Delivery
from zaqar_lite.service import Messaging
from zaqar_lite.service.subscriptions import Subscriptions
from zaqar_lite.storage import open_storage

K1 = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
K2 = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
SECRET = {"card": "4111-1111-1111-1111"}
#: retry a failed attempt at once, twice, then suspend
SHORT = {"retries_with_no_delay": 2, "minimum_delay_retries": 0, "maximum_delay_retries": 0,
         "minimum_delay": 0, "maximum_delay": 0}


@pytest.fixture
def storage(tmp_path):
    driver = open_storage(f"sqlite:///{tmp_path}/zaqar.db")
    yield driver
    driver.close()


def settings_with(*keys: str) -> Settings:
    fast = NotifierSettings(lease_seconds=4.0, request_timeout=1.0, poll_interval=0.05, threads=2,
                            allowed_targets=ALLOW_LOOPBACK)
    return load_settings(None, storage_uri="sqlite:///unused.db").replace(notifier=fast, encryption_keys=keys)


def subscribe_and_post(storage, receiver, keys: tuple[str, ...]) -> str:
    settings = settings_with(*keys)
    messaging = Messaging(storage, settings)
    messaging.create_queue("p", "vault", {"_enable_encrypt_messages": True})
    subscription_id, _ = Subscriptions(storage, settings).create(
        "p", "vault", {"subscriber": receiver.url("hook"), "options": {"_retry_policy": SHORT}})
    item = {"body": SECRET, "ttl": None, "delay": None, "dlq_eligible": True}
    messaging.post("p", "vault", "client", [item], 100)
    return subscription_id


def delivery_of(storage, subscription_id: str) -> Delivery | None:
    record = storage.get_record("p", state.DELIVERY, state.key("vault", subscription_id))
    return Delivery.from_record(record.value) if record else None


def test_a_subscriber_of_an_encrypted_queue_receives_the_plaintext_body(storage, receiver):
    subscribe_and_post(storage, receiver, (K2,))
    with running_notifier(storage, settings_with(K2)):
        wait_until(lambda: receiver.acknowledged("hook"), 20, "the delivery")
    assert receiver.acknowledged("hook")[0].body["body"] == SECRET


def test_a_body_whose_key_is_gone_is_retried_then_suspended_and_the_notifier_lives_on(storage, receiver):
    subscription_id = subscribe_and_post(storage, receiver, (K2,))
    only_k1 = settings_with(K1)
    Subscriptions(storage, only_k1).create("p", "open", {"subscriber": receiver.url("plain")})
    with running_notifier(storage, only_k1):
        wait_until(lambda: (delivery_of(storage, subscription_id) or Delivery()).suspended, 20,
                   "the suspension")
        delivery = delivery_of(storage, subscription_id)
        assert delivery is not None and delivery.last_error is not None
        assert "cannot be decrypted: it was encrypted with key k2, which [encryption] keys does not hold" \
            in delivery.last_error
        Messaging(storage, only_k1).post(
            "p", "open", "client", [{"body": "still delivering", "ttl": None, "delay": None,
                                     "dlq_eligible": True}], 100)
        wait_until(lambda: receiver.acknowledged("plain"), 20, "a delivery of another queue")
    assert receiver.acknowledged("plain")[0].body["body"] == "still delivering"
    assert receiver.deliveries("hook") == []
