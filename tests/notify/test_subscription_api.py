"""The subscription API through falcon's TestClient: Zaqar v2 shapes, answers and validation."""

from __future__ import annotations

import urllib.parse
import uuid

import falcon.testing
import pytest

from tests.notify.conftest import ALLOW_LOOPBACK
from zaqar_lite.api.app import create_app
from zaqar_lite.config import NotifierSettings, load_settings
from zaqar_lite.notify import state
from zaqar_lite.notify.state import Delivery
from zaqar_lite.storage import open_storage

URL = "http://127.0.0.1:9000/hook"
BASE = "/v2/queues/orders/subscriptions"


@pytest.fixture
def settings(tmp_path):
    """Default settings on a fresh SQLite file that skips the fsync of each commit (speed only),
    with webhooks to loopback allowed."""
    return load_settings(None, storage_uri=f"sqlite:///{tmp_path}/zaqar.db?synchronous=normal").replace(
        notifier=NotifierSettings(allowed_targets=ALLOW_LOOPBACK))


def create(client, subscriber: str = URL, queue: str = "orders", **fields) -> str:
    result = client.simulate_post(f"/v2/queues/{queue}/subscriptions",
                                  json={"subscriber": subscriber, **fields})
    assert result.status_code == 201, result.text
    return result.json["subscription_id"]


def assert_400_naming(result: falcon.testing.Result, field: str) -> None:
    assert result.status_code == 400, result.text
    assert set(result.json) == {"title", "description"}
    assert field in result.json["description"], result.json


def follow(client, href: str) -> falcon.testing.Result:
    parts = urllib.parse.urlsplit(href)
    return client.simulate_get(parts.path, query_string=parts.query)


# -- shapes and answers ---------------------------------------------------------


def test_create_answers_201_with_the_id_and_get_shows_the_zaqar_fields(client):
    result = client.simulate_post(BASE, json={"subscriber": URL, "ttl": 600, "options": {"k": "v"}})
    assert result.status_code == 201
    subscription_id = result.json["subscription_id"]
    assert result.headers["location"] == f"{BASE}/{subscription_id}"
    shown = client.simulate_get(f"{BASE}/{subscription_id}").json
    assert shown["id"] == subscription_id
    assert shown["source"] == "orders"
    assert shown["subscriber"] == URL
    assert shown["ttl"] == 600
    assert shown["age"] == 0
    assert shown["options"] == {"k": "v"}
    assert shown["confirmed"] is False
    assert shown["status"] == "active"
    assert shown["delivery"]["delivered"] == 0
    assert shown["delivery"]["last_error"] is None


def test_the_longest_ttl_is_100_billion_seconds(client):
    subscription_id = create(client, ttl=100_000_000_000)
    assert client.simulate_get(f"{BASE}/{subscription_id}").json["ttl"] == 100_000_000_000


def test_ttl_and_options_default_to_3600_and_an_empty_object(client):
    shown = client.simulate_get(f"{BASE}/{create(client)}").json
    assert (shown["ttl"], shown["options"]) == (3600, {})


def test_create_creates_the_queue(client):
    create(client, queue="fresh")
    assert "fresh" in [q["name"] for q in client.simulate_get("/v2/queues").json["queues"]]


def test_the_same_unconfirmed_subscriber_again_answers_201_with_the_existing_id(client):
    first = create(client)
    assert create(client, ttl=900) == first
    assert client.simulate_get(f"{BASE}/{first}").json["ttl"] == 3600


def test_the_same_confirmed_subscriber_again_is_a_409(client):
    first = create(client)
    assert client.simulate_put(f"{BASE}/{first}/confirm", json={"confirmed": True}).status_code == 204
    result = client.simulate_post(BASE, json={"subscriber": URL})
    assert result.status_code == 409
    assert "already exists" in result.json["description"]


def test_the_same_subscriber_on_another_queue_is_another_subscription(client):
    assert create(client, queue="a") != create(client, queue="b")


def test_confirm_sets_and_clears_the_flag(client):
    subscription_id = create(client)
    for flag in (True, False):
        result = client.simulate_put(f"{BASE}/{subscription_id}/confirm", json={"confirmed": flag})
        assert result.status_code == 204
        assert client.simulate_get(f"{BASE}/{subscription_id}").json["confirmed"] is flag


