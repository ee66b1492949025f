"""The operators' console in a real headless Chromium, driven by Playwright, on the real server.

Dead letters of two failure signatures are made through the HTTP API; the
browser then finds the queues and the groups, previews the redrive of one
signature and makes it through the page, and the HTTP API confirms that
exactly those messages moved. Chromium is Debian's (``/usr/bin/chromium``,
``tests/install_servers.sh``); Playwright comes from PyPI and downloads no
browser. Either missing skips these tests, or fails them under CI.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import missing_server
from tests.e2e.harness import ApiSession, RunningServer, Store, start_server, stop_server

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
#: "v2-" and sha1("ValueError: bad id <*>")[:12], and of "TimeoutError: upstream timed out after <*> s",
#: computed apart with hashlib
BAD_ID, TIMEOUT = "v2-5bc6c406f8f7", "v2-422a8c550d8e"
TOKEN = "console-e2e-token"
CONFIG = """\
[console]
enabled = true
"""
TOKEN_CONFIG = f"""\
[console]
enabled = true

[auth]
strategy = token

[tokens]
{TOKEN} = shop:member
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Debian Chromium under Playwright, for the whole module."""
    if not CHROMIUM.exists():
        missing_server("chromium (Debian package chromium, tests/install_servers.sh)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing_server("playwright (pip install playwright, the test extra)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                              args=["--no-proxy-server"])
        yield chromium
        chromium.close()


def console_server(store: Store, tmp_path: Path, config: str, token: str | None = None) -> RunningServer:
    path = tmp_path / "console.conf"
    path.write_text(config)
    return start_server(store.uri(tmp_path), tmp_path, extra_args=["--config", str(path)], token=token)


@pytest.fixture(scope="module")
def server(store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A real server with the console on (noauth), for the module; each test has its own project."""
    running = console_server(store, tmp_path_factory.mktemp("console"), CONFIG)
    yield running
    stop_server(running)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser tab with its own cookies."""
    context = browser.new_context()
    tab = context.new_page()
    tab.set_default_timeout(60_000)  # a loaded 2-core machine can take long to render
    yield tab
    context.close()


def dead_letter(api: ApiSession, failures: list[tuple[Any, str, str]]) -> list[str]:
    """Make one dead letter of ``src`` per (body, error_type, error), released once with that reason."""
    ids = []
    for body, _, _ in failures:
        posted = api.post("/v2/queues/src/messages", json={"messages": [{"body": body}]})
        assert posted.status_code == 201, posted.text
        ids.append(posted.json()["resources"][0].rsplit("/", 1)[1])
    claimed = api.post("/v2/queues/src/claims", params={"limit": len(ids)}, json={"ttl": 60, "grace": 60})
    assert claimed.status_code == 201, claimed.text
    claim_id = claimed.headers["location"].rsplit("/", 1)[1]
    assert sorted(m["id"] for m in claimed.json()["messages"]) == sorted(ids)
    for message_id, (_, error_type, error) in zip(ids, failures, strict=True):
        release = api.post(f"/v2/queues/src/messages/{message_id}/release", params={"claim_id": claim_id},
                           json={"error_type": error_type, "error": error})
        assert release.status_code == 204, release.text
    # the next claim meets the exhausted messages and moves them to the DLQ
    assert api.post("/v2/queues/src/claims", json={"ttl": 60, "grace": 60}).status_code == 204
    return ids


def listed_ids(api: ApiSession, queue: str) -> list[str]:
    answer = api.get(f"/v2/queues/{queue}/messages",
                     params={"echo": "true", "include_claimed": "true", "limit": 20})
    return [m["id"] for m in answer.json()["messages"]] if answer.status_code == 200 else []


def setup_queues(api: ApiSession) -> tuple[list[str], list[str]]:
    """Create ``src`` dead-lettering into ``dlq`` after one claim; dead-letter 3 + 2 messages."""
    assert api.put("/v2/queues/dlq").status_code == 201
    metadata = {"_max_claim_count": 1, "_dead_letter_queue": "dlq"}
    assert api.put("/v2/queues/src", json=metadata).status_code == 201
    bad_ids = dead_letter(api, [({"order": 1}, "ValueError", "bad id 42"),
                                ("<script>window.pwned = 1</script>", "ValueError", "bad id 7"),
                                ({"order": 3}, "ValueError", "bad id 1234")])
    timeouts = dead_letter(api, [({"order": 4}, "TimeoutError", "upstream timed out after 30 s"),
                                 ({"order": 5}, "TimeoutError", "upstream timed out after 5 s")])
    return bad_ids, timeouts


def cells(page: Any, selector: str) -> list[list[str]]:
    """Return the text of each cell of the rows a selector finds."""
    rows = page.locator(selector)
    return [[cell.strip() for cell in rows.nth(i).locator("td").all_inner_texts()]
            for i in range(rows.count())]


def queue_rows(page: Any, count: int) -> list[list[str]]:
    """Return the queue list's rows once it shows ``count`` (a loaded store may list new queues late)."""
    deadline = time.monotonic() + 30
    rows = cells(page, "#queues tbody tr")
    while len(rows) < count and time.monotonic() < deadline:
        time.sleep(0.5)
        page.reload()
        rows = cells(page, "#queues tbody tr")
    return rows


