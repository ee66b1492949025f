"""Editing a delayed message: ``PATCH /v2/queues/{queue}/messages/{message_id}`` (our extension)."""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import JSON_PATCH, assert_error, claim, post


def test_patch_of_a_delayed_message_answers_it_as_get_shows_it(client, clock):
    held, = post(client, "q", {"v": 1}, delay=120, ttl=300)
    clock.advance(20)
    result = client.simulate_patch(f"/v2/queues/q/messages/{held}", json={"body": {"v": 2}, "ttl": 600})
    assert result.status_code == 200, result.text
    shown = client.simulate_get(f"/v2/queues/q/messages/{held}").json
    assert result.json == shown
    assert (shown["body"], shown["ttl"], shown["age"], shown["id"]) == ({"v": 2}, 620, 20, held)
    assert client.simulate_post("/v2/queues/q/claims").status_code == 204
    clock.advance(100)
    assert [m["id"] for m in claim(client, "q")[1]] == [held]


def test_patch_with_delay_zero_makes_the_message_visible_now(client):
    held, = post(client, "q", "x", delay=600)
    result = client.simulate_patch(f"/v2/queues/q/messages/{held}", json={"delay": 0})
    assert result.status_code == 200, result.text
    assert [m["id"] for m in claim(client, "q")[1]] == [held]


def test_patch_after_the_delay_matured_is_409_and_changes_nothing(client, clock):
    held, = post(client, "q", "original", delay=30)
    clock.advance(30)
    result = client.simulate_patch(f"/v2/queues/q/messages/{held}", json={"body": "changed"})
    body = assert_error(result, 409, "Resource conflict")
    assert body["description"].startswith(f"Message {held} cannot be edited: its delay ended at ")
    assert client.simulate_get(f"/v2/queues/q/messages/{held}").json["body"] == "original"


def test_patch_of_a_claimed_message_is_409(client, clock):
    held, = post(client, "q", "original", delay=30)
    clock.advance(30)
    claim(client, "q")
    result = client.simulate_patch(f"/v2/queues/q/messages/{held}", json={"delay": 60})
    body = assert_error(result, 409, "Resource conflict")
    assert body["description"] == (f"Message {held} cannot be edited: it is claimed. Only a message that "
                                   "is still delayed, unclaimed and unexpired can be edited.")


def test_patch_of_an_absent_message_is_404(client):
    post(client, "q", "x", delay=30)
    assert_error(client.simulate_patch("/v2/queues/q/messages/no-such-id", json={"body": 1}), 404)


@pytest.mark.parametrize(("document", "named"), [
    ({}, "The request body must hold at least one of body, ttl and delay."),
    ({"priority": 1},
     "The request body may only have the keys body, ttl and delay; priority is not one of them."),
    ({"p" * 65: 1}, "The request body may only have the keys body, ttl and delay; a key is not one of them."),
    ({"ttl": 59}, "ttl must be at least 60, got 59."),
    ({"delay": 901}, "delay must be at most 900, got 901."),
    ({"delay": "10"}, "delay must be an integer, got a string."),
    ({"delay": 1.5}, "delay must be an integer, got 1.5."),
    ([{"op": "replace"}], "The request body must be a JSON object, got an array."),
])
def test_patch_bodies_out_of_the_rules_are_400_naming_the_key(client, document, named):
    held, = post(client, "q", "x", delay=30)
    body = assert_error(client.simulate_patch(f"/v2/queues/q/messages/{held}", json=document), 400)
    assert body["description"] == named


def test_patch_without_a_body_is_400(client):
    held, = post(client, "q", "x", delay=30)
    body = assert_error(client.simulate_patch(f"/v2/queues/q/messages/{held}"), 400)
    assert "any of body, ttl and delay" in body["description"]


def test_patch_larger_than_the_queue_post_size_is_400(client):
    client.simulate_put("/v2/queues/q", json={"_max_messages_post_size": 64})
    held, = post(client, "q", "x", delay=30)
    body = assert_error(client.simulate_patch(f"/v2/queues/q/messages/{held}", json={"body": "y" * 100}), 400)
    assert "may not exceed 64 bytes" in body["description"]