def test_list_is_paginated_with_marker_and_limit_and_next_links(client):
    made = sorted(create(client, f"{URL}/{n}") for n in range(3))
    first = client.simulate_get(BASE, params={"limit": 2}).json
    assert [s["id"] for s in first["subscriptions"]] == made[:2]
    second = follow(client, first["links"][0]["href"]).json
    assert [s["id"] for s in second["subscriptions"]] == made[2:]
    last = follow(client, second["links"][0]["href"]).json
    assert last == {"subscriptions": [], "links": []}


def test_an_unknown_queue_lists_no_subscriptions(client):
    assert client.simulate_get("/v2/queues/nothing/subscriptions").json == {"subscriptions": [], "links": []}


@pytest.mark.parametrize("limit", ["0", "21", "ten"])
def test_a_bad_list_limit_is_a_400_naming_limit(client, limit):
    assert_400_naming(client.simulate_get(BASE, params={"limit": limit}), "limit")


def test_patch_changes_the_fields_it_names_and_answers_204(client):
    subscription_id = create(client, options={"a": 1})
    result = client.simulate_patch(f"{BASE}/{subscription_id}",
                                   json={"subscriber": "https://example.com/new", "options": {"b": 2}})
    assert result.status_code == 204
    shown = client.simulate_get(f"{BASE}/{subscription_id}").json
    assert shown["subscriber"] == "https://example.com/new"
    assert (shown["options"], shown["ttl"]) == ({"b": 2}, 3600)


def test_patch_to_a_subscriber_the_queue_already_has_is_a_409(client):
    create(client, f"{URL}/taken")
    subscription_id = create(client)
    result = client.simulate_patch(f"{BASE}/{subscription_id}", json={"subscriber": f"{URL}/taken"})
    assert result.status_code == 409


def test_a_subscriber_url_is_free_again_once_a_patch_moved_away_from_it(client):
    moved = create(client)
    client.simulate_patch(f"{BASE}/{moved}", json={"subscriber": f"{URL}/elsewhere"})
    assert create(client) != moved


def test_a_subscription_expires_after_its_ttl(client, clock):
    subscription_id = create(client, ttl=60)
    clock.advance(61)
    assert client.simulate_get(f"{BASE}/{subscription_id}").status_code == 404
    assert client.simulate_get(BASE).json["subscriptions"] == []
    assert create(client) != subscription_id


def test_a_patched_ttl_counts_from_the_patch(client, clock):
    subscription_id = create(client, ttl=60)
    clock.advance(50)
    client.simulate_patch(f"{BASE}/{subscription_id}", json={"ttl": 60})
    clock.advance(50)
    assert client.simulate_get(f"{BASE}/{subscription_id}").status_code == 200


def test_delete_answers_204_also_for_an_absent_subscription(client):
    subscription_id = create(client)
    assert client.simulate_delete(f"{BASE}/{subscription_id}").status_code == 204
    assert client.simulate_get(f"{BASE}/{subscription_id}").status_code == 404
    assert client.simulate_delete(f"{BASE}/{subscription_id}").status_code == 204


@pytest.mark.parametrize(("method", "suffix", "body"), [
    ("GET", "", None), ("PATCH", "", {"ttl": 100}), ("PUT", "/confirm", {"confirmed": True}),
    ("POST", "/resume", None)])
def test_an_unknown_subscription_is_a_404(client, method, suffix, body):
    result = client.simulate_request(method, f"{BASE}/{uuid.uuid4().hex}{suffix}", json=body)
    assert result.status_code == 404
    assert result.json["title"] == "Not found"


def test_another_project_sees_none_of_them(client):
    subscription_id = create(client)
    other = falcon.testing.TestClient(client.app, headers={"Client-ID": str(uuid.uuid4()),
                                                           "X-Project-ID": "project-b"})
    assert other.simulate_get(f"{BASE}/{subscription_id}").status_code == 404
    assert other.simulate_get(BASE).json["subscriptions"] == []


def test_deleting_the_queue_deletes_its_subscriptions(client):
    subscription_id = create(client)
    assert client.simulate_delete("/v2/queues/orders").status_code == 204
    assert client.simulate_get(f"{BASE}/{subscription_id}").status_code == 404


@pytest.mark.parametrize(("resource_types", "kept"), [
    (["messages"], True), (["subscriptions"], False), (None, False)])
