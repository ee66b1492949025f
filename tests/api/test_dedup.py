"""Deduplicated posts over HTTP: the answer of a duplicate, dedup_id checks, include_fifo."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error

MESSAGES = "/v2/queues/q1/messages"


def posted(client, *messages):
    result = client.simulate_post(MESSAGES, json={"messages": list(messages)})
    assert result.status_code == 201, result.text
    return result.json["resources"]


def test_a_repeated_post_answers_201_with_the_first_href_in_the_same_place(client):
    first = posted(client, {"body": "a", "dedup_id": "order-1"}, {"body": "b"})
    again = posted(client, {"body": "c"}, {"body": "a2", "dedup_id": "order-1"})
    assert again[1] == first[0]
    assert again[0] not in first
    listed = client.simulate_get(MESSAGES, params={"echo": "true"}).json["messages"]
    assert [m["body"] for m in listed] == ["a", "b", "c"]


def test_a_post_repeating_an_id_answers_both_with_one_href_and_the_location_lists_them(client):
    result = client.simulate_post(MESSAGES, json={"messages": [
        {"body": "a", "dedup_id": "x"}, {"body": "b", "dedup_id": "x"}]})
    assert result.status_code == 201
    first, second = result.json["resources"]
    assert first == second
    message_id = first.rsplit("/", 1)[1]
    assert result.headers["location"] == f"{MESSAGES}?ids={message_id},{message_id}"
    listed = client.simulate_get(MESSAGES, params={"echo": "true"}).json["messages"]
    assert [m["body"] for m in listed] == ["a"]


def test_the_dedup_id_is_shown_only_with_include_fifo(client):
    href, = posted(client, {"body": "a", "dedup_id": "order-1"})
    plain = client.simulate_get(href).json
    assert "dedup_id" not in plain
    assert set(plain) == {"id", "href", "ttl", "age", "body", "claim_count"}
    shown = client.simulate_get(href, params={"include_fifo": "true"}).json
    assert shown["dedup_id"] == "order-1"
    listed = client.simulate_get(MESSAGES, params={"echo": "true", "include_fifo": "true"}).json
    assert [m.get("dedup_id") for m in listed["messages"]] == ["order-1"]
    claimed = client.simulate_post("/v2/queues/q1/claims", params={"include_fifo": "true"}, json={})
    assert [m["dedup_id"] for m in claimed.json["messages"]] == ["order-1"]


def test_a_message_without_a_dedup_id_shows_none_even_with_include_fifo(client):
    href, = posted(client, {"body": "a"})
    assert "dedup_id" not in client.simulate_get(href, params={"include_fifo": "true"}).json


def test_include_fifo_must_be_a_boolean(client):
    href, = posted(client, {"body": "a"})
    body = assert_error(client.simulate_get(href, params={"include_fifo": "maybe"}), 400)
    assert "include_fifo" in body["description"]


@pytest.mark.parametrize(("value", "shown"), [
    ("", '""'), ("x" * 129, '"' + "x" * 129 + '"'), ("has space", '"has space"'),
    ("caf\u00e9", '"caf\\u00e9"'), ("end\n", '"end\\n"')])
def test_a_bad_dedup_id_is_refused_naming_the_field_and_the_rule(client, value, shown):
    result = client.simulate_post(MESSAGES, json={"messages": [{"body": 1}, {"body": 2, "dedup_id": value}]})
    body = assert_error(result, 400)
    assert body["description"] == (
        f"messages[1].dedup_id must be 1 to 128 printable ASCII characters without spaces, got {shown}.")


@pytest.mark.parametrize("value", [17, None, ["a"], {"a": 1}, True])
def test_a_dedup_id_that_is_not_a_string_is_refused_naming_the_field(client, value):
    result = client.simulate_post(MESSAGES, json={"messages": [{"body": 1, "dedup_id": value}]})
    body = assert_error(result, 400)
    assert "dedup_id" in body["description"]
    assert "string" in body["description"]


def test_the_dedup_window_is_validated_and_shown_once_set(client):
    assert client.simulate_put("/v2/queues/q1", json={"_dedup_window": 60}).status_code == 201
    assert client.simulate_get("/v2/queues/q1").json["_dedup_window"] == 60
    result = client.simulate_put("/v2/queues/q2", json={"_dedup_window": 0})
    body = assert_error(result, 400)
    assert body["description"] == "_dedup_window must be between 1 and 86400, got 0."
    assert "_dedup_window" not in client.simulate_get("/v2/queues/q3").json


def test_the_next_link_of_a_listing_keeps_include_fifo(client):
    posted(client, {"body": 1, "dedup_id": "a"}, {"body": 2})
    result = client.simulate_get(MESSAGES, params={"echo": "true", "limit": 1, "include_fifo": "true"})
    (link,) = result.json["links"]
    assert "include_fifo=true" in link["href"]
