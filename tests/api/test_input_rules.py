"""What the server takes as input, as docs/openapi.yaml states it (issue 20).

Query integers are ASCII digits; query booleans are Zaqar's words in any letter
case; a query parameter given empty counts as absent (as Zaqar, whose falcon drops
blank values); request bodies are UTF-8 JSON (RFC 8259), never ``null``, with
every number inside the signed 64-bit range; queue names ``.`` and ``..`` are
refused.
"""

from __future__ import annotations

import json

import pytest

from tests.api.helpers import assert_error, claim, post

Q = "/v2/queues/q1"


@pytest.mark.parametrize("value", ["\uff11\uff10", "1_0", " 10", "10 ", "+10", "\u0661"])
@pytest.mark.parametrize("path,name", [("/v2/queues", "limit"), (Q + "/messages", "limit"),
                                       (Q + "/claims", "limit"), (Q + "/messages", "pop")])
def test_query_integers_are_ascii_digits_only(client, path, name, value):
    post(client, "q1", "a", "b")
    method = {"claims": "POST"}.get(path.rsplit("/", 1)[1], "DELETE" if name == "pop" else "GET")
    result = client.simulate_request(method, path, params={name: value})
    body = assert_error(result, 400, "Invalid API request")
    assert body["description"] == f"{name} must be a whole number from 1 to 20, in ASCII digits."


@pytest.mark.parametrize(("value", "shown"), [("21", "21"), ("0", "0"), ("9" * 5000, "9223372036854775807")])
def test_a_query_integer_out_of_range_is_refused_naming_the_range(client, value, shown):
    result = client.simulate_get("/v2/queues", params={"limit": value})
    body = assert_error(result, 400, "Invalid API request")
    assert body["description"] == f"limit must be a whole number from 1 to 20, got {shown}."


def test_ascii_digits_with_a_leading_zero_are_a_number(client):
    post(client, "q1", "a", "b", "c")
    result = client.simulate_get(Q + "/messages", params={"limit": "02", "echo": "true"})
    assert result.status_code == 200
    assert [m["body"] for m in result.json["messages"]] == ["a", "b"]


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_and_dot_dot_are_not_queue_names(client, name):
    for result in (client.simulate_put(f"/v2/queues/{name}"),
                   client.simulate_post(f"/v2/queues/{name}/messages", json={"messages": [{"body": 1}]})):
        body = assert_error(result, 400, "Invalid API request")
        assert "may not be . or .." in body["description"]
    assert client.simulate_get("/v2/queues").json["queues"] == []


def test_a_name_ending_in_an_encoded_newline_is_not_a_queue_name(client):
    body = assert_error(client.simulate_put("/v2/queues/a%0A"), 400, "Invalid API request")
    assert "may only contain ASCII letters" in body["description"]
    assert client.simulate_get("/v2/queues").json["queues"] == []


def test_names_with_dots_that_are_not_dot_segments_stay_valid(client):
    for name in ("...", ".a", "a..", "..b"):
        assert client.simulate_put(f"/v2/queues/{name}").status_code == 201, name


QUEUE_NAME_RULE = ("Queue names may not be more than 64 characters long, may only contain ASCII letters, "
                   "digits, underscores, dashes and periods, and may not be . or .. "
                   "(which URL clients rewrite).")
#: every method of every route with a {queue} field (api/middleware.py QueueNameCheck guards them all)
QUEUE_ROUTES = [
    ("PUT", ""), ("GET", ""), ("PATCH", ""), ("DELETE", ""), ("GET", "/stats"), ("POST", "/purge"),
    ("POST", "/redrive"), ("POST", "/messages"), ("GET", "/messages"), ("DELETE", "/messages"),
    ("GET", "/messages/m1"), ("DELETE", "/messages/m1"), ("POST", "/messages/m1/release"),
    ("POST", "/claims"), ("GET", "/claims/c1"), ("PATCH", "/claims/c1"), ("DELETE", "/claims/c1"),
    ("POST", "/subscriptions"), ("GET", "/subscriptions"), ("GET", "/subscriptions/s1"),
    ("PATCH", "/subscriptions/s1"), ("DELETE", "/subscriptions/s1"), ("PUT", "/subscriptions/s1/confirm"),
    ("POST", "/subscriptions/s1/resume"),
]


