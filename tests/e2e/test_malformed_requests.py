"""Hostile and broken requests against a real server: each gets a 4xx and nobody's worker dies."""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from collections.abc import Iterator

import pytest
import requests

from tests.e2e.harness import ApiSession, RunningServer

pytestmark = pytest.mark.slow

POST_LIMIT = 262144
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def unchanged_workers(server: RunningServer) -> Iterator[None]:
    """Fail the test if a gunicorn worker died (or was replaced) while it ran."""
    before = server.worker_pids()
    assert len(before) == 2, f"expected 2 workers, found {sorted(before)}"
    yield
    after = server.worker_pids()
    assert after == before, f"workers changed from {sorted(before)} to {sorted(after)}"


def assert_still_serving(api: ApiSession, queue: str) -> None:
    """The server answers ping and a real post and claim after the bad request."""
    assert api.get("/v2/ping").status_code == 204
    posted = api.post(f"/v2/queues/{queue}/messages", json={"messages": [{"body": "after"}]})
    assert posted.status_code == 201, posted.text
    claimed = api.post(f"/v2/queues/{queue}/claims", json={"ttl": 60, "grace": 60})
    assert claimed.status_code == 201, claimed.text
    assert [m["body"] for m in claimed.json()["messages"]] == ["after"]


def total_messages(api: ApiSession, queue: str) -> int:
    """Return how many messages a queue holds (claimed or not)."""
    return int(api.get(f"/v2/queues/{queue}/stats").json()["messages"]["total"])


