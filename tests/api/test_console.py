"""The operators' console (``/console``): every page and its 4xx, escaping, forged forms and token auth."""

from __future__ import annotations

import html.parser
import re
import urllib.parse

import falcon.testing
import pytest

from tests.api.helpers import headers, post
from tests.api.test_redrive import dead_letter, listed
from zaqar_lite.api.console import pages

CSRF = "zaqar_console_csrf"
SESSION = "zaqar_console_session"
FORM = "application/x-www-form-urlencoded"
#: "v2-" and sha1("ValueError: bad id <*>")[:12], and of "TimeoutError: upstream timed out after <*> s",
#: computed apart with hashlib
BAD_ID, TIMEOUT = "v2-5bc6c406f8f7", "v2-422a8c550d8e"
QUEUES = "/console/projects/project-a/queues"
DLQ_PAGE = QUEUES + "/dlq"
TOKENS = {"tok-a": ("project-a", "member"), "tok-b": ("project-b", "admin")}

# The pages call the Messaging service as the API's resources do, never the store: what they
# read and move is tested by the API suite on every store, these test the pages themselves.
pytestmark = pytest.mark.store_independent


class Cells(html.parser.HTMLParser):
    """The text of each row of one table (by id) of a page."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id, self.depth, self.rows = table_id, 0, []

    def handle_starttag(self, tag, attrs):
        if tag == "table" and (self.depth or dict(attrs).get("id") == self.table_id):
            self.depth += 1
        elif self.depth == 1 and tag == "tr":
            self.rows.append([])
        elif self.depth == 1 and tag in ("td", "th"):
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if tag == "table" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth == 1 and self.rows and self.rows[-1]:
            self.rows[-1][-1] = " ".join((self.rows[-1][-1] + " " + data).split())


def table(page: str, table_id: str) -> list[list[str]]:
    parser = Cells(table_id)
    parser.feed(page)
    return parser.rows


@pytest.fixture
def console(make_client) -> falcon.testing.TestClient:
    """A browser-like client (no API headers) of an app with the console on."""
    return make_client(None, console_enabled=True)


@pytest.fixture
def api(console) -> falcon.testing.TestClient:
    """An API client of project-a on the same app."""
    return falcon.testing.TestClient(console.app, headers=headers("project-a"))


def csrf_of(console, path: str = QUEUES, **kwargs) -> str:
    """GET a page and return the form token it set in its cookie (and wrote in its forms)."""
    page = console.simulate_get(path, **kwargs)
    assert page.status_code == 200, page.text
    token = page.cookies[CSRF].value
    if '<form method="post"' in page.text:
        assert f'name="csrf_token" value="{token}"' in page.text
    return token


def submit(console, path, fields, token, cookies=None, **kwargs):
    """POST a form as the console's page does: the token in the cookie and in the form."""
    body = urllib.parse.urlencode([*fields, ("csrf_token", token)])
    return console.simulate_post(path, body=body, content_type=FORM,
                                 cookies={CSRF: token, **(cookies or {})}, **kwargs)


def two_signatures(api) -> tuple[list[str], list[str]]:
    """Dead-letter two messages failing with a ValueError and one with a TimeoutError."""
    bad_ids = dead_letter(api, {"n": 1}, {"n": 2}, error_type="ValueError", error="bad id 42")
    timeouts = dead_letter(api, {"n": 3}, error_type="TimeoutError", error="upstream timed out after 30 s")
    return bad_ids, timeouts


# -- off unless enabled --------------------------------------------------------------------------


@pytest.mark.parametrize("method, path", [
    ("GET", "/console"), ("GET", "/console/login"), ("GET", "/console/console.css"),
    ("GET", QUEUES), ("GET", DLQ_PAGE), ("POST", DLQ_PAGE + "/redrive"),
])
def test_the_console_is_not_served_unless_enabled(client, method, path):
    response = client.simulate_request(method, path)
    assert response.status_code == 404
    assert response.json["title"] == "Not found"