def test_purge_removes_subscriptions_only_when_asked(client, resource_types, kept):
    subscription_id = create(client)
    body = {"resource_types": resource_types} if resource_types else None
    assert client.simulate_post("/v2/queues/orders/purge", json=body).status_code == 204
    assert (client.simulate_get(f"{BASE}/{subscription_id}").status_code == 200) is kept


# -- suspension as the API shows it, and resume ---------------------------------


def suspend(settings, project: str, queue: str, subscription_id: str, error: str) -> None:
    """Write a suspended delivery state as a notifier would when its retries ran out."""
    storage = open_storage(settings.storage_uri)
    record = storage.get_record(project, state.DELIVERY, state.key(queue, subscription_id))
    delivery = Delivery.from_record(record.value)
    suspended = Delivery(**{**delivery.to_record(), "suspended_at": 1_800_000_100.0, "last_error": error,
                            "last_error_at": 1_800_000_100.0})
    storage.put_record(project, state.DELIVERY, state.key(queue, subscription_id), suspended.to_record(),
                       record.version)


def test_get_shows_a_suspension_with_its_last_error_and_time_and_resume_clears_it(client, settings):
    subscription_id = create(client)
    suspend(settings, "project-a", "orders", subscription_id, "HTTP 500 Internal Server Error")
    shown = client.simulate_get(f"{BASE}/{subscription_id}").json
    assert shown["status"] == "suspended"
    assert shown["delivery"]["last_error"] == "HTTP 500 Internal Server Error"
    assert shown["delivery"]["last_error_at"] == shown["delivery"]["suspended_at"] == "2027-01-15T08:01:40Z"
    assert client.simulate_post(f"{BASE}/{subscription_id}/resume").status_code == 204
    assert client.simulate_get(f"{BASE}/{subscription_id}").json["status"] == "active"


def test_resume_of_an_active_subscription_is_a_harmless_204(client):
    assert client.simulate_post(f"{BASE}/{create(client)}/resume").status_code == 204


def test_project_wide_resume_resumes_the_subscriber_in_every_queue(client, settings):
    on_a, on_b = create(client, queue="a"), create(client, queue="b")
    other = create(client, f"{URL}/other", queue="a")
    for queue, subscription_id in (("a", on_a), ("b", on_b), ("a", other)):
        suspend(settings, "project-a", queue, subscription_id, "timeout")
    result = client.simulate_post("/v2/subscriptions/resume", json={"subscriber": URL})
    assert result.status_code == 200
    assert result.json == {"resumed": 2}
    assert client.simulate_get(f"/v2/queues/a/subscriptions/{on_a}").json["status"] == "active"
    assert client.simulate_get(f"/v2/queues/b/subscriptions/{on_b}").json["status"] == "active"
    assert client.simulate_get(f"/v2/queues/a/subscriptions/{other}").json["status"] == "suspended"


@pytest.mark.parametrize(("body", "field"), [
    (None, "subscriber"), ({}, "subscriber"), ({"subscriber": "ftp://x"}, "subscriber")])
def test_project_wide_resume_needs_a_valid_subscriber(client, body, field):
    assert_400_naming(client.simulate_post("/v2/subscriptions/resume", json=body), field)


# -- validation: each bad input is a 400 naming its field -------------------------

