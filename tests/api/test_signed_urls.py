"""Pre-signed URLs: ``POST /v2/queues/{queue}/share`` and requests signed with its answer (Zaqar's).

The clock starts at 2100-01-01T00:00:00Z. Expected signatures were computed
apart (``hmac.new(b"s3cret", text, hashlib.sha256).hexdigest()`` over the text in
the comment beside each), never by zaqar_lite.
"""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error, headers, post

KEY = "s3cret"
CLIENT_ID = "0d3c5b7e-6f3a-4c1e-9d1b-2f4a6e8c0b1d"
TOKENS = {"tok-a": ("project-a", "member"), "tok-admin": ("project-a", "admin")}
#: 'zaqar-lite signed URL grant v2\n{"expires":"2100-01-02T00:00:00","methods":["GET"],'
#: '"paths":["/v2/queues/q1/messages"],"project":"project-a"}' (a real newline after v2)
MESSAGES_GET = "6e19c61228a50f3fa522584b38f62a8e4759625cdd1bcbd5e6effc8a7d51c261"
#: 'zaqar-lite signed URL grant v2\n{"expires":"2100-01-02T00:00:00","methods":["GET","POST"],'
#: '"paths":["/v2/queues/q1/messages"],"project":"project-a"}'
MESSAGES_GET_POST = "c1be905d29294f1ed64b28330755983abb002c5556405d2aedc23dbed87fd370"
#: 'zaqar-lite signed URL grant v2\n{"expires":"2100-01-02T00:00:00","methods":["GET","POST"],'
#: '"paths":["/v2/queues/q1/claims","/v2/queues/q1/messages"],"project":"project-a"}'
CLAIMS_MESSAGES_GET_POST = "e0d138916b33ab07598868ce2ad83e6e592b6bd5c7d1d6bee86912e708190dbf"
#: 'zaqar-lite signed URL grant v2\n{"expires":"2100-01-05T17:00:17","methods":["GET"],'
#: '"paths":["/v2/queues/q1/messages"],"project":"project-a"}'
MESSAGES_GET_JAN_5 = "adbb90b53555ac994cd30bb2e58e1b1148ae732599e4fca68f276c22c3bc6ead"


@pytest.fixture
def keyed(make_client):
    """A noauth client of project-a on an app with a signing key."""
    return make_client(headers("project-a"), signed_url_secret_key=KEY)


@pytest.fixture
def outsider(make_client):
    """A client with no credentials but a Client-ID, on the same kind of app (noauth, keyed)."""
    return make_client({"Client-ID": CLIENT_ID}, signed_url_secret_key=KEY)


@pytest.fixture
def token_outsider(make_client):
    """A client with no credentials on an app with token auth and a signing key."""
    return make_client({"Client-ID": CLIENT_ID}, signed_url_secret_key=KEY, auth_strategy="token",
                       tokens=TOKENS)


def signed_headers(share: dict, project: str | None = None) -> dict[str, str]:
    """Return the headers python-zaqarclient's signed-url backend sends for a share answer."""
    return {"URL-Signature": share["signature"], "URL-Expires": share["expires"],
            "URL-Methods": ",".join(share["methods"]), "URL-Paths": ",".join(share["paths"]),
            "X-Project-ID": project or share["project"]}


GET_POST = {"signature": MESSAGES_GET_POST, "expires": "2100-01-02T00:00:00", "methods": ["GET", "POST"],
            "paths": ["/v2/queues/q1/messages"], "project": "project-a"}


# -- share ------------------------------------------------------------------------------


@pytest.mark.store_independent
def test_a_share_without_a_body_grants_get_on_messages_for_a_day(keyed):
    result = keyed.simulate_post("/v2/queues/q1/share")
    assert result.status_code == 200
    assert result.json == {"signature": MESSAGES_GET, "expires": "2100-01-02T00:00:00",
                           "methods": ["GET"], "paths": ["/v2/queues/q1/messages"], "project": "project-a"}


@pytest.mark.store_independent
def test_a_share_answers_zaqars_body_with_full_sorted_paths(keyed):
    result = keyed.simulate_post("/v2/queues/q1/share",
                                 json={"paths": ["messages", "claims"], "methods": ["POST", "GET"]})
    assert result.status_code == 200
    assert result.json == {"signature": CLAIMS_MESSAGES_GET_POST, "expires": "2100-01-02T00:00:00",
                           "methods": ["GET", "POST"],
                           "paths": ["/v2/queues/q1/claims", "/v2/queues/q1/messages"],
                           "project": "project-a"}


