"""Every mix of store kinds as the default store and a pool, under the default (gevent) worker.

A store opened for greenlets must never be called from a thread of gevent's
pool, and the reverse: with a SQLite store beside a Redis one, the health
answered 500 (``greenlet.error: Cannot switch to a different thread``) and
other routes failed now and then. Each case registers the pool, then hits the
health, listings of several projects, queue creations with a dead-letter
queue and the console, many at once, and expects every answer to be right.
"""

from __future__ import annotations

import concurrent.futures
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import STORE_KIND
from tests.e2e.harness import ApiSession, ServerStarter

# the deployment's stores are the test's own, whatever $ZAQAR_LITE_TEST_STORE says
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(STORE_KIND != "sqlite", reason="the test starts the stores it needs")]

#: (default store, pool): every pair with SQLite or Redis on one side
MIXES = [("sqlite", "redis"), ("redis", "sqlite"), ("sqlite", "sqlite"), ("redis", "redis"),
         ("sqlite", "mongodb"), ("mongodb", "sqlite"), ("sqlite", "swift"), ("swift", "sqlite"),
         ("redis", "mongodb"), ("mongodb", "redis"), ("redis", "swift"), ("swift", "redis")]
PROJECTS = [f"mix-{n}" for n in range(4)]
ROUNDS = 6
#: seconds a detailed health may take while every other round runs
HEALTH_TIMEOUT = 120


def store_uri(kind: str, role: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Return an empty store of ``kind`` for the default store or the pool (``role``)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/{role}.db"
    if kind == "redis":
        server = request.getfixturevalue("redis_server")
        if role == "default":
            server.flushall()
        return server.uri(0 if role == "default" else 1)
    if kind == "mongodb":
        from tests.servers.mongodb import with_database

        return with_database(request.getfixturevalue("mongodb_server_uri"), f"mix_{uuid.uuid4().hex[:12]}")
    return request.getfixturevalue("swift_server").uri("m" + uuid.uuid4().hex[:12])


def host_of(uri: str) -> str:
    """Return the HOST:PORT of a network store's URI."""
    return uri.split("://", 1)[1].split("/", 1)[0].rpartition("@")[2]


def one_round(url: str, project: str, n: int) -> list[tuple[str, int, str]]:
    """Create a queue with a dead-letter queue, post, list, read the health and the console: the failures."""
    failures = []
    with ApiSession(url, project=project) as api:
        answers = [
            ("dlq", api.put(f"/v2/queues/dead-{n}", json={}), 201),
            ("queue with dlq", api.put(f"/v2/queues/work-{n}",
                                       json={"_dead_letter_queue": f"dead-{n}", "_max_claim_count": 2}), 201),
            ("post", api.post(f"/v2/queues/work-{n}/messages", json={"messages": [{"body": n}]}), 201),
            ("listing", api.get("/v2/queues", params={"limit": 20}), 200),
            ("console", api.get(f"/console/projects/{project}/queues", headers={"Accept": "text/html"}), 200),
        ]
        if n % 3 == 0:  # the detailed health reads every queue of every store: slow on Swift, not wrong
            answers.append(("health", api.get("/v2/health", timeout=HEALTH_TIMEOUT), 200))
        failures += [(what, got.status_code, got.text[:200]) for what, got, expected in answers
                     if got.status_code != expected]
    return failures


@pytest.mark.parametrize(("default_kind", "pool_kind"), MIXES, ids=[f"{d}+{p}" for d, p in MIXES])
def test_every_route_answers_whatever_the_mix_of_the_pools_stores(
        start_server_for_test: ServerStarter, request: pytest.FixtureRequest, tmp_path: Path,
        default_kind: str, pool_kind: str) -> None:
    default_uri = store_uri(default_kind, "default", request, tmp_path)
    pool_uri = store_uri(pool_kind, "pool", request, tmp_path)
    hosts = {host_of(uri) for uri in (default_uri, pool_uri) if not uri.startswith("sqlite:")}
    config = tmp_path / "mix.conf"
    config.write_text(f"[auth]\nnoauth_admin_routes = true\n\n[console]\nenabled = true\n\n"
                      f"[pools]\nenabled = true\nsqlite_dir = {tmp_path}\n"
                      + (f"allowed_hosts = {', '.join(sorted(hosts))}\n" if hosts else ""))
    server = start_server_for_test(default_uri, workers=1, extra_args=["--config", str(config)])
    with ApiSession(server.url, project=PROJECTS[0]) as api:  # a queue of the default store
        assert api.put("/v2/queues/before", json={}).status_code == 201
    with ApiSession(server.url, project="ops") as ops:
        created = ops.put("/v2/pools/other", json={"uri": pool_uri, "weight": 10})
        assert created.status_code == 201, created.text
        # before any queue is placed: the health asks the pool's store about its queues
        health = ops.get("/v2/health")
        assert health.status_code == 200, health.text
        assert health.json()["other"]["storage"] == pool_kind

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        rounds = [pool.submit(one_round, server.url, project, n)
                  for n in range(ROUNDS) for project in PROJECTS]
        failures: list[Any] = [f for done in rounds for f in done.result()]
    assert failures == [], server.log_tail()
    assert "Cannot switch to a different thread" not in server.log()

    with ApiSession(server.url, project=PROJECTS[0]) as api:
        listed = api.get("/v2/queues", params={"limit": 20}).json()["queues"]
        made = [f"{kind}-{n}" for n in range(ROUNDS) for kind in ("dead", "work")]
        assert sorted(q["name"] for q in listed) == sorted(["before", *made])
        health = api.get("/v2/health").json()
        assert health["other"]["storage_reachable"] is True
        held = sorted(q["name"] for q in health["other"]["queues"] if q["project"] == PROJECTS[0])
        assert held == sorted(made)  # the pool takes every new queue; "before" stays where it was
