"""Several OS processes claiming from one queue of a real server at once, over HTTP.

Each consumer is a separate process with its own connections, as real workers
are; the server runs two gunicorn workers, so claims also race between API
processes on the shared store.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import time
from typing import Any

import pytest

from tests.conftest import STORE_KIND
from tests.e2e.harness import ApiSession, RunningServer

pytestmark = pytest.mark.slow

CONSUMERS = 4
# A single-node Swift serves some 35 requests/s here and every claim waits its
# settle time (see zaqar_lite/storage/swift/driver.py), so it drains a smaller queue.
MESSAGES = 40 if STORE_KIND == "swift" else 200
POST_BATCH = 20
CLAIM_LIMIT = 5
#: far longer than the test runs: no claim may lapse and hand its messages out again
CLAIM_TTL = 600
RESULT_TIMEOUT = 150.0 if STORE_KIND == "swift" else 60.0
CONSUMER_DEADLINE = RESULT_TIMEOUT - 15


def consume(base_url: str, project: str, queue: str, release_every: int,
            start: Any, results: Any) -> None:
    """Claim until the queue is empty, deleting each message with its claim id.

    Every ``release_every``-th claim (0: never) is released instead of worked,
    so its messages go back to the queue. Puts a report on ``results``.
    """
    report: dict[str, Any] = {"pid": os.getpid(), "handed_out": [], "failures": []}
    claims = 0
    with ApiSession(base_url, project=project) as api:
        start.wait(RESULT_TIMEOUT)
        deadline = time.monotonic() + CONSUMER_DEADLINE
        while True:
            if time.monotonic() > deadline:
                report["failures"].append(f"queue not drained after {CONSUMER_DEADLINE:.0f} s")
                break
            response = api.post(f"/v2/queues/{queue}/claims", params={"limit": CLAIM_LIMIT},
                                json={"ttl": CLAIM_TTL, "grace": 60})
            if response.status_code == 204:
                # Nothing is claimable, but claims held by others may still be released.
                if api.get(f"/v2/queues/{queue}/stats").json()["messages"]["total"] == 0:
                    break
                time.sleep(0.05)
                continue
            if response.status_code != 201:
                report["failures"].append(f"claim: {response.status_code} {response.text}")
                break
            claims += 1
            claim_id = response.headers["Location"].rsplit("/", 1)[1]
            messages = response.json()["messages"]
            for message in messages:
                report["handed_out"].append({"id": message["id"], "claim_id": claim_id,
                                             "body": message["body"], "href": message["href"],
                                             "claim_count": message["claim_count"]})
            release = bool(release_every) and claims % release_every == 0
            report["failures"].extend(finish_claim(api, queue, claim_id, messages, release))
    results.put(report)


def finish_claim(api: ApiSession, queue: str, claim_id: str, messages: list[dict[str, Any]],
                 release: bool) -> list[str]:
    """Release a claim, or delete each of its messages with the claim id; return the failures."""
    if release:
        released = api.delete(f"/v2/queues/{queue}/claims/{claim_id}")
        return [] if released.status_code == 204 else [f"release: {released.status_code} {released.text}"]
    failures = []
    for message in messages:
        deleted = api.delete(f"/v2/queues/{queue}/messages/{message['id']}", params={"claim_id": claim_id})
        if deleted.status_code != 204:
            failures.append(f"delete {message['id']}: {deleted.status_code} {deleted.text}")
    return failures


def post_numbered(api: ApiSession, queue: str, count: int) -> dict[str, int]:
    """Post messages with bodies ``{"n": 0..count-1}``; return id -> n."""
    posted: dict[str, int] = {}
    for first in range(0, count, POST_BATCH):
        numbers = range(first, min(first + POST_BATCH, count))
        response = api.post(f"/v2/queues/{queue}/messages",
                            json={"messages": [{"body": {"n": n}, "ttl": 3600} for n in numbers]})
        assert response.status_code == 201, response.text
        ids = [href.rsplit("/", 1)[1] for href in response.json()["resources"]]
        posted.update(zip(ids, numbers, strict=True))
    return posted


def run_consumers(server: RunningServer, project: str, queue: str,
                  release_every: int) -> list[dict[str, Any]]:
    """Run CONSUMERS processes released at the same instant and return their reports.

    They start claiming together, once every one of them is ready (a barrier, not an
    event set at once: a spawned process that is ready first would drain the queue alone).
    """
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(CONSUMERS + 1), context.Queue()
    processes = [context.Process(target=consume, args=(server.url, project, queue, release_every,
                                                       start, results), daemon=True)
                 for _ in range(CONSUMERS)]
    for process in processes:
        process.start()
    start.wait(RESULT_TIMEOUT)
    try:
        reports = [results.get(timeout=RESULT_TIMEOUT) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    return reports


def handed_out(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return every hand-out of every consumer."""
    return [item for report in reports for item in report["handed_out"]]