# -- pages ---------------------------------------------------------------------------------------


def test_the_front_page_is_a_project_chooser_under_noauth(console):
    page = console.simulate_get("/console")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert '<input type="text" name="project" required>' in page.text
    chosen = console.simulate_get("/console", params={"project": "shop ops"})
    assert chosen.status_code == 303
    assert chosen.headers["location"] == "/console/projects/shop%20ops/queues"


def test_a_chosen_project_is_checked_as_the_api_checks_x_project_id(console):
    response = console.simulate_get("/console", params={"project": "a,b"})
    assert response.status_code == 400
    assert "text/html" in response.headers["content-type"]
    assert ("The project is not a valid project id, which follows the rules of the X-Project-ID header: "
            "Send one X-Project-ID header, without commas.") in response.text


def test_a_project_in_a_console_url_is_checked_as_the_api_checks_x_project_id(console):
    response = console.simulate_get("/console/projects/a,b/queues")
    assert response.status_code == 400
    assert "which follows the rules of the X-Project-ID header: Send one" in response.text


def test_the_queue_list_shows_depth_oldest_age_and_dead_letter_queue(console, api, clock):
    dead_letter(api, "a", "b")
    post(api, "src", "waiting")
    post(api, "plain", 1, 2, 3)
    clock.advance(125)
    page = console.simulate_get(QUEUES)
    assert page.status_code == 200
    assert table(page.text, "queues") == [
        ["queue", "depth", "free", "claimed", "delayed", "oldest message", "dead-letter queue", "DLQ depth"],
        ["dlq DLQ", "2", "2", "0", "0", "2 min", "-", "-"],
        ["plain", "3", "3", "0", "0", "2 min", "-", "-"],
        ["src", "1", "1", "0", "0", "2 min", "dlq", "2"],
    ]
    assert f'<a href="{DLQ_PAGE}">dlq</a>' in page.text


def test_the_queue_list_of_a_project_without_queues_says_so(console):
    page = console.simulate_get("/console/projects/nobody/queues")
    assert page.status_code == 200
    assert "This project has no queues." in page.text


def test_the_queue_list_pages_by_name(console, api):
    for number in range(52):
        assert api.simulate_put(f"/v2/queues/q{number:02d}").status_code == 201
    first = console.simulate_get(QUEUES)
    assert len(table(first.text, "queues")) == 51
    assert f'<a rel="next" href="{QUEUES}?marker=q49">' in first.text
    second = console.simulate_get(QUEUES, params={"marker": "q49"})
    assert [row[0] for row in table(second.text, "queues")[1:]] == ["q50", "q51"]
    assert 'rel="next"' not in second.text


def test_a_dead_letter_queue_page_groups_its_messages_by_last_failure_signature(console, api):
    bad_ids, timeouts = two_signatures(api)
    page = console.simulate_get(DLQ_PAGE)
    assert page.status_code == 200
    sections = re.findall(r'<section class="signature" id="signature-(v2-[0-9a-f]+)"', page.text)
    assert sections == [BAD_ID, TIMEOUT]
    assert f"<h3><code>{BAD_ID}</code> <span class=\"count\">2</span> messages</h3>" in page.text
    assert f"<h3><code>{TIMEOUT}</code> <span class=\"count\">1</span> message</h3>" in page.text
    assert "<code>ValueError: bad id &lt;*&gt;</code>" in page.text
    assert "3 dead letters" in page.text
    for message_id in bad_ids + timeouts:
        assert f'<input type="checkbox" name="ids" value="{message_id}" form="redrive-selection"' in page.text
    assert table(page.text, "queue-stats")[0] == ["depth", "3"]
    # the same ids as the redrive filter: a dry run of the group selects its 2 messages
    dry = api.simulate_post("/v2/queues/dlq/redrive", json={"dry_run": True, "filter": {"signature": BAD_ID}})
    assert dry.json["matched"] == 2


