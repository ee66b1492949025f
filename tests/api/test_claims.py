"""Claim routes: create, get, renew, release; counts, expiry and exclusivity (docs/api.rst, "Claims")."""

from __future__ import annotations

import uuid

import pytest

from tests.api.helpers import assert_error, claim, post

CLAIMS = "/v2/queues/q1/claims"
MESSAGES = "/v2/queues/q1/messages"


def bodies(messages):
    return [m["body"] for m in messages]


def claimable(client, queue="q1"):
    """Return the bodies a new claim would get (and then release it)."""
    result = client.simulate_post(f"/v2/queues/{queue}/claims", params={"limit": 20})
    if result.status_code == 204:
        return []
    client.simulate_delete(result.headers["location"])
    return bodies(result.json["messages"])


# -- create ---------------------------------------------------------------------


def test_claim_answers_201_with_the_messages_and_a_location(client, clock):
    (message_id,) = post(client, "q1", {"job": 1})
    clock.advance(2)
    result = client.simulate_post(CLAIMS, json={"ttl": 120, "grace": 60})
    assert result.status_code == 201
    location = result.headers["location"]
    assert location.startswith("/v2/queues/q1/claims/")
    claim_id = location.rsplit("/", 1)[1]
    assert claim_id
    (message,) = result.json["messages"]
    assert {k: message[k] for k in ("id", "href", "ttl", "age", "body", "claim_count")} == {
        "id": message_id,
        "href": f"/v2/queues/q1/messages/{message_id}?claim_id={claim_id}",
        "ttl": 3600,
        "age": 2,
        "body": {"job": 1},
        "claim_count": 1,
    }


def test_claim_without_a_body_uses_the_defaults(client):
    post(client, "q1", "a")
    result = client.simulate_post(CLAIMS)
    assert result.status_code == 201
    claim_id = result.headers["location"].rsplit("/", 1)[1]
    assert client.simulate_get(f"{CLAIMS}/{claim_id}").json["ttl"] == 300


def test_claim_of_an_empty_queue_is_204_with_no_body(client):
    client.simulate_put("/v2/queues/q1")
    result = client.simulate_post(CLAIMS)
    assert result.status_code == 204
    assert result.content == b""
    assert "location" not in result.headers


def test_claim_of_an_unknown_queue_is_204_with_no_body(client):
    result = client.simulate_post("/v2/queues/never-made/claims")
    assert result.status_code == 204
    assert result.content == b""


def test_claim_takes_messages_first_in_first_out_up_to_the_limit(client):
    post(client, "q1", *range(5))
    _, messages = claim(client, "q1", limit=3)
    assert bodies(messages) == [0, 1, 2]
    _, messages = claim(client, "q1", limit=3)
    assert bodies(messages) == [3, 4]


def test_claim_default_limit_is_10(client):
    post(client, "q1", *range(12))
    _, messages = claim(client, "q1")
    assert len(messages) == 10


def test_claim_accepts_a_limit_of_20(client):
    post(client, "q1", *range(20))
    post(client, "q1", *range(20, 25))
    _, messages = claim(client, "q1", limit=20)
    assert len(messages) == 20


@pytest.mark.parametrize("limit", ["0", "21", "-3", "many", "2.0"])
def test_claim_with_a_limit_outside_1_to_20_is_400(client, limit):
    post(client, "q1", "a")
    assert_error(client.simulate_post(CLAIMS, params={"limit": limit}), 400)
    assert claimable(client) == ["a"]


@pytest.mark.parametrize("document", [
    {"ttl": 59}, {"ttl": 43201}, {"ttl": "300"}, {"ttl": True}, {"ttl": 300.5},
    {"grace": 59}, {"grace": 43201}, {"grace": "60"}, {"grace": False},
    ["ttl", 300], "ttl",
], ids=["ttl-59", "ttl-43201", "ttl-string", "ttl-bool", "ttl-float", "grace-59", "grace-43201",
        "grace-string", "grace-bool", "list", "string"])
def test_claim_with_a_bad_ttl_or_grace_is_400(client, document):
    post(client, "q1", "a")
    assert_error(client.simulate_post(CLAIMS, json=document), 400)
    assert claimable(client) == ["a"]


def test_null_ttl_and_grace_mean_the_defaults_as_zaqarclient_sends_them(client):
    post(client, "q1", "a")
    response = client.simulate_post(CLAIMS, json={"ttl": None, "grace": None})
    assert response.status_code == 201
    claim_href = response.headers["location"]
    assert client.simulate_get(claim_href).json["ttl"] == 300


def test_claim_with_invalid_json_is_400(client):
    post(client, "q1", "a")
    assert_error(client.simulate_post(CLAIMS, body="{ttl: 300}"), 400)


