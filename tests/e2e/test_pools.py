"""Two pools behind a real server, registered with the unmodified python-zaqarclient: a SQLite file
and a Redis server of the test's own; stopping the Redis server answers 503 for its queues only."""

from __future__ import annotations

from typing import Any

import pytest
from zaqarclient.queues import client as zaqar
from zaqarclient.transport import errors as zaqar_errors

from tests.conftest import STORE_KIND
from tests.e2e.harness import ApiSession, ServerStarter

# the deployment's stores are the test's own, whatever $ZAQAR_LITE_TEST_STORE says
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(STORE_KIND != "sqlite", reason="the test starts the stores it needs")]


def admin_client(url: str) -> Any:
    """Return a zaqarclient v2 client (noauth: every caller is an admin)."""
    return zaqar.Client(url, version=2,
                        conf={"auth_opts": {"backend": "noauth", "options": {"os_project_id": "ops"}}})


def test_two_pools_serve_their_queues_and_one_that_is_down_answers_503_for_its_own_only(
        start_server_for_test: ServerStarter, redis_restartable_store: Any, tmp_path: Any) -> None:
    config = tmp_path / "pools.conf"
    config.write_text(f"[auth]\nnoauth_admin_routes = true\n\n"
                      f"[pools]\nenabled = true\nsqlite_dir = {tmp_path}\n"
                      f"allowed_hosts = {redis_restartable_store.uri.split('/')[2]}\n")
    # one worker: what a second one would see of a new pool only after [pools] refresh_interval
    server = start_server_for_test(f"sqlite:///{tmp_path}/default.db", workers=1,
                                   extra_args=["--config", str(config)])
    client = admin_client(server.url)
    lite_uri = f"sqlite:///{tmp_path}/lite.db"
    client.pool("lite", uri=lite_uri, weight=10)
    client.pool("fast", uri=redis_restartable_store.uri, weight=10, flavor="quick")
    client.flavor("quick", pool_list=["fast"])

    assert sorted((p.name, p.weight) for p in client.pools()) == [("fast", 10), ("lite", 10)]
    assert client.pool("lite", auto_create=False).get() == {
        "name": "lite", "uri": lite_uri, "weight": 10, "flavor": "", "href": "/v2/pools/lite"}
    client.pool("lite", auto_create=False).update({"weight": 20})
    assert client.pool("lite", auto_create=False).get()["weight"] == 20
    assert [f.name for f in client.flavors()] == ["quick"]
    assert client.flavor("quick", auto_create=False).get()["pool_list"] == ["fast"]

    with ApiSession(server.url, project="shop") as api:
        assert api.put("/v2/queues/orders", json={}).status_code == 201
        assert api.put("/v2/queues/clicks", json={"_flavor": "quick"}).status_code == 201
        for queue in ("orders", "clicks"):
            posted = api.post(f"/v2/queues/{queue}/messages", json={"messages": [{"body": 1}]})
            assert posted.status_code == 201

        redis_restartable_store.stop()
        down = api.post("/v2/queues/clicks/messages", json={"messages": [{"body": 2}]})
        assert down.status_code == 503, down.text
        assert down.json()["title"] == "Service temporarily unavailable"
        assert api.post("/v2/queues/orders/messages", json={"messages": [{"body": 2}]}).status_code == 201
        health = client.health()
        assert health["catalog_reachable"] is True
        assert health["fast"] == {"storage_reachable": False, "storage": "redis"}
        assert health["lite"]["message_volume"]["total"] == 2

        redis_restartable_store.start()
        again = api.post("/v2/queues/clicks/messages", json={"messages": [{"body": 3}]})
        assert again.status_code == 201, again.text
        assert api.get("/v2/queues/clicks/stats").json()["messages"]["total"] == 2

        with pytest.raises(zaqar_errors.ConflictError):
            client.pool("lite", auto_create=False).delete()
        assert api.delete("/v2/queues/orders").status_code == 204
    client.pool("lite", auto_create=False).delete()
    client.flavor("quick", auto_create=False).delete()
    assert [p.name for p in client.pools()] == ["fast"]
