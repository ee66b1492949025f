"""Small helpers shared by the API tests: posting, claiming and checking error bodies."""

from __future__ import annotations

import urllib.parse
import uuid
from typing import Any

import falcon.testing

JSON_PATCH = "application/openstack-messaging-v2.0-json-patch"


def headers(project: str = "project-a", client_id: str | None = None) -> dict[str, str]:
    """Return valid noauth headers for a project, with a fresh Client-ID unless one is given."""
    return {"Client-ID": client_id or str(uuid.uuid4()), "X-Project-ID": project}


def assert_error(result: falcon.testing.Result, status: int, title: str | None = None) -> dict[str, Any]:
    """Check an error answer: its status and a JSON body with a title and a description."""
    assert result.status_code == status, result.text
    assert result.headers["content-type"].startswith("application/json")
    body = result.json
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["description"], str) and body["description"]
    if title is not None:
        assert body["title"] == title
    return body


def post(client: falcon.testing.TestClient, queue: str, *bodies: Any, **fields: Any) -> list[str]:
    """Post one message per body (with the same extra fields) and return their ids."""
    messages = [{"body": body, **fields} for body in bodies]
    result = client.simulate_post(f"/v2/queues/{queue}/messages", json={"messages": messages})
    assert result.status_code == 201, result.text
    return [href.rsplit("/", 1)[1] for href in result.json["resources"]]


def claim(client: falcon.testing.TestClient, queue: str, limit: int | None = None,
          **options: int) -> tuple[str, list[dict[str, Any]]]:
    """Create a claim that must succeed; return its id and the messages it holds."""
    params = {"limit": limit} if limit is not None else None
    result = client.simulate_post(f"/v2/queues/{queue}/claims", params=params, json=options)
    assert result.status_code == 201, result.text
    return result.headers["location"].rsplit("/", 1)[1], result.json["messages"]


def follow(client: falcon.testing.TestClient, href: str) -> falcon.testing.Result:
    """GET a ``links`` href (path and query string) as returned by the API."""
    parts = urllib.parse.urlsplit(href)
    return client.simulate_get(parts.path, query_string=parts.query)
