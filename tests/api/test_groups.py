"""Ordered message groups over HTTP: a group's messages claimed together in order, checks, include_fifo."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error, claim

MESSAGES = "/v2/queues/q1/messages"


def posted(client, *messages):
    result = client.simulate_post(MESSAGES, json={"messages": list(messages)})
    assert result.status_code == 201, result.text
    return [href.rsplit("/", 1)[1] for href in result.json["resources"]]


def test_a_claim_takes_a_groups_messages_together_in_post_order_and_the_group_waits_for_them(client):
    posted(client, {"body": "a1", "group": "a"}, {"body": "b1", "group": "b"}, {"body": "a2", "group": "a"},
           {"body": "a3", "group": "a"}, {"body": "n1"})
    claim_id, messages = claim(client, "q1", limit=2)
    assert [m["body"] for m in messages] == ["a1", "a2"]
    _, others = claim(client, "q1", limit=10)
    assert [m["body"] for m in others] == ["b1", "n1"]  # a3 waits while a1 and a2 are claimed
    first = messages[0]["id"]
    assert client.simulate_delete(f"{MESSAGES}/{first}", params={"claim_id": claim_id}).status_code == 204
    assert client.simulate_post("/v2/queues/q1/claims", json={}).status_code == 204  # a2 is still claimed
    assert client.simulate_delete(f"/v2/queues/q1/claims/{claim_id}").status_code == 204
    _, messages = claim(client, "q1", limit=10)
    assert [m["body"] for m in messages] == ["a2", "a3"]


def test_the_group_is_shown_only_with_include_fifo(client):
    message_id, = posted(client, {"body": "a1", "group": "orders/17", "dedup_id": "d1"})
    plain = client.simulate_get(f"{MESSAGES}/{message_id}").json
    assert set(plain) == {"id", "href", "ttl", "age", "body", "claim_count"}
    shown = client.simulate_get(f"{MESSAGES}/{message_id}", params={"include_fifo": "true"}).json
    assert (shown["group"], shown["dedup_id"]) == ("orders/17", "d1")
    claimed = client.simulate_post("/v2/queues/q1/claims", params={"include_fifo": "1"}, json={})
    assert [m["group"] for m in claimed.json["messages"]] == ["orders/17"]


def test_a_dead_lettered_head_shows_its_group_in_the_provenance_and_its_group_moves_on(client):
    assert client.simulate_put("/v2/queues/dlq").status_code == 201
    assert client.simulate_put("/v2/queues/q1", json={"_max_claim_count": 1,
                                                      "_dead_letter_queue": "dlq"}).status_code == 201
    posted(client, {"body": "a1", "group": "a"}, {"body": "a2", "group": "a"})
    claim_id, messages = claim(client, "q1", limit=1)
    assert [m["body"] for m in messages] == ["a1"]
    assert client.simulate_delete(f"/v2/queues/q1/claims/{claim_id}").status_code == 204
    _, messages = claim(client, "q1")
    assert [m["body"] for m in messages] == ["a2"]
    moved = client.simulate_get("/v2/queues/dlq/messages", params={
        "echo": "true", "include_dead_letter": "true", "include_fifo": "true"}).json["messages"]
    assert [(m["body"], m["dead_letter"]["group"], "group" in m) for m in moved] == [("a1", "a", False)]


@pytest.mark.parametrize(("value", "shown"), [
    ("", '""'), ("g" * 129, '"' + "g" * 129 + '"'), ("two words", '"two words"'), ("tab\t", '"tab\\t"')])
def test_a_bad_group_is_refused_naming_the_field_and_the_rule(client, value, shown):
    result = client.simulate_post(MESSAGES, json={"messages": [{"body": 1, "group": value}]})
    body = assert_error(result, 400)
    assert body["description"] == (
        f"messages[0].group must be 1 to 128 printable ASCII characters without spaces, got {shown}.")


@pytest.mark.parametrize("value", [7, None, ["a"], False])
def test_a_group_that_is_not_a_string_is_refused_naming_the_field(client, value):
    body = assert_error(client.simulate_post(MESSAGES, json={"messages": [{"body": 1, "group": value}]}), 400)
    assert "group" in body["description"]
    assert "string" in body["description"]
