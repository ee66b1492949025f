"""Queue templates over HTTP: the admin API, and queues created by a name a template matches."""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import assert_error, headers
from zaqar_lite.models import QueueTemplate

ORDERS = {"pattern": "orders-*", "metadata": {"_dead_letter_queue": "orders-dlq", "_max_claim_count": 2,
                                              "_default_message_ttl": 600}}
TOKENS = {"tok-admin": ("p1", "admin"), "tok-member": ("p1", "member")}


def put_template(client, name, body):
    return client.simulate_put(f"/v2/queue_templates/{name}", json=body)


def metadata(client, queue):
    result = client.simulate_get(f"/v2/queues/{queue}")
    assert result.status_code == 200, result.text
    return result.json


@pytest.fixture
def settings(settings):
    """The default settings with the templates routes on under noauth (the tests are the operator)."""
    return settings.replace(noauth_admin_routes=True)


@pytest.fixture
def orders(client):
    """The ``orders`` template is defined and its dead-letter queue exists in project-a."""
    assert put_template(client, "orders", ORDERS).status_code == 201
    assert client.simulate_put("/v2/queues/orders-dlq", json={}).status_code == 201
    return client


def test_a_template_is_defined_read_listed_replaced_and_removed(client):
    created = put_template(client, "orders", ORDERS)
    assert created.status_code == 201
    assert created.headers["location"] == "/v2/queue_templates/orders"
    assert client.simulate_get("/v2/queue_templates/orders").json == {
        "name": "orders", "href": "/v2/queue_templates/orders", "pattern": "orders-*",
        "metadata": {"_dead_letter_queue": "orders-dlq", "_max_claim_count": 2, "_default_message_ttl": 600},
        "source": "api"}
    assert put_template(client, "eu", {"pattern": "eu-*", "metadata": {}}).status_code == 201
    listed = client.simulate_get("/v2/queue_templates").json["queue_templates"]
    assert [(t["name"], t["pattern"]) for t in listed] == [("eu", "eu-*"), ("orders", "orders-*")]
    replaced = put_template(client, "orders", {"pattern": "order-*", "metadata": {"_max_claim_count": 4}})
    assert replaced.status_code == 204
    assert client.simulate_get("/v2/queue_templates/orders").json["metadata"] == {"_max_claim_count": 4}
    assert client.simulate_delete("/v2/queue_templates/orders").status_code == 204
    assert client.simulate_delete("/v2/queue_templates/orders").status_code == 204
    body = assert_error(client.simulate_get("/v2/queue_templates/orders"), 404)
    assert body["description"] == "Queue template orders does not exist."


def test_a_queue_created_by_a_matching_name_starts_with_the_template(orders):
    assert orders.simulate_put("/v2/queues/orders-eu", json={"team": "eu"}).status_code == 201
    assert metadata(orders, "orders-eu") == {
        "_max_messages_post_size": 262144, "_default_message_ttl": 600, "_default_message_delay": 0,
        "_dead_letter_queue": "orders-dlq", "_dead_letter_queue_messages_ttl": None, "_max_claim_count": 2,
        "_enable_encrypt_messages": False, "team": "eu", "_queue_template": "orders"}


def test_a_queue_whose_name_matches_no_template_is_untouched(orders):
    assert orders.simulate_put("/v2/queues/payments", json={}).status_code == 201
    shown = metadata(orders, "payments")
    assert shown["_max_claim_count"] is None and "_queue_template" not in shown


def test_the_request_overrides_the_template_and_null_unsets_a_key(orders):
    created = orders.simulate_put("/v2/queues/orders-us",
                                  json={"_max_claim_count": 5, "_default_message_ttl": None})
    assert created.status_code == 201
    shown = metadata(orders, "orders-us")
    assert (shown["_max_claim_count"], shown["_default_message_ttl"], shown["_dead_letter_queue"]) == \
        (5, 3600, "orders-dlq")


def test_messages_of_a_templated_queue_are_dead_lettered_as_the_template_says(orders):
    assert orders.simulate_put("/v2/queues/orders-eu", json={}).status_code == 201
    posted = orders.simulate_post("/v2/queues/orders-eu/messages", json={"messages": [{"body": 1}]})
    message_id = posted.json["resources"][0].rsplit("/", 1)[1]
    for _ in range(2):
        claimed = orders.simulate_post("/v2/queues/orders-eu/claims", json={"ttl": 60, "grace": 60})
        assert claimed.status_code == 201
        assert orders.simulate_delete(claimed.headers["location"]).status_code == 204
    assert orders.simulate_post("/v2/queues/orders-eu/claims", json={"ttl": 60}).status_code == 204
    listed = orders.simulate_get("/v2/queues/orders-dlq/messages", params={"echo": "true"}).json
    assert [m["id"] for m in listed["messages"]] == [message_id]


def test_the_template_dead_letter_queue_must_exist_when_the_queue_is_created(client):
    assert put_template(client, "orders", ORDERS).status_code == 201
    body = assert_error(client.simulate_put("/v2/queues/orders-eu", json={}), 400)
    assert body["description"] == (
        "Queue template orders (pattern orders-*) applies to queue orders-eu: _dead_letter_queue names "
        "queue orders-dlq, which does not exist in this project; create it first.")
    assert client.simulate_get("/v2/queues").json["queues"] == []


def test_the_dead_letter_queue_of_a_template_is_created_without_it(client):
    defined = put_template(client, "orders", {"pattern": "orders*", "metadata": ORDERS["metadata"]})
    assert defined.status_code == 201
    assert client.simulate_put("/v2/queues/orders-dlq", json={}).status_code == 201
    assert "_queue_template" not in metadata(client, "orders-dlq")


