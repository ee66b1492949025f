"""A pytest plugin that runs Zaqar's own wsgi v2 unit tests over HTTP against a real zaqar-lite.

Loaded with ``-p tests.zaqar_unit.http_adapter`` by ``tests/zaqar_unit/run.py`` in the
virtualenv that holds Zaqar's tests (``.venv-zaqar-unit``), never in the project's. It imports
nothing of zaqar-lite: the server it speaks to is named by ``ZAQAR_LITE_UNIT_URL``.

Zaqar's ``TestBase`` builds Zaqar in-process (``bootstrap.Bootstrap``) and sends each request
through falcon's ``create_environ`` straight into the WSGI app. At run time this plugin replaces
three methods of that base class, and nothing else:

- ``setUp`` loads the test's configuration as Zaqar's does (the tests read option values from
  ``self.conf``) but builds no Zaqar; ``self.boot`` is a stand-in holding Zaqar's transport
  defaults (``_defaults.message_ttl`` etc.) and the storage handles the tests' tearDowns touch
  (``drop_database`` is left to the cleanup below).
- ``simulate_request`` sends the request over HTTP to the server and fills ``self.srmock`` (status
  line, headers, ``headers_dict``) as falcon's ``StartResponseMock`` does; it returns the body as
  the WSGI iterable would be (``[bytes]``, or ``[]`` when empty).
- ``tearDown`` deletes, over HTTP, every queue of every project the test spoke as, so that each
  test starts from an empty store as Zaqar's tearDowns (which drop the MongoDB databases) make it.

A test that reconfigures Zaqar (``self.conf.set_override``) or mocks its controllers reaches
nothing on the server: those are listed in ``expected_failures.txt``.
"""

from __future__ import annotations

import http.client
import json
import os
import types
import urllib.parse
import uuid
from typing import Any

import falcon
from zaqar import tests as zaqar_testing
from zaqar.conf import default, drivers_transport_wsgi, transport
from zaqar.tests.unit.transport.wsgi import base

SERVER_URL = os.environ.get("ZAQAR_LITE_UNIT_URL", "")
#: seconds one request may take before the test fails
TIMEOUT = 30.0


def _status_line(code: int, reason: str) -> str:
    """Return falcon's status line for ``code`` (``falcon.HTTP_201`` is ``'201 Created'``)."""
    try:
        return falcon.code_to_http_status(code)
    except ValueError:
        return f"{code} {reason}"


class _Connection:
    """One kept-alive HTTP connection to the server, reopened when the server closed it."""

    def __init__(self, url: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 80
        self._conn: http.client.HTTPConnection | None = None

    def request(self, method: str, target: str, body: bytes | None,
                headers: dict[str, str]) -> tuple[int, str, list[tuple[str, str]], bytes]:
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT)
            try:
                self._conn.request(method, target, body=body, headers=headers)
                response = self._conn.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._conn.close()
                self._conn = None
                if attempt == 2:
                    raise
                continue
            if response.getheader("connection", "").lower() == "close":
                self._conn.close()
                self._conn = None
            return response.status, response.reason, response.getheaders(), data
        raise AssertionError("unreachable")


_CONNECTION = _Connection(SERVER_URL)


def _stand_in_boot(conf: Any) -> types.SimpleNamespace:
    """Return what the tests read of ``self.boot``: Zaqar's transport defaults and no-op storage handles."""
    transport_cfg = conf[transport.GROUP_NAME]
    defaults = types.SimpleNamespace(message_ttl=transport_cfg.default_message_ttl,
                                     claim_ttl=transport_cfg.default_claim_ttl,
                                     claim_grace=transport_cfg.default_claim_grace)
    connection = types.SimpleNamespace(drop_database=lambda name: None)
    storage = types.SimpleNamespace(connection=connection, message_databases=[])
    return types.SimpleNamespace(
        transport=types.SimpleNamespace(_defaults=defaults),
        storage=types.SimpleNamespace(_storage=storage, close=lambda: None),
        control=types.SimpleNamespace(queues_database="queues", close=lambda: None))


