"""Every body refusal names the field and its limit in words, and never echoes the request."""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import assert_error, post

JSON_PATCH = "application/openstack-messaging-v2.0-json-patch"
SECRET = "s3cr3t-<script>-payload"


@pytest.mark.store_independent
@pytest.mark.parametrize(("document", "description"), [
    ({"messages": [{"body": 1}] * 21}, "messages may hold at most 20 messages per post, got 21."),
    ({"messages": []}, "messages may not be empty."),
    ({}, "messages is required."),
    ({"messages": [{"ttl": 60}]}, "messages[0].body is required."),
    ({"messages": [{"body": 1}, {"body": 2, "ttl": 30}]}, "messages[1].ttl must be at least 60, got 30."),
    ({"messages": [{"body": 1, "ttl": 1209601}]}, "messages[0].ttl must be at most 1209600, got 1209601."),
    ({"messages": [{"body": 1, "delay": SECRET}]}, "messages[0].delay must be an integer, got a string."),
    ({"messages": [{"body": 1, "delay": -1}]}, "messages[0].delay must be at least 0, got -1."),
    ({"messages": [{"body": 1, "dlq_eligible": "no"}]},
     "messages[0].dlq_eligible must be true or false, got a string."),
    ({"messages": {"body": SECRET}}, "messages must be an array, got an object."),
    ([{"body": SECRET}], "The request body must be a JSON object, got an array."),
])
def test_a_refused_post_names_the_field_and_the_limit_in_words(client, document, description):
    result = client.simulate_post("/v2/queues/q/messages", json=document)
    body = assert_error(result, 400, "Invalid request body")
    assert body["description"] == description


@pytest.mark.parametrize(("document", "description"), [
    ({"ttl": 59}, "ttl must be at least 60, got 59."),
    ({"ttl": 43201}, "ttl must be at most 43200, got 43201."),
    ({"grace": "soon"}, "grace must be an integer, got a string."),
    ([60], "The request body must be a JSON object, got an array."),
])
def test_a_refused_claim_names_the_field_and_the_limit(client, document, description):
    post(client, "q", 1)
    result = client.simulate_post("/v2/queues/q/claims", json=document)
    body = assert_error(result, 400, "Invalid request body")
    assert body["description"] == description


@pytest.mark.parametrize(("operations", "description"), [
    ([{"op": "move", "path": "/metadata/x", "value": 1}],
     '[0].op must be one of "add", "remove" or "replace", got a string.'),
    ([{"op": "add", "path": "/x", "value": 1}], "[0].path must be /metadata/ followed by the key."),
    ([{"op": "add", "path": "/metadata/x"}], "[0].value is required: add needs a value."),
    ([{"path": "/metadata/x"}], "[0].op is required."),
    ([], "The request body may not be empty."),
])
def test_a_refused_queue_patch_names_the_operation_and_the_rule(client, operations, description):
    assert client.simulate_put("/v2/queues/q").status_code == 201
    result = client.simulate_patch("/v2/queues/q", body=json.dumps(operations), content_type=JSON_PATCH)
    assert assert_error(result, 400)["description"] == description


@pytest.mark.parametrize(("document", "description"), [
    ({"resource_types": ["queues"]},
     'resource_types[0] must be one of "messages" or "subscriptions", got a string.'),
    ({"resource_types": ["messages", "messages"]}, "resource_types may not list the same value twice."),
    ({"resource_types": []}, "resource_types may not be empty."),
])
def test_a_refused_purge_names_the_rule(client, document, description):
    assert client.simulate_put("/v2/queues/q").status_code == 201
    result = client.simulate_post("/v2/queues/q/purge", json=document)
    assert assert_error(result, 400, "Invalid request body")["description"] == description


@pytest.mark.parametrize("document", [
    {"messages": [{"body": 1, "ttl": SECRET}]},
    {"messages": [{"body": SECRET}] * 21},
    {"messages": SECRET},
    [SECRET],
    {"messages": [{"body": 1}], SECRET: 1},
])
def test_no_refusal_repeats_what_was_sent(client, document):
    result = client.simulate_post("/v2/queues/q/messages", json=document)
    assert result.status_code in (201, 400)
    assert SECRET not in result.text
    assert "'" not in result.json.get("description", "")  # no Python repr of anything
