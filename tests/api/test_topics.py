"""Topic routes (Zaqar 23's ``/v2/topics``): create, metadata, patch, delete, list, stats, purge,
posts, and a topic's subscriptions; every refusal names its field."""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import JSON_PATCH, assert_error, follow, post
from zaqar_lite.notify import state

#: what Zaqar 23 shows for a topic without metadata, key for key
TOPIC_DEFAULTS = {"_max_messages_post_size": 262144, "_default_message_ttl": 3600,
                  "_default_message_delay": 0}
HOOK = "http://hooks.example.com:9/hook"


def patch(client, topic, operations, content_type=JSON_PATCH):
    # json= would force Content-Type: application/json
    return client.simulate_patch(f"/v2/topics/{topic}", body=json.dumps(operations),
                                 content_type=content_type)


def post_to_topic(client, topic, *bodies, **fields):
    result = client.simulate_post(f"/v2/topics/{topic}/messages",
                                  json={"messages": [{"body": body, **fields} for body in bodies]})
    assert result.status_code == 201, result.text
    return [href.rsplit("/", 1)[1] for href in result.json["resources"]]


def subscribe(client, topic, subscriber=HOOK):
    result = client.simulate_post(f"/v2/topics/{topic}/subscriptions", json={"subscriber": subscriber})
    assert result.status_code == 201, result.text
    return result.json["subscription_id"]


def test_put_creates_201_then_204_and_get_shows_zaqars_three_defaults_under_the_stored_keys(client):
    created = client.simulate_put("/v2/topics/news", json={"_default_message_ttl": 300, "colour": "red"})
    assert created.status_code == 201
    assert created.headers["location"] == "/v2/topics/news"
    again = client.simulate_put("/v2/topics/news", json={"colour": "blue"})
    assert again.status_code == 204
    shown = client.simulate_get("/v2/topics/news")
    assert shown.json == {"_max_messages_post_size": 262144, "_default_message_ttl": 300,
                          "_default_message_delay": 0, "colour": "red"}
    assert client.simulate_put("/v2/topics/bare").status_code == 201
    assert client.simulate_get("/v2/topics/bare").json == TOPIC_DEFAULTS


def test_a_missing_topic_is_a_404_that_names_it(client):
    body = assert_error(client.simulate_get("/v2/topics/nowhere"), 404, "Not found")
    assert body["description"] == "Topic nowhere does not exist."
    assert_error(patch(client, "nowhere", [{"op": "add", "path": "/metadata/k", "value": 1}]), 404)


def test_a_topic_and_a_queue_of_the_same_name_never_meet(client):
    assert client.simulate_put("/v2/queues/same", json={"colour": "queue"}).status_code == 201
    assert client.simulate_put("/v2/topics/same", json={"colour": "topic"}).status_code == 201
    post_to_topic(client, "same", "to the topic")
    post(client, "same", "to the queue", "and again")
    queue_sub = client.simulate_post("/v2/queues/same/subscriptions", json={"subscriber": HOOK})
    topic_sub = subscribe(client, "same", "http://hooks.example.com:9/other")
    assert client.simulate_get("/v2/queues/same/stats").json["messages"]["total"] == 2
    assert client.simulate_get("/v2/topics/same/stats").json["messages"]["total"] == 1
    assert client.simulate_get("/v2/queues/same").json["colour"] == "queue"
    assert client.simulate_get("/v2/topics/same").json["colour"] == "topic"
    assert [s["id"] for s in client.simulate_get("/v2/queues/same/subscriptions").json["subscriptions"]] \
        == [queue_sub.json["subscription_id"]]
    assert [s["id"] for s in client.simulate_get("/v2/topics/same/subscriptions").json["subscriptions"]] \
        == [topic_sub]
    assert client.simulate_delete("/v2/topics/same").status_code == 204
    assert client.simulate_get("/v2/queues/same/stats").json["messages"]["total"] == 2
    assert [q["name"] for q in client.simulate_get("/v2/queues").json["queues"]] == ["same"]
    assert client.simulate_get("/v2/topics").json == {"topics": [], "links": []}


