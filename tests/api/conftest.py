"""Fixtures of the API suite: more clients on the same app, and apps with other settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon.testing
import pytest

from tests.api.helpers import headers
from zaqar_lite.api.app import create_app
from zaqar_lite.storage import open_storage
from zaqar_lite.storage.base import Storage


@pytest.fixture
def other_client(client) -> falcon.testing.TestClient:
    """Another client (its own Client-ID) of project-a, on the same app."""
    return falcon.testing.TestClient(client.app, headers=headers("project-a"))


@pytest.fixture
def project_b(client) -> falcon.testing.TestClient:
    """A client of project-b, on the same app and store as ``client``."""
    return falcon.testing.TestClient(client.app, headers=headers("project-b"))


@pytest.fixture
def bare(client) -> falcon.testing.TestClient:
    """A client on the same app that sends no default headers at all."""
    return falcon.testing.TestClient(client.app)


@pytest.fixture
def make_client(settings, clock) -> Callable[..., falcon.testing.TestClient]:
    """Build a client on an app with changed settings (same store file, same clock)."""
    def build(default_headers: dict[str, str] | None = None, **changes: Any) -> falcon.testing.TestClient:
        app = create_app(settings.replace(**changes), clock=clock)
        return falcon.testing.TestClient(app, headers=default_headers)
    return build


@pytest.fixture
def storage(settings) -> Storage:
    """A driver the test holds on to, so it can make the store misbehave."""
    return open_storage(settings.storage_uri)


@pytest.fixture
def store_client(settings, clock, storage) -> falcon.testing.TestClient:
    """A client on an app built around the ``storage`` fixture."""
    app = create_app(settings, storage=storage, clock=clock)
    return falcon.testing.TestClient(app, headers=headers("project-a"))