def test_claim_with_an_oversized_body_is_400(client):
    post(client, "q1", "a")
    assert_error(client.simulate_post(CLAIMS, json={"ttl": 300, "padding": "x" * 5000}), 400)


def test_claim_accepts_ttl_and_grace_at_their_bounds(client):
    post(client, "q1", "a", "b")
    claim(client, "q1", limit=1, ttl=60, grace=60)
    claim(client, "q1", limit=1, ttl=43200, grace=43200)


# -- get ------------------------------------------------------------------------


def test_get_claim_shows_age_ttl_href_and_its_messages(client, clock):
    first, second = post(client, "q1", "a", "b")
    claim_id, _ = claim(client, "q1", ttl=120)
    clock.advance(10)
    result = client.simulate_get(f"{CLAIMS}/{claim_id}")
    assert result.status_code == 200
    body = result.json
    assert body["age"] == 10
    assert body["ttl"] == 120
    assert body["href"] == f"/v2/queues/q1/claims/{claim_id}"
    assert [m["id"] for m in body["messages"]] == [first, second]
    assert body["messages"][0]["href"] == f"/v2/queues/q1/messages/{first}?claim_id={claim_id}"
    assert body["messages"][0]["claim_count"] == 1


def test_get_claim_no_longer_lists_a_deleted_message(client):
    first, second = post(client, "q1", "a", "b")
    claim_id, _ = claim(client, "q1")
    client.simulate_delete(f"{MESSAGES}/{first}", params={"claim_id": claim_id})
    messages = client.simulate_get(f"{CLAIMS}/{claim_id}").json["messages"]
    assert [m["id"] for m in messages] == [second]


def test_get_of_an_unknown_claim_is_404(client):
    post(client, "q1", "a")
    claim(client, "q1")
    assert_error(client.simulate_get(f"{CLAIMS}/{uuid.uuid4()}"), 404, "Not found")


def test_get_of_an_expired_claim_is_404(client, clock):
    post(client, "q1", "a")
    claim_id, _ = claim(client, "q1", ttl=60)
    clock.advance(59)
    assert client.simulate_get(f"{CLAIMS}/{claim_id}").status_code == 200
    clock.advance(1)
    assert_error(client.simulate_get(f"{CLAIMS}/{claim_id}"), 404)


def test_get_of_a_claim_through_another_queue_is_404(client):
    post(client, "q1", "a")
    claim_id, _ = claim(client, "q1")
    assert_error(client.simulate_get(f"/v2/queues/q2/claims/{claim_id}"), 404)


# -- renew ----------------------------------------------------------------------


def test_patch_renews_the_claim_from_now(client, clock):
    post(client, "q1", "a")
    claim_id, _ = claim(client, "q1", ttl=60)
    clock.advance(50)
    result = client.simulate_patch(f"{CLAIMS}/{claim_id}", json={"ttl": 90, "grace": 60})
    assert result.status_code == 204
    assert result.content == b""
    clock.advance(80)
    renewed = client.simulate_get(f"{CLAIMS}/{claim_id}")
    assert renewed.status_code == 200
    assert renewed.json["ttl"] == 90
    assert claimable(client) == []
    clock.advance(11)
    assert_error(client.simulate_get(f"{CLAIMS}/{claim_id}"), 404)
    assert claimable(client) == ["a"]


def test_patch_renewal_extends_the_message_expiry_to_the_new_claim_end_plus_grace(client, clock):
    (message_id,) = post(client, "q1", "a", ttl=60)
    claim_id, _ = claim(client, "q1", ttl=60, grace=60)
    clock.advance(50)
    client.simulate_patch(f"{CLAIMS}/{claim_id}", json={"ttl": 300, "grace": 100})
    # expiry is now at least 50 + 300 + 100 seconds after the post
    assert client.simulate_get(f"{MESSAGES}/{message_id}").json["ttl"] == 450
    clock.advance(399)
    assert client.simulate_get(f"{MESSAGES}/{message_id}").status_code == 200
    clock.advance(2)
    assert_error(client.simulate_get(f"{MESSAGES}/{message_id}"), 404)


def test_patch_of_an_unknown_claim_is_404(client):
    assert_error(client.simulate_patch(f"{CLAIMS}/{uuid.uuid4()}", json={"ttl": 60}), 404)


def test_patch_of_an_expired_claim_is_404(client, clock):
    post(client, "q1", "a")
    claim_id, _ = claim(client, "q1", ttl=60)
    clock.advance(61)
    assert_error(client.simulate_patch(f"{CLAIMS}/{claim_id}", json={"ttl": 60}), 404)
    assert claimable(client) == ["a"]


