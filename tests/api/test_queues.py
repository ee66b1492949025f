"""Queue routes: create, metadata, JSON-patch, delete, list, stats, purge (docs/api.rst, "Queues")."""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import JSON_PATCH, assert_error, claim, follow, post

#: what Zaqar 23 shows for a queue without metadata, key for key
RESERVED_DEFAULTS = {
    "_max_messages_post_size": 262144,
    "_default_message_ttl": 3600,
    "_default_message_delay": 0,
    "_dead_letter_queue": None,
    "_dead_letter_queue_messages_ttl": None,
    "_max_claim_count": None,
    "_enable_encrypt_messages": False,
}



def assert_metadata(shown, **stored):
    """Check shown metadata: exactly Zaqar's reserved defaults (unless overridden) plus ``stored``."""
    assert shown == {**RESERVED_DEFAULTS, **stored}


BAD_QUEUE_NAMES = ["q" * 65, "bad name", "bad$", "caf%C3%A9", "a%2Cb", "star*"]


def patch(client, queue, operations, content_type=JSON_PATCH):
    # json= would force Content-Type: application/json
    return client.simulate_patch(f"/v2/queues/{queue}", body=json.dumps(operations),
                                 content_type=content_type)


def names(result):
    return [q["name"] for q in result.json["queues"]]


# -- create, read, delete -------------------------------------------------------


def test_put_creates_a_queue_with_201_and_a_location(client):
    result = client.simulate_put("/v2/queues/fresh")
    assert result.status_code == 201
    assert result.headers["location"] == "/v2/queues/fresh"
    assert names(client.simulate_get("/v2/queues")) == ["fresh"]


def test_put_of_an_existing_queue_is_204_and_keeps_its_metadata(client):
    assert client.simulate_put("/v2/queues/q1", json={"team": "blue"}).status_code == 201
    again = client.simulate_put("/v2/queues/q1", json={"team": "red"})
    assert again.status_code == 204
    assert "location" not in again.headers
    assert client.simulate_get("/v2/queues/q1").json["team"] == "blue"


def test_put_stores_metadata_and_get_shows_it_over_the_reserved_defaults(client):
    client.simulate_put("/v2/queues/q1", json={"team": "blue", "_default_message_ttl": 120})
    result = client.simulate_get("/v2/queues/q1")
    assert result.status_code == 200
    assert_metadata(result.json, team="blue", _default_message_ttl=120)


def test_get_of_a_queue_without_metadata_shows_the_reserved_defaults(client):
    client.simulate_put("/v2/queues/q1")
    assert_metadata(client.simulate_get("/v2/queues/q1").json)


def test_get_of_a_missing_queue_answers_200_with_the_reserved_defaults(client):
    result = client.simulate_get("/v2/queues/never-made")
    assert result.status_code == 200
    assert_metadata(result.json)


def test_a_queue_name_of_64_characters_is_accepted(client):
    assert client.simulate_put("/v2/queues/" + "q" * 64).status_code == 201


def test_queue_names_may_use_letters_digits_underscore_dash_and_period(client):
    assert client.simulate_put("/v2/queues/Aa0_-.z").status_code == 201


@pytest.mark.parametrize("method,suffix", [
    ("PUT", ""), ("GET", ""), ("DELETE", ""), ("PATCH", ""), ("GET", "/stats"), ("POST", "/purge"),
    ("GET", "/messages"), ("POST", "/messages"), ("DELETE", "/messages?pop=1"), ("GET", "/messages/m1"),
    ("DELETE", "/messages/m1"), ("POST", "/claims"), ("GET", "/claims/c1"), ("PATCH", "/claims/c1"),
    ("DELETE", "/claims/c1"),
])
def test_a_bad_queue_name_is_400_on_every_route(client, method, suffix):
    content_type = JSON_PATCH if method == "PATCH" else None
    for name in BAD_QUEUE_NAMES:
        path, _, query = f"/v2/queues/{name}{suffix}".partition("?")
        result = client.simulate_request(method, path, query_string=query, content_type=content_type)
        assert_error(result, 400, "Invalid API request")


