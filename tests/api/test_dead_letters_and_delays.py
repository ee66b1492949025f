"""Dead-letter metadata rules, provenance, release with reason, delays.

docs/api.rst, "Reserved metadata", "Provenance", "Release one message (zaqar-lite extension)" and
"Delayed delivery".
"""

from __future__ import annotations

import json

import pytest

PATCH = {"Content-Type": "application/openstack-messaging-v2.0-json-patch"}


def patch_queue(client, name, operations):
    return client.simulate_patch(f"/v2/queues/{name}", body=json.dumps(operations), headers=PATCH)


def put_queue(client, name, metadata=None):
    return client.simulate_put(f"/v2/queues/{name}", json=metadata if metadata is not None else {})


def post_messages(client, queue, *items):
    response = client.simulate_post(f"/v2/queues/{queue}/messages", json={"messages": list(items)})
    assert response.status_code == 201, response.text
    return [href.rsplit("/", 1)[1] for href in response.json["resources"]]


def claim(client, queue, limit=10, ttl=60, grace=60, **params):
    return client.simulate_post(f"/v2/queues/{queue}/claims", params={"limit": limit, **params},
                                json={"ttl": ttl, "grace": grace})


@pytest.fixture
def dlq(client):
    assert put_queue(client, "dlq").status_code == 201
    return "dlq"


@pytest.mark.parametrize("metadata, fragment", [
    ({"_max_claim_count": 0, "_dead_letter_queue": "dlq"}, "_max_claim_count must be at least 1, got 0"),
    ({"_max_claim_count": -3, "_dead_letter_queue": "dlq"}, "_max_claim_count must be at least 1"),
    ({"_max_claim_count": True, "_dead_letter_queue": "dlq"},
     "_max_claim_count must be an integer, got true"),
    ({"_max_claim_count": "3", "_dead_letter_queue": "dlq"}, "_max_claim_count must be an integer"),
    ({"_max_claim_count": 2.5, "_dead_letter_queue": "dlq"}, "_max_claim_count must be an integer"),
    ({"_max_claim_count": 3, "_dead_letter_queue": "bad name!"},
     "_dead_letter_queue must be a queue name: ASCII letters, digits, _ - and ., 1 to 64 characters, "
     "not . or .. (got a string)."),
    ({"_max_claim_count": 3, "_dead_letter_queue": 7},
     "_dead_letter_queue must be a queue name: ASCII letters, digits, _ - and ., 1 to 64 characters, "
     "not . or .. (got 7)."),
    ({"_max_claim_count": 3, "_dead_letter_queue": "missing"}, "names queue missing, which does not exist"),
    ({"_max_claim_count": 3, "_dead_letter_queue": "src"}, "_dead_letter_queue cannot be the queue itself"),
    ({"_max_claim_count": 3, "_dead_letter_queue": "dlq", "_dead_letter_queue_messages_ttl": 59},
     "_dead_letter_queue_messages_ttl must be between 60 and 1209600, got 59"),
    ({"_max_claim_count": 3, "_dead_letter_queue": "dlq", "_dead_letter_queue_messages_ttl": 1209601},
     "_dead_letter_queue_messages_ttl must be between 60 and 1209600"),
    ({"_dead_letter_on_expiry": True}, "_dead_letter_on_expiry needs _dead_letter_queue"),
    ({"_max_claim_count": 3, "_dead_letter_queue": "dlq", "_dead_letter_on_expiry": "yes"},
     "_dead_letter_on_expiry must be true or false, got a string."),
    ({"_default_message_delay": 901}, "_default_message_delay must be between 0 and 900, got 901"),
    ({"_default_message_delay": False}, "_default_message_delay must be an integer"),
    ({"_default_message_ttl": 59}, "_default_message_ttl must be between 60 and 1209600"),
    ({"_max_messages_post_size": 0}, "_max_messages_post_size must be between 1 and 262144"),
    ({"_max_messages_post_size": 262145}, "_max_messages_post_size must be between 1 and 262144"),
    ({"_retry_policy": {"bogus": 1}}, "metadata._retry_policy.bogus is not a retry policy key"),
])
def test_each_reserved_metadata_rule_answers_400_naming_the_key(client, dlq, metadata, fragment):
    response = put_queue(client, "src", metadata)
    assert response.status_code == 400
    assert response.json["title"] == "Invalid API request"
    assert fragment in response.json["description"]
    patch = [{"op": "add", "path": f"/metadata/{k}", "value": v} for k, v in metadata.items()]
    assert put_queue(client, "src2").status_code == 201
    fragment = fragment.replace("queue itself (src)", "queue itself (src2)")
    if "cannot be the queue itself" in fragment:
        patch = [{"op": "add", "path": "/metadata/_max_claim_count", "value": 3},
                 {"op": "add", "path": "/metadata/_dead_letter_queue", "value": "src2"}]
    response = patch_queue(client, "src2", patch)
    assert response.status_code == 400
    assert fragment in response.json["description"]


