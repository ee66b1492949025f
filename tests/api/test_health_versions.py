"""Versions, JSON-Home, ping, health, unknown routes, outages and unexpected errors.

docs/api.rst, "Versions and health" and "Errors".
"""

from __future__ import annotations

import json

from tests.api.helpers import assert_error, claim, post
from zaqar_lite import errors


def test_root_answers_300_with_the_versions_document(bare):
    result = bare.simulate_get("/")
    assert result.status_code == 300
    (version,) = result.json["versions"]
    assert version["id"] == "2"
    assert version["status"] == "CURRENT"
    assert version["links"] == [{"rel": "self", "href": "/v2/"}]


def test_v2_home_is_a_json_home_document_listing_the_resources(client):
    result = client.simulate_get("/v2/")
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/json-home"
    resources = json.loads(result.text)["resources"]
    hrefs = {r.get("href-template") for r in resources.values()}
    assert "/v2/queues{?marker,limit,detailed,name,with_count}" in hrefs
    assert "/v2/queues/{queue_name}" in hrefs
    assert "/v2/queues/{queue_name}/stats" in hrefs
    assert "/v2/queues/{queue_name}/purge" in hrefs
    assert "/v2/queues/{queue_name}/claims{?limit}" in hrefs
    assert "/v2/queues/{queue_name}/claims/{claim_id}" in hrefs
    assert "/v2/ping" in hrefs
    assert resources["rel/queue"]["hints"]["allow"] == ["PUT", "GET", "PATCH", "DELETE"]


def test_v2_home_answers_the_same_without_the_trailing_slash(client):
    assert client.simulate_get("/v2").text == client.simulate_get("/v2/").text


def test_v2_home_needs_the_client_id_header(bare):
    assert_error(bare.simulate_get("/v2/", headers={"X-Project-ID": "project-a"}), 400)


def test_ping_answers_204_with_no_body(client):
    result = client.simulate_get("/v2/ping")
    assert result.status_code == 204
    assert result.content == b""


def test_head_ping_answers_204(client):
    assert client.simulate_head("/v2/ping").status_code == 204


def test_ping_answers_503_when_the_store_does_not_answer(store_client, storage, monkeypatch):
    monkeypatch.setattr(storage, "ping", lambda: False)
    assert store_client.simulate_get("/v2/ping").status_code == 503
    assert store_client.simulate_head("/v2/ping").status_code == 503


def test_the_503_of_ping_has_the_json_error_body_its_content_type_announces(store_client, storage,
                                                                          monkeypatch):
    monkeypatch.setattr(storage, "ping", lambda: False)
    result = store_client.simulate_get("/v2/ping")
    body = assert_error(result, 503, "Service temporarily unavailable")
    assert body["description"] == "The storage backend cannot be reached. Please try again in a few seconds."
    assert result.headers["retry-after"] == "1"
    head = store_client.simulate_head("/v2/ping")
    assert head.status_code == 503
    assert head.content == b""
    assert head.headers["retry-after"] == "1"


def test_health_reports_the_store_and_the_message_volume_of_the_project(client):
    post(client, "q1", "a", "b")
    post(client, "q2", "c")
    claim(client, "q1", limit=1)
    result = client.simulate_get("/v2/health")
    assert result.status_code == 200
    assert result.json["storage_reachable"] is True
    volume = result.json["message_volume"]
    assert (volume["claimed"], volume["free"], volume["delayed"], volume["total"]) == (1, 2, 0, 3)


def test_health_counts_only_the_callers_project(client, project_b):
    post(client, "q1", "a", "b")
    volume = project_b.simulate_get("/v2/health").json["message_volume"]
    assert (volume["claimed"], volume["free"], volume["total"]) == (0, 0, 0)


def test_health_says_when_the_store_is_unreachable(store_client, storage, monkeypatch):
    monkeypatch.setattr(storage, "ping", lambda: False)
    result = store_client.simulate_get("/v2/health")
    assert result.status_code == 200
    assert result.json["storage_reachable"] is False


def test_an_unreachable_store_is_503_asking_to_retry(store_client, storage, monkeypatch):
    def down(*args, **kwargs):
        raise errors.StorageUnavailable("database is locked")

    monkeypatch.setattr(storage, "get_queue_metadata", down)
    result = store_client.simulate_get("/v2/queues/q1")
    body = assert_error(result, 503, "Service temporarily unavailable")
    assert body["description"].endswith("Please try again in a few seconds.")


def test_an_unexpected_exception_is_a_500_that_leaks_no_traceback(store_client, storage, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(storage, "list_queues", broken)
    result = store_client.simulate_get("/v2/queues")
    assert_error(result, 500)
    assert "secret internal detail" not in result.text
    assert "Traceback" not in result.text
    # the app keeps serving after the failure
    assert store_client.simulate_get("/v2/ping").status_code == 204


def test_an_unknown_route_is_404_with_an_error_body(client):
    assert_error(client.simulate_get("/v2/nothing-here"), 404, "Not found")


def test_a_method_the_route_does_not_have_is_405_with_an_error_body(client):
    assert_error(client.simulate_post("/v2/queues"), 405)
    assert_error(client.simulate_put("/v2/queues/q1/messages"), 405)
