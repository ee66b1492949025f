"""Headers every /v2 request must carry, content negotiation and token auth.

docs/api.rst, "Headers" and "Authentication".
"""

from __future__ import annotations

import tempfile
import uuid

import pytest

from tests.api.helpers import assert_error, headers
from zaqar_lite.config import Settings
from zaqar_lite.storage import open_storage

SOME_UUID = uuid.UUID("0d3c5b7e-6f3a-4c1e-9d1b-2f4a6e8c0b1d")
TOKENS = {"tok-admin": ("p1", "admin"), "tok-member": ("p1", "member")}


# -- Client-ID ------------------------------------------------------------------


@pytest.mark.store_independent
def test_missing_client_id_is_400(bare):
    result = bare.simulate_get("/v2/queues", headers={"X-Project-ID": "project-a"})
    assert_error(result, 400, "Invalid API request")


@pytest.mark.store_independent
@pytest.mark.parametrize("value", [
    "not-a-uuid",
    "1234",
    SOME_UUID.hex[:-1],
    SOME_UUID.hex + "0",
    str(SOME_UUID).replace("d", "g"),
], ids=["words", "short", "31-hex", "33-hex", "non-hex"])
def test_client_id_that_is_not_a_uuid_is_400_wrong_uuid_value(bare, value):
    result = bare.simulate_get("/v2/queues", headers={"X-Project-ID": "project-a", "Client-ID": value})
    body = assert_error(result, 400, "Invalid API request")
    assert "Wrong UUID value" in body["description"]


@pytest.mark.store_independent
def test_empty_client_id_is_400(bare):
    result = bare.simulate_get("/v2/queues", headers={"X-Project-ID": "project-a", "Client-ID": ""})
    assert_error(result, 400)


@pytest.mark.parametrize("value", [
    str(SOME_UUID),
    SOME_UUID.hex,
    str(SOME_UUID).upper(),
    "{" + str(SOME_UUID) + "}",
    "urn:uuid:" + str(SOME_UUID),
], ids=["dashed", "32-hex-like-zaqarclient", "upper-case", "braces", "urn"])
def test_client_id_in_any_form_uuid_parses_is_accepted(bare, value):
    result = bare.simulate_get("/v2/queues", headers={"X-Project-ID": "project-a", "Client-ID": value})
    assert result.status_code == 200


@pytest.mark.parametrize("value", ["a" * 10, "b" * 36, "my-worker-name-7"], ids=["10", "36", "name"])
def test_off_mode_accepts_any_client_id_of_10_to_36_characters(make_client, value):
    client = make_client(client_id_uuid_safe="off")
    result = client.simulate_get("/v2/queues", headers={"X-Project-ID": "project-a", "Client-ID": value})
    assert result.status_code == 200


@pytest.mark.store_independent
@pytest.mark.parametrize("value", ["a" * 9, "b" * 37], ids=["9", "37"])
def test_off_mode_rejects_a_client_id_outside_10_to_36_characters(make_client, value):
    client = make_client(client_id_uuid_safe="off")
    result = client.simulate_get("/v2/queues", headers={"X-Project-ID": "project-a", "Client-ID": value})
    assert_error(result, 400)


@pytest.mark.store_independent
def test_off_mode_still_requires_a_client_id(make_client):
    client = make_client(client_id_uuid_safe="off")
    assert_error(client.simulate_get("/v2/queues", headers={"X-Project-ID": "project-a"}), 400)


@pytest.mark.store_independent
def test_strict_mode_rejects_a_name_that_off_mode_accepts(bare):
    result = bare.simulate_get("/v2/queues",
                               headers={"X-Project-ID": "project-a", "Client-ID": "my-worker-name-7"})
    assert_error(result, 400)


# -- X-Project-ID ---------------------------------------------------------------


@pytest.mark.store_independent
def test_missing_project_id_is_400(bare):
    assert_error(bare.simulate_get("/v2/queues", headers={"Client-ID": str(SOME_UUID)}), 400)


@pytest.mark.store_independent
@pytest.mark.parametrize("value", ["", "   "], ids=["empty", "blank"])
def test_empty_project_id_is_400(bare, value):
    result = bare.simulate_get("/v2/queues", headers={"Client-ID": str(SOME_UUID), "X-Project-ID": value})
    assert_error(result, 400)


@pytest.mark.store_independent
def test_project_id_longer_than_256_characters_is_400(bare):
    result = bare.simulate_get("/v2/queues", headers=headers("p" * 257))
    assert_error(result, 400)


def test_project_id_of_256_characters_is_accepted(bare):
    assert bare.simulate_get("/v2/queues", headers=headers("p" * 256)).status_code == 200


