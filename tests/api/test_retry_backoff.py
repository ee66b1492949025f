"""Retry backoff over HTTP: the ``_retry_backoff`` queue key and a release's ``delay`` (docs/api.rst)."""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import JSON_PATCH, assert_error, claim, post

MESSAGES = "/v2/queues/q1/messages"


def release(client, message_id: str, claim_id: str, document=None):
    return client.simulate_post(f"{MESSAGES}/{message_id}/release", params={"claim_id": claim_id},
                                json=document)


def claimable(client) -> list[str]:
    result = client.simulate_post("/v2/queues/q1/claims", json={"ttl": 60})
    return [] if result.status_code == 204 else [m["id"] for m in result.json["messages"]]


def test_the_policy_is_stored_and_shown_as_given(client):
    policy = {"base": 1, "factor": 2, "max": 300, "jitter": 0.1}
    assert client.simulate_put("/v2/queues/q1", json={"_retry_backoff": policy}).status_code == 201
    assert client.simulate_get("/v2/queues/q1").json["_retry_backoff"] == policy


def test_a_queue_without_the_policy_does_not_show_the_key(client):
    client.simulate_put("/v2/queues/q1", json={})
    assert "_retry_backoff" not in client.simulate_get("/v2/queues/q1").json


@pytest.mark.parametrize(("policy", "description"), [
    ({"factor": 2}, "_retry_backoff.base is required (seconds before the first retry)."),
    ({"base": 1, "factor": 20}, "_retry_backoff.factor must be between 1 and 10, got 20."),
    ({"base": 30, "max": 10}, "_retry_backoff.max must be between 30 and 900, got 10."),
    ({"base": 1, "jitter": "0.1"}, '_retry_backoff.jitter must be a number, got "0.1".'),
    ("fast", '_retry_backoff must be an object with keys base, factor, max, jitter, got "fast".'),
])
def test_a_bad_policy_is_400_naming_the_key_and_the_rule(client, policy, description):
    body = assert_error(client.simulate_put("/v2/queues/q1", json={"_retry_backoff": policy}), 400,
                        "Invalid API request")
    assert body["description"] == description


def test_a_patch_sets_and_removes_the_policy(client):
    client.simulate_put("/v2/queues/q1", json={})
    added = client.simulate_patch("/v2/queues/q1", content_type=JSON_PATCH, body=json.dumps([
        {"op": "add", "path": "/metadata/_retry_backoff", "value": {"base": 5}}]))
    assert added.status_code == 200 and added.json["_retry_backoff"] == {"base": 5}
    removed = client.simulate_patch("/v2/queues/q1", content_type=JSON_PATCH, body=json.dumps([
        {"op": "remove", "path": "/metadata/_retry_backoff"}]))
    assert removed.status_code == 200 and "_retry_backoff" not in removed.json


def test_a_lapsed_claim_waits_out_the_backoff_before_the_next_claim(client, clock):
    client.simulate_put("/v2/queues/q1", json={"_retry_backoff": {"base": 10, "factor": 3}})
    (message_id,) = post(client, "q1", "job")
    claim(client, "q1", ttl=60)
    clock.advance(69)
    assert claimable(client) == []
    stats = client.simulate_get("/v2/queues/q1/stats").json["messages"]
    assert (stats["claimed"], stats["delayed"], stats["free"]) == (0, 1, 0)
    clock.advance(1)
    assert claimable(client) == [message_id]
    clock.advance(60 + 29)  # the 2nd retry waits 30 s
    assert claimable(client) == []
    clock.advance(1)
    assert claimable(client) == [message_id]


def test_a_release_with_a_delay_holds_the_message_back(client, clock):
    (message_id,) = post(client, "q1", "job")
    claim_id, _ = claim(client, "q1")
    assert release(client, message_id, claim_id, {"error": "busy", "delay": 45}).status_code == 204
    listed = client.simulate_get(MESSAGES, params={"echo": "true"}).json["messages"]
    assert listed == []
    clock.advance(44)
    assert claimable(client) == []
    clock.advance(1)
    assert claimable(client) == [message_id]


def test_a_release_delay_of_zero_overrides_the_queues_wait(client):
    client.simulate_put("/v2/queues/q1", json={"_retry_backoff": {"base": 100}})
    (message_id,) = post(client, "q1", "job")
    claim_id, _ = claim(client, "q1")
    assert release(client, message_id, claim_id, {"delay": 0}).status_code == 204
    assert claimable(client) == [message_id]


@pytest.mark.parametrize(("document", "fragment"), [
    ({"delay": -1}, "delay"), ({"delay": 901}, "delay"), ({"delay": "5"}, "delay"),
    ({"delay": 2.5}, "delay"), ({"delay": True}, "delay"),
])
def test_a_bad_release_delay_is_400_naming_the_field(client, document, fragment):
    (message_id,) = post(client, "q1", "job")
    claim_id, _ = claim(client, "q1")
    body = assert_error(release(client, message_id, claim_id, document), 400)
    assert fragment in body["description"]
    assert claimable(client) == []  # still held by its claim: nothing was released
