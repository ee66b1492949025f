"""Retry backoff on the real server: a lapsed claim and a delayed release keep a message back."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e.harness import ApiSession, RunningServer, Store, configured_server

pytestmark = pytest.mark.slow

#: claims of 1 s allowed
CONFIG = """\
[limits]
min_claim_ttl = 1
min_claim_grace = 1
"""


@pytest.fixture(scope="module")
def fast_server(store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One server for the module: each test works in a project of its own."""
    directory = tmp_path_factory.mktemp("fast")
    with configured_server(store.uri(directory), directory, CONFIG) as running:
        yield running


def claim(api: ApiSession, queue: str, ttl: int = 1) -> tuple[str | None, list[str]]:
    """Claim for ``ttl`` seconds; return the claim id and the message ids (None and [] on a 204)."""
    answer = api.post(f"/v2/queues/{queue}/claims", json={"ttl": ttl, "grace": 1})
    if answer.status_code == 204:
        return None, []
    assert answer.status_code == 201, answer.text
    return answer.headers["Location"].rsplit("/", 1)[1], [m["id"] for m in answer.json()["messages"]]


def seconds_until_claimable(api: ApiSession, queue: str, started: float, timeout: float = 15) -> float:
    """Poll claims every 50 ms; return the seconds from ``started`` (monotonic) until one took a message.

    ``started`` is read before the request that began the wait, so the server's clock
    started later, whatever the time the answer took: a lower bound stays exact under load.
    """
    while time.monotonic() - started < timeout:
        if claim(api, queue)[1]:
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"nothing was claimable in {queue} within {timeout} s")


def test_a_lapsed_claim_keeps_the_message_back_for_the_backoff(fast_server: RunningServer) -> None:
    with ApiSession(fast_server.url, project="backoff") as api:
        assert api.put("/v2/queues/work", json={"_retry_backoff": {"base": 2}}).status_code == 201
        assert api.post("/v2/queues/work/messages", json={"messages": [{"body": "flaky"}]}).ok
        started = time.monotonic()
        assert claim(api, "work")[1]
        # the claim lapses after 1 s, then the first retry waits 2 s
        waited = seconds_until_claimable(api, "work", started)
        assert 3 - 0.05 <= waited <= 3 + 5  # a busy machine's slack


def test_a_release_with_a_delay_keeps_the_message_back(fast_server: RunningServer) -> None:
    with ApiSession(fast_server.url, project="release") as api:
        assert api.post("/v2/queues/work/messages", json={"messages": [{"body": "later"}]}).ok
        claim_id, (message_id,) = claim(api, "work", ttl=30)  # held until the release, however slow
        started = time.monotonic()
        released = api.post(f"/v2/queues/work/messages/{message_id}/release", params={"claim_id": claim_id},
                            json={"error": "busy", "error_type": "Busy", "delay": 2})
        assert released.status_code == 204, released.text
        stats = api.get("/v2/queues/work/stats").json()["messages"]
        assert (stats["claimed"], stats["delayed"]) == (0, 1)
        waited = seconds_until_claimable(api, "work", started)
        assert 2 - 0.05 <= waited <= 2 + 5
