"""Long-polling claims on a real server (``?wait=S``): woken by posts, releases, delays and claim expiry.

The server runs two workers, so the waiting claim and the write that wakes it
are often served by different processes: the wake-up crosses the store's
channel (local sockets, or Redis pub/sub). Every wait is a few seconds; a
claim answered 201 before its wait ended was woken (or, on MongoDB and Swift,
found the message at a re-check).
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import ApiSession, RunningServer, Store, start_server, stop_server

#: short claim ttl and grace allowed, so a claim can lapse within a test
CONFIG = """[limits]
min_claim_ttl = 1
min_claim_grace = 1
"""
#: seconds a claim waits: a woken claim is answered well before (a claim on a loaded Swift takes
#: its settle waits and a few store requests after the wake-up), one never woken only at the end
WAIT = 5
#: seconds a test lets a claim wait before it makes the write that should wake it
BEFORE_THE_WRITE = 1.0


@pytest.fixture(scope="module")
def server(store: Store, data_dir: Path) -> Iterator[RunningServer]:
    """A real server with 2 workers whose claims may last one second."""
    config = data_dir / "short-claims.conf"
    config.write_text(CONFIG)
    running = start_server(store.uri(data_dir), data_dir, extra_args=["--config", str(config)])
    yield running
    stop_server(running)


@pytest.fixture
def waiting() -> Iterator[concurrent.futures.ThreadPoolExecutor]:
    """Threads for the claims that wait while the test writes."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        yield pool


def waiting_claim(server: RunningServer, project: str, queue: str, wait: int = WAIT,
                  ttl: int = 60) -> tuple[int, list[str], float]:
    """Claim with ``wait`` from a connection of its own; return the status, the ids and the seconds taken."""
    with ApiSession(server.url, project=project) as session:
        started = time.monotonic()
        response = session.post(f"/v2/queues/{queue}/claims", params={"limit": 1, "wait": wait},
                                json={"ttl": ttl, "grace": 60}, timeout=wait + 10)
        took = time.monotonic() - started
    ids = [m["id"] for m in response.json()["messages"]] if response.status_code == 201 else []
    return response.status_code, ids, took


def post(api: ApiSession, queue: str, body: object, **fields: object) -> str:
    response = api.post(f"/v2/queues/{queue}/messages", json={"messages": [{"body": body, **fields}]})
    assert response.status_code == 201, response.text
    return str(response.json()["resources"][0].rsplit("/", 1)[1])


def claim_now(api: ApiSession, queue: str, ttl: int = 60) -> tuple[str, str]:
    response = api.post(f"/v2/queues/{queue}/claims", params={"limit": 1}, json={"ttl": ttl, "grace": 60})
    assert response.status_code == 201, response.text
    return response.headers["location"].rsplit("/", 1)[1], response.json()["messages"][0]["id"]


def assert_woken(result: tuple[int, list[str], float], message_id: str, earliest: float,
                 wait: int = WAIT) -> None:
    """The claim got exactly ``message_id``, after at least ``earliest`` s, before its wait ended."""
    status, ids, took = result
    assert (status, ids) == (201, [message_id])
    assert earliest - 0.2 <= took < wait


def test_a_waiting_claim_is_answered_soon_after_a_post_from_another_connection(
        server, api, project, queue_name, waiting):
    api.put(f"/v2/queues/{queue_name}")
    claim = waiting.submit(waiting_claim, server, project, queue_name)
    time.sleep(BEFORE_THE_WRITE)
    message_id = post(api, queue_name, {"job": 1})
    assert_woken(claim.result(), message_id, BEFORE_THE_WRITE)


def test_a_waiting_claim_is_woken_by_a_claim_release(server, api, project, queue_name, waiting):
    message_id = post(api, queue_name, "work")
    claim_id, _ = claim_now(api, queue_name)
    claim = waiting.submit(waiting_claim, server, project, queue_name)
    time.sleep(BEFORE_THE_WRITE)
    assert api.delete(f"/v2/queues/{queue_name}/claims/{claim_id}").status_code == 204
    assert_woken(claim.result(), message_id, BEFORE_THE_WRITE)