@pytest.mark.parametrize("body", ['["a", "b"]', '"text"', "42", "{not json", '{"a": 1,}'],
                         ids=["list", "string", "number", "broken", "trailing-comma"])
def test_put_with_a_body_that_is_not_a_json_object_is_400(client, body):
    assert_error(client.simulate_put("/v2/queues/q1", body=body), 400)
    assert names(client.simulate_get("/v2/queues")) == []


def test_put_with_metadata_over_65536_bytes_is_400(client):
    assert_error(client.simulate_put("/v2/queues/q1", json={"blob": "x" * 65536}), 400)


@pytest.mark.parametrize("key,value", [
    ("_default_message_ttl", True),
    ("_default_message_ttl", "3600"),
    ("_default_message_ttl", 59),
    ("_default_message_ttl", 1209601),
    ("_default_message_ttl", 600.5),
    ("_max_messages_post_size", 0),
    ("_max_messages_post_size", 262145),
    ("_max_messages_post_size", False),
    ("_default_message_delay", -1),
    ("_default_message_delay", 901),
    ("_default_message_delay", True),
])
def test_put_with_a_reserved_key_of_wrong_type_or_range_is_400(client, key, value):
    body = assert_error(client.simulate_put("/v2/queues/q1", json={key: value}), 400)
    assert key in body["description"]


def test_put_with_reserved_keys_at_their_bounds_is_accepted(client):
    metadata = {"_default_message_ttl": 60, "_max_messages_post_size": 1, "_default_message_delay": 900}
    assert client.simulate_put("/v2/queues/low", json=metadata).status_code == 201
    metadata = {"_default_message_ttl": 1209600, "_max_messages_post_size": 262144,
                "_default_message_delay": 0}
    assert client.simulate_put("/v2/queues/high", json=metadata).status_code == 201


def test_delete_answers_204_and_the_queue_is_gone(client):
    client.simulate_put("/v2/queues/q1", json={"team": "blue"})
    result = client.simulate_delete("/v2/queues/q1")
    assert result.status_code == 204
    assert result.content == b""
    assert names(client.simulate_get("/v2/queues")) == []
    assert "team" not in client.simulate_get("/v2/queues/q1").json


def test_delete_is_idempotent(client):
    client.simulate_put("/v2/queues/q1")
    assert client.simulate_delete("/v2/queues/q1").status_code == 204
    assert client.simulate_delete("/v2/queues/q1").status_code == 204
    assert client.simulate_delete("/v2/queues/never-made").status_code == 204


def test_delete_removes_the_messages_and_claims_of_the_queue(client):
    post(client, "q1", "a", "b")
    claim_id, _ = claim(client, "q1", limit=1)
    client.simulate_delete("/v2/queues/q1")
    client.simulate_put("/v2/queues/q1")
    listing = client.simulate_get("/v2/queues/q1/messages",
                                  params={"echo": "true", "include_claimed": "true"})
    assert listing.json["messages"] == []
    assert_error(client.simulate_get(f"/v2/queues/q1/claims/{claim_id}"), 404)


# -- PATCH ----------------------------------------------------------------------


def test_patch_adds_replaces_and_removes_keys_and_answers_the_whole_metadata(client):
    client.simulate_put("/v2/queues/q1", json={"team": "blue", "old": 1})
    result = patch(client, "q1", [
        {"op": "add", "path": "/metadata/owner", "value": "ops"},
        {"op": "replace", "path": "/metadata/team", "value": "red"},
        {"op": "remove", "path": "/metadata/old"},
        {"op": "replace", "path": "/metadata/_default_message_ttl", "value": 120},
    ])
    assert result.status_code == 200
    changed = {"team": "red", "owner": "ops", "_default_message_ttl": 120}
    assert_metadata(result.json, **changed)
    assert_metadata(client.simulate_get("/v2/queues/q1").json, **changed)