def test_list_pages_by_name_with_links_and_shows_metadata_only_when_detailed(client):
    for name in ("t-c", "t-a", "t-b", "other"):
        assert client.simulate_put(f"/v2/topics/{name}", json={"n": name}).status_code == 201
    first = client.simulate_get("/v2/topics", params={"limit": "2"})
    assert first.json["topics"] == [{"name": "other", "href": "/v2/topics/other"},
                                    {"name": "t-a", "href": "/v2/topics/t-a"}]
    assert first.json["links"] == [{"rel": "next", "href": "/v2/topics?limit=2&marker=t-a"}]
    second = follow(client, first.json["links"][0]["href"])
    assert [t["name"] for t in second.json["topics"]] == ["t-b", "t-c"]
    detailed = client.simulate_get("/v2/topics", params={"detailed": "true", "name": "t-b"})
    assert detailed.json["topics"] == [{"name": "t-b", "href": "/v2/topics/t-b",
                                        "metadata": {**TOPIC_DEFAULTS, "n": "t-b"}}]
    filtered = client.simulate_get("/v2/topics", params={"n": "t-c"})
    assert [t["name"] for t in filtered.json["topics"]] == ["t-c"]


def test_another_project_sees_none_of_the_topics(client, project_b):
    assert client.simulate_put("/v2/topics/mine").status_code == 201
    assert project_b.simulate_get("/v2/topics").json["topics"] == []
    assert_error(project_b.simulate_get("/v2/topics/mine"), 404)


def test_patch_adds_replaces_and_removes_keys_and_answers_the_whole_metadata(client):
    client.simulate_put("/v2/topics/p", json={"a": 1, "b": 2})
    result = patch(client, "p", [{"op": "replace", "path": "/metadata/a", "value": 10},
                                 {"op": "remove", "path": "/metadata/b"},
                                 {"op": "add", "path": "/metadata/_default_message_delay", "value": 5}])
    assert result.status_code == 200, result.text
    expected = {**TOPIC_DEFAULTS, "a": 10, "_default_message_delay": 5}
    assert result.json == expected
    assert client.simulate_get("/v2/topics/p").json == expected


def test_patch_refusals_name_the_rule(client):
    client.simulate_put("/v2/topics/p")
    wrong_type = assert_error(patch(client, "p", [], content_type="application/json"), 415)
    assert wrong_type["description"] == (
        "PATCH of a topic needs Content-Type application/openstack-messaging-v2.0-json-patch.")
    absent = assert_error(patch(client, "p", [{"op": "replace", "path": "/metadata/nokey", "value": 1}]), 409)
    assert absent["description"] == "Cannot replace metadata key 'nokey': it is not set."
    claim_only = assert_error(patch(client, "p", [{"op": "add", "path": "/metadata/_max_claim_count",
                                                   "value": 3}]), 400)
    assert claim_only["description"] == (
        "[0].path may not be /metadata/_max_claim_count: a topic's messages are never claimed, so it takes "
        "no claim or dead-letter setting.")
    bad_op = assert_error(patch(client, "p", [{"op": "move", "path": "/metadata/a"}]), 400)
    assert bad_op["description"] == '[0].op must be one of "add", "remove" or "replace", got a string.'
    bad_value = assert_error(patch(client, "p", [{"op": "add", "path": "/metadata/_default_message_ttl",
                                                  "value": 1}]), 400)
    assert "_default_message_ttl" in bad_value["description"]


@pytest.mark.parametrize("key", ["_max_claim_count", "_dead_letter_queue", "_dead_letter_queue_messages_ttl",
                                 "_dead_letter_on_expiry", "_retry_backoff", "_paused", "_paused_by",
                                 "_dead_letter_breaker"])
