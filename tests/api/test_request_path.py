"""What a post or a claim costs above the service: the work done once per process, not once per request.

Each test counts the calls of the piece that used to run on every request
(building a JSON encoder or decoder, resolving the metrics series, parsing a
Client-ID, looking a resource's responders up) over several requests of the
real app, and checks that the answers did not change.
"""

from __future__ import annotations

import json
import uuid

import falcon
import falcon.testing
import pytest

from tests.api.helpers import claim, post
from zaqar_lite import metrics as counted
from zaqar_lite.api import app as app_module
from zaqar_lite.api import inputs
from zaqar_lite.api.metrics import RequestMetrics
from zaqar_lite.api.middleware import QueueNameCheck
from zaqar_lite.api.schemas import parsing
from zaqar_lite.errors import InvalidBody

REQUESTS = 5


class Counted:
    """Wraps a callable and counts its calls."""

    def __init__(self, target):
        self.target = target
        self.calls = 0
        self.texts: list[str] = []

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if args and isinstance(args[0], str):
            self.texts.append(args[0])
        return self.target(*args, **kwargs)


# the HTTP layer's encoder: a store may build its own (Swift's driver writes its objects with
# json.dumps and options), so the count is taken in the SQLite pass only
@pytest.mark.store_independent
def test_answers_are_falcons_json_text_from_one_encoder_built_once(client, monkeypatch):
    post(client, "enc", "warm-up")
    body = {"text": "caf\u00e9 \u2603 \"quoted\" \\", "n": [1, 2.5, None, True]}
    sent = json.dumps({"messages": [{"body": body}]}).encode()
    built = Counted(json.JSONEncoder)
    monkeypatch.setattr(json, "JSONEncoder", built)
    for _ in range(REQUESTS):
        answer = client.simulate_post("/v2/queues/enc/messages", body=sent)
        assert answer.status_code == 201
    href = answer.json["resources"][0]
    result = client.simulate_get(href)
    assert built.calls == 0
    monkeypatch.undo()
    # the bytes falcon's default handler writes: json.dumps(..., ensure_ascii=False) in UTF-8
    assert result.content == json.dumps(result.json, ensure_ascii=False).encode()
    assert "caf\u00e9 \u2603".encode() in result.content
    assert app_module.RESPONSE_JSON.serialize(body, falcon.MEDIA_JSON) == \
        json.dumps(body, ensure_ascii=False).encode()