def test_patch_accepts_the_content_type_with_parameters(client):
    client.simulate_put("/v2/queues/q1")
    result = patch(client, "q1", [{"op": "add", "path": "/metadata/a", "value": 1}],
                   content_type=JSON_PATCH + "; charset=utf-8")
    assert result.status_code == 200


@pytest.mark.parametrize("content_type", ["application/json", "application/json-patch+json", "text/plain"])
def test_patch_with_the_wrong_content_type_is_415(client, content_type):
    client.simulate_put("/v2/queues/q1")
    result = patch(client, "q1", [{"op": "add", "path": "/metadata/a", "value": 1}], content_type)
    assert_error(result, 415)
    assert "a" not in client.simulate_get("/v2/queues/q1").json


def test_patch_without_a_content_type_is_415(client):
    client.simulate_put("/v2/queues/q1")
    result = client.simulate_patch("/v2/queues/q1", body='[{"op": "add", "path": "/metadata/a", "value": 1}]')
    assert_error(result, 415)


def test_patch_of_a_missing_queue_is_404(client):
    result = patch(client, "never-made", [{"op": "add", "path": "/metadata/a", "value": 1}])
    assert_error(result, 404, "Not found")


@pytest.mark.parametrize("op", ["replace", "remove"])
def test_patch_replace_or_remove_of_an_absent_plain_key_is_409(client, op):
    client.simulate_put("/v2/queues/q1", json={"team": "blue"})
    operation = {"op": op, "path": "/metadata/absent"}
    if op == "replace":
        operation["value"] = 1
    assert_error(patch(client, "q1", [operation]), 409, "Resource conflict")
    assert client.simulate_get("/v2/queues/q1").json["team"] == "blue"


def test_patch_remove_of_an_unset_reserved_key_is_allowed(client):
    client.simulate_put("/v2/queues/q1")
    result = patch(client, "q1", [{"op": "remove", "path": "/metadata/_default_message_delay"}])
    assert result.status_code == 200
    assert result.json["_default_message_delay"] == 0


@pytest.mark.parametrize("body", [
    {"op": "add", "path": "/metadata/a", "value": 1},
    [],
    [{"op": "move", "path": "/metadata/a", "value": 1}],
    [{"op": "add", "path": "/a", "value": 1}],
    [{"op": "add", "path": "/metadata/", "value": 1}],
    [{"op": "add", "path": "metadata/a", "value": 1}],
    [{"op": "add", "path": "/metadata/a"}],
    [{"op": "replace", "path": "/metadata/a"}],
    [{"path": "/metadata/a", "value": 1}],
    [{"op": "add", "value": 1}],
    [{"op": "add", "path": 7, "value": 1}],
    ["add"],
], ids=["object", "empty", "bad-op", "bad-pointer", "empty-key", "relative-pointer", "add-no-value",
        "replace-no-value", "no-op", "no-path", "path-not-string", "item-not-object"])
def test_patch_with_a_bad_body_or_pointer_is_400(client, body):
    client.simulate_put("/v2/queues/q1", json={"a": 0})
    assert_error(patch(client, "q1", body), 400)
    assert client.simulate_get("/v2/queues/q1").json["a"] == 0


def test_patch_with_an_invalid_json_body_is_400(client):
    client.simulate_put("/v2/queues/q1")
    result = client.simulate_patch("/v2/queues/q1", body="[{", content_type=JSON_PATCH)
    assert_error(result, 400)


def test_patch_without_a_body_is_400(client):
    client.simulate_put("/v2/queues/q1")
    assert_error(client.simulate_patch("/v2/queues/q1", content_type=JSON_PATCH), 400)


