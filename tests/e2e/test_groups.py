"""Ordered message groups on the real server: consumer processes never hold messages of a group at once."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest

from tests.e2e.harness import ApiSession, RunningServer

pytestmark = pytest.mark.slow

CONSUMERS = 3
GROUPS = "abcde"
PER_GROUP = 4
#: a claim's ttl: on a loaded Swift a claim's write slower than its settle time is given up and
#: keeps its message hidden until that claim lapses (it may protect a claim it overwrote; the
#: group waits behind it), so the consumers can wait out one ttl within the deadline
CLAIM_TTL = 60
DEADLINE = 240.0


def consume(base_url: str, project: str, queue: str, start: Any, results: Any) -> None:
    """Claim and delete until the queue is empty; report (body, claimed at, deleted at) of each message."""
    handled: list[tuple[str, float, float]] = []
    with ApiSession(base_url, project=project) as api:
        start.wait(60)
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            answer = api.post(f"/v2/queues/{queue}/claims", params={"limit": 5},
                              json={"ttl": CLAIM_TTL, "grace": 60})
            if answer.status_code == 204:
                if api.get(f"/v2/queues/{queue}/stats").json()["messages"]["total"] == 0:
                    break
                time.sleep(0.02)
                continue
            claimed_at = time.monotonic()
            for message in answer.json()["messages"]:
                time.sleep(0.01)  # the work
                deleted_at = time.monotonic()
                api.delete(message["href"])
                handled.append((message["body"], claimed_at, deleted_at))
    results.put(handled)


def test_consumer_processes_take_each_group_in_order_one_claim_at_a_time(
        server: RunningServer, project: str, queue_name: str):
    with ApiSession(server.url, project=project) as api:
        messages = [{"body": f"{group}{n}", "group": group} for n in range(PER_GROUP) for group in GROUPS]
        assert api.post(f"/v2/queues/{queue_name}/messages", json={"messages": messages}).status_code == 201
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(CONSUMERS), context.Queue()
    consumers = [context.Process(target=consume, args=(server.url, project, queue_name, start, results))
                 for _ in range(CONSUMERS)]
    for process in consumers:
        process.start()
    handled = [item for _ in consumers for item in results.get(timeout=DEADLINE + 30)]
    for process in consumers:
        process.join(30)
    assert sorted(body for body, _, _ in handled) == sorted(m["body"] for m in messages)
    for group in GROUPS:
        spans = sorted((claimed, deleted, body) for body, claimed, deleted in handled if body[0] == group)
        assert [body for _, _, body in spans] == [f"{group}{n}" for n in range(PER_GROUP)]
        for (earlier_claim, deleted, _), (claimed, _, _) in zip(spans, spans[1:], strict=False):
            # the next one came in the same claim, or was claimed only once this one was done
            assert claimed == earlier_claim or deleted <= claimed