def test_a_dead_letter_shows_its_provenance_and_failure_history(console, api):
    [message_id] = dead_letter(api, {"n": 1}, error_type="ValueError", error="bad id 42")
    page = console.simulate_get(DLQ_PAGE)
    assert f'<tr data-message="{message_id}">' in page.text
    row = page.text.split(f'<tr data-message="{message_id}">')[1].split("</tr>")[0]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    assert cells[1:6] == [message_id, "src", "max_claims", "1", "2100-01-01T00:00:00Z"]
    assert cells[6] == "ValueError bad id 42"
    assert ('<td>2100-01-01T00:00:00Z</td><td class="num">1</td><td>ValueError</td><td>bad id 42</td>'
            in page.text)
    assert '<pre class="body">{\n  &#34;n&#34;: 1\n}</pre>' in page.text


def test_a_queue_page_shows_its_redrive_tasks_and_their_progress(console, api):
    two_signatures(api)
    assert "No redrive task." in console.simulate_get(DLQ_PAGE).text
    started = api.simulate_post("/v2/queues/dlq/redrive",
                                json={"async": True, "filter": {"signature": BAD_ID}})
    assert started.status_code == 202, started.text
    task = started.json
    rows = table(console.simulate_get(DLQ_PAGE).text, "redrive-task-list")
    assert rows[1:] == [[task["id"], "running", "0", "counting", "source queues", task["started"], "",
                         "Cancel"]]
    cancelled = api.simulate_post(f"/v2/queues/dlq/redrive/tasks/{task['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    rows = table(console.simulate_get(DLQ_PAGE).text, "redrive-task-list")
    assert [row[1] for row in rows[1:]] == ["cancelled"]


def test_a_dead_letter_queue_page_starts_with_a_summary_of_its_signatures_linking_to_each(
        console, api, clock):
    dead_letter(api, {"n": 1}, {"n": 2}, error_type="ValueError", error="bad id 42")
    clock.advance(120)
    dead_letter(api, {"n": 3}, error_type="TimeoutError", error="upstream timed out after 30 s")
    clock.advance(30)
    page = console.simulate_get(DLQ_PAGE).text
    assert table(page, "signature-summary")[1:] == [
        [BAD_ID, "2", "67%", "2 min", "ValueError: bad id <*>", "Start a redrive task of this signature"],
        [TIMEOUT, "1", "33%", "30 s", "TimeoutError: upstream timed out after <*> s",
         "Start a redrive task of this signature"]]
    assert page.index('id="signature-summary"') < page.index(f'id="signature-{BAD_ID}"')
    for signature in (BAD_ID, TIMEOUT):
        assert f'<a href="#signature-{signature}"><code>{signature}</code></a>' in page


def tasks_of(api) -> list[dict]:
    return api.simulate_get("/v2/queues/dlq/redrive/tasks").json["tasks"]


def test_a_redrive_task_is_started_and_cancelled_through_the_forms(console, api, clock):
    two_signatures(api)
    token = csrf_of(console, DLQ_PAGE)
    started = submit(console, DLQ_PAGE + "/redrive/tasks", [("signature", BAD_ID), ("max_per_second", "5")],
                     token)
    assert started.status_code == 303, started.text
    assert started.headers["location"] == DLQ_PAGE + "#redrive-tasks"
    [task] = tasks_of(api)
    assert (task["status"], task["filter"], task["max_per_second"]) == ("running", {"signature": BAD_ID}, 5.0)
    again = submit(console, DLQ_PAGE + "/redrive/tasks", [], token)
    assert again.status_code == 409 and "text/html" in again.headers["content-type"]
    assert task["id"] in again.text
    page = console.simulate_get(DLQ_PAGE).text
    cancel_url = f"{DLQ_PAGE}/redrive/tasks/{task['id']}/cancel"
    assert f'<form method="post" action="{cancel_url}">' in page
    cancelled = submit(console, cancel_url, [], token)
    assert cancelled.status_code == 303, cancelled.text
    assert cancelled.headers["location"] == DLQ_PAGE + "#redrive-tasks"
    assert [t["status"] for t in tasks_of(api)] == ["cancelled"]
    assert "Cancel</button>" not in console.simulate_get(DLQ_PAGE).text
    assert submit(console, cancel_url, [], token).status_code == 409
    # a task of every dead letter, at the server's default rate
    clock.advance(1)
    assert submit(console, DLQ_PAGE + "/redrive/tasks", [], token).status_code == 303
    newest = tasks_of(api)[0]
    assert (newest["status"], newest["filter"], newest["max_per_second"]) == ("running", {}, 500.0)


@pytest.mark.parametrize(("fields", "status", "says"), [
    ([("max_per_second", "fast")], 400, "max_per_second must be a number"),
    ([("max_per_second", "nan")], 400, "max_per_second must be a finite number"),
    ([("max_per_second", "0")], 400, "max_per_second"),
    ([("max_per_second", "501")], 400, "max_redrive_rate"),
    ([("signature", "not-hex")], 400, "signature"),
    ([("signature", BAD_ID), ("signature", TIMEOUT)], 400, "signature may be sent once only"),
])
def test_a_bad_task_form_is_a_4xx_page_and_starts_nothing(console, api, fields, status, says):
    two_signatures(api)
    token = csrf_of(console, DLQ_PAGE)
    response = submit(console, DLQ_PAGE + "/redrive/tasks", fields, token)
    assert response.status_code == status, response.text
    assert says in response.text
    assert tasks_of(api) == []


def test_a_task_on_an_unknown_queue_or_an_unknown_task_is_a_404_page(console, api):
    token = csrf_of(console, QUEUES)
    assert submit(console, QUEUES + "/missing/redrive/tasks", [], token).status_code == 404
    two_signatures(api)
    unknown = f"{DLQ_PAGE}/redrive/tasks/00000000-0000-4000-8000-000000000000/cancel"
    assert submit(console, unknown, [], token).status_code == 404
    assert submit(console, f"{DLQ_PAGE}/redrive/tasks/not-a-task/cancel", [], token).status_code == 404


@pytest.mark.parametrize("forgery", ["no cookie", "no field", "origin"])
def test_forged_task_forms_start_and_cancel_nothing(console, api, forgery):
    two_signatures(api)
    started = api.simulate_post("/v2/queues/dlq/redrive", json={"async": True})
    token = csrf_of(console, DLQ_PAGE)
    for path in (DLQ_PAGE + "/redrive/tasks", f"{DLQ_PAGE}/redrive/tasks/{started.json['id']}/cancel"):
        body = urllib.parse.urlencode([] if forgery == "no field" else [("csrf_token", token)])
        response = console.simulate_post(
            path, body=body, content_type=FORM, cookies={} if forgery == "no cookie" else {CSRF: token},
            headers={"Origin": "https://evil.example"} if forgery == "origin" else {})
        assert response.status_code == 403, response.text
    assert [t["status"] for t in tasks_of(api)] == ["running"]


def test_a_queue_without_dead_letters_says_so(console, api):
    post(api, "plain", 1)
    page = console.simulate_get(QUEUES + "/plain")
    assert page.status_code == 200
    assert "No dead letters in this queue." in page.text
    assert "No redrive task." in page.text


def test_an_unknown_queue_is_a_404_page(console):
    response = console.simulate_get(QUEUES + "/missing")
    assert response.status_code == 404
    assert "text/html" in response.headers["content-type"]
    assert "<h1 class=\"error\">404 Not found</h1>" in response.text
    assert "Queue missing does not exist in project project-a." in response.text


def test_a_bad_queue_name_is_a_400_page(console):
    response = console.simulate_get(QUEUES + "/b@d")
    assert response.status_code == 400
    assert "text/html" in response.headers["content-type"]
    assert "Invalid API request" in response.text


def test_an_unknown_console_path_is_a_404_page(console):
    response = console.simulate_get("/console/nothing/here")
    assert response.status_code == 404
    assert "text/html" in response.headers["content-type"]


def test_the_style_sheet_is_served(console):
    response = console.simulate_get("/console/console.css")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/css; charset=utf-8"
    assert "section.signature" in response.text


@pytest.mark.parametrize("path", ["/console", QUEUES, QUEUES + "/missing", "/console/console.css"])
def test_every_console_answer_forbids_scripts_framing_and_caching(console, path):
    response = console.simulate_get(path)
    assert response.headers["content-security-policy"] == (
        "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["referrer-policy"] == "same-origin"


@pytest.mark.parametrize("seconds, reads", [
    (None, "-"), (0, "0 s"), (59.9, "59 s"), (60, "1 min"), (3599, "59 min"), (3600, "1 h"),
    (3660, "1 h 1 min"), (86400, "1 d"), (90000, "1 d 1 h"),
])
def test_ages_read_as_an_operator_reads_them(seconds, reads):
    assert pages.duration(seconds) == reads


# -- escaping ------------------------------------------------------------------------------------


def test_a_message_body_and_error_with_markup_are_escaped(console, api):
    dead_letter(api, "<script>alert(1)</script>", error_type="XSS", error='<img src=x onerror="alert(2)">')
    page = console.simulate_get(DLQ_PAGE)
    assert page.status_code == 200
    assert "<script" not in page.text
    assert "<img" not in page.text
    assert "&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;" in page.text
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in page.text


def test_a_project_name_with_markup_is_escaped(console):
    page = console.simulate_get("/console/projects/%3Cb%3Eops/queues")
    assert page.status_code == 200
    assert "<strong>&lt;b&gt;ops</strong>" in page.text
    assert "<b>" not in page.text


# -- redrive -------------------------------------------------------------------------------------


def test_a_signature_is_previewed_then_redriven_through_the_forms(console, api):
    bad_ids, timeouts = two_signatures(api)
    token = csrf_of(console, DLQ_PAGE)
    preview = submit(console, DLQ_PAGE + "/redrive", [("signature", BAD_ID), ("action", "preview")], token)
    assert preview.status_code == 200
    assert '<p id="matched"><span class="count">2</span> dead letters of dlq would move' in preview.text
    assert [row[0] for row in table(preview.text, "sample")[1:]] == bad_ids
    assert [row[2] for row in table(preview.text, "sample")[1:]] == ["src", "src"]
    assert f'<input type="hidden" name="signature" value="{BAD_ID}">' in preview.text
    assert len(listed(api, "dlq")) == 3  # a preview moves nothing
    done = submit(console, DLQ_PAGE + "/redrive", [("signature", BAD_ID), ("action", "redrive")], token)
    assert done.status_code == 200
    assert ('<p id="redriven"><span class="count">2</span> of 2 selected dead letters moved back.</p>'
            in done.text)
    assert [m["id"] for m in listed(api, "dlq")] == timeouts
    assert [m["id"] for m in listed(api, "src")] == bad_ids


def test_selected_messages_are_redriven_and_no_others(console, api):
    bad_ids, timeouts = two_signatures(api)
    token = csrf_of(console, DLQ_PAGE)
    chosen = [("ids", bad_ids[1]), ("ids", timeouts[0])]
    preview = submit(console, DLQ_PAGE + "/redrive", [*chosen, ("action", "preview")], token)
    assert "(the 2 selected)" in preview.text
    for message_id in (bad_ids[1], timeouts[0]):
        assert f'<input type="hidden" name="ids" value="{message_id}">' in preview.text
    done = submit(console, DLQ_PAGE + "/redrive", [*chosen, ("action", "redrive")], token)
    assert '<span class="count">2</span> of 2' in done.text
    assert [m["id"] for m in listed(api, "dlq")] == [bad_ids[0]]
    assert sorted(m["id"] for m in listed(api, "src")) == sorted([bad_ids[1], timeouts[0]])


@pytest.mark.parametrize("fields, says", [
    ([("signature", "zz"), ("action", "preview")], "filter.signature"),
    ([("action", "preview")], "Choose the messages to redrive (ids) or one signature"),
    ([("signature", BAD_ID), ("ids", "m1"), ("action", "preview")], "not both and not neither"),
    ([("signature", BAD_ID)], "The form field action must be preview or redrive."),
    ([("signature", BAD_ID), ("action", "delete")], "The form field action must be preview or redrive."),
    ([("signature", BAD_ID), ("signature", TIMEOUT), ("action", "redrive")], "may be sent once only"),
])
def test_bad_redrive_form_input_is_a_400_page_naming_the_field(console, api, fields, says):
    two_signatures(api)
    token = csrf_of(console, DLQ_PAGE)
    response = submit(console, DLQ_PAGE + "/redrive", fields, token)
    assert response.status_code == 400
    assert "text/html" in response.headers["content-type"]
    assert says in response.text
    assert len(listed(api, "dlq")) == 3


def test_a_redrive_form_too_large_or_not_utf8_is_a_400_page(console, api):
    two_signatures(api)
    token = csrf_of(console, DLQ_PAGE)
    too_large = submit(console, DLQ_PAGE + "/redrive", [("ids", "x" * 400_000), ("action", "preview")], token)
    assert too_large.status_code == 400
    assert "Request body may not exceed 325536 bytes." in too_large.text
    latin1 = f"signature=caf\xe9&action=preview&csrf_token={token}".encode("latin-1")
    not_utf8 = console.simulate_post(DLQ_PAGE + "/redrive", body=latin1, content_type=FORM,
                                     cookies={CSRF: token})
    assert not_utf8.status_code == 400
    assert "A console form must be UTF-8." in not_utf8.text
    assert len(listed(api, "dlq")) == 3


def test_a_redrive_from_an_unknown_queue_is_a_404_page(console):
    token = csrf_of(console)
    fields = [("signature", BAD_ID), ("action", "preview")]
    response = submit(console, QUEUES + "/missing/redrive", fields, token)
    assert response.status_code == 404
    assert "Queue missing does not exist in project project-a." in response.text


def test_a_redrive_form_must_be_form_encoded(console):
    token = csrf_of(console)
    response = console.simulate_post(DLQ_PAGE + "/redrive", json={"csrf_token": token},
                                     cookies={CSRF: token})
    assert response.status_code == 415
    assert "application/x-www-form-urlencoded" in response.text


# -- forged forms ----------------------------------------------------------------------------------


@pytest.mark.parametrize("forgery", ["no cookie", "other cookie", "no field", "origin", "null origin",
                                     "fetch site"])
def test_a_forged_redrive_form_is_refused_and_moves_nothing(console, api, forgery):
    two_signatures(api)
    token = csrf_of(console, DLQ_PAGE)
    other = csrf_of(console, DLQ_PAGE)
    assert other != token
    fields = [("signature", BAD_ID), ("action", "redrive")]
    body = urllib.parse.urlencode([*fields, ("csrf_token", token)])
    kwargs = {"cookies": {CSRF: token}, "headers": {}}
    if forgery == "no cookie":
        kwargs["cookies"] = {}
    elif forgery == "other cookie":
        kwargs["cookies"] = {CSRF: other}
    elif forgery == "no field":
        body = urllib.parse.urlencode(fields)
    elif forgery == "origin":
        kwargs["headers"] = {"Origin": "http://evil.example"}
    elif forgery == "null origin":
        kwargs["headers"] = {"Origin": "null"}
    else:
        kwargs["headers"] = {"Sec-Fetch-Site": "cross-site"}
    response = console.simulate_post(DLQ_PAGE + "/redrive", body=body, content_type=FORM, **kwargs)
    assert response.status_code == 403
    assert "did not come from a page of this console" in response.text
    assert len(listed(api, "dlq")) == 3


def test_a_form_from_the_console_own_origin_is_accepted(console, api):
    two_signatures(api)
    token = csrf_of(console, DLQ_PAGE)
    response = submit(console, DLQ_PAGE + "/redrive", [("signature", TIMEOUT), ("action", "preview")], token,
                      headers={"Origin": "http://falconframework.org", "Sec-Fetch-Site": "same-origin"})
    assert response.status_code == 200


def test_the_form_token_cookie_is_http_only_and_strictly_same_site(console):
    cookie = console.simulate_get(QUEUES).cookies[CSRF]
    assert cookie.http_only and cookie.same_site == "Strict" and cookie.path == "/console"
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", cookie.value)


# -- token auth ----------------------------------------------------------------------------------


@pytest.fixture
def token_console(make_client) -> falcon.testing.TestClient:
    return make_client(None, console_enabled=True, auth_strategy="token", tokens=TOKENS)


def log_in(console, token: str) -> falcon.testing.Result:
    form = csrf_of(console, "/console/login")
    return submit(console, "/console/login", [("token", token)], form)


def session_of(console, token: str) -> dict[str, str]:
    """Log in with a token; return the cookies of the session it opened."""
    response = log_in(console, token)
    assert response.status_code == 303, response.text
    return {SESSION: response.cookies[SESSION].value}


def test_under_token_auth_the_front_page_leads_to_the_login_form(token_console):
    response = token_console.simulate_get("/console")
    assert response.status_code == 303
    assert response.headers["location"] == "/console/login"
    page = token_console.simulate_get("/console/login")
    assert '<input type="password" name="token" autocomplete="off" required>' in page.text


def test_a_page_without_a_token_is_a_401_page_offering_the_login(token_console):
    response = token_console.simulate_get(QUEUES)
    assert response.status_code == 401
    assert '<a href="/console/login">Log in</a>' in response.text


def test_an_unknown_token_does_not_log_in(token_console):
    response = log_in(token_console, "tok-x")
    assert response.status_code == 401
    assert SESSION not in response.cookies


def test_a_token_logs_in_to_its_project_in_an_http_only_cookie_holding_a_session_id_only(token_console):
    response = log_in(token_console, "tok-a")
    assert response.status_code == 303
    assert response.headers["location"] == QUEUES
    cookie = response.cookies[SESSION]
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", cookie.value)
    assert "tok-a" not in response.headers["set-cookie"]
    assert cookie.http_only and cookie.same_site == "Strict" and cookie.path == "/console"
    session = {SESSION: cookie.value}
    assert token_console.simulate_get("/console", cookies=session).headers["location"] == QUEUES
    assert token_console.simulate_get(QUEUES, cookies=session).status_code == 200
    assert log_in(token_console, "tok-a").cookies[SESSION].value != cookie.value  # a new session each time


def test_the_raw_token_in_the_session_cookie_opens_nothing(token_console):
    assert token_console.simulate_get(QUEUES, cookies={SESSION: "tok-a"}).status_code == 401
    assert token_console.simulate_get(QUEUES, cookies={"zaqar_console_token": "tok-a"}).status_code == 401
    forged = {SESSION: "A" * 43}  # well formed, never opened
    assert token_console.simulate_get(QUEUES, cookies=forged).status_code == 401


def test_the_log_out_button_shows_once_logged_in(token_console):
    assert "Log out" not in token_console.simulate_get("/console/login").text
    assert '<form class="logout" method="post" action="/console/logout">' in token_console.simulate_get(
        QUEUES, cookies=session_of(token_console, "tok-a")).text


def test_a_token_sees_only_its_own_project(token_console):
    response = token_console.simulate_get("/console/projects/project-b/queues",
                                          cookies=session_of(token_console, "tok-a"))
    assert response.status_code == 403
    assert "does not match the project of the token" in response.text


def test_a_proxy_may_send_the_token_as_x_auth_token(token_console):
    response = token_console.simulate_get(QUEUES, headers={"X-Auth-Token": "tok-a"})
    assert response.status_code == 200
    assert token_console.simulate_get(QUEUES, headers={"X-Auth-Token": "tok-b"}).status_code == 403


def test_a_redrive_under_token_auth_needs_the_token_and_the_form_token(token_console):
    api = falcon.testing.TestClient(token_console.app, headers={"X-Auth-Token": "tok-a",
                                                                 "Client-ID": headers()["Client-ID"]})
    bad_ids, _ = two_signatures(api)
    session = session_of(token_console, "tok-a")
    form = csrf_of(token_console, DLQ_PAGE, cookies=session)
    fields = [("signature", BAD_ID), ("action", "redrive")]
    assert submit(token_console, DLQ_PAGE + "/redrive", fields, form).status_code == 401
    done = submit(token_console, DLQ_PAGE + "/redrive", fields, form, cookies=session)
    assert done.status_code == 200
    assert [m["id"] for m in listed(api, "src")] == bad_ids


def test_logging_out_removes_the_session_cookie_and_closes_the_session(token_console):
    session = session_of(token_console, "tok-a")
    form = csrf_of(token_console, QUEUES, cookies=session)
    response = submit(token_console, "/console/logout", [], form, cookies=session)
    assert response.status_code == 303
    assert response.headers["location"] == "/console"
    assert response.cookies[SESSION].value == ""
    assert response.cookies[SESSION].max_age is not None or response.cookies[SESSION].expires is not None
    # a copy of the cookie kept from before the logout opens nothing any more
    assert token_console.simulate_get(QUEUES, cookies=session).status_code == 401


def test_a_session_opened_by_one_worker_is_read_and_closed_by_every_other(make_client):
    # two apps on one store: two workers (or servers) of a deployment
    first, second = (make_client(None, console_enabled=True, auth_strategy="token", tokens=TOKENS)
                     for _ in range(2))
    session = session_of(first, "tok-a")
    assert second.simulate_get(QUEUES, cookies=session).status_code == 200
    form = csrf_of(second, QUEUES, cookies=session)
    assert submit(second, "/console/logout", [], form, cookies=session).status_code == 303
    assert first.simulate_get(QUEUES, cookies=session).status_code == 401


def test_a_session_expires_after_its_lifetime(make_client, clock):
    console = make_client(None, console_enabled=True, auth_strategy="token", tokens=TOKENS,
                          console_session_lifetime=600.0)
    session = session_of(console, "tok-a")
    clock.advance(599)
    assert console.simulate_get(QUEUES, cookies=session).status_code == 200
    clock.advance(1)
    assert console.simulate_get(QUEUES, cookies=session).status_code == 401
    assert console.simulate_get("/console", cookies=session).headers["location"] == "/console/login"


def test_a_session_ends_with_its_token(make_client):
    console = make_client(None, console_enabled=True, auth_strategy="token", tokens=TOKENS)
    session = session_of(console, "tok-a")
    # the same store, served after tok-a was taken out of [tokens]
    revoked = make_client(None, console_enabled=True, auth_strategy="token",
                          tokens={"tok-b": TOKENS["tok-b"]})
    assert revoked.simulate_get(QUEUES, cookies=session).status_code == 401


def test_the_login_form_under_noauth_leads_back_to_the_chooser(console):
    response = console.simulate_get("/console/login")
    assert response.status_code == 303
    assert response.headers["location"] == "/console"