def test_a_dlq_in_another_project_does_not_count(client, dlq):
    response = client.simulate_put("/v2/queues/src",
                                   json={"_max_claim_count": 2, "_dead_letter_queue": "dlq"},
                                   headers={"X-Project-ID": "project-b"})
    assert response.status_code == 400
    assert "does not exist in this project" in response.json["description"]


def test_a_queue_that_is_a_dlq_cannot_get_a_dlq_of_its_own(client, dlq):
    assert put_queue(client, "src", {"_max_claim_count": 2, "_dead_letter_queue": "dlq"}).status_code == 201
    assert put_queue(client, "other-dlq").status_code == 201
    patch = [{"op": "add", "path": "/metadata/_max_claim_count", "value": 2},
             {"op": "add", "path": "/metadata/_dead_letter_queue", "value": "other-dlq"}]
    response = patch_queue(client, "dlq", patch)
    assert response.status_code == 400
    description = response.json["description"]
    assert "queue dlq is the dead-letter queue of src; chains are not supported" in description


def test_a_queue_with_a_dlq_cannot_be_named_as_a_dlq(client, dlq):
    assert put_queue(client, "src", {"_max_claim_count": 2, "_dead_letter_queue": "dlq"}).status_code == 201
    response = put_queue(client, "upstream", {"_max_claim_count": 2, "_dead_letter_queue": "src"})
    assert response.status_code == 400
    description = response.json["description"]
    assert "queue src has a dead-letter queue of its own; chains are not supported" in description


def test_get_shows_reserved_keys_with_defaults_and_patch_can_unset_them(client, dlq):
    assert put_queue(client, "src", {"_max_claim_count": 2, "_dead_letter_queue": "dlq"}).status_code == 201
    shown = client.simulate_get("/v2/queues/src").json
    assert shown["_max_claim_count"] == 2
    assert shown["_dead_letter_queue"] == "dlq"
    assert shown["_dead_letter_queue_messages_ttl"] is None
    assert shown["_default_message_delay"] == 0
    assert shown["_enable_encrypt_messages"] is False
    assert "_dead_letter_on_expiry" not in shown
    patch = [{"op": "remove", "path": "/metadata/_max_claim_count"},
             {"op": "remove", "path": "/metadata/_dead_letter_queue"}]
    response = patch_queue(client, "src", patch)
    assert response.status_code == 200
    assert response.json["_max_claim_count"] is None
    assert response.json["_dead_letter_queue"] is None