@pytest.mark.parametrize("key,value", [
    ("_default_message_ttl", True), ("_default_message_ttl", 30), ("_max_messages_post_size", 262145),
    ("_default_message_delay", "5"),
])
def test_patch_result_is_validated_like_a_put(client, key, value):
    client.simulate_put("/v2/queues/q1")
    result = patch(client, "q1", [{"op": "add", "path": f"/metadata/{key}", "value": value}])
    body = assert_error(result, 400)
    assert key in body["description"]
    assert client.simulate_get("/v2/queues/q1").json[key] == RESERVED_DEFAULTS[key]


def test_a_put_with_a_misspelt_reserved_key_is_400_naming_the_key_and_creates_nothing(client):
    result = client.simulate_put("/v2/queues/q1", json={"_max_claims_count": 2, "owner": "team-a"})
    body = assert_error(result, 400)
    assert body["description"].startswith("_max_claims_count is not a reserved metadata key; "
                                           "did you mean _max_claim_count?")
    assert names(client.simulate_get("/v2/queues")) == []


def test_a_patch_adding_a_misspelt_reserved_key_is_400_and_changes_nothing(client):
    client.simulate_put("/v2/queues/q1", json={"_max_claim_count": 3})
    result = patch(client, "q1", [{"op": "add", "path": "/metadata/_dead_letter_queu", "value": "dlq"}])
    body = assert_error(result, 400)
    assert body["description"].startswith("_dead_letter_queu is not a reserved metadata key; "
                                          "did you mean _dead_letter_queue?")
    assert_metadata(client.simulate_get("/v2/queues/q1").json, _max_claim_count=3)


def test_underscore_keys_far_from_every_reserved_key_are_stored_as_zaqar_stores_them(client):
    assert client.simulate_put("/v2/queues/q1", json={"_owner": "team-a"}).status_code == 201
    assert_metadata(client.simulate_get("/v2/queues/q1").json, _owner="team-a")


# -- list -----------------------------------------------------------------------


def test_an_empty_project_lists_no_queues_and_no_links(client):
    result = client.simulate_get("/v2/queues")
    assert result.status_code == 200
    assert result.json == {"queues": [], "links": []}


def test_list_gives_names_and_hrefs_in_name_order_without_metadata(client):
    for name in ("charlie", "alpha", "bravo"):
        client.simulate_put(f"/v2/queues/{name}", json={"team": name})
    queues = client.simulate_get("/v2/queues").json["queues"]
    assert queues == [{"name": "alpha", "href": "/v2/queues/alpha"},
                      {"name": "bravo", "href": "/v2/queues/bravo"},
                      {"name": "charlie", "href": "/v2/queues/charlie"}]


def test_detailed_list_shows_each_queues_metadata_as_get_does(client):
    client.simulate_put("/v2/queues/alpha", json={"team": "blue", "_default_message_delay": 5})
    client.simulate_put("/v2/queues/bravo")
    queues = client.simulate_get("/v2/queues", params={"detailed": "true"}).json["queues"]
    zaqar_defaults = {"_max_messages_post_size": 262144, "_default_message_ttl": 3600,
                      "_default_message_delay": 0, "_dead_letter_queue": None,
                      "_dead_letter_queue_messages_ttl": None, "_max_claim_count": None,
                      "_enable_encrypt_messages": False}
    assert queues == [
        {"name": "alpha", "href": "/v2/queues/alpha",
         "metadata": {**zaqar_defaults, "team": "blue", "_default_message_delay": 5}},
        {"name": "bravo", "href": "/v2/queues/bravo", "metadata": zaqar_defaults},
    ]
    for queue in queues:
        assert queue["metadata"] == client.simulate_get(queue["href"]).json


def test_zaqar_lite_reserved_keys_show_only_when_set(client, dlq_name="dlq"):
    client.simulate_put(f"/v2/queues/{dlq_name}")
    client.simulate_put("/v2/queues/q1",
                        json={"_dead_letter_queue": dlq_name, "_dead_letter_on_expiry": True})
    assert_metadata(client.simulate_get("/v2/queues/q1").json,
                    _dead_letter_queue=dlq_name, _dead_letter_on_expiry=True)
    result = patch(client, "q1", [{"op": "remove", "path": "/metadata/_dead_letter_on_expiry"}])
    assert result.status_code == 200
    assert_metadata(result.json, _dead_letter_queue=dlq_name)