def test_a_claim_only_key_in_a_topics_metadata_is_a_400_naming_it(client, key):
    body = assert_error(client.simulate_put("/v2/topics/t", json={key: 1}), 400)
    assert body["description"] == (f"{key} must be absent: a topic's messages are never claimed, so it takes "
                                   "no claim or dead-letter setting.")
    assert_error(client.simulate_get("/v2/topics/t"), 404)


@pytest.mark.parametrize(("document", "words"), [
    ([1], "The request body must be a JSON object, got an array."),
    ({"_default_message_ttl": 1}, "_default_message_ttl must be between 60 and 1209600, got 1."),
])
def test_bad_metadata_is_a_400_naming_the_field(client, document, words):
    body = assert_error(client.simulate_put("/v2/topics/t", json=document), 400)
    assert body["description"] == words


@pytest.mark.parametrize(("method", "path"), [
    ("PUT", "/v2/topics/bad$"), ("GET", "/v2/topics/bad$"), ("DELETE", "/v2/topics/bad$"),
    ("GET", "/v2/topics/bad$/stats"), ("POST", "/v2/topics/bad$/purge"), ("POST", "/v2/topics/bad$/messages"),
    ("GET", "/v2/topics/bad$/messages/x"),
    ("GET", "/v2/topics/bad$/subscriptions"), ("GET", "/v2/topics/bad$/subscriptions/x"),
    ("PUT", "/v2/topics/bad$/subscriptions/x/confirm"), ("POST", "/v2/topics/bad$/subscriptions/x/resume"),
    ("PUT", "/v2/topics/" + "t" * 65)])
def test_a_bad_topic_name_is_a_400_on_every_route(client, method, path):
    body = assert_error(client.simulate_request(method, path, json={}), 400)
    assert body["description"].startswith("Topic names may not be more than 64 characters long")


def test_posted_messages_answer_topic_hrefs_and_count_in_stats(client, clock):
    assert client.simulate_get("/v2/topics/s/stats").json == {
        "messages": {"claimed": 0, "free": 0, "delayed": 0, "total": 0}}
    first, second = post_to_topic(client, "s", "one", "two")
    post_to_topic(client, "s", "later", delay=30)
    clock.advance(7)
    stats = client.simulate_get("/v2/topics/s/stats").json["messages"]
    assert (stats["claimed"], stats["free"], stats["delayed"], stats["total"]) == (0, 2, 1, 3)
    assert stats["oldest"]["href"] == f"/v2/topics/s/messages/{first}"
    assert stats["oldest"]["age"] == 7
    assert first != second
    assert client.simulate_get("/v2/topics").json["topics"] == [{"name": "s", "href": "/v2/topics/s"}]


def test_a_post_answers_its_resources_and_location(client):
    result = client.simulate_post("/v2/topics/s/messages", json={"messages": [{"body": 1}, {"body": 2}]})
    assert result.status_code == 201
    ids = [href.rsplit("/", 1)[1] for href in result.json["resources"]]
    assert result.json["resources"] == [f"/v2/topics/s/messages/{i}" for i in ids]
    assert result.headers["location"] == f"/v2/topics/s/messages?ids={ids[0]},{ids[1]}"


@pytest.mark.parametrize(("document", "words"), [
    ({}, "messages is required."),
    ({"messages": []}, "messages may not be empty."),
    ({"messages": [{"body": 1, "ttl": 1}]}, "messages[0].ttl must be at least 60, got 1."),
    ({"messages": [{"ttl": 60}]}, "messages[0].body is required."),
])
def test_a_bad_post_is_a_400_naming_the_field(client, document, words):
    body = assert_error(client.simulate_post("/v2/topics/s/messages", json=document), 400)
    assert body["description"] == words