BAD_FIELDS = [
    ({}, "subscriber"),
    ({"subscriber": 123}, "subscriber"),
    ({"subscriber": ""}, "subscriber"),
    ({"subscriber": "ftp://example.com/x"}, "subscriber"),
    ({"subscriber": "mailto:"}, "mailto: needs an address"),
    ({"subscriber": "mailto:ops"}, "'ops' is not a mail address"),
    ({"subscriber": "mailto:ops@"}, "'ops@' is not a mail address"),
    ({"subscriber": "mailto:a b@example.com"}, "is not a mail address"),
    ({"subscriber": "mailto:a@example.com,b@example.com"}, "mailto: takes one address"),
    ({"subscriber": "mailto:ops@example.com?cc=boss@example.com"}, "field 'cc' is not supported"),
    ({"subscriber": "mailto:ops@example.com?subject=a%0D%0ABcc:x@y.z"}, "subject must be one line"),
    ({"subscriber": "mailto://ops@example.com"}, "without //"),
    ({"subscriber": "trust+ftp://example.com/x"}, "subscriber"),
    ({"subscriber": "trust+http://"}, "subscriber"),
    ({"subscriber": "trust+example.com"}, "subscriber"),
    ({"subscriber": "mailto:ops@example.com", "options": {"from": "not an address"}}, "options.from"),
    ({"subscriber": "mailto:ops@example.com", "options": {"from": "a@example.com, b@example.com"}},
     "options.from"),
    ({"subscriber": "mailto:ops@example.com", "options": {"from": 5}}, "options.from"),
    ({"subscriber": "mailto:ops@example.com", "options": {"subject": "a\nBcc: x@y.z"}}, "options.subject"),
    ({"subscriber": "mailto:ops@example.com", "options": {"subject": ["x"]}}, "options.subject"),
    ({"subscriber": "http://"}, "subscriber"),
    ({"subscriber": "example.com/hook"}, "subscriber"),
    ({"subscriber": "http://exa mple.com/"}, "subscriber"),
    ({"subscriber": "http://example.com:99999/"}, "subscriber"),
    ({"subscriber": "http://example.com/" + "x" * 2100}, "subscriber"),
    ({"subscriber": URL, "ttl": "600"}, "ttl"),
    ({"subscriber": URL, "ttl": 59}, "ttl"),
    ({"subscriber": URL, "ttl": 0}, "ttl"),
    ({"subscriber": URL, "ttl": True}, "ttl"),
    ({"subscriber": URL, "ttl": 60.5}, "ttl"),
    ({"subscriber": URL, "ttl": 10**15}, "ttl"),
    ({"subscriber": URL, "ttl": 100_000_000_001}, "ttl"),
    ({"subscriber": URL, "options": []}, "options"),
    ({"subscriber": URL, "options": "x"}, "options"),
    ({"subscriber": URL, "options": {"_retry_policy": []}}, "options._retry_policy"),
    ({"subscriber": URL, "options": {"_retry_policy": {"tries": 3}}}, "options._retry_policy.tries"),
    ({"subscriber": URL, "options": {"_retry_policy": {"retries_with_no_delay": -1}}},
     "options._retry_policy.retries_with_no_delay"),
    ({"subscriber": URL, "options": {"_retry_policy": {"minimum_delay_retries": "2"}}},
     "options._retry_policy.minimum_delay_retries"),
    ({"subscriber": URL, "options": {"_retry_policy": {"maximum_delay_retries": 100000}}},
     "options._retry_policy.maximum_delay_retries"),
    ({"subscriber": URL, "options": {"_retry_policy": {"minimum_delay": False}}},
     "options._retry_policy.minimum_delay"),
    ({"subscriber": URL, "options": {"_retry_policy": {"maximum_delay": 2.5}}},
     "options._retry_policy.maximum_delay"),
    ({"subscriber": URL, "options": {"_retry_policy": {"minimum_delay": 20, "maximum_delay": 10}}},
     "options._retry_policy.minimum_delay"),
    ({"subscriber": URL, "options": {"_retry_policy": {"retry_backoff_function": "cubic"}}},
     "options._retry_policy.retry_backoff_function"),
    ({"subscriber": URL, "options": {"_retry_policy": {"ignore_subscription_override": 1}}},
     "options._retry_policy.ignore_subscription_override"),
    ({"subscriber": URL, "options": {"post_data": 5}}, "options.post_data"),
    ({"subscriber": URL, "options": {"post_headers": ["X-A: b"]}}, "options.post_headers"),
    ({"subscriber": URL, "options": {"post_headers": {"Bad Name": "v"}}}, "options.post_headers"),
    ({"subscriber": URL, "options": {"post_headers": {"X-A": 5}}}, "options.post_headers.X-A"),
    ({"subscriber": URL, "options": {"post_headers": {"X-A": "a\r\nX-B: b"}}}, "options.post_headers.X-A"),
    ({"subscriber": URL, "options": {"secret": ""}}, "options.secret"),
    ({"subscriber": URL, "options": {"secret": 42}}, "options.secret"),
    ({"subscriber": URL, "source": "orders"}, "source"),
]


BAD_FIELD_IDS = [f"{field}-{index}" for index, (_, field) in enumerate(BAD_FIELDS)]


@pytest.mark.parametrize(("body", "field"), BAD_FIELDS, ids=BAD_FIELD_IDS)
def test_each_bad_create_input_is_a_400_naming_its_field(client, body, field):
    assert_400_naming(client.simulate_post(BASE, json=body), field)