def assert_json_error(response: requests.Response, status: int) -> None:
    """The response has the given status and the ``{"title", "description"}`` error body."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"title", "description"} and body["title"] and body["description"]
    assert "Traceback" not in response.text


BAD_MESSAGE_BODIES = {
    "garbage": b"{not json at all",
    "truncated": b'{"messages": [{"body": 1}',
    "a list instead of an object": b'[{"body": 1}]',
    "invalid utf-8": b'{"messages": [{"body": "\xff\xfe"}]}',
    "NaN": b'{"messages": [{"body": NaN}]}',
    "an integer beyond 64 bits": b'{"messages": [{"body": 1, "ttl": 99999999999999999999}]}',
    "an integer of 5000 digits": b'{"messages": [{"body": ' + b"9" * 5000 + b"}]}",
    "an empty message list": b'{"messages": []}',
    "a body that is only whitespace": b"   \n ",
}


@pytest.mark.usefixtures("unchanged_workers")
@pytest.mark.parametrize("raw", BAD_MESSAGE_BODIES.values(), ids=BAD_MESSAGE_BODIES.keys())
def test_a_malformed_message_post_is_a_400_and_the_server_keeps_serving(
        api: ApiSession, queue_name: str, raw: bytes) -> None:
    response = api.post(f"/v2/queues/{queue_name}/messages", data=raw, headers=JSON)

    assert_json_error(response, 400)
    assert_still_serving(api, queue_name)


@pytest.mark.usefixtures("unchanged_workers")
def test_a_body_over_the_post_limit_is_refused_and_the_server_keeps_serving(
        api: ApiSession, queue_name: str) -> None:
    huge = json.dumps({"messages": [{"body": "x" * (4 * POST_LIMIT)}]}).encode()

    response = api.post(f"/v2/queues/{queue_name}/messages", data=huge, headers=JSON)

    assert_json_error(response, 400)
    assert_still_serving(api, queue_name)


def oversized_chunks() -> Iterator[bytes]:
    """Yield a JSON message post of 448 KiB in chunks, sent without Content-Length."""
    yield b'{"messages": [{"body": "'
    for _ in range(7):
        yield b"x" * 65536


def post_oversized_chunks(api: ApiSession, queue: str) -> int | None:
    """Send ``oversized_chunks``; return the status, or None if the connection was reset first."""
    try:
        return api.post(f"/v2/queues/{queue}/messages", data=oversized_chunks(), headers=JSON).status_code
    except requests.ConnectionError:
        return None


@pytest.mark.usefixtures("unchanged_workers")
def test_a_chunked_body_over_the_post_limit_is_refused_and_the_server_keeps_serving(
        api: ApiSession, queue_name: str) -> None:
    response = api.post(f"/v2/queues/{queue_name}/messages", data=oversized_chunks(), headers=JSON)

    assert_json_error(response, 400)
    assert total_messages(api, queue_name) == 0
    assert_still_serving(api, queue_name)


@pytest.mark.store_independent
@pytest.mark.usefixtures("unchanged_workers")
def test_a_client_still_sending_a_refused_body_reads_its_400_rather_than_a_reset(
        api: ApiSession, queue_name: str) -> None:
    # The server answers before the body ends and closes; an abrupt close would
    # reset the connection and lose the answer about half of the time.
    statuses = [post_oversized_chunks(api, queue_name) for _ in range(10)]

    assert statuses == [400] * 10


def test_a_valid_chunked_message_post_is_accepted(api: ApiSession, queue_name: str) -> None:
    body = json.dumps({"messages": [{"body": "streamed"}]}).encode()

    response = api.post(f"/v2/queues/{queue_name}/messages", data=iter([body]), headers=JSON)

    assert response.status_code == 201, response.text
    claimed = api.post(f"/v2/queues/{queue_name}/claims", json={"ttl": 60, "grace": 60})
    assert [m["body"] for m in claimed.json()["messages"]] == ["streamed"]


@pytest.mark.store_independent
@pytest.mark.usefixtures("unchanged_workers")
def test_deeply_nested_json_is_a_400(api: ApiSession, queue_name: str) -> None:
    nested = b'{"messages": [{"body": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}"

    response = api.post(f"/v2/queues/{queue_name}/messages", data=nested[:POST_LIMIT], headers=JSON)

    assert_json_error(response, 400)


@pytest.mark.usefixtures("unchanged_workers")
def test_a_form_encoded_body_is_a_400(api: ApiSession, queue_name: str) -> None:
    response = api.post(f"/v2/queues/{queue_name}/messages", data={"messages": "x"})

    assert_json_error(response, 400)
    assert_still_serving(api, queue_name)


@pytest.mark.usefixtures("unchanged_workers")
def test_a_queue_patch_with_the_wrong_content_type_is_a_415(api: ApiSession, queue_name: str) -> None:
    assert api.put(f"/v2/queues/{queue_name}").status_code == 201

    response = api.patch(f"/v2/queues/{queue_name}", headers=JSON,
                         data=b'[{"op": "add", "path": "/metadata/a", "value": 1}]')

    assert_json_error(response, 415)


@pytest.mark.store_independent
@pytest.mark.usefixtures("unchanged_workers")
@pytest.mark.parametrize("headers", [
    {"Client-ID": None}, {"Client-ID": "not-a-uuid"}, {"X-Project-ID": None}, {"X-Project-ID": ""},
], ids=["no client id", "a client id that is no uuid", "no project", "an empty project"])
def test_missing_or_bad_identity_headers_are_a_400(api: ApiSession, queue_name: str,
                                                   headers: dict[str, str | None]) -> None:
    # requests drops a header whose value is None, which is how these leave one out
    response = api.get(f"/v2/queues/{queue_name}/messages", headers=headers)  # type: ignore[arg-type]

    assert_json_error(response, 400)


@pytest.mark.usefixtures("unchanged_workers")
def test_an_oversized_header_or_request_line_is_a_4xx(api: ApiSession, queue_name: str) -> None:
    too_long_header = api.get("/v2/ping", headers={"X-Filler": "y" * 100_000})
    too_long_path = api.get(f"/v2/queues/{'a' * 10_000}/messages")

    assert 400 <= too_long_header.status_code < 500
    assert 400 <= too_long_path.status_code < 500
    assert_still_serving(api, queue_name)


@pytest.mark.store_independent
@pytest.mark.usefixtures("unchanged_workers")
def test_a_bad_queue_name_is_a_400_and_an_unknown_route_a_404(api: ApiSession) -> None:
    bad_name = api.get("/v2/queues/" + urllib.parse.quote("bad name!") + "/messages")
    no_route = api.get("/v2/nothing-here")

    assert_json_error(bad_name, 400)
    assert no_route.status_code == 404


def stall(server: RunningServer, queue: str) -> socket.socket:
    """Open a connection that sends headers and half a body, then goes silent."""
    port = int(server.url.rsplit(":", 1)[1])
    connection = socket.create_connection(("127.0.0.1", port), timeout=5)
    connection.sendall(
        f"POST /v2/queues/{queue}/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Client-ID: 3b1c9c2d-7a0e-4c6f-9e3d-2b1a0c9f8e7d\r\nX-Project-ID: e2e\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"messages\": [".encode())
    return connection


@pytest.mark.usefixtures("unchanged_workers")
def test_clients_that_stall_mid_body_do_not_block_other_requests(server: RunningServer, api: ApiSession,
                                                                  queue_name: str) -> None:
    stalled = [stall(server, queue_name) for _ in range(2 * len(server.worker_pids()))]
    try:
        time.sleep(0.5)
        started = time.monotonic()
        assert api.get("/v2/ping", timeout=5).status_code == 204
        assert time.monotonic() - started < 2
        assert_still_serving(api, queue_name)
    finally:
        for connection in stalled:
            connection.close()


def raw_request(server: RunningServer, target: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """Send one GET with the request target exactly as given (no client normalises it)."""
    port = urllib.parse.urlsplit(server.url).port
    lines = [f"GET {target} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
             *(f"{name}: {value}" for name, value in headers.items())]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.mark.store_independent
@pytest.mark.parametrize("target", ["//v2/queues", "//v2/ping", "//v2", "/v2%2Fqueues",
                                    "//v2/queues/q1/stats", "/v2/queues/", "//v2/health"])
def test_no_spelling_of_a_path_skips_the_header_checks(server: RunningServer, unchanged_workers: None,
                                                       target: str) -> None:
    status, body = raw_request(server, target, {"X-Project-ID": "e2e"})
    assert status == 400, body
    assert b"Client-ID" in body
    status, body = raw_request(server, target, {"Client-ID": "0d3c5b7e-6f3a-4c1e-9d1b-2f4a6e8c0b1d"})
    assert status == 400, body
    assert b"X-Project-ID" in body
    assert "Traceback" not in server.log()