@pytest.mark.store_independent
def test_project_headers_are_required_on_every_v2_route(bare):
    only_client = {"Client-ID": str(SOME_UUID)}
    for method, path in [("GET", "/v2/ping"), ("PUT", "/v2/queues/q1"), ("GET", "/v2/queues/q1/stats"),
                         ("POST", "/v2/queues/q1/claims"), ("GET", "/v2/health")]:
        assert_error(bare.simulate_request(method, path, headers=only_client), 400)


# -- content negotiation --------------------------------------------------------


@pytest.mark.store_independent
@pytest.mark.parametrize("accept", ["text/plain", "application/xml", "text/html, image/png",
                                    "application/json;q=0"])
def test_a_client_that_does_not_accept_json_is_406(client, accept):
    result = client.simulate_get("/v2/queues", headers={"Accept": accept})
    assert_error(result, 406)


@pytest.mark.parametrize("accept", ["application/json", "*/*", "application/*",
                                    "text/plain, application/json"])
def test_a_client_that_accepts_json_is_served(client, accept):
    assert client.simulate_get("/v2/queues", headers={"Accept": accept}).status_code == 200


@pytest.mark.parametrize("content_type", [
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=utf-8",
    "multipart/form-data; boundary=xyz",
])
def test_a_form_encoded_body_is_400_even_when_it_holds_json(client, content_type):
    result = client.simulate_post("/v2/queues/q1/messages", body='{"messages": [{"body": 1}]}',
                                  headers={"Content-Type": content_type})
    assert_error(result, 400)
    # nothing was posted
    listing = client.simulate_get("/v2/queues/q1/messages", params={"echo": "true"})
    assert listing.json["messages"] == []


# -- token auth -----------------------------------------------------------------


@pytest.fixture
def token_client(make_client):
    """A client of an app with token auth; tests add X-Auth-Token per request."""
    return make_client({"Client-ID": str(SOME_UUID)}, auth_strategy="token", tokens=TOKENS)


@pytest.mark.store_independent
def test_token_auth_without_a_token_is_401(token_client):
    assert_error(token_client.simulate_get("/v2/queues"), 401)


@pytest.mark.store_independent
def test_token_auth_with_an_unknown_token_is_401(token_client):
    assert_error(token_client.simulate_get("/v2/queues", headers={"X-Auth-Token": "tok-nobody"}), 401)


def test_token_auth_takes_the_project_from_the_token(token_client, make_client):
    created = token_client.simulate_put("/v2/queues/from-token", headers={"X-Auth-Token": "tok-member"})
    assert created.status_code == 201
    noauth = make_client(headers("p1"))
    names = [q["name"] for q in noauth.simulate_get("/v2/queues").json["queues"]]
    assert names == ["from-token"]


def test_token_auth_accepts_an_x_project_id_that_agrees_with_the_token(token_client):
    result = token_client.simulate_get("/v2/queues",
                                       headers={"X-Auth-Token": "tok-member", "X-Project-ID": "p1"})
    assert result.status_code == 200


@pytest.mark.store_independent
def test_token_auth_refuses_an_x_project_id_that_disagrees_with_the_token(token_client):
    result = token_client.simulate_get("/v2/queues",
                                       headers={"X-Auth-Token": "tok-member", "X-Project-ID": "p2"})
    assert_error(result, 403, "Forbidden")


@pytest.mark.store_independent
def test_token_auth_still_requires_a_client_id(make_client):
    client = make_client(auth_strategy="token", tokens=TOKENS)
    assert_error(client.simulate_get("/v2/queues", headers={"X-Auth-Token": "tok-admin"}), 400)


@pytest.mark.store_independent
def test_health_is_403_for_a_member(token_client):
    assert_error(token_client.simulate_get("/v2/health", headers={"X-Auth-Token": "tok-member"}), 403)


def test_health_is_200_for_an_admin(token_client):
    result = token_client.simulate_get("/v2/health", headers={"X-Auth-Token": "tok-admin"})
    assert result.status_code == 200
    assert result.json["storage_reachable"] is True


def test_ping_is_open_to_a_member(token_client):
    assert token_client.simulate_get("/v2/ping", headers={"X-Auth-Token": "tok-member"}).status_code == 204


@pytest.mark.store_independent
def test_versions_document_needs_no_token(token_client):
    assert token_client.simulate_get("/").status_code == 300


# -- every spelling of every route is checked -------------------------------------


def route_paths() -> list[tuple[str, str]]:
    """Return ``(method, path)`` for every method of every route, parameters filled.

    Left out: the public routes, ``GET /`` and ``GET /metrics`` (which checks its
    own token when one is required: ``tests/api/test_metrics.py``).
    """
    from zaqar_lite.api import app as api_app

    found = []
    with tempfile.TemporaryDirectory() as directory:
        storage = open_storage(f"sqlite:///{directory}/routes.db")
        table = api_app.routes(api_app.build_services(Settings(), storage))
        storage.close()
    for template, resource in table:
        if template in ("/", "/metrics"):
            continue
        path = (template.replace("{queue}", "q1").replace("{message_id}", "m1")
                .replace("{claim_id}", "c1").replace("{subscription_id}", "s1"))
        for method in ("GET", "HEAD", "PUT", "POST", "PATCH", "DELETE"):
            if hasattr(resource, "on_" + method.lower()):
                found.append((method, path))
    return found


