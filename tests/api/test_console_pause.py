"""The console's pause and resume form, and what its pages show of a paused queue and its breaker.

docs/api.rst, "Pausing a queue" and "Dead-letter circuit breaker".
"""

from __future__ import annotations

import re
import urllib.parse

import pytest

from tests.api.helpers import post
from tests.api.test_console import CSRF, FORM, QUEUES, api, console, csrf_of, submit, table  # noqa: F401

pytestmark = pytest.mark.store_independent

JOBS = QUEUES + "/jobs"


def text_of(page: str) -> str:
    """Return a page's text as a reader sees it: no tags, runs of white space as one space."""
    return " ".join(re.sub(r"<[^>]+>", " ", page).split()).replace(" .", ".")


def test_an_operator_pauses_and_resumes_a_queue_from_its_page(console, api):  # noqa: F811
    post(api, "jobs", {"n": 1})
    page = console.simulate_get(JOBS)
    assert "Running: claims take messages." in page.text
    token = csrf_of(console, JOBS)
    paused = submit(console, JOBS + "/pause", [("paused", "true")], token)
    assert paused.status_code == 303
    assert paused.headers["Location"] == JOBS
    assert api.simulate_get("/v2/queues/jobs").json["_paused"] is True
    assert api.simulate_post("/v2/queues/jobs/claims").status_code == 204
    page = console.simulate_get(JOBS)
    assert "Paused: posts are accepted, claims take nothing. Paused by an operator." in text_of(page.text)
    listed = console.simulate_get(QUEUES)
    assert [row[0] for row in table(listed.text, "queues")[1:]] == ["jobs paused"]
    assert submit(console, JOBS + "/pause", [("paused", "false")], token).status_code == 303
    assert "_paused" not in api.simulate_get("/v2/queues/jobs").json
    assert api.simulate_post("/v2/queues/jobs/claims").status_code == 201


def test_the_queue_page_says_what_tripped_the_breaker(console, api):  # noqa: F811
    assert api.simulate_put("/v2/queues/jobs-dlq").status_code == 201
    assert api.simulate_put("/v2/queues/jobs", json={
        "_dead_letter_queue": "jobs-dlq", "_max_claim_count": 1,
        "_dead_letter_breaker": {"seconds": 60, "max_dead_letters": 0}}).status_code == 201
    post(api, "jobs", {"n": 1})
    first = api.simulate_post("/v2/queues/jobs/claims")
    assert api.simulate_delete(first.headers["Location"]).status_code == 204
    assert api.simulate_post("/v2/queues/jobs/claims").status_code == 204  # dead-letters it: trips
    record = api.simulate_get("/v2/queues/jobs").json["_paused_by"]
    page = console.simulate_get(JOBS)
    shown = text_of(page.text)
    assert (f"Paused by its dead-letter breaker at {record['at']}: 1 dead letters and 0 messages claimed "
            f"since {record['window_started']} (the rule: more than 0 dead letters within 60 s).") in shown
    assert ["dead-letter breaker", "pauses the queue at more than 0 dead letters within 60 s"] in \
        table(page.text, "queue-stats")


@pytest.mark.parametrize("forgery", ["no cookie", "no field", "origin"])
def test_a_forged_pause_form_pauses_nothing(console, api, forgery):  # noqa: F811
    post(api, "jobs", {"n": 1})
    token = csrf_of(console, JOBS)
    fields = [("paused", "true")] + ([] if forgery == "no field" else [("csrf_token", token)])
    response = console.simulate_post(
        JOBS + "/pause", body=urllib.parse.urlencode(fields), content_type=FORM,
        cookies={} if forgery == "no cookie" else {CSRF: token},
        headers={"Origin": "https://evil.example"} if forgery == "origin" else {})
    assert response.status_code == 403, response.text
    assert "_paused" not in api.simulate_get("/v2/queues/jobs").json


def test_a_pause_form_without_true_or_false_is_400(console, api):  # noqa: F811
    post(api, "jobs", {"n": 1})
    token = csrf_of(console, JOBS)
    response = submit(console, JOBS + "/pause", [("paused", "maybe")], token)
    assert response.status_code == 400
    assert "The form field paused must be true or false." in response.text
    assert submit(console, QUEUES + "/missing/pause", [("paused", "true")], token).status_code == 404