def set_up(self: Any) -> None:
    """Zaqar's ``TestBase.setUp`` without the in-process Zaqar."""
    zaqar_testing.TestBase.setUp(self)
    if not self.config_file:
        self.skipTest("No config specified")
    self.conf.register_opts(default.ALL_OPTS)
    self.conf.register_opts(transport.ALL_OPTS, group=transport.GROUP_NAME)
    self.transport_cfg = self.conf[transport.GROUP_NAME]
    self.conf.register_opts(drivers_transport_wsgi.ALL_OPTS, group=drivers_transport_wsgi.GROUP_NAME)
    self.wsgi_cfg = self.conf[drivers_transport_wsgi.GROUP_NAME]
    self.conf.unreliable = True
    self.conf.admin_mode = True
    self.boot = _stand_in_boot(self.conf)
    self.app = None
    self.srmock = falcon.testing.StartResponseMock()
    self._projects_spoken: set[str] = set()
    self.headers = {
        "Client-ID": str(uuid.uuid4()),
        "X-ROLES": "admin",
        "X-USER-ID": "a12d157c7d0d41999096639078fd11fc",
        "X-TENANT-ID": "abb69142168841fcaa2785791b92467f",
    }


def simulate_request(self: Any, path: str, project_id: str | None = None,
                     **kwargs: Any) -> list[bytes] | None:
    """Send the request to the server over HTTP; fill ``self.srmock`` and return the body as WSGI would."""
    headers = dict(kwargs.get("headers", self.headers))
    project_id = "518b51ea133c4facadae42c328d6b77b" if project_id is None else project_id
    if kwargs.get("need_project_id", True):
        headers["X-Project-ID"] = headers.get("X-Project-ID", project_id)
    try:
        path.encode("latin1").decode("utf-8", "replace")
    except UnicodeEncodeError:
        # as Zaqar's simulate_request: such a path never reaches the app
        self.srmock.status = falcon.HTTP_400
        return None
    if headers.get("X-Project-ID"):
        self._projects_spoken.add(headers["X-Project-ID"])
    method = kwargs.get("method", "GET")
    query = kwargs.get("query_string") or ""
    target = urllib.parse.quote(path, safe="/%:@!$&'()*+,;=-._~") + (f"?{query}" if query else "")
    body = kwargs.get("body")
    data = body.encode("utf-8") if isinstance(body, str) else body
    headers.setdefault("Host", "openstack.example.com")
    code, reason, response_headers, payload = _CONNECTION.request(method, target, data, headers)
    self.srmock(_status_line(code, reason), response_headers)
    return [payload] if payload else []


def _delete_every_queue(self: Any) -> None:
    """Delete, over HTTP, every queue of each project the test spoke as."""
    for project in sorted(self._projects_spoken):
        headers = {"Client-ID": str(uuid.uuid4()),
                   "X-Project-ID": project}
        for _ in range(100):  # pages of 20 queues; a test makes far fewer
            code, _, _, payload = _CONNECTION.request("GET", "/v2/queues?limit=20", None, headers)
            queues = json.loads(payload).get("queues", []) if code == 200 and payload else []
            if not queues:
                break
            for queue in queues:
                name = urllib.parse.quote(queue["name"], safe="")
                _CONNECTION.request("DELETE", f"/v2/queues/{name}", None, headers)


def tear_down(self: Any) -> None:
    """Leave an empty store behind, then run the rest of Zaqar's tearDown chain (oslotest's)."""
    if getattr(self, "_projects_spoken", None):
        _delete_every_queue(self)
    zaqar_testing.TestBase.tearDown(self)


def pytest_configure(config: Any) -> None:
    """Replace the in-process request path of Zaqar's wsgi test base class before any test runs."""
    if not SERVER_URL:
        raise RuntimeError("ZAQAR_LITE_UNIT_URL must name the zaqar-lite server to test")
    base.TestBase.setUp = set_up
    base.TestBase.tearDown = tear_down
    base.TestBase.simulate_request = simulate_request