def test_encrypted_messages_are_refused_on_a_server_without_encryption_keys(client):
    result = client.simulate_put("/v2/queues/q1", json={"_enable_encrypt_messages": True})
    assert "[encryption] keys" in assert_error(result, 400)["description"]
    assert client.simulate_get("/v2/queues/q1").json["_enable_encrypt_messages"] is False
    client.simulate_put("/v2/queues/q1", json={"_enable_encrypt_messages": False})
    result = patch(client, "q1", [{"op": "replace", "path": "/metadata/_enable_encrypt_messages",
                                   "value": True}])
    assert "_enable_encrypt_messages" in assert_error(result, 400)["description"]
    assert_metadata(client.simulate_get("/v2/queues/q1").json, _enable_encrypt_messages=False)


@pytest.mark.parametrize("value", [1, 0, "true", [True]])
def test_encrypted_messages_must_be_a_boolean(client, value):
    result = client.simulate_put("/v2/queues/q1", json={"_enable_encrypt_messages": value})
    assert "_enable_encrypt_messages must be true or false" in assert_error(result, 400)["description"]


@pytest.mark.parametrize("body", [b" ", b"\n", b" \t\r\n "])
def test_a_whitespace_only_put_body_is_400_and_creates_nothing(client, body):
    result = client.simulate_put("/v2/queues/q1", body=body, content_type="application/json")
    assert_error(result, 400)
    assert client.simulate_get("/v2/queues").json["queues"] == []


def test_an_empty_put_body_creates_the_queue(client):
    result = client.simulate_put("/v2/queues/q1", body=b"", content_type="application/json")
    assert result.status_code == 201


def test_queue_list_pages_follow_the_next_links_to_an_empty_page(client):
    for i in range(5):
        client.simulate_put(f"/v2/queues/q{i}")
    pages = []
    result = client.simulate_get("/v2/queues", params={"limit": 2})
    while result.json["queues"]:
        pages.append(names(result))
        (link,) = result.json["links"]
        assert link["rel"] == "next"
        result = follow(client, link["href"])
    assert pages == [["q0", "q1"], ["q2", "q3"], ["q4"]]
    assert result.json == {"queues": [], "links": []}


def test_list_starts_after_the_marker(client):
    for name in ("a", "b", "c"):
        client.simulate_put(f"/v2/queues/{name}")
    assert names(client.simulate_get("/v2/queues", params={"marker": "a"})) == ["b", "c"]


def test_list_default_page_is_10_queues(client):
    for i in range(12):
        client.simulate_put(f"/v2/queues/q{i:02d}")
    assert len(client.simulate_get("/v2/queues").json["queues"]) == 10
    assert len(client.simulate_get("/v2/queues", params={"limit": 20}).json["queues"]) == 12


@pytest.mark.parametrize("limit", ["0", "21", "-1", "ten", "2.5", "true"])
def test_list_with_a_limit_outside_1_to_20_is_400(client, limit):
    assert_error(client.simulate_get("/v2/queues", params={"limit": limit}), 400)


@pytest.mark.parametrize("param", ["detailed", "with_count"])
def test_list_with_a_non_boolean_flag_is_400(client, param):
    assert_error(client.simulate_get("/v2/queues", params={param: "perhaps"}), 400)


def test_list_with_count_gives_the_number_of_queues(client):
    for i in range(3):
        client.simulate_put(f"/v2/queues/q{i}")
    result = client.simulate_get("/v2/queues", params={"with_count": "true", "limit": 1})
    assert result.json["count"] == 3
    assert len(result.json["queues"]) == 1
    assert "count" not in client.simulate_get("/v2/queues").json


