"""``[auth] strategy = keystone``: a real server validates tokens of a real Keystone.

The Keystone (tests/servers/keystone.py) has the projects ``alpha`` (a member
and an admin) and ``beta`` (a member). The server asks it through
keystonemiddleware's ``auth_token``; the project and role come from the token.
Authentication does not touch the store, so these run on the default store only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from zaqarclient.queues import client as zaqar
from zaqarclient.transport import errors as zaqar_errors

from tests.e2e.harness import STORES, ApiSession, RunningServer, start_server, stop_server
from tests.servers.keystone import (  # noqa: F401  (the fixture)
    ADMIN_PASSWORD,
    USER_PASSWORD,
    KeystoneServer,
    keystone_server_fixture,
)

pytestmark = pytest.mark.store_independent


@pytest.fixture(scope="module")
def tokens(keystone_server: KeystoneServer) -> dict[str, str]:
    """A project-scoped token of each user."""
    return {user: keystone_server.token(user) for user in ("alpha-member", "alpha-admin", "beta-member")}


@pytest.fixture(scope="module")
def keystone_zaqar(keystone_server: KeystoneServer, tokens: dict[str, str],
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A zaqar-lite with ``[auth] strategy = keystone`` on the session's Keystone."""
    directory = tmp_path_factory.mktemp("keystone-zaqar")
    config = directory / "zaqar-lite.conf"
    config.write_text("[auth]\nstrategy = keystone\n[console]\nenabled = true\n"
                      + keystone_server.authtoken_section())
    running = start_server(STORES["sqlite"].uri(directory), directory, extra_args=["--config", str(config)],
                           token=tokens["alpha-member"])
    yield running
    stop_server(running)


def as_user(server: RunningServer, token: str | None, project: str | None = None) -> ApiSession:
    """Return a session sending ``token`` (and ``X-Project-ID`` only when ``project`` is given)."""
    session = ApiSession(server.url)
    del session.headers["X-Project-ID"]
    if project is not None:
        session.headers["X-Project-ID"] = project
    if token is not None:
        session.headers["X-Auth-Token"] = token
    return session


def queue_names(listing: requests.Response) -> list[str]:
    """Return the names of a queue listing (an empty one may be a 204)."""
    assert listing.status_code in (200, 204), listing.text
    return [q["name"] for q in listing.json()["queues"]] if listing.status_code == 200 else []


def test_a_member_token_reads_and_writes_the_queues_of_its_project(keystone_zaqar, tokens, keystone_server):
    alpha = keystone_server.projects["alpha"]
    with as_user(keystone_zaqar, tokens["alpha-member"]) as member:
        assert member.put("/v2/queues/orders", json={}).status_code == 201
        posted = member.post("/v2/queues/orders/messages", json={"messages": [{"ttl": 300, "body": "one"}]})
        assert posted.status_code == 201
        listed = member.get("/v2/queues/orders/messages", params={"echo": "true"})
        assert listed.status_code == 200
        assert [m["body"] for m in listed.json()["messages"]] == ["one"]
    # naming the token's own project is allowed too, and sees the same queue
    with as_user(keystone_zaqar, tokens["alpha-member"], project=alpha) as named:
        assert queue_names(named.get("/v2/queues")) == ["orders"]
    # the other project's member does not see it
    with as_user(keystone_zaqar, tokens["beta-member"]) as beta:
        assert queue_names(beta.get("/v2/queues")) == []


def test_an_admin_token_reaches_the_admin_routes(keystone_zaqar, tokens):
    with as_user(keystone_zaqar, tokens["alpha-admin"]) as admin:
        assert admin.get("/v2/health").status_code == 200
        assert admin.get("/v2/queue_templates").status_code == 200


def test_a_member_token_is_refused_the_admin_routes(keystone_zaqar, tokens):
    with as_user(keystone_zaqar, tokens["alpha-member"]) as member:
        health = member.get("/v2/health")
        assert health.status_code == 403
        assert health.json()["description"] == "This resource needs the admin role."
        assert member.get("/v2/queue_templates").status_code == 403


def test_identity_headers_sent_by_a_client_grant_nothing(keystone_zaqar, tokens):
    forged = {"X-Roles": "admin", "X-Identity-Status": "Confirmed", "X-Project-Id": "forged"}
    with as_user(keystone_zaqar, None) as anonymous:
        assert anonymous.get("/v2/queues", headers=forged).status_code == 401
    with as_user(keystone_zaqar, tokens["alpha-member"]) as member:
        assert member.get("/v2/health", headers={"X-Roles": "admin"}).status_code == 403


@pytest.mark.parametrize("token", [None, "", "not-a-keystone-token",
                                   "gAAAAABpRandomLookingFernetTokenThatKeystoneNeverIssued0123456789"])
