"""One composition root: ``create_app`` builds each service once and hands each resource the ones it uses.

Read from the route table (``api.app.routes``) and, for what no resource may
do (build a service, cast a store, reach through the messaging service for
its store), from the source of ``zaqar_lite/api/`` with :mod:`ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from zaqar_lite.api import health, pools, subscriptions, templates, topics
from zaqar_lite.api.app import Services, build_services, routes
from zaqar_lite.config import PoolSettings, load_settings
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_deployment

API = Path(__file__).resolve().parents[2] / "zaqar_lite" / "api"
#: the services of the app: only the composition root (``api/app.py``) builds them
SERVICES = {"Messaging", "QueueTemplates", "Topics", "Subscriptions", "PoolAdmin", "LongPoll",
            "EncryptedStorage"}


@pytest.fixture
def services(tmp_path) -> Services:
    """The services of an app on a SQLite file, with pools enabled."""
    settings = load_settings(None, storage_uri=f"sqlite:///{tmp_path}/zaqar.db").replace(
        pools=PoolSettings(enabled=True, sqlite_dir=str(tmp_path)))
    return build_services(settings, open_deployment(settings))


def resources(services: Services, kind: type) -> list[object]:
    """Return every routed resource of a kind."""
    found = [resource for _, resource in routes(services) if isinstance(resource, kind)]
    assert found, f"no route serves a {kind.__name__}"
    return found


def test_the_pool_routes_and_health_share_one_pool_administration(services):
    assert services.pools is not None
    held = [r.pools for r in resources(services, pools.AdminResource)]
    held += [r.pools for r in resources(services, health.Health)]
    assert len(held) == 5
    assert all(admin is services.pools for admin in held)


def test_without_pools_the_pool_routes_and_health_have_no_administration(tmp_path):
    settings = load_settings(None, storage_uri=f"sqlite:///{tmp_path}/zaqar.db")
    services = build_services(settings, open_deployment(settings))
    assert services.pools is None
    assert all(r.pools is None for r in resources(services, pools.AdminResource))


def test_the_template_routes_serve_the_templates_new_queues_start_from(services):
    held = [r.templates for r in resources(services, templates.TemplateResource)]
    assert len(held) == 2
    assert all(t is services.templates for t in held)
    assert services.messaging.templates is services.templates


def test_the_messaging_service_forwards_nothing_to_the_templates():
    for forwarder in ("list_templates", "get_template", "put_template", "delete_template"):
        assert not hasattr(Messaging, forwarder), forwarder


def test_the_topic_routes_share_one_topic_service(services):
    held = [r.topics for r in resources(services, topics.TopicResource)]
    assert len(held) == 6
    assert all(t is services.topics for t in held)
    assert services.topics.messaging is services.messaging


def test_queue_and_topic_subscription_routes_share_one_subscription_service(services):
    held = [r.service for r in resources(services, subscriptions.SubscriptionResource)]
    assert len(held) == 9  # five of queues (the subscriber's resume among them), four of topics
    assert all(s is services.subscriptions for s in held)
    assert services.subscriptions.storage is services.messaging.storage


def test_a_messaging_service_handed_in_without_its_templates_is_refused(tmp_path):
    settings = load_settings(None, storage_uri=f"sqlite:///{tmp_path}/zaqar.db")
    storage = open_deployment(settings)
    with pytest.raises(ValueError, match="queue templates"):
        build_services(settings, storage, messaging=Messaging(storage, settings))


def api_sources() -> list[Path]:
    """Every module of the HTTP layer but the composition root."""
    return sorted(p for p in API.rglob("*.py") if p != API / "app.py")


def called_name(node: ast.Call) -> str | None:
    """The name a call calls: ``f`` of ``f(...)``, ``C`` of ``module.C(...)``."""
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


@pytest.mark.parametrize("path", api_sources(), ids=lambda p: str(p.relative_to(API)))
def test_no_resource_builds_a_service_casts_a_store_or_reaches_through_the_messaging_service(path):
    tree = ast.parse(path.read_text(), str(path))
    calls = {called_name(node) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    assert calls & SERVICES == set(), "services are built in api/app.py and handed in"
    assert "cast" not in calls, "a resource is handed the object it uses, never a cast one"
    reached = [ast.unparse(node) for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and node.attr in ("storage", "deployment", "templates")
               and ast.unparse(node.value).endswith("messaging")]
    assert reached == [], "a resource is handed the store or service it uses"