def test_a_signature_redriven_through_the_page_moves_exactly_its_messages(server, page, project):
    with ApiSession(server.url, project=project) as api:
        bad_ids, timeouts = setup_queues(api)
        page.goto(server.url + "/console")
        page.fill("input[name=project]", project)
        page.click("text=Open")
        assert page.url == f"{server.url}/console/projects/{project}/queues"
        dlq_row, src_row = queue_rows(page, 2)
        assert dlq_row[:5] == ["dlq DLQ", "5", "5", "0", "0"] and dlq_row[6:] == ["-", "-"]
        assert re.fullmatch(r"[0-9]+ s", dlq_row[5])  # the oldest dead letter's age: seconds
        assert src_row == ["src", "0", "0", "0", "0", "-", "dlq", "5"]

        page.click("tr[data-queue=src] >> text=dlq")
        # evaluate_all does not wait for the page the link opens: wait for it first
        page.wait_for_url(f"{server.url}/console/projects/{project}/queues/dlq")
        assert page.locator("section.signature").evaluate_all("s => s.map(e => e.dataset.signature)") == [
            BAD_ID, TIMEOUT]
        assert page.inner_text(f"#signature-{BAD_ID} h3 .count") == "3"
        assert page.inner_text(f"#signature-{TIMEOUT} h3 .count") == "2"
        assert page.inner_text(f"#signature-{BAD_ID} .signature-text") == "ValueError: bad id <*>"
        # a body holding a script is shown as text, never run
        assert page.locator("pre.body", has_text="<script>window.pwned = 1</script>").count() == 1
        assert page.evaluate("typeof window.pwned") == "undefined"

        page.click(f"#signature-{TIMEOUT} >> text=Preview redrive of this signature")
        assert page.inner_text("#matched .count") == "2"
        assert [row[0] for row in cells(page, "#sample tbody tr")] == timeouts
        assert sorted(listed_ids(api, "dlq")) == sorted(bad_ids + timeouts)  # the preview moved nothing

        page.click("text=Redrive 2 messages")
        assert page.inner_text("#redriven .count") == "2"
        assert listed_ids(api, "src") == timeouts
        assert listed_ids(api, "dlq") == bad_ids


def test_selected_messages_redriven_through_the_page_move_and_no_others(server, page, project):
    with ApiSession(server.url, project=project) as api:
        bad_ids, timeouts = setup_queues(api)
        page.goto(f"{server.url}/console/projects/{project}/queues/dlq")
        page.check(f"input[name=ids][value='{bad_ids[1]}']")
        page.check(f"input[name=ids][value='{timeouts[0]}']")
        page.click("text=Preview redrive of the selected messages")
        assert page.inner_text("#matched .count") == "2"
        page.click("text=Redrive 2 messages")
        assert page.inner_text("#redriven .count") == "2"
        assert sorted(listed_ids(api, "src")) == sorted([bad_ids[1], timeouts[0]])
        assert listed_ids(api, "dlq") == [bad_ids[0], bad_ids[2], timeouts[1]]


def test_a_redrive_task_is_started_from_the_signature_summary_and_cancelled_through_the_page(
        server, page, project):
    with ApiSession(server.url, project=project) as api:
        bad_ids, timeouts = setup_queues(api)
        page.goto(f"{server.url}/console/projects/{project}/queues/dlq")
        summary = cells(page, "#signature-summary tbody tr")
        assert [row[:3] for row in summary] == [[BAD_ID, "3", "60%"], [TIMEOUT, "2", "40%"]]
        page.click(f"#signature-summary a[href='#signature-{TIMEOUT}']")
        assert page.url.endswith(f"/queues/dlq#signature-{TIMEOUT}")

        # a task of every dead letter, slow enough (one a minute) to be running when cancelled
        page.fill("#start-redrive-task input[name=max_per_second]", "0.0166")
        page.click("#start-redrive-task button")
        page.wait_for_url(f"{server.url}/console/projects/{project}/queues/dlq#redrive-tasks")
        [task] = api.get("/v2/queues/dlq/redrive/tasks").json()["tasks"]
        assert (task["status"], task["filter"], task["max_per_second"]) == ("running", {}, 0.0166)
        row = f"#redrive-task-list tr[data-task='{task['id']}']"
        assert cells(page, row)[0][1] == "running"

        page.click(f"{row} button:has-text('Cancel')")
        page.wait_for_url(f"{server.url}/console/projects/{project}/queues/dlq#redrive-tasks")
        assert cells(page, row)[0][1] == "cancelled"
        assert page.locator(f"{row} button").count() == 0
        ended = api.get(f"/v2/queues/dlq/redrive/tasks/{task['id']}").json()
        assert ended["status"] == "cancelled" and ended["finished"] is not None
        # at most the first batch (one message) moved before the cancel; the rest stayed
        assert ended["moved"] <= 1
        assert len(listed_ids(api, "dlq")) == len(bad_ids + timeouts) - ended["moved"]

        # the signature summary starts a task of that signature only
        page.click(f"#signature-summary tr[data-signature='{BAD_ID}'] button")
        page.wait_for_url(f"{server.url}/console/projects/{project}/queues/dlq#redrive-tasks")
        newest = api.get("/v2/queues/dlq/redrive/tasks").json()["tasks"][0]
        assert newest["filter"] == {"signature": BAD_ID}