def test_a_post_larger_than_the_topics_max_post_size_is_a_400(client):
    client.simulate_put("/v2/topics/small", json={"_max_messages_post_size": 1024})
    body = assert_error(client.simulate_post("/v2/topics/small/messages",
                                             json={"messages": [{"body": "x" * 2000}]}), 400)
    assert body["description"] == "Request body may not exceed 1024 bytes on topic small."
    client.simulate_put("/v2/queues/small", json={"_max_messages_post_size": 1024})
    on_queue = assert_error(client.simulate_post("/v2/queues/small/messages",
                                                 json={"messages": [{"body": "x" * 2000}]}), 400)
    assert on_queue["description"] == "Request body may not exceed 1024 bytes on queue small."


def test_purge_removes_messages_or_subscriptions_as_asked_and_delete_removes_both(client):
    post_to_topic(client, "pg", 1, 2)
    subscription_id = subscribe(client, "pg")
    assert client.simulate_post("/v2/topics/pg/purge",
                                json={"resource_types": ["messages"]}).status_code == 204
    assert client.simulate_get("/v2/topics/pg/stats").json["messages"]["total"] == 0
    assert client.simulate_get(f"/v2/topics/pg/subscriptions/{subscription_id}").status_code == 200
    assert client.simulate_post("/v2/topics/pg/purge",
                                json={"resource_types": ["subscriptions"]}).status_code == 204
    assert_error(client.simulate_get(f"/v2/topics/pg/subscriptions/{subscription_id}"), 404)
    bad = assert_error(client.simulate_post("/v2/topics/pg/purge", json={"resource_types": ["claims"]}), 400)
    assert bad["description"] == \
        'resource_types[0] must be one of "messages" or "subscriptions", got a string.'
    post_to_topic(client, "pg", 3)
    subscribe(client, "pg")
    assert client.simulate_delete("/v2/topics/pg").status_code == 204
    assert client.simulate_delete("/v2/topics/pg").status_code == 204
    assert client.simulate_get("/v2/topics/pg/stats").json["messages"]["total"] == 0
    assert client.simulate_get("/v2/topics/pg/subscriptions").json["subscriptions"] == []


def test_a_topics_subscriptions_are_created_listed_changed_confirmed_and_deleted_under_topic_paths(client):
    created = client.simulate_post("/v2/topics/alerts/subscriptions", json={"subscriber": HOOK, "ttl": 600})
    assert created.status_code == 201
    subscription_id = created.json["subscription_id"]
    assert created.headers["location"] == f"/v2/topics/alerts/subscriptions/{subscription_id}"
    assert client.simulate_get("/v2/topics/alerts").json == TOPIC_DEFAULTS  # created with it
    shown = client.simulate_get(f"/v2/topics/alerts/subscriptions/{subscription_id}").json
    assert (shown["source"], shown["subscriber"], shown["ttl"], shown["confirmed"]) == \
        ("alerts", HOOK, 600, False)
    patched = client.simulate_patch(f"/v2/topics/alerts/subscriptions/{subscription_id}", json={"ttl": 900})
    assert patched.status_code == 204
    confirmed = client.simulate_put(f"/v2/topics/alerts/subscriptions/{subscription_id}/confirm",
                                    json={"confirmed": True})
    assert confirmed.status_code == 204
    resumed = client.simulate_post(f"/v2/topics/alerts/subscriptions/{subscription_id}/resume")
    assert resumed.status_code == 204
    listed = client.simulate_get("/v2/topics/alerts/subscriptions", params={"limit": "1"}).json
    assert [(s["id"], s["ttl"], s["confirmed"]) for s in listed["subscriptions"]] == \
        [(subscription_id, 900, True)]
    assert listed["links"] == [{"rel": "next",
                                "href": f"/v2/topics/alerts/subscriptions?marker={subscription_id}&limit=1"}]
    again = client.simulate_post("/v2/topics/alerts/subscriptions", json={"subscriber": HOOK})
    assert assert_error(again, 409)["description"] == ("Such subscription already exists. Subscriptions "
                                                       "are unique by project + topic + subscriber URI.")
    assert client.simulate_delete(f"/v2/topics/alerts/subscriptions/{subscription_id}").status_code == 204
    gone = assert_error(client.simulate_get(f"/v2/topics/alerts/subscriptions/{subscription_id}"), 404)
    assert gone["description"] == f"Subscription {subscription_id} does not exist in topic alerts."
    on_queue = assert_error(client.simulate_get(f"/v2/queues/alerts/subscriptions/{subscription_id}"), 404)
    assert on_queue["description"] == f"Subscription {subscription_id} does not exist in queue alerts."


