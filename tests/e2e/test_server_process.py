"""The ``zaqar-lite serve`` process itself: startup log, shutdown, restart, and its sweeper."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.e2e.harness import (
    ApiSession,
    RunningServer,
    ServerStarter,
    Store,
    configured_server,
    serve_command,
    server_environment,
    stop_server,
)

pytestmark = pytest.mark.slow

#: limits low enough to watch claims lapse and messages expire within a test
FAST_EXPIRY_CONFIG = """\
[server]
sweep_interval = 0.2

[limits]
min_message_ttl = 1
min_claim_ttl = 1
min_claim_grace = 1
"""
SWEEPER_LINE = re.compile(r"this worker \(pid (\d+)\) runs the sweeper")


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass; return whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def total(api: ApiSession, queue: str) -> int:
    """Return the number of messages in a queue."""
    return int(api.get(f"/v2/queues/{queue}/stats").json()["messages"]["total"])


def sweeper_pids(server: RunningServer) -> list[int]:
    """Return, in order, the pids that announced they run the sweeper."""
    return [int(pid) for pid in SWEEPER_LINE.findall(server.log())]


@pytest.fixture
def fast_server(start_server_for_test: ServerStarter, store: Store, tmp_path: Path) -> RunningServer:
    """A server whose config allows 1 s ttls and sweeps every 0.2 s."""
    config = tmp_path / "fast.conf"
    config.write_text(FAST_EXPIRY_CONFIG)
    return start_server_for_test(store.uri(tmp_path), extra_args=["--config", str(config)])


@pytest.fixture(scope="module")
def sweeping_server(store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A server like ``fast_server``, shared by the sweeper tests that kill nothing (each on queues
    of its own)."""
    directory = tmp_path_factory.mktemp("sweeping")
    with configured_server(store.uri(directory), directory, FAST_EXPIRY_CONFIG) as running:
        yield running


def make_queue_with_dlq(api: ApiSession, queue: str, **extra: object) -> str:
    """Create a queue dead-lettering after one claim into ``<queue>-dlq``; return the DLQ name."""
    dlq = f"{queue}-dlq"
    assert api.put(f"/v2/queues/{dlq}").status_code == 201
    metadata: dict[str, Any] = {"_max_claim_count": 1, "_dead_letter_queue": dlq, **extra}
    created = api.put(f"/v2/queues/{queue}", json=metadata)
    assert created.status_code == 201, created.text
    return dlq


def test_startup_log_names_the_storage_and_where_its_data_lives(server: RunningServer, store: Store,
                                                               data_dir: Path) -> None:
    log = server.log()

    assert f"storage {store.name}" in log
    assert store.location(data_dir) in log
    assert f"on {server.url} with 2 workers" in log


def test_refused_requests_log_no_traceback(server: RunningServer, api: ApiSession) -> None:
    # domain errors raised deep in the service (a DLQ that does not exist, a claim rule)
    refused = api.put("/v2/queues/orders", json={"_max_claim_count": 2, "_dead_letter_queue": "absent"})
    assert refused.status_code == 400, refused.text
    posted = api.post("/v2/queues/orders/messages", json={"messages": [{"body": 1}]})
    message = posted.json()["resources"][0]
    assert api.delete(message + "?claim_id=" + "0" * 24).status_code in (400, 403)

    assert "Traceback" not in server.log()
    assert "failed with" not in server.log()


def test_the_server_opens_no_gunicorn_control_socket_shared_with_other_servers(server: RunningServer) -> None:
    assert "Control socket" not in server.log()


def test_exactly_one_worker_runs_the_sweeper(server: RunningServer) -> None:
    assert wait_until(lambda: len(sweeper_pids(server)) == 1, timeout=5)
    time.sleep(1)

    assert len(sweeper_pids(server)) == 1
    assert sweeper_pids(server)[0] in server.worker_pids()


@pytest.mark.parametrize("uri", ["nosuch://somewhere", "sqlite:////proc/no-such-dir/zaqar.db"],
                         ids=["an unknown scheme", "an sqlite file that cannot be created"])
def test_serve_refuses_a_store_it_cannot_open_with_a_clear_error_and_no_traceback(uri: str,
                                                                                 tmp_path: Path) -> None:
    command = [*serve_command(), "serve", "--bind", f"127.0.0.1:{free_port()}", "--storage", uri]

    result = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=tmp_path,
                            env=server_environment())

    assert result.returncode == 1
    assert f"cannot open storage {uri}" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_serve_refuses_a_sqlite_uri_that_would_open_a_file_in_the_working_directory(tmp_path: Path) -> None:
    # sqlite:/x reads as the absolute /x, but was opened as x in the working directory
    uri = f"sqlite:{tmp_path}/zaqar.db"
    command = [*serve_command(), "serve", "--bind", f"127.0.0.1:{free_port()}", "--storage", uri]

    result = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=tmp_path,
                            env=server_environment())

    assert result.returncode == 1
    assert f"cannot open storage {uri}: " in result.stderr
    assert f"for the file {tmp_path}/zaqar.db write sqlite:///{tmp_path}/zaqar.db " in result.stderr
    assert not list(tmp_path.rglob("zaqar.db"))