@pytest.mark.parametrize("name", ["bad!name", "a" * 65])
@pytest.mark.parametrize("method,suffix", QUEUE_ROUTES)
def test_every_queue_route_refuses_a_bad_queue_name_first(client, method, suffix, name):
    result = client.simulate_request(method, f"/v2/queues/{name}{suffix}",
                                     params={"ids": "m1", "claim_id": "c1"},
                                     json={"messages": [{"body": 1}], "subscriber": "http://hooks.example.com:9/"})
    body = assert_error(result, 400, "Invalid API request")
    assert body["description"] == QUEUE_NAME_RULE
    assert client.simulate_get("/v2/queues").json["queues"] == []


def test_a_bad_queue_name_on_a_method_the_route_does_not_serve_is_a_405(client):
    result = client.simulate_post("/v2/queues/bad!name")
    assert_error(result, 405, "Method not allowed")
    assert result.headers["allow"] == "DELETE, GET, PATCH, PUT, OPTIONS"


def test_options_on_a_bad_queue_name_lists_the_methods(client):
    result = client.simulate_options("/v2/queues/bad!name/stats")
    assert result.status_code == 200
    assert result.headers["allow"] == "GET"


def test_a_bad_queue_name_without_a_client_id_is_refused_for_the_header_first(client):
    result = client.simulate_get("/v2/queues/bad!name", headers={"Client-ID": ""})
    body = assert_error(result, 400, "Invalid API request")
    assert body["description"] == "The Client-ID header is required."


@pytest.mark.parametrize("name", [".", ".."])
def test_a_dead_letter_queue_or_redrive_destination_may_not_be_a_dot_segment(client, name):
    assert_error(client.simulate_put(Q, json={"_dead_letter_queue": name}), 400)
    assert_error(client.simulate_post(Q + "/redrive", json={"destination": name}), 400)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_body_that_is_not_utf8_is_refused(client, encoding):
    raw = json.dumps({"messages": [{"body": "caf\u00e9"}]}).encode(encoding)
    result = client.simulate_post(Q + "/messages", body=raw,
                                  headers={"Content-Type": f"application/json; charset={encoding}"})
    body = assert_error(result, 400, "Invalid request body")
    assert body["description"] == "Request body must be JSON encoded in UTF-8 (RFC 8259)."
    assert client.simulate_get(Q + "/stats").json["messages"]["total"] == 0


def test_a_utf8_body_with_a_byte_order_mark_is_refused(client):
    raw = b"\xef\xbb\xbf" + json.dumps({"messages": [{"body": 1}]}).encode()
    body = assert_error(client.simulate_post(Q + "/messages", body=raw), 400, "Invalid request body")
    assert body["description"] == ("Request body must be JSON encoded in UTF-8 without a byte order mark "
                                   "(RFC 8259).")


def test_a_utf8_body_is_taken_as_it_is(client):
    raw = json.dumps({"messages": [{"body": "caf\u00e9 \U0001f600"}]}, ensure_ascii=False).encode()
    assert client.simulate_post(Q + "/messages", body=raw).status_code == 201
    listed = client.simulate_get(Q + "/messages", params={"echo": "true"}).json["messages"]
    assert [m["body"] for m in listed] == ["caf\u00e9 \U0001f600"]


@pytest.mark.parametrize("method,path", [("POST", Q + "/purge"), ("POST", Q + "/redrive"),
                                         ("POST", Q + "/claims"), ("PUT", Q),
                                         ("PATCH", Q + "/claims/c1")])
def test_a_null_body_is_refused(client, method, path):
    post(client, "q1", "kept")
    result = client.simulate_request(method, path, body="null", headers={"Content-Type": "application/json"})
    body = assert_error(result, 400, "Invalid request body")
    assert body["description"] == "Request body may not be null; send a JSON object or no body."
    assert client.simulate_get(Q + "/stats").json["messages"]["total"] == 1


def test_no_body_still_means_the_defaults(client):
    post(client, "q1", "gone")
    assert client.simulate_post(Q + "/purge").status_code == 204
    assert client.simulate_get(Q + "/stats").json["messages"]["total"] == 0


@pytest.mark.parametrize("number", ["9223372036854775808", "-9223372036854775809", "1e19", "-1e19",
                                    "9.3e18", "1e300", "1e400"])