@pytest.mark.parametrize(("document", "field"), [
    ({}, "subscriber"), ({"subscriber": "ftp://example.com"}, "subscriber"),
    ({"subscriber": HOOK, "ttl": "long"}, "ttl"), ({"subscriber": HOOK, "options": []}, "options")])
def test_a_bad_topic_subscription_is_a_400_naming_its_field(client, document, field):
    body = assert_error(client.simulate_post("/v2/topics/alerts/subscriptions", json=document), 400)
    assert field in body["description"]


def test_confirm_of_a_topic_subscription_needs_a_boolean(client):
    subscription_id = subscribe(client, "alerts")
    body = assert_error(client.simulate_put(f"/v2/topics/alerts/subscriptions/{subscription_id}/confirm",
                                            json={"confirmed": "yes"}), 400)
    assert "confirmed" in body["description"]


def suspend(storage, project, source, subscription_id):
    """Write a suspended delivery state as a notifier does when its retries ran out."""
    record = storage.get_record(project, state.DELIVERY, state.key(source, subscription_id))
    suspended = {**record.value, "suspended_at": 1_800_000_100.0, "last_error": "timeout",
                 "last_error_at": 1_800_000_100.0}
    storage.put_record(project, state.DELIVERY, state.key(source, subscription_id), suspended, record.version)


def test_a_suspended_topic_subscription_resumes_alone_or_with_the_projects_subscriber(client, storage):
    first, second = subscribe(client, "alerts"), subscribe(client, "audit")
    on_queue = client.simulate_post("/v2/queues/alerts/subscriptions", json={"subscriber": HOOK})
    queue_subscription = on_queue.json["subscription_id"]
    for source, subscription_id in (("alerts", first), ("audit", second)):
        suspend(storage, "project-a,topics", source, subscription_id)
    suspend(storage, "project-a", "alerts", queue_subscription)
    shown = client.simulate_get(f"/v2/topics/alerts/subscriptions/{first}").json
    assert (shown["status"], shown["delivery"]["last_error"]) == ("suspended", "timeout")
    assert client.simulate_post(f"/v2/topics/alerts/subscriptions/{first}/resume").status_code == 204
    assert client.simulate_get(f"/v2/topics/alerts/subscriptions/{first}").json["status"] == "active"
    resumed = client.simulate_post("/v2/subscriptions/resume", json={"subscriber": HOOK})
    assert resumed.json == {"resumed": 2}
    assert client.simulate_get(f"/v2/topics/audit/subscriptions/{second}").json["status"] == "active"
    queue_shown = client.simulate_get(f"/v2/queues/alerts/subscriptions/{queue_subscription}")
    assert queue_shown.json["status"] == "active"


def test_a_topic_message_is_read_at_the_href_its_post_answered(client, clock):
    posted = client.simulate_post("/v2/topics/news/messages",
                                  json={"messages": [{"body": {"k": 1}, "ttl": 120}]})
    href = posted.json["resources"][0]
    clock.advance(5)
    shown = client.simulate_get(href)
    assert shown.status_code == 200, shown.text
    assert shown.json == {"id": href.rsplit("/", 1)[1], "href": href, "ttl": 120, "age": 5, "body": {"k": 1},
                          "claim_count": 0}
    body = assert_error(client.simulate_get("/v2/topics/news/messages/absent"), 404)
    assert body["description"] == "Message absent does not exist in topic news."
    assert_error(client.simulate_get(href.replace("/v2/topics/", "/v2/queues/")), 404)
    clock.advance(120)
    assert_error(client.simulate_get(href), 404)
