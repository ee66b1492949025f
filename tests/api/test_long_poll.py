"""``POST /v2/queues/{q}/claims?wait=S``: checks of ``wait``, the wait, and no wait when messages exist."""

from __future__ import annotations

import threading
import time

import pytest

from tests.api.helpers import assert_error, headers, post

CLAIMS = "/v2/queues/q1/claims"


@pytest.mark.parametrize(("wait", "rule"), [
    ("0", "wait must be between 1 and 20 seconds, got 0."),
    ("21", "wait must be between 1 and 20 seconds, got 21."),
    ("1.5", "wait must be a whole number of seconds written in ASCII digits, got '1.5'."),
    ("soon", "wait must be a whole number of seconds written in ASCII digits, got 'soon'."),
    ("-1", "wait must be a whole number of seconds written in ASCII digits, got '-1'."),
])
def test_a_wait_out_of_range_or_not_a_whole_number_is_400_naming_the_rule(client, wait, rule):
    started = time.monotonic()
    body = assert_error(client.simulate_post(CLAIMS, params={"wait": wait}), 400)
    assert body["description"] == rule
    assert time.monotonic() - started < 1.0


def test_the_longest_wait_is_the_server_setting(make_client):
    client = make_client(headers(), claim_max_wait=2)
    body = assert_error(client.simulate_post(CLAIMS, params={"wait": "3"}), 400)
    assert body["description"] == "wait must be between 1 and 2 seconds, got 3."


def test_a_waiting_claim_on_an_empty_queue_answers_204_after_the_wait(client):
    client.simulate_put("/v2/queues/q1")
    started = time.monotonic()
    result = client.simulate_post(CLAIMS, params={"wait": "1"})
    took = time.monotonic() - started
    assert result.status_code == 204
    assert result.text == ""
    assert 0.95 <= took < 3.0


def test_a_waiting_claim_answers_at_once_when_messages_exist(client):
    (message_id,) = post(client, "q1", {"job": 1})
    started = time.monotonic()
    result = client.simulate_post(CLAIMS, params={"wait": "20", "limit": "5"})
    assert time.monotonic() - started < 2.0
    assert result.status_code == 201
    assert [m["id"] for m in result.json["messages"]] == [message_id]


def test_a_waiting_claim_is_answered_when_another_client_posts_in_the_same_process(client, other_client):
    client.simulate_put("/v2/queues/q1")
    outcome = {}

    def wait_for_a_message() -> None:
        started = time.monotonic()
        outcome["result"] = client.simulate_post(CLAIMS, params={"wait": "5"})
        outcome["took"] = time.monotonic() - started

    waiting = threading.Thread(target=wait_for_a_message)
    waiting.start()
    time.sleep(0.5)
    (message_id,) = post(other_client, "q1", "wake up")
    waiting.join(10)
    assert outcome["result"].status_code == 201
    assert [m["id"] for m in outcome["result"].json["messages"]] == [message_id]
    assert 0.4 <= outcome["took"] < 5


def test_a_waiting_claim_on_a_dead_letter_queue_is_answered_when_a_claim_moves_a_message_there(client):
    assert client.simulate_put("/v2/queues/jobs-dlq").status_code == 201
    assert client.simulate_put("/v2/queues/jobs", json={"_dead_letter_queue": "jobs-dlq",
                                                         "_max_claim_count": 1}).status_code == 201
    (poison,) = post(client, "jobs", "poison")
    first = client.simulate_post("/v2/queues/jobs/claims")
    assert first.status_code == 201
    assert client.simulate_delete(first.headers["Location"]).status_code == 204
    outcome = {}

    def wait_for_a_dead_letter() -> None:
        started = time.monotonic()
        outcome["result"] = client.simulate_post("/v2/queues/jobs-dlq/claims", params={"wait": "10"})
        outcome["took"] = time.monotonic() - started

    waiting = threading.Thread(target=wait_for_a_dead_letter)
    waiting.start()
    time.sleep(0.5)
    assert client.simulate_post("/v2/queues/jobs/claims").status_code == 204  # it moved the poison
    waiting.join(15)
    assert outcome["result"].status_code == 201
    assert [m["id"] for m in outcome["result"].json["messages"]] == [poison]
    assert 0.4 <= outcome["took"] < 5