def test_under_token_auth_the_browser_logs_in_and_sees_its_project(store, tmp_path, page):
    running = console_server(store, tmp_path, TOKEN_CONFIG, token=TOKEN)
    try:
        page.goto(running.url + "/console")
        assert page.url == running.url + "/console/login"
        page.fill("input[name=token]", "not-a-token")
        page.click("button:has-text('Log in')")
        assert page.inner_text("h1") == "401 Unauthorized"
        page.goto(running.url + "/console/login")
        page.fill("input[name=token]", TOKEN)
        page.click("button:has-text('Log in')")
        assert page.url == running.url + "/console/projects/shop/queues"
        cookie = next(c for c in page.context.cookies() if c["name"] == "zaqar_console_session")
        assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/console")
        assert TOKEN not in cookie["value"]  # an opaque session id; the token stays on the server
        assert page.evaluate("document.cookie") == ""  # no script can read the session id
        assert page.goto(running.url + "/console/projects/other/queues").status == 403
        page.goto(running.url + "/console/projects/shop/queues")
        page.click("text=Log out")
        assert page.goto(running.url + "/console/projects/shop/queues").status == 401
        # a copy of the cookie taken before the logout opens nothing on any worker
        for _ in range(4):
            replayed = requests.get(running.url + "/console/projects/shop/queues",
                                    cookies={"zaqar_console_session": cookie["value"]}, timeout=10,
                                    proxies={"http": "", "https": ""})
            assert replayed.status_code == 401
    finally:
        stop_server(running)


def test_a_queue_tripped_by_its_breaker_is_resumed_and_paused_through_the_page(server, page, project):
    with ApiSession(server.url, project=project) as api:
        assert api.put("/v2/queues/dlq").status_code == 201
        metadata = {"_max_claim_count": 1, "_dead_letter_queue": "dlq",
                    "_dead_letter_breaker": {"seconds": 600, "max_dead_letters": 1}}
        assert api.put("/v2/queues/src", json=metadata).status_code == 201
        dead_letter(api, [({"order": 1}, "ValueError", "bad id 1"), ({"order": 2}, "ValueError", "bad id 2")])
        posted = api.post("/v2/queues/src/messages", json={"messages": [{"body": {"order": 3}}]})
        assert posted.status_code == 201
        page.goto(f"{server.url}/console/projects/{project}/queues")
        assert [row[0] for row in queue_rows(page, 2)] == ["dlq DLQ", "src paused"]
        page.click("tr[data-queue=src] >> text=src")
        page.wait_for_url(f"{server.url}/console/projects/{project}/queues/src")
        state = page.inner_text("#pause .state")
        assert "Paused by its dead-letter breaker" in state
        assert "2 dead letters and 0 messages claimed" in state
        assert "(the rule: more than 1 dead letters within 600 s)" in state
        assert api.post("/v2/queues/src/claims", json={"ttl": 60, "grace": 60}).status_code == 204

        page.click("#pause button:has-text('Resume consumption')")
        page.wait_for_url(f"{server.url}/console/projects/{project}/queues/src")
        assert page.inner_text("#pause .state") == "Running: claims take messages."
        claimed = api.post("/v2/queues/src/claims", json={"ttl": 60, "grace": 60})
        assert [m["body"] for m in claimed.json()["messages"]] == [{"order": 3}]

        page.click("#pause button:has-text('Pause consumption')")
        page.wait_for_url(f"{server.url}/console/projects/{project}/queues/src")
        assert "Paused by an operator." in page.inner_text("#pause .state")
        assert api.get("/v2/queues/src").json()["_paused"] is True