def test_a_missing_or_unknown_token_is_401(keystone_zaqar, token):
    with as_user(keystone_zaqar, token) as session:
        answer = session.get("/v2/queues")
    assert answer.status_code == 401
    assert answer.json()["description"] == "A valid Keystone token is required in the X-Auth-Token header."


def test_a_revoked_token_is_401(keystone_zaqar, keystone_server):
    token = keystone_server.token("alpha-member")
    keystone_server.revoke(token)
    with as_user(keystone_zaqar, token) as session:
        assert session.get("/v2/queues").status_code == 401


def test_a_token_of_one_project_cannot_touch_another(keystone_zaqar, tokens, keystone_server):
    beta = keystone_server.projects["beta"]
    with as_user(keystone_zaqar, tokens["alpha-member"], project=beta) as alpha_member:
        answer = alpha_member.put("/v2/queues/stolen", json={})
        assert answer.status_code == 403
        assert answer.json()["description"] == "X-Project-ID does not match the project of the token."
    with as_user(keystone_zaqar, tokens["alpha-admin"], project=beta) as alpha_admin:
        assert alpha_admin.get("/v2/queues").status_code == 403
    with as_user(keystone_zaqar, tokens["beta-member"]) as beta_member:
        assert queue_names(beta_member.get("/v2/queues")) == []


def test_the_versions_document_stays_public(keystone_zaqar):
    with as_user(keystone_zaqar, None) as anonymous:
        assert anonymous.get("/").status_code == 300


def test_a_system_scoped_token_is_refused_as_naming_no_project(keystone_zaqar, keystone_server):
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "admin", "domain": {"id": "default"}, "password": ADMIN_PASSWORD}}},
        "scope": {"system": {"all": True}}}}
    issued = requests.post(f"{keystone_server.url}/auth/tokens", json=body, timeout=30)
    assert issued.status_code == 201
    with as_user(keystone_zaqar, issued.headers["X-Subject-Token"]) as system_admin:
        answer = system_admin.get("/v2/queues")
    assert answer.status_code == 403
    assert answer.json()["description"] == "The Keystone token is not scoped to a project."


def keystone_client(server: RunningServer, keystone: KeystoneServer, user: str, project: str) -> zaqar.Client:
    """Return python-zaqarclient with its keystone backend: it gets its token from Keystone itself."""
    return zaqar.Client(server.url, version=2, conf={"auth_opts": {"backend": "keystone", "options": {
        "os_auth_url": keystone.url, "os_username": user, "os_password": USER_PASSWORD,
        "os_project_name": project, "os_user_domain_id": "default", "os_project_domain_id": "default"}}})


def test_python_zaqarclient_with_keystone_credentials_works_unchanged(keystone_zaqar, keystone_server):
    member = keystone_client(keystone_zaqar, keystone_server, "alpha-member", "alpha")
    queue = member.queue("from-zaqarclient")
    queue.post([{"body": {"n": 1}, "ttl": 300}])
    assert [m.body for m in queue.messages(echo=True)] == [{"n": 1}]
    with pytest.raises(zaqar_errors.ForbiddenError):
        member.health()
    admin = keystone_client(keystone_zaqar, keystone_server, "alpha-admin", "alpha")
    assert isinstance(admin.health(), dict)
    # the admin of the same project sees the member's message
    assert admin.queue("from-zaqarclient").stats["messages"]["total"] == 1


def test_console_pages_need_a_keystone_token_sent_as_a_header(keystone_zaqar, tokens, keystone_server):
    page = f"/console/projects/{keystone_server.projects['alpha']}/queues"
    with as_user(keystone_zaqar, tokens["alpha-member"]) as proxied:
        assert proxied.get(page, headers={"Accept": "text/html"}).status_code == 200
    with as_user(keystone_zaqar, None) as anonymous:
        assert anonymous.get(page, headers={"Accept": "text/html"}).status_code == 401
    with as_user(keystone_zaqar, tokens["beta-member"]) as other:
        assert other.get(page, headers={"Accept": "text/html"}).status_code == 403


def test_metrics_needs_a_keystone_token_with_the_admin_role(keystone_zaqar, tokens):
    # its queue series name the queues of every project
    for token, status in ((None, 401), ("not-a-token", 401), (tokens["alpha-member"], 403),
                          (tokens["alpha-admin"], 200)):
        with as_user(keystone_zaqar, token) as session:
            answer = session.get("/metrics")
            assert answer.status_code == status, (token, answer.text)
    with as_user(keystone_zaqar, tokens["alpha-admin"]) as admin:
        assert "zaqar_lite_messages_posted_total" in admin.get("/metrics").text
