"""The default dead-letter queue ([queues] default_dead_letter_queue) and ``_max_message_ttl``, over HTTP.

Sweeps run through the service on the same store and clock, as the sweeper
thread of a worker runs them.
"""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import assert_error, headers
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage

DEFAULT = "dead-letters"


def put_queue(client, name, metadata=None):
    return client.simulate_put(f"/v2/queues/{name}", json=metadata if metadata is not None else {})


def post(client, queue, *items):
    response = client.simulate_post(f"/v2/queues/{queue}/messages", json={"messages": list(items)})
    assert response.status_code == 201, response.text
    return [href.rsplit("/", 1)[1] for href in response.json["resources"]]


def claim(client, queue, **params):
    return client.simulate_post(f"/v2/queues/{queue}/claims", params={"limit": 10, **params},
                                json={"ttl": 60, "grace": 60})


def release_claim(client, queue, response):
    assert response.status_code == 201, response.text
    assert client.simulate_delete(response.headers["location"]).status_code == 204


def message(client, queue, message_id):
    return client.simulate_get(f"/v2/queues/{queue}/messages/{message_id}",
                               params={"include_dead_letter": "true"})


@pytest.fixture
def with_default(make_client):
    """A client of project-a on an app whose settings name a default dead-letter queue."""
    return make_client(headers("project-a"), default_dead_letter_queue=DEFAULT)


@pytest.fixture
def sweep(settings, clock):
    """Run one sweep of the store, with the given default dead-letter queue setting."""
    def run(default: str = DEFAULT):
        changed = settings.replace(default_dead_letter_queue=default)
        return Messaging(open_storage(settings.storage_uri), changed, clock).sweep()
    return run


# -- the default dead-letter queue -----------------------------------------------------------

def test_without_the_setting_a_queue_with_only_a_max_claim_count_never_moves(client, clock):
    assert put_queue(client, DEFAULT).status_code == 201
    assert put_queue(client, "orders", {"_max_claim_count": 1}).status_code == 201
    kept, = post(client, "orders", {"body": 1})
    release_claim(client, "orders", claim(client, "orders"))
    again = claim(client, "orders")
    assert [m["id"] for m in again.json["messages"]] == [kept]
    assert client.simulate_get(f"/v2/queues/{DEFAULT}/stats").json["messages"]["total"] == 0


def test_dead_letter_on_expiry_alone_is_refused_without_the_setting_and_accepted_with_it(client,
                                                                                          with_default):
    body = assert_error(put_queue(client, "orders", {"_dead_letter_on_expiry": True}), 400)
    assert body["description"] == "_dead_letter_on_expiry needs _dead_letter_queue."
    assert put_queue(with_default, "orders", {"_dead_letter_on_expiry": True}).status_code == 201


def test_the_setting_adds_nothing_to_a_queues_representation(client, with_default):
    assert put_queue(with_default, "orders", {"_max_claim_count": 2}).status_code == 201
    shown = with_default.simulate_get("/v2/queues/orders").json
    assert shown == {"_max_messages_post_size": 262144, "_default_message_ttl": 3600,
                     "_default_message_delay": 0, "_dead_letter_queue": None,
                     "_dead_letter_queue_messages_ttl": None, "_max_claim_count": 2,
                     "_enable_encrypt_messages": False}


def test_an_exhausted_message_moves_into_the_default_dlq_and_its_provenance_says_so(with_default):
    assert put_queue(with_default, DEFAULT).status_code == 201
    assert put_queue(with_default, "orders", {"_max_claim_count": 1}).status_code == 201
    doomed, = post(with_default, "orders", {"body": {"order": 7}})
    first = claim(with_default, "orders")
    release_claim(with_default, "orders", first)
    assert claim(with_default, "orders").status_code == 204
    moved = message(with_default, DEFAULT, doomed)
    assert moved.status_code == 200
    assert moved.json["body"] == {"order": 7}
    provenance = moved.json["dead_letter"]
    assert (provenance["source_queue"], provenance["reason"], provenance["claim_count"]) == (
        "orders", "max_claims", 1)
    assert provenance["default_dead_letter_queue"] is True
    assert provenance["last_claim_id"] == first.headers["location"].rsplit("/", 1)[1]


