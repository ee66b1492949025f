"""The default dead-letter queue and Solace's delayed consumption recipe, on the real server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import (
    ApiSession,
    RunningServer,
    Store,
    configured_server,
    serve_with_config,
)

pytestmark = pytest.mark.slow

#: 1 s ttls allowed, a sweep every 0.2 s, and a default dead-letter queue
CONFIG = """\
[server]
sweep_interval = 0.2

[queues]
default_dead_letter_queue = dead-letters

[limits]
min_message_ttl = 1
min_claim_ttl = 1
min_claim_grace = 1
"""
#: the recipe's delay, seconds
DELAY = 2


@pytest.fixture(scope="module")
def fast_server(store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One server for the module: each test works in a project of its own."""
    directory = tmp_path_factory.mktemp("fast")
    with configured_server(store.uri(directory), directory, CONFIG) as running:
        yield running


def listed(api: ApiSession, queue: str) -> list[dict[str, Any]]:
    answer = api.get(f"/v2/queues/{queue}/messages", params={"echo": "true", "include_dead_letter": "true"})
    return answer.json()["messages"] if answer.status_code == 200 else []


def first_seen(api: ApiSession, queue: str, timeout: float) -> tuple[float, list[dict[str, Any]]]:
    """Poll a queue every 50 ms; return the wall time its first message was seen, and the messages."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = listed(api, queue)
        if found:
            return time.time(), found
        time.sleep(0.05)
    raise AssertionError(f"nothing reached {queue} in {timeout} s")


def test_consumers_of_a_see_each_message_the_max_ttl_of_b_after_its_post(fast_server: RunningServer) -> None:
    with ApiSession(fast_server.url, project="recipe") as api:
        assert api.put("/v2/queues/a").status_code == 201
        created = api.put("/v2/queues/b", json={"_max_message_ttl": DELAY, "_dead_letter_on_expiry": True,
                                                "_dead_letter_queue": "a"})
        assert created.status_code == 201, created.text
        before = time.time()
        assert api.post("/v2/queues/b/messages", json={"messages": [{"body": "later", "ttl": 3600}]}).ok
        after = time.time()

        seen, messages = first_seen(api, "a", timeout=DELAY + 10)

        assert seen - before >= DELAY - 0.01  # stores keep times to the millisecond
        assert seen - after <= DELAY + 5  # one sweep (0.2 s) and a busy machine's slack
        assert [(m["body"], m["dead_letter"]["reason"], m["dead_letter"]["source_queue"])
                for m in messages] == [("later", "expired", "b")]


def test_an_exhausted_message_reaches_the_default_dlq_by_the_sweeper(fast_server: RunningServer) -> None:
    with ApiSession(fast_server.url, project="defaults") as api:
        assert api.put("/v2/queues/dead-letters").status_code == 201
        assert api.put("/v2/queues/work", json={"_max_claim_count": 1}).status_code == 201
        assert api.post("/v2/queues/work/messages", json={"messages": [{"body": "poison", "ttl": 600}]}).ok
        assert api.post("/v2/queues/work/claims", json={"ttl": 1, "grace": 1}).status_code == 201

        _, messages = first_seen(api, "dead-letters", timeout=10)

        provenance = messages[0]["dead_letter"]
        assert (messages[0]["body"], provenance["reason"], provenance["source_queue"],
                provenance["default_dead_letter_queue"]) == ("poison", "max_claims", "work", True)


def test_serve_refuses_a_default_dlq_that_is_no_queue_name(tmp_path: Path) -> None:
    result = serve_with_config("[queues]\ndefault_dead_letter_queue = #DEAD_MSG_QUEUE\n", tmp_path)

    assert result.returncode != 0
    assert "[queues] default_dead_letter_queue must be a valid queue name" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
