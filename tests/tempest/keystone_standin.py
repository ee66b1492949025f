"""A tiny Keystone v3 stand-in: the identity endpoint tempest needs, nothing more.

tempest gets its credentials and service catalog from Keystone, and (with
dynamic credentials, as in Zaqar's own gate) creates a fresh project and user
for each test class through Keystone's admin API. This stand-in answers exactly
those calls, in memory:

- ``GET /v3``: the version document;
- ``POST /v3/auth/tokens`` (password or token method): the project's one fixed
  token in ``X-Subject-Token``, with a catalog whose ``messaging`` entry is the
  zaqar-lite server under test;
- ``GET /v3/domains?name=``, ``GET /v3/roles``, ``POST /v3/projects``,
  ``POST /v3/users``, ``PUT /v3/projects/{p}/users/{u}/roles/{r}``, and the
  matching ``GET``/``DELETE`` of a project or user.

Each new project takes the next (project id, token) pair from a pool fixed in
advance, which is also written into zaqar-lite's ``[tokens]``: zaqar-lite never
talks to this server, it checks the tokens through its own token auth. This
stands in for the identity service only.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

DOMAIN = {"id": "default", "name": "Default"}
REGION = "RegionOne"
ROLES = [{"id": name, "name": name, "domain_id": None} for name in ("admin", "member", "reader")]
#: far in the future, in the ISO 8601 form tempest parses
EXPIRES_AT = "2099-12-31T23:59:59.000000Z"
ISSUED_AT = "2026-01-01T00:00:00.000000Z"


@dataclasses.dataclass(frozen=True)
class Project:
    """A project and the one token every user of it is given."""

    id: str
    token: str


@dataclasses.dataclass
class User:
    """A user, its password and the project it has a role on."""

    id: str
    name: str
    password: str
    project: Project | None = None
    project_name: str = ""


class NotFound(Exception):
    """Answered with 404."""


class KeystoneStandin:
    """A Keystone v3 identity endpoint on 127.0.0.1, served from a thread.

    Args:
        admin: the admin user (with its project), whose credentials tempest is configured with.
        pool: the projects handed out, in order, to ``POST /v3/projects``.
        messaging_url: the root URL of the zaqar-lite server under test.
    """

    def __init__(self, admin: User, pool: list[Project], messaging_url: str) -> None:
        self.messaging_url = messaging_url.rstrip("/")
        self.pool = list(pool)
        self.users = {admin.id: admin}
        self.projects: dict[str, tuple[Project, str]] = {}
        if admin.project is not None:
            self.projects[admin.project.id] = (admin.project, admin.project_name)
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Return the root URL, e.g. ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        """Start answering requests."""
        self._thread.start()

    def stop(self) -> None:
        """Stop answering and close the listening socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # -- authentication ----------------------------------------------------------------------

    def authenticate(self, auth: dict[str, Any]) -> User | None:
        """Return the user a v3 ``auth`` object proves (scoped to its project), or None."""
        identity = auth.get("identity") or {}
        methods = identity.get("methods") or []
        user = None
        if "password" in methods:
            given = (identity.get("password") or {}).get("user") or {}
            user = next((u for u in self.users.values()
                         if given.get("id", given.get("name")) in (u.id, u.name)
                         and given.get("password") == u.password), None)
        elif "token" in methods:
            user = self.by_token((identity.get("token") or {}).get("id"))
        if user is None or user.project is None:
            return None
        scope = (auth.get("scope") or {}).get("project") or {}
        if scope and user.project.id != scope.get("id") and user.project_name != scope.get("name"):
            return None
        return user

    def by_token(self, token: str | None) -> User | None:
        """Return a user of the project whose token this is, or None."""
        return next((u for u in self.users.values() if u.project and u.project.token == token), None)

    def token_body(self, user: User) -> dict[str, Any]:
        """Return the body of a project-scoped token of ``user``."""
        def service(kind: str, name: str, url: str) -> dict[str, Any]:
            return {"type": kind, "name": name, "id": name,
                    "endpoints": [{"id": f"{name}-{interface}", "interface": interface,
                                   "region": REGION, "region_id": REGION, "url": url}
                                  for interface in ("public", "internal", "admin")]}

        assert user.project is not None
        role = "admin" if user.name == "admin" else "member"
        return {"token": {
            "methods": ["password"], "expires_at": EXPIRES_AT, "issued_at": ISSUED_AT,
            "audit_ids": [user.project.token[:22]],
            "user": {"id": user.id, "name": user.name, "domain": DOMAIN, "password_expires_at": None},
            "project": {"id": user.project.id, "name": user.project_name, "domain": DOMAIN},
            "roles": [{"id": role, "name": role}],
            "catalog": [service("messaging", "zaqar", self.messaging_url),
                        service("identity", "keystone", f"{self.url}/v3")],
        }}

    # -- the admin API tempest's dynamic credentials use -------------------------------------

    def project_body(self, project_id: str) -> dict[str, Any]:
        """Return ``{"project": ...}`` of a project."""
        if project_id not in self.projects:
            raise NotFound(f"Could not find project: {project_id}.")
        project, name = self.projects[project_id]
        return {"project": {"id": project.id, "name": name, "domain_id": DOMAIN["id"],
                            "enabled": True, "description": "", "is_domain": False}}

    def create_project(self, body: dict[str, Any]) -> dict[str, Any]:
        """Give the next project of the pool the requested name."""
        with self.lock:
            if not self.pool:
                raise NotFound("The pool of projects (and tokens) is used up.")
            project = self.pool.pop(0)
            self.projects[project.id] = (project, body["project"]["name"])
        return self.project_body(project.id)

    def user_body(self, user_id: str) -> dict[str, Any]:
        """Return ``{"user": ...}`` of a user."""
        if user_id not in self.users:
            raise NotFound(f"Could not find user: {user_id}.")
        user = self.users[user_id]
        return {"user": {"id": user.id, "name": user.name, "domain_id": DOMAIN["id"], "enabled": True}}

    def create_user(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a user (its project comes with its first role assignment)."""
        given = body["user"]
        with self.lock:
            user_id = f"user-{len(self.users)}"
            self.users[user_id] = User(id=user_id, name=given["name"], password=given["password"])
        return self.user_body(user_id)

    def delete_user(self, user_id: str) -> None:
        """Forget a user (its project's data stays in zaqar-lite, as with Keystone)."""
        self.user_body(user_id)
        del self.users[user_id]

    def delete_project(self, project_id: str) -> None:
        """Check the project exists; its token is never handed out again."""
        self.project_body(project_id)

    def assign_role(self, project_id: str, user_id: str) -> None:
        """Give a user a role on a project: here, make it that project's user."""
        self.project_body(project_id)
        self.user_body(user_id)
        self.users[user_id].project, self.users[user_id].project_name = self.projects[project_id]

    def routes(self) -> list[tuple[str, str, int, Callable[..., Any]]]:
        """Return (method, path pattern, status, handler of query and body) for the admin API."""
        def domains(query: dict[str, list[str]], body: Any) -> dict[str, Any]:
            named = query.get("name", [DOMAIN["name"]])[0] == DOMAIN["name"]
            return {"domains": [dict(DOMAIN, enabled=True)] if named else []}

        project, user = r"/v3/projects/(?P<project_id>[^/]+)", r"/v3/users/(?P<user_id>[^/]+)"
        return [
            ("GET", r"/v3/domains", 200, domains),
            ("GET", r"/v3/roles", 200, lambda query, body: {"roles": ROLES}),
            ("POST", r"/v3/projects", 201, lambda query, body: self.create_project(body)),
            ("GET", project, 200, lambda query, body, project_id: self.project_body(project_id)),
            ("DELETE", project, 204, lambda query, body, project_id: self.delete_project(project_id)),
            ("POST", r"/v3/users", 201, lambda query, body: self.create_user(body)),
            ("GET", user, 200, lambda query, body, user_id: self.user_body(user_id)),
            ("DELETE", user, 204, lambda query, body, user_id: self.delete_user(user_id)),
            ("PUT", rf"{project}/users/(?P<user_id>[^/]+)/roles/[^/]+", 204,
             lambda query, body, project_id, user_id: self.assign_role(project_id, user_id)),
        ]


class KeystoneHandler(BaseHTTPRequestHandler):
    """The stand-in's HTTP handler; :func:`_handler` binds it to one :class:`KeystoneStandin`."""

    keystone: KeystoneStandin
    routes: list[tuple[str, str, int, Callable[..., Any]]]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base signature
        pass

    def _send(self, status: int, body: dict[str, Any] | None, token: str | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if token is not None:
            self.send_header("X-Subject-Token", token)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, title: str, message: str) -> None:
        self._send(status, {"error": {"code": status, "title": title, "message": message}})

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    def _tokens(self) -> None:
        if self.command == "GET":
            user = self.keystone.by_token(self.headers.get("X-Subject-Token"))
            if user is None:
                self._error(404, "Not Found", "The token is not known.")
            else:
                self._send(200, self.keystone.token_body(user), self.headers.get("X-Subject-Token"))
            return
        try:
            auth = self._body()["auth"]
        except (ValueError, KeyError, TypeError):
            self._error(400, "Bad Request", "Expected a JSON body with an 'auth' object.")
            return
        user = self.keystone.authenticate(auth)
        if user is None or user.project is None:
            self._error(401, "Unauthorized", "The request you have made requires authentication.")
            return
        self._send(201, self.keystone.token_body(user), user.project.token)

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        if self.command == "GET" and path in ("", "/v3"):
            self._send(200, {"version": {
                "id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
                "links": [{"rel": "self", "href": f"{self.keystone.url}/v3/"}],
                "media-types": [{"base": "application/json",
                                 "type": "application/vnd.openstack.identity-v3+json"}]}})
            return
        if path == "/v3/auth/tokens" and self.command in ("GET", "POST"):
            self._tokens()
            return
        if self.keystone.by_token(self.headers.get("X-Auth-Token")) is None:
            self._error(401, "Unauthorized", "The request you have made requires authentication.")
            return
        for method, pattern, status, handler in self.routes:
            match = re.fullmatch(pattern, path)
            if method == self.command and match:
                try:
                    body = handler(parse_qs(url.query), self._body(), **match.groupdict())
                except (NotFound, KeyError) as exc:
                    self._error(404, "Not Found", str(exc))
                    return
                self._send(status, body)
                return
        self._error(404, "Not Found", f"{self.command} {path} is not served by this stand-in.")

    do_GET = do_POST = do_PUT = do_DELETE = _dispatch  # noqa: N815 - http.server's names


def _handler(keystone: KeystoneStandin) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (KeystoneHandler,), {"keystone": keystone, "routes": keystone.routes()})
