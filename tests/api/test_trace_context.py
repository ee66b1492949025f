"""W3C trace context over HTTP: taken from a post's headers, shown only with ``include_trace=true``."""

from __future__ import annotations

import pytest

from tests.api.helpers import assert_error

MESSAGES = "/v2/queues/q1/messages"
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


def traced_post(client, *bodies, **headers):
    result = client.simulate_post(MESSAGES, json={"messages": [{"body": b} for b in bodies]}, headers=headers)
    assert result.status_code == 201, result.text
    return [href.rsplit("/", 1)[1] for href in result.json["resources"]]


def test_a_listing_shows_the_trace_only_when_asked(client):
    traced_post(client, "a", traceparent=PARENT, tracestate=STATE)
    traced_post(client, "b")
    plain = client.simulate_get(MESSAGES, params={"echo": "true"}).json["messages"]
    assert [sorted(m) for m in plain] == [["age", "body", "claim_count", "href", "id", "ttl"]] * 2
    asked = client.simulate_get(MESSAGES, params={"echo": "true", "include_trace": "true"}).json
    assert [m.get("trace") for m in asked["messages"]] == [{"traceparent": PARENT, "tracestate": STATE}, None]
    assert "include_trace=true" in asked["links"][0]["href"]


def test_claim_pop_and_get_show_the_trace_when_asked(client):
    first, second, third = traced_post(client, "a", "b", "c", traceparent=PARENT)
    claimed = client.simulate_post("/v2/queues/q1/claims", params={"limit": 1, "include_trace": "true"},
                                   json={}).json["messages"]
    assert [(m["id"], m["trace"]) for m in claimed] == [(first, {"traceparent": PARENT})]
    got = client.simulate_get(f"{MESSAGES}/{second}", params={"include_trace": "true"}).json
    assert got["trace"] == {"traceparent": PARENT}
    popped = client.simulate_delete(MESSAGES, params={"pop": 5, "include_trace": "true"}).json["messages"]
    assert [(m["id"], m["trace"]) for m in popped] == [(second, {"traceparent": PARENT}),
                                                       (third, {"traceparent": PARENT})]


def test_a_claim_without_the_parameter_shows_zaqars_fields_only(client):
    traced_post(client, "a", traceparent=PARENT)
    claimed = client.simulate_post("/v2/queues/q1/claims", json={}).json["messages"]
    assert "trace" not in claimed[0]


def test_the_dead_letter_provenance_carries_the_trace(client):
    client.simulate_put("/v2/queues/dlq")
    client.simulate_put("/v2/queues/q1", json={"_max_claim_count": 1, "_dead_letter_queue": "dlq"})
    (message_id,) = traced_post(client, "poison", traceparent=PARENT, tracestate="vendor=x")
    claim = client.simulate_post("/v2/queues/q1/claims", json={}).json["messages"][0]
    client.simulate_post(f"{MESSAGES}/{message_id}/release", params={"claim_id": claim["claim_id"]})
    assert client.simulate_post("/v2/queues/q1/claims", json={}).status_code == 204  # moved
    dead = client.simulate_get(f"/v2/queues/dlq/messages/{message_id}",
                               params={"include_dead_letter": "true"})
    assert dead.json["dead_letter"]["trace"] == {"traceparent": PARENT, "tracestate": "vendor=x"}


@pytest.mark.parametrize(("headers", "fragment"), [
    ({"traceparent": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}, "traceparent must be W3C"),
    ({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"}, "traceparent must be W3C"),
    ({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"}, "traceparent must be W3C"),
    ({"traceparent": "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "version ff is invalid"),
    ({"traceparent": f"{PARENT}-extra"}, "version 00 has exactly four fields"),
    ({"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, "all-zero trace-id"),
    ({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}, "all-zero parent-id"),
    ({"tracestate": STATE}, "tracestate needs a traceparent header"),
    ({"traceparent": PARENT, "tracestate": "Rojo=1"}, "tracestate list-member 'Rojo=1'"),
    ({"traceparent": PARENT, "tracestate": "rojo"}, "tracestate list-member 'rojo'"),
    ({"traceparent": PARENT, "tracestate": ",".join(f"k{i}=v" for i in range(33))},
     "at most 32 list-members"),
])
def test_a_malformed_trace_header_is_400_and_stores_nothing(client, headers, fragment):
    result = client.simulate_post(MESSAGES, json={"messages": [{"body": "x"}]}, headers=headers)
    body = assert_error(result, 400, "Invalid API request")
    assert fragment in body["description"]
    assert client.simulate_get(MESSAGES, params={"echo": "true"}).json["messages"] == []


def test_a_future_version_with_more_fields_is_accepted(client):
    parent = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next"
    (message_id,) = traced_post(client, "a", traceparent=parent)
    got = client.simulate_get(f"{MESSAGES}/{message_id}", params={"include_trace": "true"}).json
    assert got["trace"] == {"traceparent": parent}


def test_a_bad_include_trace_is_400(client):
    assert_error(client.simulate_get(MESSAGES, params={"include_trace": "maybe"}), 400)
