"""``Storage.next_visible_at``: when a queue's delayed or claimed messages may next become claimable.

SQLite and Redis read it from the store (long polling sleeps until then);
MongoDB and Swift answer ``now`` (they cannot tell cheaply, and long polling
re-checks them at an interval). On every driver the answer is never later
than the true time.
"""

from __future__ import annotations

import pytest

from tests.storage.conformance.conftest import P, Q, post

#: the drivers that read the time from the store; the others answer ``now`` (the two-pool
#: deployment's pools are a SQLite and a Redis store)
TELLS = ("sqlite", "redis", "pools")


@pytest.fixture
def start(clock) -> float:
    return clock()


def answer(driver, clock) -> float | None:
    return driver.next_visible_at(P, Q, clock())


def test_a_queue_with_nothing_delayed_or_claimed_has_no_next_time(driver, messaging, clock):
    post(messaging, "free")
    assert answer(driver, clock) == (None if driver.name in TELLS else clock())


def test_the_next_time_is_the_earliest_delay_or_claim_end(driver, messaging, clock, start):
    post(messaging, "later", delay=30)
    post(messaging, "claimed")
    messaging.claim(P, Q, 1, 60, 60)
    if driver.name not in TELLS:
        assert answer(driver, clock) == start
        return
    assert answer(driver, clock) == start + 30
    clock.advance(31)  # the delay ended: the claim's end is next
    assert answer(driver, clock) == start + 60
    clock.advance(30)  # the claim lapsed too
    assert answer(driver, clock) is None


def test_a_released_claim_is_no_longer_waited_for(driver, messaging, clock, start):
    post(messaging, "claimed")
    claim_id, _, _ = messaging.claim(P, Q, 1, 120, 60)
    messaging.release_claim(P, Q, claim_id)
    assert answer(driver, clock) == (None if driver.name in TELLS else start)


def test_another_queue_is_not_counted(driver, messaging, clock, start):
    post(messaging, "elsewhere", delay=10, queue="other")
    assert answer(driver, clock) == (None if driver.name in TELLS else start)
