"""The subscription service, the lease and a running notifier on every storage driver.

Subscription state lives only in the versioned records of the storage contract,
so the same behaviour must hold on SQLite, Redis, MongoDB and Swift. The
``driver`` fixture of the storage suite gives each test a fresh store of each kind.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.notify.conftest import ALLOW_LOOPBACK, PATIENT, wait_until
from tests.notify.receiver import Receiver
from tests.notify.streams import acknowledged_numbers, check_stream
from tests.storage.conftest import driver, driver_uri  # noqa: F401 - the fixtures, parametrised over every store
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import NotifierSettings, Settings, load_settings
from zaqar_lite.notify import state
from zaqar_lite.notify.lease import Lease, LeaseLost
from zaqar_lite.notify.worker import Notifier
from zaqar_lite.service import Messaging
from zaqar_lite.service.subscriptions import SubscriptionExists, Subscriptions

URL = "http://127.0.0.1:9/hook"


@pytest.fixture
def settings_for_store() -> Settings:
    fast = NotifierSettings(lease_seconds=4.0, request_timeout=1.0, poll_interval=0.1, threads=2,
                            allowed_targets=ALLOW_LOOPBACK)
    return load_settings(None, storage_uri="sqlite:///unused.db").replace(notifier=fast)


@pytest.fixture
def service(driver, settings_for_store, clock) -> Subscriptions:  # noqa: F811
    return Subscriptions(driver, settings_for_store, clock)


def test_subscriptions_are_unique_listed_changed_and_removed_with_their_queue(service, driver):  # noqa: F811
    first, created = service.create("p", "q1", {"subscriber": URL})
    assert created
    assert service.create("p", "q1", {"subscriber": URL}) == (first, False)
    other, _ = service.create("p", "q2", {"subscriber": URL})
    second, _ = service.create("p", "q1", {"subscriber": URL + "/2"})
    assert {s.id for s, _ in service.list("p", "q1", marker=None, limit=10)} == {first, second}
    assert [s.id for s, _ in service.list("p", "q2", marker=None, limit=10)] == [other]
    service.confirm("p", "q1", first, {"confirmed": True})
    with pytest.raises(SubscriptionExists):
        service.create("p", "q1", {"subscriber": URL})
    service.update("p", "q1", first, {"subscriber": URL + "/new"})
    third, created = service.create("p", "q1", {"subscriber": URL})
    assert created and third != first
    service.delete_queue_subscriptions("p", "q1")
    for kind in (state.SUBSCRIPTION, state.SUBSCRIBER, state.DELIVERY):
        assert driver.list_records("p", kind, prefix="q1/") == []
        assert len(driver.list_records("p", kind, prefix="q2/")) == 1


def test_the_lease_is_exclusive_and_taken_over_after_expiry(service, driver):  # noqa: F811
    clock = ManualClock()
    subscription_id, _ = service.create("p", "q", {"subscriber": URL})
    record_key = state.key("q", subscription_id)
    first = Lease(driver, "p", record_key, "a", 10.0, clock)
    second = Lease(driver, "p", record_key, "b", 10.0, clock)
    assert first.acquire() and not second.acquire()
    clock.advance(11)
    assert second.acquire()
    with pytest.raises(LeaseLost):
        first.write(lambda d: d)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.mark.slow
def test_a_running_notifier_delivers_in_order_through_random_failures(driver, settings_for_store,  # noqa: F811
                                                                       receiver):
    # Every Swift record write waits its settle time (0.5 s), so Swift gets a shorter stream.
    count = 5 if driver.name == "swift" else 40
    receiver.behave("hook", fail_rate=0.3)
    Subscriptions(driver, settings_for_store).create(
        "p", "orders", {"subscriber": receiver.url("hook"), "options": {"_retry_policy": PATIENT}})
    messaging = Messaging(driver, settings_for_store)
    for first in range(0, count, 20):
        messaging.post("p", "orders", "client", [
            {"body": {"n": n}, "ttl": None, "delay": None, "dlq_eligible": True}
            for n in range(first, min(first + 20, count))], 100)
    notifier = Notifier(driver, settings_for_store)
    thread = threading.Thread(target=notifier.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(acknowledged_numbers(receiver.deliveries("hook"))) == count, 60,
                   f"{count} deliveries")
    finally:
        notifier.stop()
        thread.join(15)
    assert check_stream(receiver.deliveries("hook"), count) == 0
    assert receiver.overlaps == []
