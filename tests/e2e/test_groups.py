"""Ordered message groups on the real server: consumer processes never hold messages of a group at once."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import ApiSession, RunningServer, Store, configured_server

pytestmark = pytest.mark.slow

CONSUMERS = 3
GROUPS = "abcde"
PER_GROUP = 4
#: a claim's ttl: on Swift a claim that loses a message of a group to another claim leaves that
#: group's later messages it wrote claimed and unanswered until it lapses (docs/api.rst, "Ordered
#: message groups"), so the consumers wait out one ttl within the deadline. The module's server
#: allows it (min_claim_ttl). Not lower: a claim lapsing while its consumer still deletes its
#: messages hands them out twice, and on a loaded Swift a claim takes up to its operation_timeout
#: (10 s) and each of its five deletes up to 2 s
CLAIM_TTL = 30
CONFIG = f"""\
[limits]
min_claim_ttl = {CLAIM_TTL}
"""
DEADLINE = 240.0


@pytest.fixture(scope="module")
def server(store: Store, data_dir: Path) -> Iterator[RunningServer]:
    """The module's server, on which a claim may live CLAIM_TTL seconds."""
    with configured_server(store.uri(data_dir), data_dir, CONFIG) as running:
        yield running


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