@pytest.mark.parametrize("document", [{"ttl": 59}, {"grace": 43201}, {"ttl": True}, ["ttl"]])
def test_patch_with_a_bad_ttl_or_grace_is_400(client, document):
    post(client, "q1", "a")
    claim_id, _ = claim(client, "q1", ttl=60)
    assert_error(client.simulate_patch(f"{CLAIMS}/{claim_id}", json=document), 400)
    assert client.simulate_get(f"{CLAIMS}/{claim_id}").json["ttl"] == 60


# -- release --------------------------------------------------------------------


def test_delete_releases_the_claim_and_its_messages_are_claimable_at_once(client):
    post(client, "q1", "a", "b")
    claim_id, _ = claim(client, "q1")
    assert client.simulate_post(CLAIMS).status_code == 204
    result = client.simulate_delete(f"{CLAIMS}/{claim_id}")
    assert result.status_code == 204
    assert result.content == b""
    _, messages = claim(client, "q1")
    assert bodies(messages) == ["a", "b"]


def test_released_messages_are_listed_as_unclaimed(client):
    post(client, "q1", "a")
    claim_id, _ = claim(client, "q1")
    client.simulate_delete(f"{CLAIMS}/{claim_id}")
    (message,) = client.simulate_get(MESSAGES, params={"echo": "true"}).json["messages"]
    assert "?" not in message["href"]


def test_a_released_claim_is_gone(client):
    post(client, "q1", "a")
    claim_id, _ = claim(client, "q1")
    client.simulate_delete(f"{CLAIMS}/{claim_id}")
    assert_error(client.simulate_get(f"{CLAIMS}/{claim_id}"), 404)


def test_deleting_an_unknown_claim_is_204(client):
    assert client.simulate_delete(f"{CLAIMS}/{uuid.uuid4()}").status_code == 204


# -- counts, expiry, exclusivity ---------------------------------------------------


def test_claim_count_increments_with_each_claim(client, clock):
    (message_id,) = post(client, "q1", "a")
    for expected in (1, 2, 3):
        claim_id, (message,) = claim(client, "q1")
        assert message["claim_count"] == expected
        client.simulate_delete(f"{CLAIMS}/{claim_id}")
    claim(client, "q1", ttl=60)
    clock.advance(61)
    assert client.simulate_get(f"{MESSAGES}/{message_id}").json["claim_count"] == 4
    _, (message,) = claim(client, "q1")
    assert message["claim_count"] == 5


def test_claim_extends_message_expiry_to_claim_end_plus_grace(client, clock):
    (message_id,) = post(client, "q1", "a", ttl=60)
    claim(client, "q1", ttl=300, grace=60)
    assert client.simulate_get(f"{MESSAGES}/{message_id}").json["ttl"] == 360
    clock.advance(359)
    assert client.simulate_get(f"{MESSAGES}/{message_id}").status_code == 200
    clock.advance(2)
    assert_error(client.simulate_get(f"{MESSAGES}/{message_id}"), 404)


def test_claim_does_not_shorten_a_longer_message_ttl(client):
    (message_id,) = post(client, "q1", "a", ttl=7200)
    claim(client, "q1", ttl=300, grace=60)
    assert client.simulate_get(f"{MESSAGES}/{message_id}").json["ttl"] == 7200


def test_a_claimed_message_is_not_claimable_by_another_claim_until_it_lapses(client, other_client, clock):
    post(client, "q1", "a", "b", "c")
    _, first = claim(client, "q1", limit=2, ttl=60)
    _, second = claim(other_client, "q1", limit=5, ttl=120)
    assert bodies(first) == ["a", "b"]
    assert bodies(second) == ["c"]
    assert client.simulate_post(CLAIMS).status_code == 204
    clock.advance(59)
    assert client.simulate_post(CLAIMS).status_code == 204
    clock.advance(2)
    _, third = claim(client, "q1", limit=5)
    assert bodies(third) == ["a", "b"]


def test_expired_messages_are_not_claimable(client, clock):
    post(client, "q1", "short", ttl=60)
    post(client, "q1", "long", ttl=600)
    clock.advance(61)
    _, messages = claim(client, "q1")
    assert bodies(messages) == ["long"]


def test_a_bad_include_dead_letter_on_a_claim_is_refused_before_anything_is_claimed(client):
    post(client, "q1", {"job": 1})
    result = client.simulate_post(CLAIMS, params={"include_dead_letter": "maybe"})
    assert "include_dead_letter" in assert_error(result, 400)["description"]
    (message,) = client.simulate_get(MESSAGES, params={"echo": "true"}).json["messages"]
    assert message["claim_count"] == 0
    assert claimable(client) == [{"job": 1}]