def test_request_bodies_are_parsed_by_one_decoder_built_once(client, monkeypatch):
    built = Counted(json.JSONDecoder)
    monkeypatch.setattr(json, "JSONDecoder", built)
    for _ in range(REQUESTS):
        post(client, "dec", {"n": 1})
    claim(client, "dec", limit=REQUESTS)
    assert built.calls == 0
    # the refusals keep their words
    result = client.simulate_post("/v2/queues/dec/messages", body=b'{"messages": [}')
    assert result.status_code == 400
    assert result.json["description"] == ("Request body is not valid JSON: Expecting value: "
                                          "line 1 column 15 (char 14).")
    result = client.simulate_post("/v2/queues/dec/messages", body=b'{"messages": [{"body": NaN}]}')
    assert result.json["description"] == "NaN is not a valid JSON number."
    result = client.simulate_post("/v2/queues/dec/messages", body=b'{"messages": [{"body": 1e999}]}')
    assert result.json["description"] == "A number of the request body is too large to be represented."
    assert parsing.parse_json(b'{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}


@pytest.mark.store_independent
def test_a_body_of_one_value_is_read_in_one_scan_and_every_other_as_the_decoder_reads_it(monkeypatch):
    bodies = ['{"a": 1}', ' {"a": 1} ', '{"a": 1,}', '[1, 2', "", "   ", "nul", "NaN", '{"a": 1e999}',
              "[99999999999999999999]", '"x"  y', '{"a": 1}{}', "[1] ", '{"messages": [{"body": "\u00e9"}]}']

    def outcome(read, text):
        try:
            return "parsed", read(text)
        except (ValueError, InvalidBody) as exc:
            return type(exc).__name__, str(exc)

    expected = {text: outcome(parsing._DECODER.decode, text) for text in bodies}
    decoded = Counted(parsing._DECODER.decode)
    monkeypatch.setattr(parsing._DECODER, "decode", decoded)
    for text in bodies:
        assert outcome(parsing._parsed, text) == expected[text], text
    # what is not one value alone: whitespace around it, no value, or more after it
    assert decoded.texts == [' {"a": 1} ', "", "   ", "nul", '"x"  y', '{"a": 1}{}', "[1] "]
    decoded.texts.clear()
    assert parsing.parse_json(b'{"messages": [{"body": {"n": 1}}]}') == {"messages": [{"body": {"n": 1}}]}
    assert decoded.texts == []


def test_the_request_metrics_resolve_each_series_once(client, monkeypatch):
    post(client, "series", "warm-up")  # this app's middleware has met the route
    claim(client, "series")
    requests_labels = Counted(counted.HTTP_REQUESTS.labels)
    duration_labels = Counted(counted.HTTP_DURATION.labels)
    monkeypatch.setattr(counted.HTTP_REQUESTS, "labels", requests_labels)
    monkeypatch.setattr(counted.HTTP_DURATION, "labels", duration_labels)
    series = counted.HTTP_REQUESTS.labels("POST", "/v2/queues/{queue}/messages", "201")
    before = series._value.get()
    for _ in range(REQUESTS):
        post(client, "series", "m")
    assert (requests_labels.calls, duration_labels.calls) == (1, 0)  # the one call just above
    assert series._value.get() == before + REQUESTS


@pytest.mark.filterwarnings("ignore:Unknown REQUEST_METHOD")  # wsgiref's check of falcon's test client
def test_methods_a_client_invents_share_one_series_and_one_cache_entry(client):
    owner = next(m for m in client.app._unprepared_middleware if isinstance(m, RequestMetrics))
    for i in range(REQUESTS):
        client.simulate_request(f"INVENTED{i}", "/v2/queues/x/messages")
    invented = [key for key in owner._series if key[0] == counted.OTHER_METHOD]
    assert len(invented) == 1


def test_a_client_id_is_parsed_once_however_many_requests_carry_it(client, monkeypatch):
    parsed = Counted(uuid.UUID)
    monkeypatch.setattr(inputs.uuid, "UUID", parsed)
    inputs.is_uuid.cache_clear()
    own = str(uuid.uuid4())
    for _ in range(REQUESTS):
        result = client.simulate_post("/v2/queues/cid/messages", headers={"Client-ID": own},
                                      json={"messages": [{"body": "m"}]})
        assert result.status_code == 201
        result = client.simulate_get("/v2/queues/cid/messages", headers={"Client-ID": own})
        assert result.status_code == 200
    assert parsed.texts == [own]  # parsed from text once (new message ids are made from bytes)
    result = client.simulate_get("/v2/queues/cid/messages", headers={"Client-ID": "not-a-uuid"})
    assert result.status_code == 400
    assert result.json["description"] == "Wrong UUID value: the Client-ID header must be a UUID."
    result = client.simulate_get("/v2/queues/cid/messages", headers={"Client-ID": "not-a-uuid"})
    assert result.status_code == 400
    assert parsed.texts.count("not-a-uuid") == 1


def test_a_resources_responders_are_looked_up_once_per_class(client):
    check = next(m for m in client.app._unprepared_middleware if isinstance(m, QueueNameCheck))
    for _ in range(REQUESTS):
        post(client, "served", "m")
    served = check._served
    assert len([cls for cls in served if cls.__name__ == "MessageCollection"]) == 1
    collection = next(methods for cls, methods in served.items() if cls.__name__ == "MessageCollection")
    assert collection == {"GET", "POST", "DELETE"}


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE", "PUT"])
def test_a_bad_queue_name_is_refused_where_a_responder_exists_and_405_elsewhere(client, method):
    result = client.simulate_request(method, "/v2/queues/b%20d/messages")
    assert result.status_code == (405 if method == "PUT" else 400)
