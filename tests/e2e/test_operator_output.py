"""What an operator sees of a real ``zaqar-lite serve``: the access log, a busy port."""

from __future__ import annotations

import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.harness import ApiSession, ServerStarter, Store, serve_command, server_environment
from tests.e2e.test_server_process import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.store_independent]

#: one access log line: client, request line, status, milliseconds, project
ACCESS_LINE = r'127\.0\.0\.1 "{request} HTTP/1\.1" {status} \d+ ms project={project}$'


def test_each_request_gets_one_access_log_line_with_its_status_time_and_project(
        start_server_for_test: ServerStarter, store: Store, tmp_path: Path) -> None:
    server = start_server_for_test(store.uri(tmp_path / "data"), workers=1)
    with ApiSession(server.url, project="shop") as api:
        assert api.put("/v2/queues/orders").status_code == 201
        assert api.post("/v2/queues/orders/messages?x=1", json={"messages": [{"body": 1}]}).status_code == 201
        del api.headers["X-Project-ID"]
        assert api.get("/v2/queues/orders/stats").status_code == 400

    lines = {
        "put": ACCESS_LINE.format(request="PUT /v2/queues/orders", status=201, project="shop"),
        "post": ACCESS_LINE.format(request=r"POST /v2/queues/orders/messages\?x=1", status=201,
                                   project="shop"),
        "refused": ACCESS_LINE.format(request="GET /v2/queues/orders/stats", status=400, project="-"),
    }
    assert wait_until(lambda: all(re.search(line, server.log(), re.MULTILINE) for line in lines.values()))
    assert len(re.findall(lines["put"], server.log(), re.MULTILINE)) == 1


def test_the_access_log_can_be_turned_off(start_server_for_test: ServerStarter, store: Store,
                                          tmp_path: Path) -> None:
    config = tmp_path / "quiet.conf"
    config.write_text("[server]\naccess_log = false\n")
    server = start_server_for_test(store.uri(tmp_path / "data"), workers=1,
                                   extra_args=["--config", str(config)])
    with ApiSession(server.url, project="shop") as api:
        assert api.put("/v2/queues/quiet-orders").status_code == 201
        assert api.get("/v2/queues/quiet-orders/stats").status_code == 200
    time.sleep(0.5)  # a line written by the worker would be in the log by now

    assert " ms project=" not in server.log()
    assert "/v2/queues/quiet-orders" not in server.log()


def test_a_busy_port_is_reported_at_once_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [*serve_command(), "serve", "--bind", f"127.0.0.1:{port}",
                   "--storage", f"sqlite:///{tmp_path}/zaqar.db"]

        result = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=tmp_path,
                                env=server_environment())

    assert result.returncode == 1
    assert result.stderr == (f"Error: 127.0.0.1:{port} is already in use (another program listens there; "
                             "choose another address with --bind or [server] bind)\n")