def test_a_waiting_claim_is_woken_by_a_message_release(server, api, project, queue_name, waiting):
    message_id = post(api, queue_name, "work")
    claim_id, _ = claim_now(api, queue_name)
    claim = waiting.submit(waiting_claim, server, project, queue_name)
    time.sleep(BEFORE_THE_WRITE)
    released = api.post(f"/v2/queues/{queue_name}/messages/{message_id}/release",
                        params={"claim_id": claim_id}, json={"error": "retry later"})
    assert released.status_code == 204, released.text
    assert_woken(claim.result(), message_id, BEFORE_THE_WRITE)


def test_a_waiting_claim_is_woken_when_a_delay_ends(server, api, project, queue_name):
    message_id = post(api, queue_name, "later", delay=2)
    status, ids, took = waiting_claim(server, project, queue_name, wait=5)
    assert (status, ids) == (201, [message_id])
    assert 1.8 <= took < 5


def test_a_waiting_claim_is_woken_when_a_claim_lapses(server, api, project, queue_name):
    message_id = post(api, queue_name, "work")
    claim_now(api, queue_name, ttl=2)
    status, ids, took = waiting_claim(server, project, queue_name, wait=5)
    assert (status, ids) == (201, [message_id])
    assert 1.5 <= took < 5


def test_two_waiting_claims_and_one_message_exactly_one_gets_it(server, api, project, queue_name, waiting):
    api.put(f"/v2/queues/{queue_name}")
    claims = [waiting.submit(waiting_claim, server, project, queue_name, 2) for _ in range(2)]
    time.sleep(BEFORE_THE_WRITE / 2)
    message_id = post(api, queue_name, "only one")
    results = sorted((c.result()[:2] for c in claims), key=lambda result: result[0])
    assert results == [(201, [message_id]), (204, [])]


def test_a_claim_without_wait_answers_204_at_once(server, api, queue_name):
    api.put(f"/v2/queues/{queue_name}")
    started = time.monotonic()
    assert api.post(f"/v2/queues/{queue_name}/claims", params={"limit": 1}).status_code == 204
    assert time.monotonic() - started < 1.0


def test_under_gthread_a_waiting_claim_holds_a_thread_and_is_woken_all_the_same(
        store, tmp_path, start_server_for_test, project, queue_name, waiting):
    config = tmp_path / "gthread.conf"
    config.write_text("[server]\nworker_class = gthread\nthreads = 4\n")
    threaded = start_server_for_test(store.uri(tmp_path), extra_args=["--config", str(config)])
    with ApiSession(threaded.url, project=project) as api:
        api.put(f"/v2/queues/{queue_name}")
        claim = waiting.submit(waiting_claim, threaded, project, queue_name)
        time.sleep(BEFORE_THE_WRITE)
        message_id = post(api, queue_name, "threads")
        assert_woken(claim.result(), message_id, BEFORE_THE_WRITE)


def set_paused(api: ApiSession, queue: str, paused: bool) -> None:
    """Pause (``_paused: true``) or resume (remove it) a queue by a JSON-patch of its metadata."""
    operation = {"op": "add", "path": "/metadata/_paused", "value": True} if paused else \
        {"op": "remove", "path": "/metadata/_paused"}
    response = api.patch(f"/v2/queues/{queue}", json=[operation],
                         headers={"Content-Type": "application/openstack-messaging-v2.0-json-patch"})
    assert response.status_code == 200, response.text


def test_a_waiting_claim_on_a_paused_queue_is_not_woken_by_a_post(server, api, project, queue_name, waiting):
    api.put(f"/v2/queues/{queue_name}")
    set_paused(api, queue_name, True)
    claim = waiting.submit(waiting_claim, server, project, queue_name, 2)
    time.sleep(BEFORE_THE_WRITE / 2)
    post(api, queue_name, "held back")
    status, ids, took = claim.result()
    assert (status, ids) == (204, [])
    assert took >= 1.8


def test_a_waiting_claim_on_a_paused_queue_is_woken_by_its_resume(server, api, project, queue_name, waiting):
    message_id = post(api, queue_name, "work")
    set_paused(api, queue_name, True)
    claim = waiting.submit(waiting_claim, server, project, queue_name)
    time.sleep(BEFORE_THE_WRITE)
    set_paused(api, queue_name, False)
    assert_woken(claim.result(), message_id, BEFORE_THE_WRITE)