def test_sigterm_stops_the_server_promptly_and_cleanly(start_server_for_test: ServerStarter, store: Store,
                                                       tmp_path: Path) -> None:
    running = start_server_for_test(store.uri(tmp_path))
    workers = running.worker_pids()
    with ApiSession(running.url) as api:
        assert api.post("/v2/queues/q/messages", json={"messages": [{"body": 1}]}).status_code == 201

    started = time.monotonic()
    status = stop_server(running)

    assert status == 0
    assert time.monotonic() - started < 10
    assert "Traceback" not in running.log()
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


@pytest.mark.store_independent
def test_ctrl_c_stops_the_server_at_once_and_without_a_traceback(start_server_for_test: ServerStarter,
                                                                 store: Store, tmp_path: Path) -> None:
    running = start_server_for_test(store.uri(tmp_path))
    workers = running.worker_pids()
    with ApiSession(running.url) as api:  # its connection stays open, idle, until the stop
        assert api.post("/v2/queues/q/messages", json={"messages": [{"body": 1}]}).status_code == 201

        started = time.monotonic()
        # a terminal's Ctrl-C: SIGINT to the master and its workers (start_new_session: their own group)
        os.killpg(running.pid, signal.SIGINT)
        status = running.process.wait(30)

    assert status == 0
    assert time.monotonic() - started < 5
    log = running.log()
    assert "Traceback" not in log
    assert "failed with SystemExit" not in log
    assert all(f"Worker exiting (pid: {pid})" in log for pid in workers)  # each stopped; none was killed


def raw_request(method: str, path: str, body: bytes = b"") -> bytes:
    """Return an HTTP/1.1 request with valid Zaqar headers, as a client writes it on a kept-alive one."""
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nClient-ID: {uuid.uuid4()}\r\n"
            f"X-Project-ID: stop\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def read_until_closed(connection: socket.socket) -> bytes:
    """Return everything the server sends until it closes the connection (within 30 s)."""
    connection.settimeout(30)
    received = b""
    while data := connection.recv(65536):
        received += data
    return received


@pytest.mark.store_independent
def test_a_stop_closes_idle_connections_at_once_and_answers_the_requests_under_way(
        start_server_for_test: ServerStarter, store: Store, tmp_path: Path) -> None:
    # deadlines far away: an idle connection closed during the test was closed by the stop
    config = tmp_path / "late-deadlines.conf"
    config.write_text("[server]\nheader_timeout = 120\nbody_timeout = 120\n")
    running = start_server_for_test(store.uri(tmp_path), workers=1, extra_args=["--config", str(config)])
    host, port = running.url.removeprefix("http://").split(":")
    idle, half_head, head_only = (socket.create_connection((host, int(port)), timeout=30) for _ in range(3))
    post = raw_request("POST", "/v2/queues/stopping/messages", b'{"messages": [{"body": 1}]}')
    head, body = post.split(b"\r\n\r\n")
    with idle, half_head, head_only:
        idle.sendall(raw_request("GET", "/v2/ping"))
        assert idle.recv(65536).startswith(b"HTTP/1.1 204 ")  # kept alive: nothing more to read
        half_head.sendall(head[:40])
        head_only.sendall(head + b"\r\n\r\n")

        running.process.send_signal(signal.SIGTERM)

        assert read_until_closed(idle) == b""
        half_head.sendall(head[40:] + b"\r\n\r\n" + body)
        head_only.sendall(body)
        # each is answered, then closed (the head read after the stop says so at once)
        answers = [read_until_closed(connection) for connection in (half_head, head_only)]
        assert [answer.split(b"\r\n", 1)[0] for answer in answers] == [b"HTTP/1.1 201 Created"] * 2, answers
        assert b"\r\nConnection: close\r\n" in answers[0]
    assert running.process.wait(30) == 0