@pytest.mark.store_independent
def test_a_share_takes_an_expiry_with_a_zone_and_answers_it_in_utc(keyed):
    result = keyed.simulate_post("/v2/queues/q1/share", json={"expires": "2100-01-05T19:00:17+02:00"})
    assert result.status_code == 200
    assert (result.json["expires"], result.json["signature"]) == ("2100-01-05T17:00:17", MESSAGES_GET_JAN_5)


@pytest.mark.store_independent
def test_nulls_mean_the_defaults(keyed):
    nulls = {"paths": None, "methods": None, "expires": None}
    result = keyed.simulate_post("/v2/queues/q1/share", json=nulls)
    assert result.json["signature"] == MESSAGES_GET


@pytest.mark.store_independent
def test_a_share_under_token_auth_signs_for_the_tokens_project(token_outsider):
    result = token_outsider.simulate_post("/v2/queues/q1/share", json={"methods": ["GET", "POST"]},
                                          headers={"X-Auth-Token": "tok-a"})
    assert result.json == GET_POST


@pytest.mark.store_independent
def test_a_share_under_token_auth_needs_a_token(token_outsider):
    assert_error(token_outsider.simulate_post("/v2/queues/q1/share"), 401)


@pytest.mark.store_independent
def test_without_a_key_share_is_403_saying_signed_urls_are_not_enabled(client):
    body = assert_error(client.simulate_post("/v2/queues/q1/share"), 403, "Forbidden")
    assert body["description"] == ("Signed URLs are not enabled on this server: its operator has not set "
                                   "[signed_urls] secret_key.")


@pytest.mark.store_independent
@pytest.mark.parametrize(("document", "description"), [
    ({"dummy": "meh"}, "The request body may only have the keys paths, methods and expires; dummy is not one "
                       "of them."),
    ({"paths": ["notallowed"]},
     'paths[0] must be one of "claims", "messages" or "subscriptions", got a string.'),
    ({"paths": "messages"}, "paths must be an array or null, got a string."),
    ({"methods": "methods not list"}, "methods must be an array or null, got a string."),
    ({"methods": ["FETCH"]}, 'methods[0] must be one of "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST" '
                             'or "PUT", got a string.'),
    ({"expires": 3600}, "expires must be a string or null, got 3600."),
    ({"expires": "wrong date format"}, "expires must be an ISO 8601 date and time such as "
                                       "2016-01-01T00:00:00 (UTC, or with a zone such as Z or +02:00)."),
    ({"expires": "2100-02-30T00:00:00"},
     "expires names no existing date and time between the years 1 and "
     "9999 (a month, day, hour, minute, second or zone is out of range)."),
    ({"expires": "2016-09-01T00:00:00"}, "expires must be later than now (2100-01-01T00:00:00); a signed URL "
                                         "that has already expired grants nothing."),
    (["messages"], "The request body must be a JSON object, got an array."),
], ids=["unknown-key", "path", "paths-not-list", "methods-not-list", "method", "expires-integer",
        "expires-words", "expires-no-such-day", "expires-past", "not-an-object"])
def test_a_bad_share_body_is_400_naming_the_field(keyed, document, description):
    body = assert_error(keyed.simulate_post("/v2/queues/q1/share", json=document), 400)
    assert body["description"] == description


@pytest.mark.store_independent
def test_a_share_body_that_is_not_json_is_400(keyed):
    assert_error(keyed.simulate_post("/v2/queues/q1/share", body="not json"), 400, "Invalid request body")


@pytest.mark.store_independent
def test_a_share_body_over_4096_bytes_is_400(keyed):
    result = keyed.simulate_post("/v2/queues/q1/share", json={"expires": "x" * 5000})
    body = assert_error(result, 400, "Invalid request body")
    assert body["description"] == "Request body may not exceed 4096 bytes."


@pytest.mark.store_independent
def test_a_share_of_a_bad_queue_name_is_400(keyed):
    assert_error(keyed.simulate_post("/v2/queues/bad%20name/share"), 400)


# -- signed requests ---------------------------------------------------------------------


def test_a_signed_request_reads_the_queues_messages_without_other_credentials(keyed, outsider):
    post(keyed, "q1", {"n": 1}, {"n": 2})
    result = outsider.simulate_get("/v2/queues/q1/messages", params={"echo": "true"},
                                   headers=signed_headers(GET_POST))
    assert result.status_code == 200
    assert [m["body"] for m in result.json["messages"]] == [{"n": 1}, {"n": 2}]