def test_list_filters_by_name(client):
    for name in ("alpha", "beta", "gamma"):
        client.simulate_put(f"/v2/queues/{name}")
    assert names(client.simulate_get("/v2/queues", params={"name": "alp"})) == ["alpha"]


def test_list_filters_on_metadata_equality(client):
    client.simulate_put("/v2/queues/q1", json={"team": "blue", "size": 5})
    client.simulate_put("/v2/queues/q2", json={"team": "red", "size": 5})
    client.simulate_put("/v2/queues/q3")
    assert names(client.simulate_get("/v2/queues", params={"team": "blue"})) == ["q1"]
    assert names(client.simulate_get("/v2/queues", params={"size": "5"})) == ["q1", "q2"]
    assert names(client.simulate_get("/v2/queues", params={"team": "green"})) == []


def test_list_next_link_keeps_the_metadata_filter(client):
    for i in range(3):
        client.simulate_put(f"/v2/queues/blue{i}", json={"team": "blue"})
        client.simulate_put(f"/v2/queues/red{i}", json={"team": "red"})
    first = client.simulate_get("/v2/queues", params={"team": "red", "limit": 2})
    assert names(first) == ["red0", "red1"]
    second = follow(client, first.json["links"][0]["href"])
    assert names(second) == ["red2"]


# -- stats ----------------------------------------------------------------------


def test_stats_of_an_empty_queue_have_zero_counts_and_no_oldest_or_newest(client):
    client.simulate_put("/v2/queues/q1")
    result = client.simulate_get("/v2/queues/q1/stats")
    assert result.status_code == 200
    assert result.json == {"messages": {"claimed": 0, "free": 0, "delayed": 0, "total": 0}}


def test_stats_of_a_missing_queue_are_zero(client):
    result = client.simulate_get("/v2/queues/never-made/stats")
    assert result.status_code == 200
    assert result.json == {"messages": {"claimed": 0, "free": 0, "delayed": 0, "total": 0}}


def test_stats_count_claimed_and_free_and_show_the_oldest_and_newest(client, clock):
    first, _, _ = post(client, "q1", "a", "b", "c")
    clock.advance(10)
    (last,) = post(client, "q1", "d")
    claim(client, "q1", limit=1)
    clock.advance(5)
    stats = client.simulate_get("/v2/queues/q1/stats").json["messages"]
    assert {k: stats[k] for k in ("claimed", "free", "delayed", "total")} == \
        {"claimed": 1, "free": 3, "delayed": 0, "total": 4}
    assert stats["oldest"] == {"href": f"/v2/queues/q1/messages/{first}", "age": 15,
                               "created": "2100-01-01T00:00:00Z"}
    assert stats["newest"] == {"href": f"/v2/queues/q1/messages/{last}", "age": 5,
                               "created": "2100-01-01T00:00:10Z"}


def test_stats_of_a_queue_with_one_message_show_it_as_oldest_and_newest(client):
    (only,) = post(client, "q1", "a")
    stats = client.simulate_get("/v2/queues/q1/stats").json["messages"]
    assert stats["total"] == 1
    assert stats["oldest"]["href"] == stats["newest"]["href"] == f"/v2/queues/q1/messages/{only}"


def test_stats_do_not_count_expired_messages(client, clock):
    post(client, "q1", "short", ttl=60)
    post(client, "q1", "long", ttl=600)
    clock.advance(61)
    stats = client.simulate_get("/v2/queues/q1/stats").json["messages"]
    assert stats["total"] == 1
    assert stats["free"] == 1


# -- purge ----------------------------------------------------------------------


def test_purge_removes_free_and_claimed_messages(client):
    post(client, "q1", "a", "b", "c")
    claim_id, _ = claim(client, "q1", limit=2)
    result = client.simulate_post("/v2/queues/q1/purge")
    assert result.status_code == 204
    stats = client.simulate_get("/v2/queues/q1/stats").json["messages"]
    assert stats == {"claimed": 0, "free": 0, "delayed": 0, "total": 0}
    listing = client.simulate_get("/v2/queues/q1/messages",
                                  params={"echo": "true", "include_claimed": "true"})
    assert listing.json["messages"] == []
    assert_error(client.simulate_get(f"/v2/queues/q1/claims/{claim_id}"), 404)