def spellings(path: str) -> list[str]:
    """Return the variants of a path a client can send that may reach the same resource."""
    return ["/" + path, path.replace("/v2", "//v2/", 1).replace("v2//", "v2/"),
            path.replace("/v2", "/./v2", 1), path.replace("/v2/", "/v2%2F", 1),
            path + "/", "//" + path.lstrip("/") + "//"]


ROUTES = route_paths()


def test_the_route_list_covers_the_api():
    assert len(ROUTES) >= 30
    assert ("GET", "/v2/ping") in ROUTES and ("DELETE", "/v2/queues/q1/messages/m1") in ROUTES


@pytest.mark.store_independent
@pytest.mark.parametrize("method, path", ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_no_spelling_of_a_route_skips_the_header_checks(bare, method, path):
    for variant in [path, *spellings(path)]:
        result = bare.simulate_request(method, variant, headers={"X-Project-ID": "p1"})
        assert result.status_code in (400, 404), (variant, result.status_code, result.text)
        if result.status_code == 400 and method != "HEAD":
            assert "Client-ID" in result.json["description"], variant


@pytest.mark.store_independent
@pytest.mark.parametrize("method, path", ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_no_spelling_of_a_route_skips_token_auth(token_client, method, path):
    for variant in [path, *spellings(path)]:
        result = token_client.simulate_request(method, variant, headers={"X-Project-ID": "p1"})
        assert result.status_code in (401, 404), (variant, result.status_code, result.text)


def test_a_doubled_slash_reaches_the_resource_with_a_checked_context(client):
    assert client.simulate_put("//v2/queues/q1").status_code == 201
    assert [q["name"] for q in client.simulate_get("//v2/queues").json["queues"]] == ["q1"]


@pytest.mark.store_independent
def test_the_versions_document_needs_no_headers_in_any_spelling(bare):
    for path in ("/", "//"):
        assert bare.simulate_get(path).status_code == 300


# -- X-Project-ID -------------------------------------------------------------------


@pytest.mark.store_independent
def test_two_project_headers_joined_by_the_server_are_refused(bare):
    # a WSGI server hands a header sent twice to the app as one value joined by ", "
    result = bare.simulate_get("/v2/queues",
                               headers={"Client-ID": str(SOME_UUID), "X-Project-ID": "fuzz,other"})
    assert "X-Project-ID" in assert_error(result, 400)["description"]


@pytest.mark.store_independent
@pytest.mark.parametrize("value", ["caf\u00c3\u00a9", "tab\there", "\u00e9t\u00e9"])
def test_a_project_outside_printable_ascii_is_refused_not_mangled(bare, value):
    result = bare.simulate_get("/v2/queues", headers={"Client-ID": str(SOME_UUID), "X-Project-ID": value})
    assert "printable ASCII" in assert_error(result, 400)["description"]


# -- Zaqar's transport options ---------------------------------------------------------


@pytest.mark.parametrize("value, status", [("a" * 4, 400), ("a" * 5, 200), ("a" * 8, 200), ("a" * 9, 400)])
def test_off_mode_uses_the_configured_client_id_lengths(make_client, value, status):
    client = make_client(client_id_uuid_safe="off", min_length_client_id=5, max_length_client_id=8)
    result = client.simulate_get("/v2/queues", headers={"X-Project-ID": "project-a", "Client-ID": value})
    assert result.status_code == status
    if status == 400:
        assert "5 to 8 characters" in result.json["description"]


def test_message_delete_with_claim_id_requires_claim_ids_on_a_delete_by_ids(make_client):
    client = make_client(headers("project-a"), message_delete_with_claim_id=True)
    created = client.simulate_post("/v2/queues/q1/messages", json={"messages": [{"body": 1}]})
    message_id = created.json["resources"][0].rsplit("/", 1)[1]
    result = client.simulate_delete("/v2/queues/q1/messages", params={"ids": message_id})
    assert "claim_ids" in assert_error(result, 400)["description"]
    claimed = client.simulate_post("/v2/queues/q1/claims", json={})
    claim_id = claimed.headers["location"].rsplit("/", 1)[1]
    result = client.simulate_delete("/v2/queues/q1/messages",
                                    params={"ids": message_id, "claim_ids": claim_id})
    assert result.status_code == 204
    assert client.simulate_get(f"/v2/queues/q1/messages/{message_id}").status_code == 404