def test_a_signed_request_posts_to_the_queue_of_the_signing_project(keyed, outsider):
    result = outsider.simulate_post("/v2/queues/q1/messages", json={"messages": [{"body": "signed"}]},
                                    headers=signed_headers(GET_POST))
    assert result.status_code == 201
    listed = keyed.simulate_get("/v2/queues/q1/messages", params={"echo": "true"}).json["messages"]
    assert [m["body"] for m in listed] == ["signed"]


def test_a_signed_request_reads_one_message_under_its_path(keyed, outsider):
    [message_id] = post(keyed, "q1", "one")
    result = outsider.simulate_get(f"/v2/queues/q1/messages/{message_id}", headers=signed_headers(GET_POST))
    assert (result.status_code, result.json["body"]) == (200, "one")


def test_under_token_auth_a_signed_request_needs_no_token(keyed, token_outsider):
    post(keyed, "q1", "for-the-signed")
    result = token_outsider.simulate_get("/v2/queues/q1/messages", params={"echo": "true"},
                                         headers=signed_headers(GET_POST))
    assert result.status_code == 200
    assert [m["body"] for m in result.json["messages"]] == ["for-the-signed"]


def test_a_share_answer_works_as_is_for_a_signed_request(keyed, outsider):
    share = keyed.simulate_post("/v2/queues/q1/share", json={"paths": ["claims"], "methods": ["POST"]}).json
    post(keyed, "q1", "to-claim")
    result = outsider.simulate_post("/v2/queues/q1/claims", json={"ttl": 60}, headers=signed_headers(share))
    assert result.status_code == 201
    assert [m["body"] for m in result.json["messages"]] == ["to-claim"]


@pytest.mark.store_independent
@pytest.mark.parametrize(("changes", "description"), [
    ({"URL-Methods": "GET,POST,DELETE"}, "The URL-Signature does not match the URL-Paths, URL-Methods, "
     "URL-Expires and X-Project-ID of the request: the signed URL was altered, or signed for another project "
     "or by another key."),
    ({"URL-Expires": "2100-01-03T00:00:00"}, None),
    ({"URL-Paths": "/v2/queues/q1/messages,/v2/queues/q1/claims"}, None),
    ({"URL-Signature": "wrong signature"}, None),
    ({"X-Project-ID": "project-b"}, None),
], ids=["method-added", "expiry-extended", "path-added", "signature", "other-project"])
def test_a_tampered_signed_request_is_403(outsider, changes, description):
    result = outsider.simulate_get("/v2/queues/q1/messages", headers={**signed_headers(GET_POST), **changes})
    body = assert_error(result, 403, "Forbidden")
    assert body["description"].startswith("The URL-Signature does not match")
    if description is not None:
        assert body["description"] == description


@pytest.mark.store_independent
def test_a_signed_request_after_its_expiry_is_403(outsider, clock):
    clock.advance(86400)
    result = outsider.simulate_get("/v2/queues/q1/messages", headers=signed_headers(GET_POST))
    body = assert_error(result, 403)
    assert body["description"] == "The signed URL expired at 2100-01-02T00:00:00Z."


@pytest.mark.store_independent
def test_a_signed_request_with_a_method_not_signed_is_403(outsider):
    result = outsider.simulate_delete("/v2/queues/q1/messages", params={"pop": "1"},
                                      headers=signed_headers(GET_POST))
    body = assert_error(result, 403, "Forbidden")
    assert body["description"] == "The signed URL allows GET, POST; it does not allow DELETE."


@pytest.mark.store_independent
@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/v2/queues/q1/claims"),
    ("GET", "/v2/queues/q1/stats"),
    ("GET", "/v2/queues/q2/messages"),
    ("POST", "/v2/queues/q1/share"),
    ("GET", "/v2/queues"),
    ("GET", "/v2/health"),
])
def test_a_signed_request_on_a_path_not_signed_is_403(outsider, method, path):
    result = outsider.simulate_request(method, path, headers=signed_headers(GET_POST))
    body = assert_error(result, 403, "Forbidden")
    assert body["description"] == ("The signed URL covers /v2/queues/q1/messages and what lies under them; "
                                   f"it does not cover {path}.")


@pytest.mark.store_independent
@pytest.mark.parametrize("header", ["URL-Expires", "URL-Methods", "URL-Paths"])
def test_a_signed_request_without_one_of_the_headers_is_403_naming_it(outsider, header):
    sent = {k: v for k, v in signed_headers(GET_POST).items() if k != header}
    body = assert_error(outsider.simulate_get("/v2/queues/q1/messages", headers=sent), 403)
    assert body["description"].endswith(f"; {header} is missing or empty.")