def test_a_body_that_is_not_an_object_is_a_400(client):
    assert client.simulate_post(BASE, json=[{"subscriber": URL}]).status_code == 400
    assert client.simulate_post(BASE, body=b"{not json", headers={"Content-Type": "application/json"}
                                ).status_code == 400


@pytest.mark.parametrize(("body", "field"), [
    (body, field) for body, field in BAD_FIELDS if body.get("subscriber") == URL and len(body) == 2
][:12] + [({"subscriber": "ftp://x"}, "subscriber"), ({"confirmed": True}, "confirmed")])
def test_each_bad_patch_input_is_a_400_naming_its_field(client, body, field):
    subscription_id = create(client)
    patch = {k: v for k, v in body.items() if k != "subscriber" or field == "subscriber"}
    assert_400_naming(client.simulate_patch(f"{BASE}/{subscription_id}", json=patch), field)


def test_an_empty_patch_is_a_400(client):
    subscription_id = create(client)
    assert client.simulate_patch(f"{BASE}/{subscription_id}", json={}).status_code == 400


@pytest.mark.parametrize("body", [None, {}, {"confirmed": "yes"}, {"confirmed": 1}])
def test_confirm_needs_a_boolean_confirmed(client, body):
    subscription_id = create(client)
    assert_400_naming(client.simulate_put(f"{BASE}/{subscription_id}/confirm", json=body), "confirmed")


def test_a_bad_queue_name_is_a_400(client):
    result = client.simulate_post("/v2/queues/bad%20name/subscriptions", json={"subscriber": URL})
    assert result.status_code == 400


def test_the_https_only_switch_refuses_plain_http_subscribers(settings, clock):
    strict = settings.replace(notifier=NotifierSettings(subscriber_schemes=("https",),
                                                        allowed_targets=ALLOW_LOOPBACK))
    client = falcon.testing.TestClient(create_app(strict, clock=clock),
                                       headers={"Client-ID": str(uuid.uuid4()), "X-Project-ID": "p"})
    assert_400_naming(client.simulate_post(BASE, json={"subscriber": URL}), "https")
    assert client.simulate_post(BASE, json={"subscriber": "https://example.com/h"}).status_code == 201


# -- secrets are written, never read back ------------------------------------------------


SECRET_OPTIONS = {"secret": "hmac-key-1", "k": "v",
                  "post_headers": {"Authorization": "Bearer abc", "X-Api-Key": "k-9", "X-Trace": "t1"}}
MASKED_OPTIONS = {"secret": "********", "k": "v",
                  "post_headers": {"Authorization": "********", "X-Api-Key": "********", "X-Trace": "t1"}}


def stored_options(settings, subscription_id: str, project: str = "project-a", queue: str = "orders"):
    storage = open_storage(settings.storage_uri)
    try:
        record = storage.get_record(project, state.SUBSCRIPTION, state.key(queue, subscription_id))
        return record.value["options"]
    finally:
        storage.close()


def test_get_and_list_mask_the_signing_secret_and_credential_headers(client, settings):
    subscription_id = create(client, options=SECRET_OPTIONS)

    assert client.simulate_get(f"{BASE}/{subscription_id}").json["options"] == MASKED_OPTIONS
    assert client.simulate_get(BASE).json["subscriptions"][0]["options"] == MASKED_OPTIONS
    assert stored_options(settings, subscription_id) == SECRET_OPTIONS


def test_options_sent_back_with_the_masks_keep_the_secrets(client, settings):
    subscription_id = create(client, options=SECRET_OPTIONS)
    shown = client.simulate_get(f"{BASE}/{subscription_id}").json["options"]

    changed = {**shown, "k": "w"}
    assert client.simulate_patch(f"{BASE}/{subscription_id}", json={"options": changed}).status_code == 204

    assert stored_options(settings, subscription_id) == {**SECRET_OPTIONS, "k": "w"}


def test_a_new_secret_replaces_the_old_one_and_is_masked_too(client, settings):
    subscription_id = create(client, options=SECRET_OPTIONS)
    new = {"secret": "hmac-key-2", "post_headers": {"Authorization": "Bearer xyz"}}

    assert client.simulate_patch(f"{BASE}/{subscription_id}", json={"options": new}).status_code == 204

    assert stored_options(settings, subscription_id) == new
    assert client.simulate_get(f"{BASE}/{subscription_id}").json["options"] == {
        "secret": "********", "post_headers": {"Authorization": "********"}}