def test_patch_ttl_is_capped_by_the_queue_max_message_ttl_as_a_post_is(client, clock):
    assert client.simulate_put("/v2/queues/q", json={"_max_message_ttl": 300}).status_code == 201
    held, = post(client, "q", "x", delay=120, ttl=200)
    clock.advance(20)
    result = client.simulate_patch(f"/v2/queues/q/messages/{held}", json={"ttl": 900})
    assert result.status_code == 200, result.text
    # ttl counts from the edit, capped at 300: age 20 + 300
    assert result.json["ttl"] == 320


# -- Zaqar's JSON-patch media type ------------------------------------------------

def patch_ops(client, message_href, operations, content_type=JSON_PATCH):
    return client.simulate_patch(message_href, body=json.dumps(operations),
                                 headers={"Content-Type": content_type})


def test_json_patch_replaces_body_ttl_and_delay_as_the_merge_body_does(client, clock):
    held, = post(client, "q", {"v": 1}, delay=120, ttl=300)
    clock.advance(20)
    result = patch_ops(client, f"/v2/queues/q/messages/{held}", [
        {"op": "replace", "path": "/body", "value": {"v": 2}},
        {"op": "replace", "path": "/ttl", "value": 600},
        {"op": "replace", "path": "/delay", "value": 0},
    ])
    assert result.status_code == 200, result.text
    shown = client.simulate_get(f"/v2/queues/q/messages/{held}").json
    assert result.json == shown
    assert (shown["body"], shown["ttl"], shown["age"]) == ({"v": 2}, 620, 20)
    assert [m["id"] for m in claim(client, "q")[1]] == [held]


def test_json_patch_media_type_takes_parameters(client):
    held, = post(client, "q", "x", delay=60)
    result = patch_ops(client, f"/v2/queues/q/messages/{held}",
                       [{"op": "replace", "path": "/body", "value": "y"}], JSON_PATCH + "; charset=utf-8")
    assert (result.status_code, result.json["body"]) == (200, "y")


@pytest.mark.parametrize(("operations", "named"), [
    ({"op": "replace", "path": "/body", "value": 1},
     "The request body must be an array, got an object."),
    ([], "The request body may not be empty."),
    ([{"op": "add", "path": "/body", "value": 1}],
     "[0].op must be replace (a message is edited by replacing its body, ttl or delay)."),
    ([{"op": "remove", "path": "/delay"}],
     "[0].op must be replace (a message is edited by replacing its body, ttl or delay)."),
    ([{"op": "replace", "path": "/body", "value": 1}, {"op": "replace", "path": "/metadata/x", "value": 1}],
     "[1].path must be /body, /ttl or /delay."),
    ([{"op": "replace", "path": "/ttl"}], "[0].value is required: replace needs a value."),
    ([{"op": "replace", "value": 1}], "[0].path is required."),
    (["replace"], "[0] must be a JSON object, got a string."),
    ([{"op": "replace", "path": "/ttl", "value": 60, "from": "/delay"}],
     "[0] may only have the keys op, path and value; from is not one of them."),
    ([{"op": "replace", "path": "/ttl", "value": 59}], "ttl must be at least 60, got 59."),
    ([{"op": "replace", "path": "/delay", "value": "10"}], "delay must be an integer, got a string."),
])
def test_json_patch_with_a_bad_operation_is_400_naming_it(client, operations, named):
    held, = post(client, "q", "original", delay=60)
    body = assert_error(patch_ops(client, f"/v2/queues/q/messages/{held}", operations), 400)
    assert body["description"] == named
    assert client.simulate_get(f"/v2/queues/q/messages/{held}").json["body"] == "original"


@pytest.mark.parametrize("content_type", ["text/plain", "application/json-patch+json",
                                          "application/merge-patch+json"])
def test_a_message_patch_in_another_media_type_is_415(client, content_type):
    held, = post(client, "q", "original", delay=60)
    result = client.simulate_patch(f"/v2/queues/q/messages/{held}", body='{"body": "changed"}',
                                   headers={"Content-Type": content_type})
    body = assert_error(result, 415)
    assert "application/json" in body["description"] and JSON_PATCH in body["description"]
    assert client.simulate_get(f"/v2/queues/q/messages/{held}").json["body"] == "original"


def test_json_patch_without_a_body_is_400(client):
    held, = post(client, "q", "x", delay=60)
    result = client.simulate_patch(f"/v2/queues/q/messages/{held}", headers={"Content-Type": JSON_PATCH})
    body = assert_error(result, 400)
    assert body["description"].startswith("The request body must list replace operations on /body, /ttl")