def test_dead_lettered_message_shows_its_provenance(client, clock, dlq):
    assert put_queue(client, "src", {"_max_claim_count": 2, "_dead_letter_queue": "dlq",
                                     "_dead_letter_queue_messages_ttl": 7200}).status_code == 201
    doomed, = post_messages(client, "src", {"body": {"order": 42}})
    for attempt in range(2):
        response = claim(client, "src")
        claim_href = response.headers["location"]
        claim_id = claim_href.rsplit("/", 1)[1]
        release = client.simulate_post(f"/v2/queues/src/messages/{doomed}/release",
                                       params={"claim_id": claim_id},
                                       json={"error": f"HTTP 502 from 10.0.0.{attempt}",
                                             "error_type": "BadGateway"})
        assert release.status_code == 204
    clock.advance(30)
    assert claim(client, "src").status_code == 204
    plain = client.simulate_get(f"/v2/queues/dlq/messages/{doomed}").json
    assert set(plain) == {"id", "href", "ttl", "age", "body", "claim_count"}
    message = client.simulate_get(f"/v2/queues/dlq/messages/{doomed}",
                                  params={"include_dead_letter": "true"}).json
    assert message["body"] == {"order": 42}
    assert message["claim_count"] == 2
    # 30 s in src before the move, then the DLQ's 7200 s
    assert (message["ttl"], message["age"]) == (7230, 30)
    provenance = message["dead_letter"]
    assert provenance["source_queue"] == "src"
    assert provenance["reason"] == "max_claims"
    assert provenance["claim_count"] == 2
    assert provenance["last_claim_id"] == claim_id
    assert provenance["dead_lettered_at"].endswith("Z")
    assert provenance["first_posted_at"].endswith("Z")
    assert [f["error"] for f in provenance["failures"]] == ["HTTP 502 from 10.0.0.0",
                                                           "HTTP 502 from 10.0.0.1"]
    assert provenance["failures"][0]["claim_count"] == 1
    listed = client.simulate_get("/v2/queues/dlq/messages",
                                 params={"echo": "true", "include_dead_letter": "true"}).json["messages"]
    assert listed[0]["dead_letter"]["reason"] == "max_claims"
    plain = client.simulate_get("/v2/queues/dlq/messages",
                                params={"echo": "true", "include_dead_letter": "false"}).json["messages"]
    assert set(plain[0]) == {"id", "href", "ttl", "age", "body", "claim_count"}
    claimed = claim(client, "dlq", ttl=60, include_dead_letter="true").json["messages"]
    assert claimed[0]["dead_letter"]["source_queue"] == "src"


@pytest.mark.parametrize("body, fragment", [
    ({"error": 5}, "error must be a string, got 5."),
    ({"error_type": ["x"]}, "error_type must be a string, got an array."),
    ({"error": "x" * 4097}, "error may be at most 4096 characters long, got 4097."),
    ({"reason": "x"},
     "The request body may only have the keys error, error_type, delay and outcome; "
     "reason is not one of them."),
    ([1], "The request body must be a JSON object, got an array."),
])
def test_release_with_a_bad_reason_is_400(client, body, fragment):
    ids = post_messages(client, "q", {"body": 1})
    claim_id = claim(client, "q").headers["location"].rsplit("/", 1)[1]
    response = client.simulate_post(f"/v2/queues/q/messages/{ids[0]}/release", params={"claim_id": claim_id},
                                     json=body)
    assert response.status_code == 400
    assert response.json["description"] == fragment


def test_release_needs_a_claim_id_and_the_right_claim(client):
    ids = post_messages(client, "q", {"body": 1})
    assert client.simulate_post(f"/v2/queues/q/messages/{ids[0]}/release").status_code == 400
    assert client.simulate_post(f"/v2/queues/q/messages/{ids[0]}/release",
                                params={"claim_id": "nope"}).status_code == 400
    assert client.simulate_post("/v2/queues/q/messages/absent/release",
                                params={"claim_id": "nope"}).status_code == 404


def test_released_message_is_claimable_at_once_with_its_count_kept(client):
    ids = post_messages(client, "q", {"body": 1})
    claim_id = claim(client, "q").headers["location"].rsplit("/", 1)[1]
    assert client.simulate_post(f"/v2/queues/q/messages/{ids[0]}/release",
                                params={"claim_id": claim_id}).status_code == 204
    again = claim(client, "q")
    assert again.status_code == 201
    assert again.json["messages"][0]["claim_count"] == 2


@pytest.mark.parametrize("delay", [-1, 901, "10", True, 1.5])
def test_out_of_range_or_mistyped_delay_is_400(client, delay):
    response = client.simulate_post("/v2/queues/q/messages", json={"messages": [{"body": 1, "delay": delay}]})
    assert response.status_code == 400
    assert "delay" in response.json["description"]


def test_delayed_message_is_hidden_from_claims_lists_and_pop_until_due(client, clock):
    late, = post_messages(client, "q", {"body": "late", "delay": 120})
    assert claim(client, "q").status_code == 204
    assert client.simulate_delete("/v2/queues/q/messages", params={"pop": 5}).json == {"messages": []}
    assert client.simulate_get("/v2/queues/q/messages", params={"echo": "true"}).json["messages"] == []
    shown = client.simulate_get("/v2/queues/q/messages", params={"echo": "true", "include_delayed": "true"})
    assert [m["id"] for m in shown.json["messages"]] == [late]
    stats = client.simulate_get("/v2/queues/q/stats").json["messages"]
    assert (stats["delayed"], stats["free"], stats["total"]) == (1, 0, 1)
    clock.advance(120)
    response = claim(client, "q")
    assert [m["id"] for m in response.json["messages"]] == [late]


