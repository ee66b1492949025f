"""A redrive task on the real server: killed mid-task with SIGKILL, resumed by the restarted server.

Every message must end in its source queue exactly once, and the task must
say it completed having moved them all.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import ApiSession, RunningServer, ServerStarter, Store

pytestmark = pytest.mark.slow

#: sweeps and task looks every 0.2 s; a dead server's task is free after 2 s
CONFIG = """\
[server]
sweep_interval = 0.2
redrive_task_lease = 2
"""
MESSAGES = 60
#: messages a second: three batches, the kill comes once the first is moved, before the last
RATE = 20
#: messages moved before the kill
MIDWAY = 20


def start(starter: ServerStarter, store: Store, data_dir: Path, config: Path) -> RunningServer:
    return starter(store.uri(data_dir), extra_args=["--config", str(config)])


def dead_letters(api: ApiSession) -> list[str]:
    """Post MESSAGES messages to ``src`` and dead-letter each into ``dlq`` (one claim each); return ids."""
    assert api.put("/v2/queues/dlq").status_code == 201
    metadata = {"_max_claim_count": 1, "_dead_letter_queue": "dlq"}
    assert api.put("/v2/queues/src", json=metadata).status_code == 201
    ids: list[str] = []
    for first in range(0, MESSAGES, 20):
        posted = api.post("/v2/queues/src/messages",
                          json={"messages": [{"body": {"n": n}} for n in range(first, first + 20)]})
        assert posted.status_code == 201, posted.text
        ids += [href.rsplit("/", 1)[1] for href in posted.json()["resources"]]
    for _ in range(MESSAGES // 20):
        claimed = api.post("/v2/queues/src/claims", params={"limit": 20})
        assert claimed.status_code == 201, claimed.text
        assert api.delete(claimed.headers["location"]).status_code == 204
    assert api.post("/v2/queues/src/claims", params={"limit": 20}).status_code == 204
    return ids


def every_id(api: ApiSession, queue: str) -> list[str]:
    """Return the id of every message of a queue, following the listing's pages."""
    found: list[str] = []
    query: dict[str, Any] = {"limit": 20, "echo": "true", "include_claimed": "true"}
    while True:
        page = api.get(f"/v2/queues/{queue}/messages", params=query).json()
        found += [m["id"] for m in page["messages"]]
        if not page["messages"]:
            return found
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page["links"][0]["href"]).query))


def wait_for(api: ApiSession, path: str, done: Any, timeout: float) -> dict[str, Any]:
    """Poll a task every 50 ms until ``done(task)``; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = api.get(path).json()
        if done(task):
            return task
        time.sleep(0.05)
    raise AssertionError(f"the task never got there: {api.get(path).json()}")


def test_a_task_killed_with_its_server_resumes_and_moves_every_message_exactly_once(
        start_server_for_test: ServerStarter, store: Store, tmp_path: Path, project: str):
    config = tmp_path / "tasks.conf"
    config.write_text(CONFIG)
    first = start(start_server_for_test, store, tmp_path, config)
    with ApiSession(first.url, project=project) as api:
        ids = dead_letters(api)
        assert api.get("/v2/queues/dlq/stats").json()["messages"]["total"] == MESSAGES
        started = api.post("/v2/queues/dlq/redrive", json={"async": True, "max_per_second": RATE})
        assert started.status_code == 202, started.text
        path = started.headers["location"]
        midway = wait_for(api, path, lambda t: t["moved"] >= MIDWAY, timeout=30)
    os.killpg(first.pid, signal.SIGKILL)
    first.process.wait()
    assert midway["status"] == "running" and midway["moved"] < MESSAGES

    second = start(start_server_for_test, store, tmp_path, config)
    with ApiSession(second.url, project=project) as api:
        task = wait_for(api, path, lambda t: t["status"] != "running", timeout=60)
        assert (task["status"], task["moved"], task["remaining"]) == ("completed", MESSAGES, 0)
        assert task["error"] is None
        back = every_id(api, "src")
        assert len(back) == MESSAGES
        assert sorted(set(back)) == sorted(ids)
        assert every_id(api, "dlq") == []
        assert api.get("/v2/queues/dlq/stats").json()["messages"]["total"] == 0
    assert f"redrive task {task['id']} on {project}/dlq taken by" in second.log()