def assert_queue_is_drained(api: ApiSession, queue: str) -> None:
    """The queue holds nothing and nothing is claimable."""
    stats = api.get(f"/v2/queues/{queue}/stats").json()["messages"]
    assert stats["total"] == 0, stats
    assert api.post(f"/v2/queues/{queue}/claims", json={"ttl": 60, "grace": 60}).status_code == 204


def test_concurrent_consumers_get_every_message_exactly_once(server: RunningServer, project: str,
                                                             api: ApiSession, queue_name: str) -> None:
    posted = post_numbered(api, queue_name, MESSAGES)

    reports = run_consumers(server, project, queue_name, release_every=0)

    assert [f for r in reports for f in r["failures"]] == []
    got = collections.Counter(item["id"] for item in handed_out(reports))
    duplicated = {message_id: n for message_id, n in got.items() if n > 1}
    lost = set(posted) - set(got)
    assert duplicated == {} and lost == set() and set(got) == set(posted)
    for item in handed_out(reports):
        assert item["body"] == {"n": posted[item["id"]]}
        assert item["href"].endswith(f"/messages/{item['id']}?claim_id={item['claim_id']}")
        assert item["claim_count"] == 1
    assert sum(1 for r in reports if r["handed_out"]) > 1, "one consumer took everything: no race was run"
    assert_queue_is_drained(api, queue_name)


def test_released_messages_go_out_again_but_never_to_two_claims_at_once(
        server: RunningServer, project: str, api: ApiSession, queue_name: str) -> None:
    posted = post_numbered(api, queue_name, MESSAGES // 2)

    reports = run_consumers(server, project, queue_name, release_every=2)

    assert [f for r in reports for f in r["failures"]] == []
    counts_seen: dict[str, list[int]] = collections.defaultdict(list)
    for item in handed_out(reports):
        counts_seen[item["id"]].append(item["claim_count"])
    assert set(counts_seen) == set(posted)
    # Each hand-out increments the count atomically with the claim, so two claims
    # holding a message at once would both report the same count.
    overlapping = {message_id: sorted(seen) for message_id, seen in counts_seen.items()
                   if sorted(seen) != list(range(1, len(seen) + 1))}
    assert overlapping == {}
    assert_queue_is_drained(api, queue_name)


def test_concurrent_consumers_on_a_queue_with_a_dlq_never_see_an_exhausted_message(
        server: RunningServer, project: str, api: ApiSession, queue_name: str) -> None:
    max_claims = 2
    dlq = f"{queue_name}-dlq"
    assert api.put(f"/v2/queues/{dlq}").status_code == 201
    created = api.put(f"/v2/queues/{queue_name}",
                      json={"_max_claim_count": max_claims, "_dead_letter_queue": dlq})
    assert created.status_code == 201, created.text
    posted = post_numbered(api, queue_name, MESSAGES // 2)

    # Every claim is released, so each message is handed out until its count is spent.
    reports = run_consumers(server, project, queue_name, release_every=1)

    assert [f for r in reports for f in r["failures"]] == []
    counts_seen: dict[str, list[int]] = collections.defaultdict(list)
    for item in handed_out(reports):
        counts_seen[item["id"]].append(item["claim_count"])
    assert {m: sorted(seen) for m, seen in counts_seen.items()} == {m: [1, 2] for m in posted}
    assert_queue_is_drained(api, queue_name)
    in_dlq: list[str] = []
    marker = None
    while True:
        params = {"echo": "true", "limit": 20, "include_dead_letter": "true",
                  **({"marker": marker} if marker else {})}
        page = api.get(f"/v2/queues/{dlq}/messages", params=params).json()
        if not page["messages"]:
            break
        in_dlq.extend(m["id"] for m in page["messages"])
        assert all(m["dead_letter"]["source_queue"] == queue_name for m in page["messages"])
        marker = page["links"][0]["href"].split("marker=")[1].split("&")[0]
    assert sorted(in_dlq) == sorted(posted)
