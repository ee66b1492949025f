"""The Keystone v3 stand-in answers the calls tempest makes, over loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from tests.tempest.keystone_standin import KeystoneStandin, Project, User

ADMIN = User(id="admin", name="admin", password="secret",
             project=Project(id="admin-project", token="admin-token"), project_name="admin")
POOL = [Project(id="project-1", token="token-1"), Project(id="project-2", token="token-2")]
MESSAGING = "http://127.0.0.1:9/"


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every request on loopback whatever proxy the environment names."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture
def keystone() -> Iterator[KeystoneStandin]:
    server = KeystoneStandin(ADMIN, POOL, MESSAGING)
    server.start()
    yield server
    server.stop()


def password_auth(name: str, password: str, project: dict[str, str]) -> dict[str, object]:
    return {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": name, "password": password, "domain": {"name": "Default"}}}},
        "scope": {"project": project}}}


def test_a_password_gets_the_projects_token_and_a_catalog_pointing_at_the_server(keystone):
    answer = requests.post(f"{keystone.url}/v3/auth/tokens",
                           json=password_auth("admin", "secret", {"name": "admin"}), timeout=5)
    assert answer.status_code == 201
    assert answer.headers["X-Subject-Token"] == "admin-token"
    token = answer.json()["token"]
    assert token["project"] == {"id": "admin-project", "name": "admin",
                                "domain": {"id": "default", "name": "Default"}}
    messaging = next(s for s in token["catalog"] if s["type"] == "messaging")
    assert {e["url"] for e in messaging["endpoints"]} == {"http://127.0.0.1:9"}
    assert {e["interface"] for e in messaging["endpoints"]} == {"public", "internal", "admin"}


def test_a_wrong_password_or_project_is_refused_with_401(keystone):
    for body in (password_auth("admin", "wrong", {"name": "admin"}),
                 password_auth("admin", "secret", {"name": "another"})):
        answer = requests.post(f"{keystone.url}/v3/auth/tokens", json=body, timeout=5)
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == 401


def test_each_new_project_takes_the_next_token_of_the_pool(keystone):
    admin = {"X-Auth-Token": "admin-token"}
    roles = requests.get(f"{keystone.url}/v3/roles", headers=admin, timeout=5).json()["roles"]
    member = next(r["id"] for r in roles if r["name"] == "member")
    tokens = []
    for name in ("first", "second"):
        project = requests.post(f"{keystone.url}/v3/projects", headers=admin, timeout=5,
                                json={"project": {"name": name, "domain_id": "default"}}).json()["project"]
        user = requests.post(f"{keystone.url}/v3/users", headers=admin, timeout=5,
                             json={"user": {"name": f"{name}-user", "password": "pw"}}).json()["user"]
        role_url = f"{keystone.url}/v3/projects/{project['id']}/users/{user['id']}/roles/{member}"
        assigned = requests.put(role_url, headers=admin, timeout=5)
        assert assigned.status_code == 204
        answer = requests.post(f"{keystone.url}/v3/auth/tokens", timeout=5,
                               json=password_auth(f"{name}-user", "pw", {"id": project["id"]}))
        assert answer.json()["token"]["project"]["name"] == name
        tokens.append((project["id"], answer.headers["X-Subject-Token"]))
    assert tokens == [("project-1", "token-1"), ("project-2", "token-2")]
    full = requests.post(f"{keystone.url}/v3/projects", headers=admin, timeout=5,
                         json={"project": {"name": "third"}})
    assert full.status_code == 404


def test_the_admin_api_needs_a_known_token(keystone):
    answer = requests.get(f"{keystone.url}/v3/roles", headers={"X-Auth-Token": "nope"}, timeout=5)
    assert answer.status_code == 401
    assert requests.get(f"{keystone.url}/v3", timeout=5).json()["version"]["id"] == "v3.14"