def test_a_queues_own_dlq_wins_and_its_provenance_does_not_mention_the_default(with_default):
    for name in (DEFAULT, "own"):
        assert put_queue(with_default, name).status_code == 201
    own = {"_max_claim_count": 1, "_dead_letter_queue": "own"}
    assert put_queue(with_default, "orders", own).status_code == 201
    doomed, = post(with_default, "orders", {"body": 1})
    release_claim(with_default, "orders", claim(with_default, "orders"))
    assert claim(with_default, "orders").status_code == 204
    provenance = message(with_default, "own", doomed).json["dead_letter"]
    assert "default_dead_letter_queue" not in provenance
    assert message(with_default, DEFAULT, doomed).status_code == 404


def test_while_the_default_dlq_does_not_exist_an_exhausted_message_is_kept_and_claimable(with_default, sweep):
    assert put_queue(with_default, "orders", {"_max_claim_count": 1}).status_code == 201
    kept, = post(with_default, "orders", {"body": 1})
    release_claim(with_default, "orders", claim(with_default, "orders"))
    assert sweep().dead_lettered == 0 and sweep().discarded == 0
    again = claim(with_default, "orders")
    assert [(m["id"], m["claim_count"]) for m in again.json["messages"]] == [(kept, 2)]
    release_claim(with_default, "orders", again)
    assert with_default.simulate_get(f"/v2/queues/{DEFAULT}/stats").json["messages"]["total"] == 0
    assert put_queue(with_default, DEFAULT).status_code == 201
    assert sweep().dead_lettered == 1
    assert message(with_default, DEFAULT, kept).json["dead_letter"]["default_dead_letter_queue"] is True


def test_the_default_dlq_is_per_project(with_default, make_client):
    project_b = make_client(headers("project-b"), default_dead_letter_queue=DEFAULT)
    assert put_queue(project_b, DEFAULT).status_code == 201
    assert put_queue(with_default, "orders", {"_max_claim_count": 1}).status_code == 201
    kept, = post(with_default, "orders", {"body": 1})
    release_claim(with_default, "orders", claim(with_default, "orders"))
    assert [m["id"] for m in claim(with_default, "orders").json["messages"]] == [kept]
    assert project_b.simulate_get(f"/v2/queues/{DEFAULT}/stats").json["messages"]["total"] == 0


def test_the_default_dlq_never_dead_letters_into_itself(with_default, sweep):
    assert put_queue(with_default, DEFAULT, {"_max_claim_count": 1}).status_code == 201
    kept, = post(with_default, DEFAULT, {"body": 1})
    release_claim(with_default, DEFAULT, claim(with_default, DEFAULT))
    assert sweep().dead_lettered == 0
    again = claim(with_default, DEFAULT, include_dead_letter="true")
    assert [(m["id"], m["claim_count"]) for m in again.json["messages"]] == [(kept, 2)]
    assert "dead_letter" not in again.json["messages"][0]


def test_an_expired_message_is_kept_until_the_default_dlq_exists_then_moved(with_default, clock, sweep):
    assert put_queue(with_default, "orders", {"_dead_letter_on_expiry": True}).status_code == 201
    kept, = post(with_default, "orders", {"body": {"late": True}, "ttl": 60})
    clock.advance(61)
    result = sweep()
    assert (result.dead_lettered, result.discarded) == (0, 0)
    assert message(with_default, "orders", kept).status_code == 404
    assert put_queue(with_default, DEFAULT).status_code == 201
    result = sweep()
    assert (result.dead_lettered, result.discarded) == (1, 0)
    moved = message(with_default, DEFAULT, kept).json
    assert moved["body"] == {"late": True}
    # 61 s in orders, then its own 60 s again from the move: ttl counts from the post, as age does
    assert (moved["ttl"], moved["age"]) == (121, 61)
    assert (moved["dead_letter"]["reason"], moved["dead_letter"]["default_dead_letter_queue"]) == (
        "expired", True)


def test_without_the_setting_a_sweep_discards_what_expired_into_a_missing_default(client, clock, sweep,
                                                                                  with_default):
    assert put_queue(with_default, "orders", {"_dead_letter_on_expiry": True}).status_code == 201
    post(with_default, "orders", {"body": 1, "ttl": 60})
    clock.advance(61)
    result = sweep("")
    assert (result.dead_lettered, result.discarded) == (0, 1)


# -- _max_message_ttl -----------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "description"), [
    (59, "_max_message_ttl must be between 60 and 1209600, got 59."),
    (1209601, "_max_message_ttl must be between 60 and 1209600, got 1209601."),
    ("600", "_max_message_ttl must be an integer, got a string."),
    (True, "_max_message_ttl must be an integer, got true."),
    (600.5, "_max_message_ttl must be an integer, got 600.5."),
])
def test_a_bad_max_message_ttl_is_400_naming_the_key_and_the_rule(client, value, description):
    body = assert_error(put_queue(client, "orders", {"_max_message_ttl": value}), 400)
    assert body["description"] == description