@pytest.mark.store_independent
def test_a_signed_request_with_an_expiry_that_is_no_time_is_403(outsider):
    sent = {**signed_headers(GET_POST), "URL-Expires": "not a real date"}
    body = assert_error(outsider.simulate_get("/v2/queues/q1/messages", headers=sent), 403)
    assert body["description"].startswith("URL-Expires must be an ISO 8601 date and time")


@pytest.mark.store_independent
def test_a_signed_request_without_a_project_is_400(outsider):
    sent = {k: v for k, v in signed_headers(GET_POST).items() if k != "X-Project-ID"}
    assert_error(outsider.simulate_get("/v2/queues/q1/messages", headers=sent), 400)


@pytest.mark.store_independent
def test_a_signed_request_still_needs_a_client_id(make_client):
    bare = make_client(None, signed_url_secret_key=KEY)
    assert_error(bare.simulate_get("/v2/queues/q1/messages", headers=signed_headers(GET_POST)), 400)


@pytest.mark.store_independent
def test_a_signed_request_to_a_server_without_a_key_is_403_saying_so(make_client):
    unkeyed = make_client({"Client-ID": CLIENT_ID})
    body = assert_error(unkeyed.simulate_get("/v2/queues/q1/messages", headers=signed_headers(GET_POST)), 403)
    assert body["description"].startswith("Signed URLs are not enabled on this server")


@pytest.mark.store_independent
def test_a_signed_request_signed_under_another_key_is_403(make_client):
    other = make_client({"Client-ID": CLIENT_ID}, signed_url_secret_key="another-key")
    body = assert_error(other.simulate_get("/v2/queues/q1/messages", headers=signed_headers(GET_POST)), 403)
    assert body["description"].startswith("The URL-Signature does not match")


@pytest.mark.store_independent
def test_a_valid_token_does_not_widen_a_signed_request(token_outsider):
    result = token_outsider.simulate_get("/v2/queues/q1/stats",
                                         headers={**signed_headers(GET_POST), "X-Auth-Token": "tok-admin"})
    assert_error(result, 403)


# -- forgery and lifetime ------------------------------------------------------------------


@pytest.mark.store_independent
def test_a_url_signed_for_a_project_holding_backslash_n_does_not_open_the_project_after_it(make_client):
    attacker = make_client(headers("J\\nvictim"), signed_url_secret_key=KEY)
    share = attacker.simulate_post("/v2/queues/q1/share").json
    assert share["project"] == "J\\nvictim"
    victim = make_client(headers("victim"), signed_url_secret_key=KEY)
    post(victim, "q1", [{"body": "secret", "ttl": 300}])
    forged = {**signed_headers(share, project="victim"), "URL-Methods": "GET\\nJ"}
    outsider = make_client({"Client-ID": CLIENT_ID}, signed_url_secret_key=KEY)
    result = outsider.simulate_get("/v2/queues/q1/messages", headers=forged)
    assert_error(result, 403)
    assert b"secret" not in result.content


@pytest.mark.store_independent
def test_a_signed_request_naming_a_path_no_url_is_signed_for_is_403(outsider):
    sent = {**signed_headers(GET_POST), "URL-Paths": "/v2/queues/q1/messages,/v2/health"}
    body = assert_error(outsider.simulate_get("/v2/queues/q1/messages", headers=sent), 403)
    assert body["description"].startswith("URL-Paths may hold only paths /v2/queues/QUEUE/RESOURCE")


@pytest.mark.store_independent
def test_a_share_until_9999_is_400_naming_the_longest_lifetime(keyed):
    result = keyed.simulate_post("/v2/queues/q1/share", json={"expires": "9999-12-31T23:59:59"})
    body = assert_error(result, 400)
    assert body["description"] == (
        "expires may be at most 604800 seconds from now (2100-01-08T00:00:00), the longest a signed URL is "
        "valid on this server ([signed_urls] max_lifetime).")


@pytest.mark.store_independent
def test_the_longest_lifetime_is_the_operators_and_a_lower_one_refuses_urls_already_signed(make_client):
    long_lived = make_client(headers("project-a"), signed_url_secret_key=KEY,
                             signed_url_max_lifetime=30 * 86400)
    share = long_lived.simulate_post("/v2/queues/q1/share", json={"expires": "2100-01-20T00:00:00"})
    assert share.status_code == 200
    strict = make_client({"Client-ID": CLIENT_ID}, signed_url_secret_key=KEY)
    result = strict.simulate_get("/v2/queues/q1/messages", headers=signed_headers(share.json))
    body = assert_error(result, 403)
    assert body["description"].startswith("The signed URL is valid until 2100-01-20T00:00:00Z, more than the "
                                          "604800 seconds")