def test_numbers_outside_64_bits_are_refused_anywhere_in_a_body(client, number):
    raw = '{"messages": [{"body": {"n": [NUMBER]}}]}'.replace("NUMBER", number)
    body = assert_error(client.simulate_post(Q + "/messages", body=raw), 400, "Invalid request body")
    integer = "Every integer of the request body must fit in 64 bits"
    number_ = "Every number of the request body must be within the 64-bit integer range"
    bounds = "(from -9223372036854775808 to 9223372036854775807)."
    rule = f"{integer if number.lstrip('-').isdigit() else number_} {bounds}"
    too_large = "A number of the request body is too large to be represented."
    assert body["description"] == (too_large if number == "1e400" else rule)


@pytest.mark.parametrize("number,stored", [("9223372036854775807", 9223372036854775807),
                                           ("-9223372036854775808", -9223372036854775808),
                                           ("9.2e18", 9.2e18), ("-9.2e18", -9.2e18), ("1.5e-300", 1.5e-300)])
def test_numbers_inside_64_bits_are_kept(client, number, stored):
    raw = '{"messages": [{"body": NUMBER}]}'.replace("NUMBER", number)
    assert client.simulate_post(Q + "/messages", body=raw).status_code == 201
    listed = client.simulate_get(Q + "/messages", params={"echo": "true"}).json["messages"]
    assert [m["body"] for m in listed] == [stored]


@pytest.mark.parametrize("word,shown", [("t", True), ("Y", True), ("on", True), ("ON", True), ("1", True),
                                        ("f", False), ("N", False), ("off", False), ("No", False)])
def test_query_booleans_take_zaqars_words_in_any_case(client, word, shown):
    post(client, "q1", "mine")
    result = client.simulate_get(Q + "/messages", params={"echo": word})
    assert result.status_code == 200
    assert len(result.json["messages"]) == (1 if shown else 0)


@pytest.mark.parametrize("word", ["tru", "ja", "2", "\uff54"])
def test_other_query_boolean_words_are_refused(client, word):
    body = assert_error(client.simulate_get("/v2/queues", params={"detailed": word}), 400)
    assert body["description"] == "detailed must be true or false (or yes/no, on/off, 1/0, t/f, y/n)."


def test_an_empty_query_value_counts_as_absent(client):
    post(client, "q1", *range(12))
    result = client.simulate_get(Q + "/messages", query_string="limit=&echo=true&include_claimed=")
    assert result.status_code == 200
    assert len(result.json["messages"]) == 10
    claim_id, _ = claim(client, "q1", limit=1)
    released = client.simulate_post(Q + "/messages/x/release", query_string="claim_id=")
    assert assert_error(released, 400)["description"] == "claim_id is required to release a message."
    assert claim_id


def test_a_delete_by_ids_checks_include_dead_letter_too(client):
    ids = post(client, "q1", "kept")
    result = client.simulate_delete(Q + "/messages", params={"ids": ids[0], "include_dead_letter": "AAA"})
    body = assert_error(result, 400, "Invalid API request")
    assert body["description"] == (
        "include_dead_letter must be true or false (or yes/no, on/off, 1/0, t/f, y/n).")
    assert client.simulate_get(Q + "/stats").json["messages"]["total"] == 1


@pytest.mark.parametrize("query", ["ids=a&ids=", "ids=&ids=a", "ids=a&ids=,,"])
def test_a_repeated_id_list_with_an_empty_repetition_is_refused(client, query):
    ids = post(client, "q1", "kept")
    result = client.simulate_delete(Q + "/messages", query_string=query.replace("a", ids[0]))
    body = assert_error(result, 400, "Invalid API request")
    assert body["description"] == "Each ids parameter must list at least one id."
    assert client.simulate_get(Q + "/stats").json["messages"]["total"] == 1


def test_a_bad_queue_name_is_refused_each_time_it_comes_and_a_good_one_stays_good(client):
    for _ in range(3):
        body = assert_error(client.simulate_put("/v2/queues/bad!name"), 400, "Invalid API request")
        assert body["description"] == QUEUE_NAME_RULE
        assert client.simulate_put("/v2/queues/good").status_code in (201, 204)
    body = assert_error(client.simulate_get("/v2/topics/bad!name"), 400, "Invalid API request")
    assert body["description"].startswith("Topic names may not be")