def test_the_max_message_ttl_shows_only_when_set_and_patch_sets_and_removes_it(client):
    assert put_queue(client, "orders").status_code == 201
    assert "_max_message_ttl" not in client.simulate_get("/v2/queues/orders").json
    patch = {"Content-Type": "application/openstack-messaging-v2.0-json-patch"}
    add = [{"op": "add", "path": "/metadata/_max_message_ttl", "value": 300}]
    added = client.simulate_patch("/v2/queues/orders", headers=patch, body=json.dumps(add))
    assert added.status_code == 200 and added.json["_max_message_ttl"] == 300
    assert client.simulate_get("/v2/queues/orders").json["_max_message_ttl"] == 300
    removed = client.simulate_patch("/v2/queues/orders", headers=patch,
                                    body=json.dumps([{"op": "remove", "path": "/metadata/_max_message_ttl"}]))
    assert removed.status_code == 200 and "_max_message_ttl" not in removed.json


def test_posted_and_default_ttls_above_the_max_are_lowered_to_it_and_lower_ones_kept(client):
    assert put_queue(client, "orders", {"_max_message_ttl": 300}).status_code == 201
    long, exact, short, default = post(client, "orders", {"body": 1, "ttl": 86400}, {"body": 2, "ttl": 300},
                                       {"body": 3, "ttl": 120}, {"body": 4})
    ttls = [message(client, "orders", m).json["ttl"] for m in (long, exact, short, default)]
    assert ttls == [300, 300, 120, 300]


def test_a_capped_message_expires_at_the_max_ttl(client, clock):
    assert put_queue(client, "orders", {"_max_message_ttl": 120}).status_code == 201
    capped, = post(client, "orders", {"body": 1, "ttl": 3600})
    clock.advance(119)
    assert message(client, "orders", capped).status_code == 200
    clock.advance(1)
    assert message(client, "orders", capped).status_code == 404


def test_solaces_delayed_consumption_recipe_through_http(client, clock, sweep):
    """Queue B (max ttl T, dead letters on expiry into A): A's consumers see a message T s after its post."""
    assert put_queue(client, "a").status_code == 201
    assert put_queue(client, "b", {"_max_message_ttl": 120, "_dead_letter_on_expiry": True,
                                   "_dead_letter_queue": "a"}).status_code == 201
    first, = post(client, "b", {"body": {"n": 1}})
    clock.advance(30)
    second, = post(client, "b", {"body": {"n": 2}, "ttl": 86400})
    clock.advance(89)  # 119 s after the first post
    sweep("")
    assert claim(client, "a").status_code == 204
    clock.advance(1)  # 120 s after the first post
    assert sweep("").dead_lettered == 1
    seen = claim(client, "a", include_dead_letter="true")
    assert [(m["id"], m["body"], m["dead_letter"]["reason"]) for m in seen.json["messages"]] == [
        (first, {"n": 1}, "expired")]
    clock.advance(29)  # 119 s after the second post
    sweep("")
    assert message(client, "a", second).status_code == 404
    clock.advance(1)
    assert sweep("").dead_lettered == 1
    assert [m["id"] for m in claim(client, "a").json["messages"]] == [second]


def test_a_message_moved_on_expiry_shows_a_ttl_no_lower_than_its_age(client, clock, sweep):
    """Measured before: ttl 60 at age 66; the ttl is the message's lifetime from its post."""
    assert put_queue(client, "a").status_code == 201
    metadata = {"_dead_letter_on_expiry": True, "_dead_letter_queue": "a"}
    assert put_queue(client, "b", metadata).status_code == 201
    expiring, = post(client, "b", {"body": {"n": 1}, "ttl": 60})
    clock.advance(66)
    assert sweep("").dead_lettered == 1
    moved = message(client, "a", expiring).json
    assert (moved["ttl"], moved["age"]) == (126, 66)
    listed = client.simulate_get("/v2/queues/a/messages", params={"echo": "true"}).json["messages"]
    assert [(m["ttl"], m["age"]) for m in listed] == [(126, 66)]
    clock.advance(59)
    assert message(client, "a", expiring).json["age"] == 125
    clock.advance(1)
    assert message(client, "a", expiring).status_code == 404