@pytest.mark.store_independent
def test_a_stop_reaches_a_worker_forked_a_moment_before(start_server_for_test: ServerStarter, store: Store,
                                                         tmp_path: Path) -> None:
    running = start_server_for_test(store.uri(tmp_path), workers=1)
    (killed,) = running.worker_pids()
    os.kill(killed, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not (replacements := running.worker_pids() - {killed}):
        assert time.monotonic() < deadline, "gunicorn did not replace its worker"
    # the replacement is still in gunicorn's worker setup, before its own signal handlers
    running.process.send_signal(signal.SIGTERM)

    assert running.process.wait(30) == 0
    (replacement,) = replacements
    assert f"Worker exiting (pid: {replacement})" in running.log()  # it stopped; it was not killed


def test_messages_and_claims_survive_a_restart(start_server_for_test: ServerStarter, store: Store,
                                               tmp_path: Path) -> None:
    uri = store.uri(tmp_path)
    first = start_server_for_test(uri)
    with ApiSession(first.url) as api:
        posted = api.post("/v2/queues/kept/messages",
                          json={"messages": [{"body": {"n": n}} for n in range(3)]}).json()["resources"]
        claimed = api.post("/v2/queues/kept/claims", params={"limit": 1}, json={"ttl": 300, "grace": 60})
        claim_href = claimed.headers["Location"]
    assert stop_server(first) == 0

    second = start_server_for_test(uri)
    with ApiSession(second.url) as api:
        listed = api.get("/v2/queues/kept/messages",
                         params={"echo": "true", "include_claimed": "true"}).json()["messages"]
        claim = api.get(claim_href)

    assert [m["href"].split("?")[0] for m in listed] == posted
    assert [m["body"] for m in listed] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert claim.status_code == 200
    assert [m["href"].split("?")[0] for m in claim.json()["messages"]] == posted[:1]


def dead_letters(api: ApiSession, dlq: str) -> list[dict[str, Any]]:
    """Return the messages a DLQ lists, with their dead-letter blocks."""
    listed: list[dict[str, Any]] = api.get(f"/v2/queues/{dlq}/messages", params={
        "echo": "true", "include_dead_letter": "true"}).json()["messages"]
    return listed


def test_the_sweeper_dead_letters_a_message_whose_last_claim_lapsed(sweeping_server: RunningServer) -> None:
    with ApiSession(sweeping_server.url, project="lapsed") as api:
        dlq = make_queue_with_dlq(api, "work")
        api.post("/v2/queues/work/messages", json={"messages": [{"body": "poison", "ttl": 600}]})
        claimed = api.post("/v2/queues/work/claims", json={"ttl": 1, "grace": 1})
        assert claimed.status_code == 201

        # both counts at once, then the listing: Swift's listings settle a moment apart
        assert wait_until(lambda: (total(api, dlq), total(api, "work")) == (1, 0), timeout=10)
        assert wait_until(lambda: len(dead_letters(api, dlq)) == 1, timeout=10)
        moved = dead_letters(api, dlq)
        assert [m["body"] for m in moved] == ["poison"]
        assert moved[0]["dead_letter"]["reason"] == "max_claims"
        assert moved[0]["dead_letter"]["source_queue"] == "work"


def test_the_sweeper_dead_letters_expired_messages_when_the_queue_asks_for_it(
        sweeping_server: RunningServer) -> None:
    with ApiSession(sweeping_server.url, project="expired") as api:
        dlq = make_queue_with_dlq(api, "timed", _dead_letter_on_expiry=True)
        api.post("/v2/queues/timed/messages", json={"messages": [{"body": "too late", "ttl": 1}]})

        assert wait_until(lambda: (total(api, dlq), total(api, "timed")) == (1, 0), timeout=10)
        assert wait_until(lambda: len(dead_letters(api, dlq)) == 1, timeout=10)
        moved = dead_letters(api, dlq)
        assert [(m["body"], m["dead_letter"]["reason"]) for m in moved] == [("too late", "expired")]


def test_another_worker_takes_over_the_sweeper_when_its_worker_dies(fast_server: RunningServer) -> None:
    assert wait_until(lambda: len(sweeper_pids(fast_server)) == 1, timeout=15)
    sweeping = sweeper_pids(fast_server)[0]

    os.kill(sweeping, signal.SIGKILL)

    assert wait_until(lambda: len(sweeper_pids(fast_server)) == 2, timeout=10)
    assert sweeper_pids(fast_server)[1] != sweeping
    with ApiSession(fast_server.url) as api:
        dlq = make_queue_with_dlq(api, "after-failover")
        api.post("/v2/queues/after-failover/messages", json={"messages": [{"body": "x", "ttl": 600}]})
        assert api.post("/v2/queues/after-failover/claims", json={"ttl": 1, "grace": 1}).status_code == 201
        assert wait_until(lambda: total(api, dlq) == 1, timeout=10)
