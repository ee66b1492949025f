"""Message routes: post, list, get by ids, bulk delete, pop, get one, delete one.

docs/api.rst, "Messages".
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.api.helpers import assert_error, claim, follow, post

MESSAGES = "/v2/queues/q1/messages"
MESSAGE_KEYS = {"id", "href", "ttl", "age", "body", "claim_count"}


def listing(client, **params):
    result = client.simulate_get(MESSAGES, params={"echo": "true", **params})
    assert result.status_code == 200
    return result.json["messages"]


def bodies(messages):
    return [m["body"] for m in messages]


def exists(client, message_id):
    return client.simulate_get(f"{MESSAGES}/{message_id}").status_code == 200


# -- post -----------------------------------------------------------------------


def test_post_answers_201_with_resources_and_a_location_listing_the_ids(client):
    result = client.simulate_post(MESSAGES, json={"messages": [{"body": "a"}, {"body": {"k": [1, 2]}}]})
    assert result.status_code == 201
    resources = result.json["resources"]
    assert len(resources) == 2
    assert all(r.startswith("/v2/queues/q1/messages/") for r in resources)
    ids = [r.rsplit("/", 1)[1] for r in resources]
    assert ids[0] != ids[1]
    assert result.headers["location"] == f"/v2/queues/q1/messages?ids={ids[0]},{ids[1]}"


def test_post_creates_the_queue(client):
    post(client, "made-by-post", "a")
    assert [q["name"] for q in client.simulate_get("/v2/queues").json["queues"]] == ["made-by-post"]


def test_post_accepts_any_json_as_a_body(client):
    posted = [None, 0, -7, 2**63 - 1, -(2**63), 1.5, "text", [], {"nested": {"list": [True, False]}}]
    ids = post(client, "q1", *posted)
    found = client.simulate_get(MESSAGES, params={"ids": ",".join(ids)}).json["messages"]
    assert {m["id"]: m["body"] for m in found} == dict(zip(ids, posted, strict=True))


def test_post_accepts_20_messages_and_ttl_and_delay_at_their_bounds(client):
    assert len(post(client, "q1", *range(20))) == 20
    assert len(post(client, "q1", "low", ttl=60, delay=0)) == 1
    assert len(post(client, "q1", "high", ttl=1209600, delay=900)) == 1


@pytest.mark.parametrize("document", [
    {},
    {"message": [{"body": 1}]},
    {"messages": {"body": 1}},
    {"messages": "body"},
    {"messages": []},
    {"messages": [{"body": i} for i in range(21)]},
    {"messages": [1]},
    {"messages": ["text"]},
    {"messages": [None]},
    {"messages": [[{"body": 1}]]},
    {"messages": [{"ttl": 60}]},
    {"messages": [{"body": 1}, {"ttl": 60}]},
    [{"body": 1}],
    "messages",
], ids=["empty-object", "misspelt-key", "messages-object", "messages-string", "no-messages", "21-messages",
        "item-number", "item-string", "item-null", "item-list", "no-body", "second-has-no-body",
        "top-level-list", "top-level-string"])
def test_post_with_a_malformed_document_is_400(client, document):
    assert_error(client.simulate_post(MESSAGES, json=document), 400)
    assert listing(client) == []


@pytest.mark.parametrize("field,value", [
    ("ttl", "3600"), ("ttl", True), ("ttl", None), ("ttl", 600.5), ("ttl", [60]), ("ttl", 59), ("ttl", 0),
    ("ttl", -60), ("ttl", 1209601), ("delay", "0"), ("delay", True), ("delay", False), ("delay", 1.5),
    ("delay", -1), ("delay", 901),
])
def test_post_with_a_ttl_or_delay_of_wrong_type_or_out_of_range_is_400(client, field, value):
    result = client.simulate_post(MESSAGES, json={"messages": [{"body": 1, field: value}]})
    body = assert_error(result, 400)
    assert field in body["description"]
    assert listing(client) == []


@pytest.mark.parametrize("raw", [
    '{"messages": [{"body": 9223372036854775808}]}',
    '{"messages": [{"body": -9223372036854775809}]}',
    '{"messages": [{"body": {"deep": [1, 123456789012345678901234567890]}}]}',
    '{"messages": [{"body": 1, "ttl": 18446744073709551676}]}',
], ids=["2^63", "-2^63-1", "nested-huge", "huge-ttl"])
def test_post_with_an_integer_beyond_64_bits_is_400(client, raw):
    assert_error(client.simulate_post(MESSAGES, body=raw), 400)
    assert listing(client) == []


@pytest.mark.parametrize("raw", [
    '{"messages": [{"body": 1e400}]}',
    '{"messages": [{"body": NaN}]}',
    '{"messages": [{"body": -Infinity}]}',
    '{"messages": [{"body": "\\ud800"}]}',
    '{"messages": [{"body": {"\\udfff": 1}}]}',
    '{"messages": [{"body": ' + "[" * 70 + "]" * 70 + "}]}",
    '{"messages": [{"body": ' + "[" * 5000 + "]" * 5000 + "}]}",
    '{"messages": [{"body": 1}]',
    '{"messages": [{"body": 1}]} trailing',
    "{'messages': [{'body': 1}]}",
    b'{"messages": [{"body": "\xff\xfe"}]}',
], ids=["overflowing-float", "nan", "infinity", "lone-surrogate", "lone-surrogate-key", "nested-70",
        "nested-5000", "truncated", "trailing-text", "single-quotes", "not-utf8"])
def test_post_of_json_that_could_not_be_stored_or_read_back_is_400(client, raw):
    assert_error(client.simulate_post(MESSAGES, body=raw), 400)
    assert listing(client) == []


def test_post_keeps_a_surrogate_pair_escape_as_one_character(client):
    result = client.simulate_post(MESSAGES, body='{"messages": [{"body": "\\ud83d\\ude00"}]}')
    assert result.status_code == 201
    assert bodies(listing(client)) == ["\U0001F600"]


def test_post_accepts_a_body_nested_60_deep(client):
    nested = json.loads("[" * 60 + "]" * 60)
    post(client, "q1", nested)
    assert bodies(listing(client)) == [nested]


def test_post_without_a_body_is_400(client):
    assert_error(client.simulate_post(MESSAGES), 400)


def padded_document(size: int) -> bytes:
    """Return a valid one-message POST body of exactly ``size`` bytes."""
    head, tail = b'{"messages": [{"body": "', b'"}]}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def test_post_of_exactly_262144_bytes_is_accepted(client):
    assert client.simulate_post(MESSAGES, body=padded_document(262144)).status_code == 201


def test_post_of_262145_bytes_is_400(client):
    assert_error(client.simulate_post(MESSAGES, body=padded_document(262145)), 400)
    assert listing(client) == []


def test_post_size_is_judged_on_the_real_bytes_including_whitespace(client):
    document = b'{"messages": [{"body": 1}]}'
    padded = document[:-1] + b" " * (262145 - len(document)) + b"}"
    assert len(padded) == 262145
    assert_error(client.simulate_post(MESSAGES, body=padded), 400)


def test_chunked_post_without_content_length_is_read_to_its_end(client):
    chunked = {"CONTENT_LENGTH": "", "wsgi.input_terminated": True}
    result = client.simulate_post(MESSAGES, body=b'{"messages": [{"body": "chunked"}]}', extras=chunked)
    assert result.status_code == 201
    assert bodies(listing(client)) == ["chunked"]
    assert_error(client.simulate_post(MESSAGES, body=padded_document(262145), extras=chunked), 400)


def test_queue_max_messages_post_size_lowers_the_limit(client):
    client.simulate_put("/v2/queues/q1", json={"_max_messages_post_size": 100})
    assert client.simulate_post(MESSAGES, body=padded_document(100)).status_code == 201
    assert_error(client.simulate_post(MESSAGES, body=padded_document(101)), 400)
    assert len(listing(client)) == 1


def test_queue_default_message_ttl_applies_when_ttl_is_left_out(client):
    client.simulate_put("/v2/queues/q1", json={"_default_message_ttl": 120})
    (message_id,) = post(client, "q1", "a")
    (explicit,) = post(client, "q1", "b", ttl=300)
    assert client.simulate_get(f"{MESSAGES}/{message_id}").json["ttl"] == 120
    assert client.simulate_get(f"{MESSAGES}/{explicit}").json["ttl"] == 300


# -- list -----------------------------------------------------------------------


def test_list_shows_each_message_with_id_href_ttl_age_body_and_claim_count(client, clock):
    (message_id,) = post(client, "q1", {"event": "created"})
    clock.advance(7)
    (message,) = listing(client)
    assert set(message) == MESSAGE_KEYS
    assert message == {"id": message_id, "href": f"/v2/queues/q1/messages/{message_id}", "ttl": 3600,
                       "age": 7, "body": {"event": "created"}, "claim_count": 0}


def test_list_is_first_in_first_out(client):
    post(client, "q1", 0, 1, 2)
    post(client, "q1", 3)
    assert bodies(listing(client)) == [0, 1, 2, 3]


def test_list_hides_the_callers_own_messages_unless_echo_is_true(client, other_client):
    post(client, "q1", "mine")
    post(other_client, "q1", "theirs")
    assert bodies(client.simulate_get(MESSAGES).json["messages"]) == ["theirs"]
    assert bodies(client.simulate_get(MESSAGES, params={"echo": "false"}).json["messages"]) == ["theirs"]
    echoed = client.simulate_get(MESSAGES, params={"echo": "true"}).json["messages"]
    assert bodies(echoed) == ["mine", "theirs"]


def test_list_hides_claimed_messages_unless_include_claimed(client):
    post(client, "q1", "a", "b")
    claim_id, _ = claim(client, "q1", limit=1)
    assert bodies(listing(client)) == ["b"]
    both = listing(client, include_claimed="true")
    assert bodies(both) == ["a", "b"]
    assert both[0]["href"].endswith(f"?claim_id={claim_id}")
    assert both[0]["href"] == f"/v2/queues/q1/messages/{both[0]['id']}?claim_id={claim_id}"
    assert "?" not in both[1]["href"]


def test_list_does_not_show_expired_messages(client, clock):
    post(client, "q1", "short", ttl=60)
    post(client, "q1", "long", ttl=120)
    clock.advance(61)
    assert bodies(listing(client)) == ["long"]


def test_message_list_pages_follow_the_next_links_to_an_empty_page(client):
    post(client, "q1", *range(5))
    pages = []
    result = client.simulate_get(MESSAGES, params={"echo": "true", "limit": 2})
    while result.json["messages"]:
        pages.append(bodies(result.json["messages"]))
        (link,) = result.json["links"]
        assert link["rel"] == "next"
        result = follow(client, link["href"])
    assert pages == [[0, 1], [2, 3], [4]]
    assert result.json == {"messages": [], "links": []}


def test_list_default_page_is_10_messages(client):
    post(client, "q1", *range(12))
    assert len(listing(client)) == 10
    assert len(listing(client, limit=20)) == 12


@pytest.mark.parametrize("marker", ["abc", "-1", "99999999999999999999999", "\u00b2", "9223372036854775807"])
def test_a_listing_with_an_unknown_marker_is_200_and_empty_as_in_zaqar(client, marker):
    post(client, "q1", "a", "b")
    result = client.simulate_get("/v2/queues/q1/messages", params={"marker": marker, "echo": "true"})
    assert result.status_code == 200
    assert result.json == {"messages": [], "links": []}


def test_list_of_an_unknown_queue_is_200_and_empty(client):
    result = client.simulate_get("/v2/queues/never-made/messages")
    assert result.status_code == 200
    assert result.json == {"messages": [], "links": []}


@pytest.mark.parametrize("params", [
    {"limit": "0"}, {"limit": "21"}, {"limit": "x"}, {"limit": "1.5"},
    {"echo": "perhaps"}, {"include_claimed": "2"}, {"include_delayed": "maybe"},
])
def test_list_with_a_bad_query_parameter_is_400(client, params):
    assert_error(client.simulate_get(MESSAGES, params=params), 400)


# -- get by ids -----------------------------------------------------------------


def test_get_by_ids_returns_the_messages_found(client):
    first, second, _ = post(client, "q1", "a", "b", "c")
    result = client.simulate_get(MESSAGES, params={"ids": f"{first},{second},{uuid.uuid4()}"})
    assert result.status_code == 200
    assert sorted(bodies(result.json["messages"])) == ["a", "b"]
    assert set(result.json["messages"][0]) == MESSAGE_KEYS


def test_get_by_ids_is_404_when_none_is_found(client):
    post(client, "q1", "a")
    assert_error(client.simulate_get(MESSAGES, params={"ids": f"{uuid.uuid4()},{uuid.uuid4()}"}), 404)


def test_get_by_ids_with_more_than_20_ids_is_400(client):
    ids = post(client, "q1", *range(20))
    assert client.simulate_get(MESSAGES, params={"ids": ",".join(ids)}).status_code == 200
    assert_error(client.simulate_get(MESSAGES, params={"ids": ",".join(ids + ["extra"])}), 400)


def test_get_by_ids_does_not_return_expired_messages(client, clock):
    (message_id,) = post(client, "q1", "a", ttl=60)
    clock.advance(61)
    assert_error(client.simulate_get(MESSAGES, params={"ids": message_id}), 404)


# -- bulk delete and pop ----------------------------------------------------------


def test_delete_by_ids_removes_those_messages_only(client):
    first, second, third = post(client, "q1", "a", "b", "c")
    result = client.simulate_delete(MESSAGES, params={"ids": f"{first},{second}"})
    assert result.status_code == 204
    assert bodies(listing(client)) == ["c"]


def test_delete_by_ids_with_claim_ids_of_the_holding_claim_removes_claimed_messages(client):
    first, second = post(client, "q1", "a", "b")
    claim_id, _ = claim(client, "q1", limit=2)
    result = client.simulate_delete(MESSAGES, params={"ids": f"{first},{second}", "claim_ids": claim_id})
    assert result.status_code == 204
    assert listing(client, include_claimed="true") == []


def test_delete_by_ids_with_claim_ids_of_another_claim_keeps_the_claimed_message(client):
    (first,) = post(client, "q1", "a")
    claim(client, "q1", limit=1)
    result = client.simulate_delete(MESSAGES, params={"ids": first, "claim_ids": str(uuid.uuid4())})
    assert_error(result, 403)
    assert exists(client, first)


def test_delete_by_ids_with_more_than_20_ids_is_400(client):
    ids = post(client, "q1", *range(20))
    assert_error(client.simulate_delete(MESSAGES, params={"ids": ",".join(ids + ["extra"])}), 400)
    assert len(listing(client, limit=20)) == 20


@pytest.mark.parametrize("params", [{}, {"ids": "a", "pop": "1"}], ids=["neither", "both"])
def test_delete_needs_exactly_one_of_ids_and_pop(client, params):
    post(client, "q1", "a")
    assert_error(client.simulate_delete(MESSAGES, params=params), 400)
    assert len(listing(client)) == 1


def test_pop_returns_and_removes_the_oldest_messages(client, clock):
    first, second, _ = post(client, "q1", "a", "b", "c")
    clock.advance(3)
    result = client.simulate_delete(MESSAGES, params={"pop": 2})
    assert result.status_code == 200
    popped = result.json["messages"]
    assert popped == [
        {"id": first, "age": 3, "ttl": 3600, "body": "a", "claim_count": 0},
        {"id": second, "age": 3, "ttl": 3600, "body": "b", "claim_count": 0},
    ]
    assert bodies(listing(client)) == ["c"]


def test_pop_skips_claimed_messages(client):
    post(client, "q1", "a", "b", "c")
    claim(client, "q1", limit=1)
    popped = client.simulate_delete(MESSAGES, params={"pop": 3}).json["messages"]
    assert bodies(popped) == ["b", "c"]
    assert bodies(listing(client, include_claimed="true")) == ["a"]


def test_pop_of_an_empty_queue_returns_no_messages(client):
    result = client.simulate_delete(MESSAGES, params={"pop": 5})
    assert result.status_code == 200
    assert result.json["messages"] == []


def test_pop_accepts_20(client):
    post(client, "q1", *range(20))
    assert len(client.simulate_delete(MESSAGES, params={"pop": 20}).json["messages"]) == 20


@pytest.mark.parametrize("pop", ["0", "21", "-1", "x", "true"])
def test_pop_outside_1_to_20_is_400(client, pop):
    post(client, "q1", "a")
    assert_error(client.simulate_delete(MESSAGES, params={"pop": pop}), 400)
    assert len(listing(client)) == 1


# -- get one --------------------------------------------------------------------


def test_get_one_message_answers_200_with_the_message(client, clock):
    (message_id,) = post(client, "q1", "a", ttl=300)
    clock.advance(4)
    result = client.simulate_get(f"{MESSAGES}/{message_id}")
    assert result.status_code == 200
    assert result.json == {"id": message_id, "href": f"/v2/queues/q1/messages/{message_id}", "ttl": 300,
                           "age": 4, "body": "a", "claim_count": 0}


def test_get_one_absent_message_is_404(client):
    post(client, "q1", "a")
    assert_error(client.simulate_get(f"{MESSAGES}/{uuid.uuid4()}"), 404, "Not found")


def test_get_one_expired_message_is_404(client, clock):
    (message_id,) = post(client, "q1", "a", ttl=60)
    clock.advance(59)
    assert exists(client, message_id)
    clock.advance(2)
    assert_error(client.simulate_get(f"{MESSAGES}/{message_id}"), 404)


def test_get_one_message_through_another_queue_is_404(client):
    (message_id,) = post(client, "q1", "a")
    assert_error(client.simulate_get(f"/v2/queues/q2/messages/{message_id}"), 404)


def test_get_one_claimed_message_shows_its_claim_in_the_href(client):
    (message_id,) = post(client, "q1", "a")
    claim_id, _ = claim(client, "q1")
    href = client.simulate_get(f"{MESSAGES}/{message_id}").json["href"]
    assert href == f"/v2/queues/q1/messages/{message_id}?claim_id={claim_id}"


# -- delete one: the claim rules ---------------------------------------------------


def test_deleting_an_absent_message_is_204(client):
    assert client.simulate_delete(f"{MESSAGES}/{uuid.uuid4()}").status_code == 204


def test_unclaimed_message_is_deleted_without_claim_id(client):
    (message_id,) = post(client, "q1", "a")
    result = client.simulate_delete(f"{MESSAGES}/{message_id}")
    assert result.status_code == 204
    assert result.content == b""
    assert not exists(client, message_id)


def test_claimed_message_cannot_be_deleted_without_claim_id(client):
    (message_id,) = post(client, "q1", "a")
    claim(client, "q1")
    assert_error(client.simulate_delete(f"{MESSAGES}/{message_id}"), 403)
    assert exists(client, message_id)


def test_deleting_a_claimed_message_with_an_unknown_claim_id_is_400(client):
    (message_id,) = post(client, "q1", "a")
    claim(client, "q1")
    result = client.simulate_delete(f"{MESSAGES}/{message_id}", params={"claim_id": str(uuid.uuid4())})
    assert_error(result, 400)
    assert exists(client, message_id)


def test_deleting_an_unclaimed_message_with_an_unknown_claim_id_is_400(client):
    (message_id,) = post(client, "q1", "a")
    result = client.simulate_delete(f"{MESSAGES}/{message_id}", params={"claim_id": str(uuid.uuid4())})
    assert_error(result, 400)
    assert exists(client, message_id)


def test_deleting_with_an_expired_claim_id_is_400(client, clock):
    (message_id,) = post(client, "q1", "a")
    claim_id, _ = claim(client, "q1", ttl=60)
    clock.advance(61)
    assert_error(client.simulate_delete(f"{MESSAGES}/{message_id}", params={"claim_id": claim_id}), 400)
    assert exists(client, message_id)


def test_deleting_with_the_id_of_a_released_claim_is_400(client):
    (message_id,) = post(client, "q1", "a")
    claim_id, _ = claim(client, "q1")
    client.simulate_delete(f"/v2/queues/q1/claims/{claim_id}")
    assert_error(client.simulate_delete(f"{MESSAGES}/{message_id}", params={"claim_id": claim_id}), 400)
    assert exists(client, message_id)


def test_deleting_an_unclaimed_message_with_a_live_claim_id_is_400(client):
    post(client, "q1", "a")
    (unclaimed,) = post(client, "q1", "b")
    claim_id, _ = claim(client, "q1", limit=1)
    assert_error(client.simulate_delete(f"{MESSAGES}/{unclaimed}", params={"claim_id": claim_id}), 400)
    assert exists(client, unclaimed)


def test_deleting_a_message_held_by_another_live_claim_is_403(client):
    first, second = post(client, "q1", "a", "b")
    first_claim, _ = claim(client, "q1", limit=1)
    second_claim, _ = claim(client, "q1", limit=1)
    assert_error(client.simulate_delete(f"{MESSAGES}/{first}", params={"claim_id": second_claim}), 403)
    assert exists(client, first)


def test_deleting_a_claimed_message_with_its_claim_id_is_204(client):
    (message_id,) = post(client, "q1", "a")
    claim_id, _ = claim(client, "q1")
    result = client.simulate_delete(f"{MESSAGES}/{message_id}", params={"claim_id": claim_id})
    assert result.status_code == 204
    assert not exists(client, message_id)


def test_deleting_a_message_whose_claim_lapsed_needs_no_claim_id(client, clock):
    (message_id,) = post(client, "q1", "a")
    claim(client, "q1", ttl=60)
    clock.advance(61)
    assert client.simulate_delete(f"{MESSAGES}/{message_id}").status_code == 204
    assert not exists(client, message_id)


def test_deleting_with_the_href_a_claim_returned_works(client):
    post(client, "q1", "a")
    _, (message,) = claim(client, "q1")
    path, _, query = message["href"].partition("?")
    assert client.simulate_delete(path, query_string=query).status_code == 204
    assert listing(client, include_claimed="true") == []


# -- release with a reason: routing and validation only -----------------------------


def test_release_without_claim_id_is_400(client):
    (message_id,) = post(client, "q1", "a")
    assert_error(client.simulate_post(f"{MESSAGES}/{message_id}/release"), 400)


@pytest.mark.parametrize("document", [{"error": 5}, {"error_type": ["E"]}, {"reason": "x"}, ["error"]],
                         ids=["error-not-string", "type-not-string", "unknown-key", "not-an-object"])
def test_release_with_a_bad_body_is_400(client, document):
    (message_id,) = post(client, "q1", "a")
    claim_id, _ = claim(client, "q1")
    result = client.simulate_post(f"{MESSAGES}/{message_id}/release", params={"claim_id": claim_id},
                                  json=document)
    assert_error(result, 400)


def test_release_with_its_claim_id_answers_204(client):
    (message_id,) = post(client, "q1", "a")
    claim_id, _ = claim(client, "q1")
    result = client.simulate_post(f"{MESSAGES}/{message_id}/release", params={"claim_id": claim_id},
                                  json={"error": "boom", "error_type": "ValueError"})
    assert result.status_code == 204


def test_a_bad_include_dead_letter_on_a_pop_is_refused_before_anything_is_taken(client):
    post(client, "q1", {"keep": 1})
    result = client.simulate_delete("/v2/queues/q1/messages",
                                    params={"pop": 1, "include_dead_letter": "maybe"})
    assert "include_dead_letter" in assert_error(result, 400)["description"]
    listed = client.simulate_get("/v2/queues/q1/messages", params={"echo": "true"}).json["messages"]
    assert [m["body"] for m in listed] == [{"keep": 1}]


def test_the_next_link_of_a_listing_keeps_include_dead_letter(client):
    post(client, "q1", {"n": 1}, {"n": 2})
    result = client.simulate_get("/v2/queues/q1/messages",
                                 params={"echo": "true", "limit": 1, "include_dead_letter": "false"})
    (link,) = result.json["links"]
    assert "include_dead_letter=false" in link["href"]
