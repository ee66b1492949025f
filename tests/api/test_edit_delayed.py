"""Editing a delayed message: ``PATCH /v2/queues/{queue}/messages/{message_id}`` (our extension)."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error, claim, post


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