def test_queue_default_delay_applies_to_messages_posted_without_delay(client, clock):
    assert put_queue(client, "slow", {"_default_message_delay": 60}).status_code == 201
    post_messages(client, "slow", {"body": "a"})
    now_id, = post_messages(client, "slow", {"body": "b", "delay": 0})
    assert [m["id"] for m in claim(client, "slow").json["messages"]] == [now_id]


def test_deployment_can_show_provenance_unless_told_not_to(make_client):
    client = make_client({"Client-ID": "4ad8f1d4-5a3b-4c1e-9d8f-0b6e2f6c1a77", "X-Project-ID": "p"},
                         include_dead_letter=True)
    assert put_queue(client, "dlq").status_code == 201
    assert put_queue(client, "src", {"_max_claim_count": 1, "_dead_letter_queue": "dlq"}).status_code == 201
    doomed, = post_messages(client, "src", {"body": 1})
    claim_id = claim(client, "src").headers["location"].rsplit("/", 1)[1]
    client.simulate_delete(f"/v2/queues/src/claims/{claim_id}")
    assert claim(client, "src").status_code == 204
    shown = client.simulate_get(f"/v2/queues/dlq/messages/{doomed}").json
    assert shown["dead_letter"]["reason"] == "max_claims"
    plain = client.simulate_get(f"/v2/queues/dlq/messages/{doomed}",
                                params={"include_dead_letter": "false"}).json
    assert "dead_letter" not in plain


def test_max_claim_count_alone_counts_claims_and_moves_nothing_until_a_dlq_is_set(client, dlq):
    assert put_queue(client, "src", {"_max_claim_count": 1}).status_code == 201
    message_id, = post_messages(client, "src", {"body": "x"})
    for count in (1, 2, 3):
        response = claim(client, "src")
        assert [m["claim_count"] for m in response.json["messages"]] == [count]
        client.simulate_delete(response.headers["location"])
    patch = [{"op": "add", "path": "/metadata/_dead_letter_queue", "value": "dlq"}]
    assert patch_queue(client, "src", patch).status_code == 200
    assert claim(client, "src").status_code == 204
    moved = client.simulate_get(f"/v2/queues/dlq/messages/{message_id}").json
    assert moved["claim_count"] == 3


def test_dead_letter_queue_alone_is_accepted_and_never_moves_by_count(client, dlq):
    assert put_queue(client, "src", {"_dead_letter_queue": "dlq"}).status_code == 201
    assert client.simulate_get("/v2/queues/src").json["_dead_letter_queue"] == "dlq"
    post_messages(client, "src", {"body": "x"})
    for count in (1, 2):
        response = claim(client, "src")
        assert [m["claim_count"] for m in response.json["messages"]] == [count]
        client.simulate_delete(response.headers["location"])
    assert client.simulate_get("/v2/queues/dlq/stats").json["messages"]["total"] == 0


@pytest.mark.parametrize("metadata", [{"_max_claim_count": 2}, {"_dead_letter_queue": "dlq"}])
def test_a_dlq_named_alone_still_obeys_the_chain_rules(client, dlq, metadata):
    assert put_queue(client, "src", metadata).status_code == 201
    if "_dead_letter_queue" in metadata:
        response = put_queue(client, "other", {"_dead_letter_queue": "src"})
        assert "chains are not supported" in response.json["description"]
    else:
        assert put_queue(client, "other", {"_dead_letter_queue": "src"}).status_code == 201


def test_dead_letter_ttl_alone_is_accepted_as_in_zaqar_and_applies_once_a_dlq_is_set(client, dlq):
    metadata = {"_dead_letter_queue_messages_ttl": 600, "_max_claim_count": 1}
    assert put_queue(client, "src", metadata).status_code == 201
    message_id, = post_messages(client, "src", {"body": "x"})
    client.simulate_delete(claim(client, "src").headers["location"])
    patch = [{"op": "add", "path": "/metadata/_dead_letter_queue", "value": "dlq"}]
    assert patch_queue(client, "src", patch).status_code == 200
    assert claim(client, "src").status_code == 204
    assert client.simulate_get(f"/v2/queues/dlq/messages/{message_id}").json["ttl"] == 600
