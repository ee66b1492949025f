"""The request path's budget: what a post, a claim, a delete and a release cost stays near the recorded cost.

Counted, not timed (``tests/budget/__init__.py``): the Python bytecode
instructions one request executes through the real app, on SQLite and on
Redis, on a queue with default settings and on one with a dead-letter queue.
A count more than 25 % over its recorded one fails (a change that makes the
path cost more, on any machine, whatever its load), and so does one under
half of it (the budget is then refreshed, so that it stays tight). Refresh on
purpose, when a feature must cost more or after the path got cheaper:
``make budget`` (``python -m tests.budget --update``).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests import budget
from tests.conftest import IN_CI
from zaqar_lite.service import Messaging


def recorded(store: str) -> dict[str, dict[str, int]]:
    """The recorded counts of ``store`` if taken with this Python's bytecode (else skip; fail under CI)."""
    document = budget.load_budget()
    taken_with = document["python"].rsplit(".", 1)[0]
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if taken_with != running:
        why = (f"the request budget was recorded with Python {taken_with}, whose bytecode differs from "
               f"Python {running}'s; refresh it: {budget.REFRESH_COMMAND}")
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    counts: dict[str, dict[str, int]] = document["stores"][store]
    return counts


def assert_within_budget(store: str, measured: dict[str, dict[str, int]]) -> None:
    problems = budget.over_budget(measured, recorded(store), store)
    document = budget.load_budget()
    then = {name: document.get(name) for name in budget.versions()}
    assert problems == [], (
        "\n".join(problems) + f"\n(versions now: {budget.versions()}; recorded with: {then}. If the change "
        f"is meant to cost this, refresh the budget on purpose: {budget.REFRESH_COMMAND})")


def test_sqlite_requests_stay_within_budget(tmp_path):
    assert_within_budget("sqlite", budget.measure(f"sqlite:///{tmp_path}/zaqar.db?synchronous=normal"))


def test_redis_requests_stay_within_budget(redis_store_uri):
    assert_within_budget("redis", budget.measure(redis_store_uri))


def test_the_budget_covers_every_store_queue_and_request():
    stores = budget.load_budget()["stores"]
    assert sorted(stores) == sorted(budget.STORES)
    for by_queue in stores.values():
        assert sorted(by_queue) == sorted(budget.QUEUES)
        for by_name in by_queue.values():
            assert sorted(by_name) == sorted(budget.REQUESTS)
            assert all(isinstance(count, int) and count > 0 for count in by_name.values())


# -- the budget's own checks --------------------------------------------------------------------------


def test_the_counter_counts_every_instruction_and_only_inside():
    def loop(n: int) -> None:
        for _ in range(n):
            pass

    counter = budget.InstructionCounter()
    counts = []
    for n in (0, 0, 1000):
        with counter:
            loop(n)
        counts.append(counter.instructions)
    loop(10_000)  # not counted
    assert counts[0] == counts[1] > 0
    # each turn of the loop is at least FOR_ITER, STORE_FAST and a jump
    assert counts[2] - counts[0] >= 3 * 1000
    assert counter.instructions == counts[2]


def test_a_slowed_post_fails_the_budget_and_only_the_post(tmp_path, monkeypatch):
    """The service's post doing as much again in a loop: the posts are over budget, the claims are not."""
    post = Messaging.post
    extra = max(recorded("sqlite")[queue]["post"] for queue in budget.QUEUES)

    def slowed_post(self: Messaging, *args: Any, **kwargs: Any) -> Any:
        for _ in range(extra):  # at least 2 instructions a turn: the post's cost at least doubles
            pass
        return post(self, *args, **kwargs)

    monkeypatch.setattr(Messaging, "post", slowed_post)
    measured = budget.measure(f"sqlite:///{tmp_path}/zaqar.db?synchronous=normal", warm=1, counted=1)
    problems = budget.over_budget(measured, recorded("sqlite"), "sqlite")
    assert [line.split(":")[0] for line in problems] == ["sqlite default post", "sqlite dlq post"]
    assert all("over 125% of the recorded" in line for line in problems)


def test_a_count_far_under_the_budget_fails_it_too():
    recorded_counts = {queue: dict.fromkeys(budget.REQUESTS, 10_000) for queue in budget.QUEUES}
    measured = {queue: dict.fromkeys(budget.REQUESTS, 10_000) for queue in budget.QUEUES}
    assert budget.over_budget(measured, recorded_counts, "sqlite") == []
    measured["default"]["claim"] = 12_500  # +25 %: still within
    measured["dlq"]["delete"] = 5_000  # half: still within
    assert budget.over_budget(measured, recorded_counts, "sqlite") == []
    measured["default"]["claim"] = 12_501
    measured["dlq"]["delete"] = 4_999
    del recorded_counts["dlq"]["release"]
    problems = budget.over_budget(measured, recorded_counts, "sqlite")
    assert [line.split(":")[0] for line in problems] == [
        "sqlite default claim", "sqlite dlq delete", "sqlite dlq release"]
    assert "over 125% of the recorded 10000" in problems[0]
    assert "under 50% of the recorded 10000" in problems[1] and "refresh" in problems[1]
    assert "no recorded count" in problems[2]
