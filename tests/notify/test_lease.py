"""The notifier lease on a delivery record: one holder at a time, taken over after expiry."""

from __future__ import annotations

import pytest

from zaqar_lite.clock import ManualClock
from zaqar_lite.notify import state
from zaqar_lite.notify.lease import Lease, LeaseLost
from zaqar_lite.notify.state import Delivery
from zaqar_lite.storage import open_storage

KEY = "q/s1"


@pytest.fixture
def storage(tmp_path):
    driver = open_storage(f"sqlite:///{tmp_path}/lease.db")
    driver.put_record("p", state.DELIVERY, KEY, Delivery(cursor=None, lease_expires=0.0).to_record(), None)
    yield driver
    driver.close()


def lease(storage, owner: str, clock: ManualClock) -> Lease:
    return Lease(storage, "p", KEY, owner, seconds=10.0, clock=clock)


def stored(storage) -> Delivery:
    return Delivery.from_record(storage.get_record("p", state.DELIVERY, KEY).value)


def test_a_free_lease_is_taken_and_then_refused_to_another_notifier(storage, clock):
    assert lease(storage, "a", clock).acquire()
    assert not lease(storage, "b", clock).acquire()
    assert stored(storage).owner == "a"


def test_an_expired_lease_is_taken_over_and_the_old_holder_can_write_nothing(storage, clock):
    first = lease(storage, "a", clock)
    assert first.acquire()
    clock.advance(10.5)
    second = lease(storage, "b", clock)
    assert second.acquire()
    with pytest.raises(LeaseLost):
        first.write(lambda d: Delivery(**{**d.to_record(), "cursor": 99}))
    assert stored(storage).owner == "b"
    assert stored(storage).cursor is None


def test_every_write_extends_the_lease(storage, clock):
    holder = lease(storage, "a", clock)
    holder.acquire()
    clock.advance(8)
    holder.write(lambda d: d)
    clock.advance(8)
    assert not lease(storage, "b", clock).acquire()


def test_a_released_lease_is_free_at_once(storage, clock):
    holder = lease(storage, "a", clock)
    holder.acquire()
    holder.release()
    assert lease(storage, "b", clock).acquire()


def test_a_write_by_the_api_in_between_is_merged_not_lost(storage, clock):
    holder = lease(storage, "a", clock)
    holder.acquire()
    record = storage.get_record("p", state.DELIVERY, KEY)
    resumed = {**record.value, "suspended_at": None, "attempts": 0, "last_error": "resumed by the API"}
    storage.put_record("p", state.DELIVERY, KEY, resumed, record.version)
    holder.write(lambda d: Delivery(**{**d.to_record(), "cursor": 5}))
    assert stored(storage).cursor == 5
    assert stored(storage).last_error == "resumed by the API"


def test_a_deleted_subscription_ends_the_lease(storage, clock):
    holder = lease(storage, "a", clock)
    holder.acquire()
    storage.delete_record("p", state.DELIVERY, KEY)
    with pytest.raises(LeaseLost):
        holder.write(lambda d: d)
