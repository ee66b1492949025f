"""No odd input ever gets a 5xx, and every error carries a title and a description.

docs/api.rst, "Errors".
"""

from __future__ import annotations

import pytest

from tests.api.helpers import JSON_PATCH, assert_error, claim, post

Q = "/v2/queues/q1"
DEEP = "[" * 100000 + "]" * 100000

# (method, path, query string, body, extra headers)
ODD_REQUESTS = [
    # query strings
    ("GET", "/v2/queues", "limit=99999999999999999999999999", None, {}),
    ("GET", "/v2/queues", "limit=1&limit=2", None, {}),
    ("GET", "/v2/queues", "marker=%00&name=%25", None, {}),
    ("GET", "/v2/queues", "team=%ED%A0%80&detailed=TRUE", None, {}),
    ("GET", "/v2/queues", "team=a&team=b&detailed=yes&with_count=1", None, {}),
    ("GET", "/v2/queues", "marker=" + "z" * 5000, None, {}),
    ("GET", "/v2/queues", "=&&=x&%FF=%FF", None, {}),
    ("GET", Q + "/messages", "marker=%C2%B2", None, {}),
    ("GET", Q + "/messages", "marker=99999999999999999999999999", None, {}),
    ("GET", Q + "/messages", "marker=9223372036854775807&limit=20", None, {}),
    ("GET", Q + "/messages", "marker=1&marker=2", None, {}),
    ("GET", Q + "/messages", "ids=,,,", None, {}),
    ("GET", Q + "/messages", "ids=%00,%FF", None, {}),
    ("GET", Q + "/messages", "ids=a&ids=b", None, {}),
    ("GET", Q + "/messages", "ids=" + ",".join(["x"] * 500), None, {}),
    ("GET", Q + "/messages", "limit=1e3", None, {}),
    ("GET", Q + "/messages", "echo=TRUE&include_claimed=Yes&include_delayed=0", None, {}),
    ("DELETE", Q + "/messages", "pop=99999999999999999999999", None, {}),
    ("DELETE", Q + "/messages", "pop=1&pop=2", None, {}),
    ("DELETE", Q + "/messages", "pop=", None, {}),
    ("DELETE", Q + "/messages", "ids=x&claim_ids=,,,", None, {}),
    ("DELETE", Q + "/messages", "ids=" + ",".join(["x"] * 500), None, {}),
    ("DELETE", Q + "/messages/anything", "claim_id=%00", None, {}),
    ("DELETE", Q + "/messages/anything", "claim_id=a&claim_id=b", None, {}),
    ("POST", Q + "/claims", "limit=99999999999999999999999", None, {}),
    ("POST", Q + "/claims", "limit=%00", None, {}),
    ("POST", Q + "/messages/x/release", "claim_id=%FF", None, {}),
    # paths
    ("GET", Q + "/messages/%00", "", None, {}),
    ("GET", Q + "/messages/%ED%A0%80", "", None, {}),
    ("GET", Q + "/messages/" + "m" * 5000, "", None, {}),
    ("GET", Q + "/claims/%FF%FE", "", None, {}),
    ("PATCH", Q + "/claims/" + "c" * 5000, "", "{}", {}),
    ("PUT", "/v2/queues/%ED%A0%80", "", None, {}),
    ("PUT", "/v2/queues/..", "", None, {}),
    ("GET", "/v2/queues/q1/stats/extra", "", None, {}),
    ("GET", "/v2//queues", "", None, {}),
    # message bodies
    ("POST", Q + "/messages", "", "null", {}),
    ("POST", Q + "/messages", "", "\x00", {}),
    ("POST", Q + "/messages", "", b"\xef\xbb\xbf{\"messages\": [{\"body\": 1}]}", {}),
    ("POST", Q + "/messages", "", b"\xff\xfe\x00\x00", {}),
    ("POST", Q + "/messages", "", '{"messages": null}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1, "ttl": 1e400}]}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1, "ttl": 9e18}]}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1, "ttl": 1e2, "delay": -0}]}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1, "ttl": 60.0000000001}]}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1, "dlq_eligible": "yes"}]}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1}], "messages": []}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1e-400}]}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": "' + "\\u0000" * 1000 + '"}]}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": {"' + "k" * 100000 + '": 1}}]}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": "' + "9" * 5000 + '"}]}', {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": ' + "9" * 5000 + "}]}", {}),
    ("POST", Q + "/messages", "", DEEP, {}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1}]}', {"Content-Length": "3"}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1}]}', {"Content-Length": "99999999999999999999"}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1}]}', {"Content-Length": "0"}),
    ("POST", Q + "/claims", "", '{"ttl": 60, "grace": 60}', {"Content-Length": "5"}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1}]}', {"Content-Type": ";;;"}),
    ("POST", Q + "/messages", "", '{"messages": [{"body": 1}]}', {"Content-Type": "text/plain"}),
    # claim bodies
    ("POST", Q + "/claims", "", "null", {}),
    ("POST", Q + "/claims", "", "[]", {}),
    ("POST", Q + "/claims", "", '{"ttl": 1e400}', {}),
    ("POST", Q + "/claims", "", '{"ttl": 9223372036854775807, "grace": -9223372036854775808}', {}),
    ("POST", Q + "/claims", "", '{"ttl": 60.0, "grace": -0.0}', {}),
    ("POST", Q + "/claims", "", DEEP, {}),
    ("PATCH", Q + "/claims/unknown", "", '{"ttl": "x"}', {}),
    # queue bodies
    ("PUT", Q, "", '{"_default_message_ttl": 1e308}', {}),
    ("PUT", Q, "", '{"_dead_letter_queue": 5, "_max_claim_count": 1}', {}),
    ("PUT", Q, "", '{"_dead_letter_queue": "bad name", "_max_claim_count": 1}', {}),
    ("PUT", Q, "", '{"_max_claim_count": 9223372036854775807, "_dead_letter_queue": "q1"}', {}),
    ("PUT", "/v2/queues/other", "", '{"_max_claim_count": true, "_dead_letter_queue": "q1"}', {}),
    ("PUT", "/v2/queues/other", "", '{"_dead_letter_on_expiry": "yes"}', {}),
    ("PUT", "/v2/queues/other", "", '{"": null, "_": {}}', {}),
    ("PUT", "/v2/queues/other", "", DEEP, {}),
    ("PATCH", Q, "", '[{"op": "add", "path": "/metadata/~1a~0", "value": 1}]', {"Content-Type": JSON_PATCH}),
    ("PATCH", Q, "", '[{"op": "add", "path": "/metadata/a", "value": 1e400}]', {"Content-Type": JSON_PATCH}),
    ("PATCH", Q, "", '[{"op": "add", "path": "/metadata/_max_claim_count", "value": 0}]',
     {"Content-Type": JSON_PATCH}),
    ("PATCH", Q, "", '[{"op": "add", "path": "/metadata/_dead_letter_queue", "value": "q1"}]',
     {"Content-Type": JSON_PATCH}),
    ("PATCH", Q, "", '[{"op": "remove", "path": "/metadata/_max_claim_count"}]',
     {"Content-Type": JSON_PATCH}),
    ("PATCH", Q, "", "null", {"Content-Type": JSON_PATCH}),
    ("PATCH", Q, "", DEEP, {"Content-Type": JSON_PATCH}),
    ("POST", Q + "/purge", "", '{"resource_types": null}', {}),
    ("POST", Q + "/purge", "", "[]", {}),
    ("POST", Q + "/messages/x/release", "claim_id=c", '{"error": null}', {}),
    # headers
    ("GET", "/v2/queues", "", None, {"Accept": ";;"}),
    ("GET", "/v2/queues", "", None, {"Accept": "application/json;q=abc"}),
    ("GET", "/v2/queues", "", None, {"Accept": "*/*;q=0.5, application/json;q=0"}),
    ("GET", "/v2/queues", "", None, {"Client-ID": "c" * 10000}),
    ("GET", "/v2/queues", "", None, {"Client-ID": "urn:uuid:"}),
    ("GET", "/v2/queues", "", None, {"X-Project-ID": "caf\u00e9"}),
    ("GET", "/v2/queues", "", None, {"X-Project-ID": "p" * 100000}),
    ("GET", "/v2/health", "", None, {"X-Auth-Token": "whatever"}),
]


@pytest.fixture
def busy_client(client):
    """A client whose queue q1 has free and claimed messages."""
    post(client, "q1", "a", "b", "c")
    claim(client, "q1", limit=1)
    return client


@pytest.mark.parametrize("method,path,query,body,extra", ODD_REQUESTS,
                         ids=[f"{i:02d}-{r[0]}-{r[1][:30]}" for i, r in enumerate(ODD_REQUESTS)])
def test_an_odd_request_never_gets_a_server_error(busy_client, method, path, query, body, extra):
    result = busy_client.simulate_request(method, path, query_string=query, body=body, headers=extra)
    assert result.status_code < 500, result.text
    if result.status_code >= 400:
        assert_error(result, result.status_code)


def test_the_store_still_answers_after_the_odd_requests(busy_client):
    for method, path, query, body, extra in ODD_REQUESTS:
        busy_client.simulate_request(method, path, query_string=query, body=body, headers=extra)
    listing = busy_client.simulate_get(f"{Q}/messages", params={"echo": "true", "include_claimed": "true",
                                                                  "limit": 20})
    assert listing.status_code == 200
    assert busy_client.simulate_get(f"{Q}/stats").status_code == 200