def test_an_existing_queue_keeps_its_metadata_when_put_again(orders):
    assert orders.simulate_put("/v2/queues/orders-eu", json={}).status_code == 201
    orders.simulate_delete("/v2/queues/orders-dlq")
    assert orders.simulate_put("/v2/queues/orders-eu", json={}).status_code == 204


def test_templates_apply_to_every_project(orders, project_b):
    assert project_b.simulate_put("/v2/queues/orders-dlq", json={}).status_code == 201
    assert project_b.simulate_put("/v2/queues/orders-b", json={}).status_code == 201
    assert metadata(project_b, "orders-b")["_queue_template"] == "orders"


def test_removing_a_template_leaves_the_queues_made_from_it(orders):
    assert orders.simulate_put("/v2/queues/orders-eu", json={}).status_code == 201
    assert orders.simulate_delete("/v2/queue_templates/orders").status_code == 204
    assert metadata(orders, "orders-eu")["_max_claim_count"] == 2
    assert orders.simulate_put("/v2/queues/orders-us", json={}).status_code == 201
    assert metadata(orders, "orders-us")["_max_claim_count"] is None


def test_clients_cannot_set_or_patch_the_template_key(orders):
    body = assert_error(orders.simulate_put("/v2/queues/mine", json={"_queue_template": "orders"}), 400)
    assert "_queue_template is set by the server" in body["description"]
    assert orders.simulate_put("/v2/queues/orders-eu", json={}).status_code == 201
    for op in ("remove", "replace"):
        patch = [{"op": op, "path": "/metadata/_queue_template", "value": "x"}]
        result = orders.simulate_patch("/v2/queues/orders-eu", body=json.dumps(patch),
                                       content_type="application/openstack-messaging-v2.0-json-patch")
        assert "_queue_template is set by the server" in assert_error(result, 400)["description"]
    assert metadata(orders, "orders-eu")["_queue_template"] == "orders"


@pytest.mark.parametrize(("body", "description"), [
    ({"metadata": {}}, "pattern is required."),
    ({"pattern": "a*", "metadata": {}, "priority": 1},
     "The request body may only have the keys pattern and metadata; priority is not one of them."),
    ({"pattern": "a*", "metadata": []}, "metadata must be a JSON object, got an array."),
    ({"pattern": "a b", "metadata": {}},
     'pattern must be a string of queue-name characters (letters, digits, _ . -) and the wildcards * and ?, '
     'got "a b".'),
    ({"pattern": "a*", "metadata": {"_max_claim_count": "3"}},
     "_max_claim_count must be an integer, got a string."),
    ({"pattern": "a*", "metadata": {"color": "red"}},
     "metadata of a template carries reserved keys only; color is not one: known keys are "
     "_dead_letter_breaker, _dead_letter_on_expiry, _dead_letter_queue, _dead_letter_queue_messages_ttl, "
     "_dedup_window, _default_message_delay, _default_message_ttl, _enable_encrypt_messages, "
     "_max_claim_count, _max_message_ttl, _max_messages_post_size, _paused, _paused_by, _retry_backoff, "
     "_retry_policy."),
])
def test_bad_templates_are_refused_with_the_field_and_the_rule(client, body, description):
    assert assert_error(put_template(client, "t", body), 400)["description"] == description


def test_a_bad_template_name_is_refused(client):
    result = put_template(client, "bad%20name", {"pattern": "a*", "metadata": {}})
    assert "template name follows the queue-name rule" in assert_error(result, 400)["description"]
    for method in ("GET", "DELETE"):
        refused = client.simulate_request(method, "/v2/queue_templates/..")
        assert "template name follows the queue-name rule" in assert_error(refused, 400)["description"]


def test_templates_need_the_admin_role_under_token_auth(make_client):
    client = make_client({"Client-ID": "6f7c3bd4-6e13-4cd7-9d40-1ac1c8b3e7d2"}, auth_strategy="token",
                         tokens=TOKENS)
    member, admin = {"X-Auth-Token": "tok-member"}, {"X-Auth-Token": "tok-admin"}
    assert_error(client.simulate_put("/v2/queue_templates/t", json=ORDERS, headers=member), 403)
    assert_error(client.simulate_get("/v2/queue_templates", headers=member), 403)
    assert client.simulate_put("/v2/queue_templates/t", json=ORDERS, headers=admin).status_code == 201
    assert_error(client.simulate_get("/v2/queue_templates/t", headers=member), 403)
    assert_error(client.simulate_delete("/v2/queue_templates/t", headers=member), 403)
    assert client.simulate_get("/v2/queue_templates/t", headers=admin).status_code == 200


def test_configured_templates_are_listed_and_read_only(make_client):
    configured = QueueTemplate(name="eu", pattern="eu-*", metadata={"_max_claim_count": 3}, source="config")
    client = make_client(headers("project-a"), queue_templates=(configured,))
    assert put_template(client, "orders", ORDERS).status_code == 201
    listed = client.simulate_get("/v2/queue_templates").json["queue_templates"]
    assert [(t["name"], t["source"]) for t in listed] == [("eu", "config"), ("orders", "api")]
    refused = assert_error(put_template(client, "eu", ORDERS), 409)
    assert refused["description"] == \
        "Queue template eu is defined in the configuration file; change it there."
    assert_error(client.simulate_delete("/v2/queue_templates/eu"), 409)
    assert client.simulate_put("/v2/queues/eu-1", json={}).status_code == 201
    assert metadata(client, "eu-1")["_max_claim_count"] == 3
