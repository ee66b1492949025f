"""Pre-signed URLs through the unmodified python-zaqarclient against a real server, noauth and token auth.

The client signs with ``Queue.signed_url`` (``zaqarclient/queues/v2/core.py``,
``signed_url_create``) and builds a client from the answer with its
``signed-url`` auth backend (``zaqarclient/auth/signed_url.py``), as its own
functional test does: that client sends URL-Signature, URL-Expires,
URL-Methods, URL-Paths and X-Project-Id and no token.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from zaqarclient.queues import client as zaqar
from zaqarclient.transport import errors as zaqar_errors

from tests.e2e.harness import RunningServer, Store, start_server, stop_server

pytestmark = [pytest.mark.slow, pytest.mark.store_independent]

KEY = "e2e-signing-key-7d1f"
TOKEN = "e2e-member-token"
TOKEN_PROJECT = "signed-e2e"
KEYED = f"[signed_urls]\nsecret_key = {KEY}\n"
KEYED_TOKEN_AUTH = KEYED + f"[auth]\nstrategy = token\n[tokens]\n{TOKEN} = {TOKEN_PROJECT}:member\n"


def keyed_server(store: Store, tmp_path: Path, config: str, token: str | None = None) -> RunningServer:
    """Start a server with a signing key (and whatever else ``config`` sets)."""
    path = tmp_path / "zaqar-lite.conf"
    path.write_text(config)
    return start_server(store.uri(tmp_path), tmp_path, extra_args=["--config", str(path)], token=token)


@pytest.fixture
def noauth_server(store: Store, tmp_path: Path) -> Iterator[RunningServer]:
    """A noauth server with a signing key."""
    running = keyed_server(store, tmp_path, KEYED)
    yield running
    stop_server(running)


@pytest.fixture
def token_server(store: Store, tmp_path: Path) -> Iterator[RunningServer]:
    """A token-auth server with a signing key and one member token."""
    running = keyed_server(store, tmp_path, KEYED_TOKEN_AUTH, token=TOKEN)
    yield running
    stop_server(running)


def signed_client(url: str, share: dict[str, Any]) -> Any:
    """Return a zaqarclient client built from a share answer, as python-zaqarclient documents it."""
    options = {"paths": share["paths"], "expires": share["expires"], "methods": share["methods"],
               "signature": share["signature"], "os_project_id": share["project"]}
    return zaqar.Client(url, version=2, conf={"auth_opts": {"backend": "signed-url", "options": options}})


def bodies(queue: Any) -> list[Any]:
    """Return the bodies of every message of a queue, the caller's own included, in order."""
    return [message.body for message in queue.messages(echo=True)]


def check_signed_use(url: str, owner_queue: Any, share: dict[str, Any], project: str) -> None:
    """Use a share answer through a signed client: read and post, and be refused beyond the grant."""
    name = owner_queue.name
    assert share["paths"] == [f"/v2/queues/{name}/messages"]
    assert share["methods"] == ["GET", "POST"]
    assert share["project"] == project
    assert len(share["signature"]) == 64

    signed_queue = signed_client(url, share).queue(name)
    assert bodies(signed_queue) == ["posted by the owner"]
    signed_queue.post([{"body": "posted through the signed URL", "ttl": 300}])
    assert bodies(owner_queue) == ["posted by the owner", "posted through the signed URL"]

    with pytest.raises(zaqar_errors.ForbiddenError):
        signed_queue.delete()
    with pytest.raises(zaqar_errors.ForbiddenError):
        signed_queue.claim(ttl=60, grace=60, limit=1)


def test_a_signed_client_reads_and_posts_on_a_noauth_server(noauth_server: RunningServer) -> None:
    project = f"e2e-{uuid.uuid4().hex[:12]}"
    owner = zaqar.Client(noauth_server.url, version=2,
                         conf={"auth_opts": {"backend": "noauth", "options": {"os_project_id": project}}})
    queue = owner.queue(f"q-{uuid.uuid4().hex[:12]}", force_create=True)
    queue.post([{"body": "posted by the owner", "ttl": 300}])

    share = queue.signed_url(paths=["messages"], methods=["GET", "POST"], ttl_seconds=3600)

    check_signed_use(noauth_server.url, queue, share, project)


def test_a_signed_client_needs_no_token_on_a_token_auth_server(token_server: RunningServer) -> None:
    owner = zaqar.Client(token_server.url, version=2, conf={"auth_opts": {
        "backend": "keystone", "options": {"os_auth_token": TOKEN, "os_project_id": TOKEN_PROJECT}}})
    queue = owner.queue(f"q-{uuid.uuid4().hex[:12]}", force_create=True)
    queue.post([{"body": "posted by the owner", "ttl": 300}])

    share = queue.signed_url(paths=["messages"], methods=["GET", "POST"])

    check_signed_use(token_server.url, queue, share, TOKEN_PROJECT)
    # the server does ask for tokens: the same listing without token or signature is refused
    plain = requests.get(f"{token_server.url}/v2/queues/{queue.name}/messages", timeout=10,
                         headers={"Client-ID": str(uuid.uuid4()), "X-Project-ID": TOKEN_PROJECT})
    assert plain.status_code == 401


def test_a_tampered_signed_client_is_refused_with_the_reason(noauth_server: RunningServer) -> None:
    project = f"e2e-{uuid.uuid4().hex[:12]}"
    owner = zaqar.Client(noauth_server.url, version=2,
                         conf={"auth_opts": {"backend": "noauth", "options": {"os_project_id": project}}})
    queue = owner.queue(f"q-{uuid.uuid4().hex[:12]}", force_create=True)
    share = queue.signed_url(methods=["GET"])
    widened = {**share, "methods": ["DELETE", "GET"]}

    response = requests.delete(
        f"{noauth_server.url}/v2/queues/{queue.name}/messages", params={"pop": "1"}, timeout=10,
        headers={"Client-ID": str(uuid.uuid4()), "X-Project-ID": project,
                 "URL-Signature": widened["signature"], "URL-Expires": widened["expires"],
                 "URL-Methods": ",".join(widened["methods"]),
                 "URL-Paths": ",".join(widened["paths"])})

    assert response.status_code == 403
    assert response.json()["description"].startswith("The URL-Signature does not match")
    with pytest.raises(zaqar_errors.ForbiddenError):
        signed_client(noauth_server.url, widened).queue(queue.name).pop(count=1)