def test_purge_keeps_the_queue_and_its_metadata(client):
    client.simulate_put("/v2/queues/q1", json={"team": "blue"})
    post(client, "q1", "a")
    client.simulate_post("/v2/queues/q1/purge")
    assert client.simulate_get("/v2/queues/q1").json["team"] == "blue"
    assert names(client.simulate_get("/v2/queues")) == ["q1"]


def test_purge_of_messages_only_removes_messages(client):
    post(client, "q1", "a")
    result = client.simulate_post("/v2/queues/q1/purge", json={"resource_types": ["messages"]})
    assert result.status_code == 204
    assert client.simulate_get("/v2/queues/q1/stats").json["messages"]["total"] == 0


def test_purge_of_subscriptions_only_keeps_the_messages(client):
    post(client, "q1", "a", "b")
    result = client.simulate_post("/v2/queues/q1/purge", json={"resource_types": ["subscriptions"]})
    assert result.status_code == 204
    assert client.simulate_get("/v2/queues/q1/stats").json["messages"]["total"] == 2


@pytest.mark.parametrize("body", [
    {"resource_types": []},
    {"resource_types": ["bogus"]},
    {"resource_types": "messages"},
    {"resource_types": ["messages", "messages"]},
    {"resource_types": [1]},
    ["messages"],
], ids=["empty", "unknown-type", "not-a-list", "duplicates", "not-strings", "not-an-object"])
def test_purge_with_bad_resource_types_is_400_and_removes_nothing(client, body):
    post(client, "q1", "a")
    assert_error(client.simulate_post("/v2/queues/q1/purge", json=body), 400)
    assert client.simulate_get("/v2/queues/q1/stats").json["messages"]["total"] == 1


def test_purge_with_an_invalid_json_body_is_400(client):
    post(client, "q1", "a")
    assert_error(client.simulate_post("/v2/queues/q1/purge", body="{resource_types"), 400)


def test_a_project_with_max_queues_per_project_queues_is_refused_another_with_403(make_client, settings):
    import dataclasses

    from tests.api.helpers import headers

    limits = dataclasses.replace(settings.limits, max_queues_per_project=3)
    tenant = make_client(headers("tenant"), limits=limits)
    for name in ("q1", "q2"):
        assert tenant.simulate_put(f"/v2/queues/{name}").status_code == 201
    message = {"messages": [{"body": {"n": 1}}]}
    assert tenant.simulate_post("/v2/queues/q3/messages", json=message).status_code == 201  # creates q3
    for refused in (tenant.simulate_put("/v2/queues/q4"),
                    tenant.simulate_post("/v2/queues/q4/messages", json=message),
                    tenant.simulate_post("/v2/queues/q4/subscriptions",
                                         json={"subscriber": "http://example.com/hook", "ttl": 3600})):
        error = assert_error(refused, 403, "Queue limit reached")
        assert "max_queues_per_project" in error["description"]
        assert "3 queues" in error["description"]
    assert tenant.simulate_get("/v2/queues/q4/stats").json["messages"]["total"] == 0
    # an existing queue is still written, and another project has its own room
    assert tenant.simulate_put("/v2/queues/q1").status_code == 204
    assert tenant.simulate_post("/v2/queues/q1/messages", json=message).status_code == 201
    other = make_client(headers("other"), limits=limits)
    assert other.simulate_put("/v2/queues/q4").status_code == 201
    # a deleted queue makes room again
    assert tenant.simulate_delete("/v2/queues/q2").status_code == 204
    assert tenant.simulate_put("/v2/queues/q4").status_code == 201
    names = [q["name"] for q in tenant.simulate_get("/v2/queues", params={"limit": 20}).json["queues"]]
    assert names == ["q1", "q3", "q4"]
