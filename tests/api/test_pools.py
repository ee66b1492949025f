"""Pools and flavors over HTTP: the admin API with Zaqar's bodies, placement, the same-pool rule, health.

The pools are SQLite files (cheap, and the suite runs them beside whatever
store ``$ZAQAR_LITE_TEST_STORE`` names as the default store).
"""

from __future__ import annotations

import json
import logging
import select
import shutil
import socket

import falcon.testing
import pytest

from tests.api.helpers import JSON_PATCH, assert_error, claim, headers, post
from tests.conftest import missing_server
from tests.servers.redis import RedisServer
from zaqar_lite.api.app import create_app
from zaqar_lite.config import PoolSettings
from zaqar_lite.storage import open_storage

TOKENS = {"tok-admin": ("p1", "admin"), "tok-member": ("p1", "member")}


@pytest.fixture
def pooled(settings, clock, tmp_path) -> falcon.testing.TestClient:
    """A client of project-a on a server with pools enabled (none registered yet), SQLite ones in tmp_path."""
    app = create_app(pooled_settings(settings, tmp_path), clock=clock)
    return falcon.testing.TestClient(app, headers=headers("project-a"))


@pytest.fixture
def uris(tmp_path) -> dict[str, str]:
    """The URIs of three SQLite pools."""
    return {name: f"sqlite:///{tmp_path}/{name}.db" for name in ("east", "west", "north")}


def pooled_settings(settings, tmp_path, **pools):
    """Settings with pools enabled, SQLite pools under ``tmp_path``, and the pool routes on under noauth."""
    return settings.replace(noauth_admin_routes=True,
                            pools=PoolSettings(enabled=True, sqlite_dir=str(tmp_path), **pools))


def put_pool(client, name, uri, weight=100, **fields):
    return client.simulate_put(f"/v2/pools/{name}", json={"uri": uri, "weight": weight, **fields})


@pytest.fixture
def two_pools(pooled, uris) -> falcon.testing.TestClient:
    """Pools east and west; west is the pool of flavor cold (a queue of no flavor goes to east)."""
    assert put_pool(pooled, "east", uris["east"]).status_code == 201
    assert put_pool(pooled, "west", uris["west"]).status_code == 201
    assert pooled.simulate_put("/v2/flavors/cold", json={"pool_list": ["west"]}).status_code == 201
    return pooled


def holds(uri: str, queue: str, project: str = "project-a") -> bool:
    """Whether the store at ``uri`` holds the queue (read directly, not through the server)."""
    store = open_storage(uri)
    try:
        return store.get_queue_metadata(project, queue) is not None
    finally:
        store.close()


# -- the admin API -------------------------------------------------------------------

def test_a_pool_is_registered_read_listed_changed_and_deleted(pooled, uris):
    created = put_pool(pooled, "east", uris["east"], options={"max_retry_sleep": 1})
    assert created.status_code == 201
    assert created.headers["location"] == "/v2/pools/east"
    assert pooled.simulate_get("/v2/pools/east").json == {
        "name": "east", "uri": uris["east"], "weight": 100, "flavor": "", "href": "/v2/pools/east"}
    assert pooled.simulate_get("/v2/pools/east", params={"detailed": "true"}).json["options"] == {
        "max_retry_sleep": 1}
    assert put_pool(pooled, "east", uris["east"], weight=60).status_code == 204
    changed = pooled.simulate_patch("/v2/pools/east", json={"weight": 40})
    assert changed.status_code == 200
    assert changed.json == {"name": "east", "uri": uris["east"], "weight": 40, "flavor": "",
                            "href": "/v2/pools/east"}
    assert pooled.simulate_delete("/v2/pools/east").status_code == 204
    assert_error(pooled.simulate_get("/v2/pools/east"), 404)
    assert pooled.simulate_delete("/v2/pools/east").status_code == 204


def test_pools_are_listed_by_name_a_page_at_a_time(pooled, uris):
    for name in ("west", "east", "north"):
        assert put_pool(pooled, name, uris[name]).status_code == 201
    first = pooled.simulate_get("/v2/pools", params={"limit": "2"}).json
    assert [p["name"] for p in first["pools"]] == ["east", "north"]
    assert first["links"] == [{"rel": "next", "href": "/v2/pools?marker=north&limit=2"}]
    second = pooled.simulate_get("/v2/pools", params={"limit": "2", "marker": "north"}).json
    assert [p["name"] for p in second["pools"]] == ["west"]
    assert "options" not in second["pools"][0]
    assert pooled.simulate_get("/v2/pools", params={"marker": "west"}).json == {"pools": [], "links": []}
    detailed = pooled.simulate_get("/v2/pools", params={"detailed": "true", "limit": "1"}).json
    assert detailed["pools"][0]["options"] == {}
    assert detailed["links"] == [{"rel": "next", "href": "/v2/pools?marker=east&limit=1&detailed=true"}]


@pytest.mark.parametrize(("body", "description"), [
    ({"uri": "sqlite:///x.db"}, "weight is required."),
    ({"weight": 1}, "uri is required."),
    ({"uri": "sqlite:///x.db", "weight": -1}, "weight must be at least 0, got -1."),
    ({"uri": "sqlite:///x.db", "weight": True}, "weight must be an integer, got true."),
    ({"uri": "sqlite:///x.db", "weight": 1, "group": "g"},
     "The request body may only have the keys uri, weight, flavor and options; group is not one of them."),
    ({"uri": "sqlite:///x.db", "weight": 1, "flavor": "not a name"},
     "flavor must be a flavor name: 1 to 64 ASCII letters, digits, _ or -."),
])
def test_a_bad_pool_body_is_refused_naming_the_field(pooled, tmp_path, body, description):
    if "uri" in body:
        body = {**body, "uri": f"sqlite:///{tmp_path}/x.db"}
    assert assert_error(pooled.simulate_put("/v2/pools/p", json=body), 400)["description"] == description


def test_a_pool_needs_a_store_of_its_own(pooled, uris, settings):
    assert put_pool(pooled, "east", uris["east"]).status_code == 201
    body = assert_error(put_pool(pooled, "west", uris["east"]), 400)
    assert body["description"] == "uri: pool east has this store already; a pool needs a store of its own."
    body = assert_error(pooled.simulate_patch("/v2/pools/east", json={"uri": settings.storage_uri}), 400)
    assert body["description"] == ("uri: this is the [storage] uri store, which holds the queues of no pool; "
                                   "a pool needs a store of its own.")
    assert put_pool(pooled, "east", uris["east"], weight=5).status_code == 204


def test_a_pool_whose_store_cannot_be_reached_is_refused(pooled, tmp_path):
    kinds = ("uri: a pool is a sqlite://, redis://, rediss://, redis+cluster://, mongodb:// or swift:// "
             "URI.")
    assert assert_error(put_pool(pooled, "p", "nosuch://127.0.0.1/"), 400)["description"] == kinds
    body = assert_error(pooled.simulate_patch("/v2/pools/p", json={"uri": "nosuch://h/"}), 400)
    assert body["description"] == kinds
    (tmp_path / "not-a-database").write_bytes(b"plain text, not SQLite")
    body = assert_error(put_pool(pooled, "p", f"sqlite:///{tmp_path}/not-a-database"), 400)
    assert body["description"].startswith(f"uri: cannot connect to sqlite:///{tmp_path}/not-a-database: ")


def test_a_sqlite_pool_uri_without_its_empty_host_is_refused_naming_the_four_slash_form(pooled, tmp_path):
    uri = f"sqlite:{tmp_path}/east.db"
    body = assert_error(put_pool(pooled, "east", uri), 400)
    assert body["description"].startswith("uri: a SQLite pool is sqlite:////ABSOLUTE/PATH")
    assert not (tmp_path / "east.db").exists()


def test_bad_names_patches_and_missing_pools_are_refused(pooled, uris):
    assert assert_error(put_pool(pooled, "a.b", uris["east"]), 400)["description"] == \
        "The pool name must be 1 to 64 ASCII letters, digits, _ or -."
    assert assert_error(put_pool(pooled, "storage", uris["east"]), 400)["description"] == \
        "The pool name storage is reserved: it is a key of GET /v2/health."
    assert assert_error(pooled.simulate_patch("/v2/pools/nope", json={"weight": 1}), 404)["description"] == \
        "Pool nope does not exist."
    assert put_pool(pooled, "east", uris["east"]).status_code == 201
    assert assert_error(pooled.simulate_patch("/v2/pools/east", json={}), 400)["description"] == \
        "The request body must hold at least one of uri, weight, flavor and options."
    assert assert_error(pooled.simulate_patch("/v2/pools/east", json={"name": "x"}), 400)["description"] == \
        "The request body may only have the keys uri, weight, flavor and options; name is not one of them."
    assert_error(pooled.simulate_get("/v2/pools", params={"limit": "21"}), 400)
    assert_error(pooled.simulate_get("/v2/pools", params={"detailed": "maybe"}), 400)
    assert_error(pooled.simulate_put("/v2/pools/east", body="not json"), 400)


def test_a_flavor_groups_pools_and_says_what_they_can_do(pooled, uris):
    for name in ("east", "west"):
        assert put_pool(pooled, name, uris[name]).status_code == 201
    created = pooled.simulate_put("/v2/flavors/durable", json={"pool_list": ["east", "west"]})
    assert created.status_code == 201
    assert created.headers["location"] == "/v2/flavors/durable"
    assert pooled.simulate_get("/v2/flavors/durable").json == {
        "name": "durable", "pool_list": ["east", "west"], "href": "/v2/flavors/durable",
        "capabilities": ["AOD", "CLAIMS", "DURABILITY", "FIFO"]}
    assert pooled.simulate_get("/v2/pools/east").json["flavor"] == "durable"
    changed = pooled.simulate_patch("/v2/flavors/durable", json={"pool_list": ["west"]})
    assert changed.status_code == 200
    assert changed.json["pool_list"] == ["west"]
    assert pooled.simulate_get("/v2/pools/east").json["flavor"] == ""
    assert pooled.simulate_get("/v2/flavors").json == {
        "flavors": [{"name": "durable", "pool_list": ["west"], "href": "/v2/flavors/durable"}],
        "links": [{"rel": "next", "href": "/v2/flavors?marker=durable&limit=10"}]}
    assert pooled.simulate_delete("/v2/flavors/durable").status_code == 204
    assert pooled.simulate_get("/v2/pools/west").json["flavor"] == ""
    assert_error(pooled.simulate_get("/v2/flavors/durable"), 404)


def test_bad_flavor_bodies_and_missing_flavors_are_refused(pooled, uris):
    assert put_pool(pooled, "east", uris["east"]).status_code == 201
    cases = [
        (pooled.simulate_put("/v2/flavors/f", json={"pool_list": []}), 400,
         "pool_list: flavor f needs at least one pool."),
        (pooled.simulate_put("/v2/flavors/f", json={"pool_list": ["nope"]}), 400,
         "pool_list: pool nope does not exist; register it first."),
        (pooled.simulate_put("/v2/flavors/f", json={}), 400, "pool_list is required."),
        (pooled.simulate_put("/v2/flavors/f", json={"pool_list": "east"}), 400,
         "pool_list must be an array, got a string."),
        (pooled.simulate_put("/v2/flavors/f!", json={"pool_list": ["east"]}), 400,
         "The flavor name must be 1 to 64 ASCII letters, digits, _ or -."),
        (pooled.simulate_patch("/v2/flavors/f", json={"pool_list": ["east"]}), 404,
         "Flavor f does not exist."),
    ]
    for result, status, description in cases:
        assert assert_error(result, status)["description"] == description


def test_the_admin_api_needs_the_admin_role_and_pools_enabled(make_client, settings, clock):
    client = make_client(headers("project-a"), noauth_admin_routes=True)
    body = assert_error(client.simulate_get("/v2/pools"), 404)
    assert body["description"] == "Pools are not enabled on this server ([pools] enabled = false)."
    assert_error(client.simulate_put("/v2/flavors/f", json={"pool_list": ["a"]}), 404)
    app = create_app(settings.replace(pools=PoolSettings(enabled=True), auth_strategy="token", tokens=TOKENS),
                     clock=clock)
    member = falcon.testing.TestClient(app, headers={"Client-ID": headers()["Client-ID"],
                                                     "X-Auth-Token": "tok-member"})
    for result in (member.simulate_get("/v2/pools"), member.simulate_get("/v2/flavors"),
                   member.simulate_delete("/v2/pools/east"), member.simulate_get("/v2/flavors/f")):
        assert assert_error(result, 403)["description"] == "This resource needs the admin role."
    nobody = falcon.testing.TestClient(app, headers={"Client-ID": headers()["Client-ID"]})
    assert_error(nobody.simulate_get("/v2/pools"), 401)
    admin = falcon.testing.TestClient(app, headers={"Client-ID": headers()["Client-ID"],
                                                    "X-Auth-Token": "tok-admin"})
    assert admin.simulate_get("/v2/pools").json == {"pools": [], "links": []}


# -- placement and routing -------------------------------------------------------------

def test_without_pools_queues_stay_in_the_default_store_and_keep_it(pooled, uris, settings):
    post(pooled, "before", "a")
    assert put_pool(pooled, "east", uris["east"]).status_code == 201
    post(pooled, "before", "b")
    post(pooled, "after", "c")
    assert holds(settings.storage_uri, "before") and not holds(uris["east"], "before")
    assert holds(uris["east"], "after") and not holds(settings.storage_uri, "after")
    listed = pooled.simulate_get("/v2/queues", params={"with_count": "true"}).json
    assert [q["name"] for q in listed["queues"]] == ["after", "before"]
    assert listed["count"] == 2
    stats = pooled.simulate_get("/v2/queues/before/stats").json["messages"]
    assert stats["total"] == 2


def test_a_new_queue_goes_to_a_pool_of_its_flavor(two_pools, uris):
    assert two_pools.simulate_put("/v2/queues/plain", json={}).status_code == 201
    assert two_pools.simulate_put("/v2/queues/archived", json={"_flavor": "cold"}).status_code == 201
    assert holds(uris["east"], "plain")
    assert holds(uris["west"], "archived") and not holds(uris["east"], "archived")
    body = assert_error(two_pools.simulate_put("/v2/queues/q", json={"_flavor": "hot"}), 400)
    assert body["description"] == "_flavor names flavor hot, which does not exist."
    body = assert_error(two_pools.simulate_put("/v2/queues/q", json={"_flavor": 7}), 400)
    assert body["description"] == "_flavor must name a flavor (1 to 64 ASCII letters, digits, _ or -), got 7."


def test_a_queue_keeps_its_pool_when_deleted_and_created_again(two_pools, uris):
    post(two_pools, "q", "a")
    assert two_pools.simulate_patch("/v2/pools/east", json={"weight": 0}).status_code == 200
    assert two_pools.simulate_patch("/v2/pools/west", json={"weight": 100}).status_code == 200
    assert two_pools.simulate_delete("/v2/queues/q").status_code == 204
    post(two_pools, "q", "b")
    assert holds(uris["east"], "q") and not holds(uris["west"], "q")


# -- the same-pool rule --------------------------------------------------------------

def test_a_queue_naming_a_dead_letter_queue_goes_to_its_pool(two_pools, uris):
    assert two_pools.simulate_put("/v2/queues/dlq", json={"_flavor": "cold"}).status_code == 201
    metadata = {"_dead_letter_queue": "dlq", "_max_claim_count": 1}
    assert two_pools.simulate_put("/v2/queues/orders", json=metadata).status_code == 201
    assert holds(uris["west"], "orders")
    post(two_pools, "orders", "m")
    claim_id, _ = claim(two_pools, "orders", ttl=60, grace=60)
    assert two_pools.simulate_delete(f"/v2/queues/orders/claims/{claim_id}").status_code == 204
    # the exhausted message moves, by one operation of west's store
    assert two_pools.simulate_post("/v2/queues/orders/claims", json={}).status_code == 204
    assert two_pools.simulate_get("/v2/queues/dlq/stats").json["messages"]["total"] == 1


def test_a_dead_letter_queue_in_another_pool_is_refused_naming_both(two_pools):
    assert two_pools.simulate_put("/v2/queues/dlq", json={"_flavor": "cold"}).status_code == 201
    assert two_pools.simulate_put("/v2/queues/orders", json={}).status_code == 201
    patch = [{"op": "add", "path": "/metadata/_dead_letter_queue", "value": "dlq"}]
    result = two_pools.simulate_patch("/v2/queues/orders", body=json.dumps(patch),
                                      headers={"Content-Type": JSON_PATCH})
    assert assert_error(result, 400)["description"] == (
        "The dead-letter queue (_dead_letter_queue) dlq is in pool west, but queue orders is in pool "
        "east: linked queues must share a pool (the move between them is one atomic operation of that "
        "pool's store).")
    result = two_pools.simulate_put("/v2/queues/eu", json={"_flavor": "cold", "_dead_letter_queue": "orders"})
    assert assert_error(result, 400)["description"].startswith(
        "Queue eu requests flavor cold, but its dead-letter queue is in pool east")


def test_a_redrive_destination_in_another_pool_is_refused_naming_both(two_pools):
    assert two_pools.simulate_put("/v2/queues/elsewhere", json={"_flavor": "cold"}).status_code == 201
    assert two_pools.simulate_put("/v2/queues/dlq", json={}).status_code == 201
    expected = "The redrive destination elsewhere is in pool west, but queue dlq is in pool east"
    for body in ({"destination": "elsewhere"}, {"destination": "elsewhere", "async": True}):
        result = two_pools.simulate_post("/v2/queues/dlq/redrive", json=body)
        assert assert_error(result, 400)["description"].startswith(expected), body


def test_a_fan_out_subscriber_in_another_pool_is_refused_naming_both(two_pools):
    assert two_pools.simulate_put("/v2/queues/copies", json={"_flavor": "cold"}).status_code == 201
    body = {"subscriber": "trust+http://zaqar.example.com:8888/v2/queues/copies/messages", "ttl": 3600}
    result = two_pools.simulate_post("/v2/queues/orders/subscriptions", json=body)
    assert assert_error(result, 400)["description"].startswith(
        "The fan-out subscriber's queue copies is in pool west, but queue orders is in pool east")
    same = {"subscriber": "trust+http://zaqar.example.com:8888/v2/queues/fresh/messages", "ttl": 3600}
    assert two_pools.simulate_post("/v2/queues/orders/subscriptions", json=same).status_code == 201


def test_a_pool_holding_queues_is_not_deleted(two_pools):
    post(two_pools, "orders", "a")
    body = assert_error(two_pools.simulate_delete("/v2/pools/east"), 409)
    assert body["description"] == (
        "Pool east holds 1 queue(s) (project-a/orders); a pool is deleted only once its queues are: "
        "delete them first (set its weight to 0 to stop new queues going there).")
    assert two_pools.simulate_delete("/v2/queues/orders").status_code == 204
    assert two_pools.simulate_delete("/v2/pools/east").status_code == 204


# -- health ------------------------------------------------------------------------

def test_health_reports_the_catalog_and_every_pool_with_its_queues(two_pools):
    post(two_pools, "orders", "a", "b")
    claim(two_pools, "orders", limit=1)
    body = two_pools.simulate_get("/v2/health").json
    assert body["catalog_reachable"] is True
    assert body["east"] == {
        "storage_reachable": True, "storage": "sqlite",
        "message_volume": {"free": 1, "claimed": 1, "delayed": 0, "total": 2},
        "queues": [{"project": "project-a", "name": "orders", "free": 1, "claimed": 1, "delayed": 0,
                    "total": 2}]}
    assert body["west"]["queues"] == []
    assert two_pools.simulate_get("/v2/ping").status_code == 204


def test_the_catalog_may_be_a_store_of_its_own(settings, clock, uris, tmp_path):
    catalog_uri = f"sqlite:///{tmp_path}/catalog.db"
    app = create_app(pooled_settings(settings, tmp_path, catalog=catalog_uri), clock=clock)
    client = falcon.testing.TestClient(app, headers=headers("project-a"))
    assert put_pool(client, "east", uris["east"]).status_code == 201
    post(client, "orders", "a")
    catalog, default = open_storage(catalog_uri), open_storage(settings.storage_uri)
    try:
        assert catalog.get_record("zaqar-lite-server", "pool", "east").value["uri"] == uris["east"]
        assert catalog.get_record("project-a", "queue_pool", "orders").value == {"pool": "east"}
        assert default.get_record("zaqar-lite-server", "pool", "east") is None
    finally:
        catalog.close()
        default.close()
    assert holds(uris["east"], "orders")


def test_the_default_dead_letter_queue_serves_the_queues_of_its_own_pool(settings, clock, uris, tmp_path):
    app = create_app(pooled_settings(settings, tmp_path).replace(default_dead_letter_queue="dead"),
                     clock=clock)
    client = falcon.testing.TestClient(app, headers=headers("project-a"))
    assert put_pool(client, "east", uris["east"]).status_code == 201
    assert put_pool(client, "west", uris["west"]).status_code == 201
    assert client.simulate_put("/v2/flavors/cold", json={"pool_list": ["west"]}).status_code == 201
    assert client.simulate_put("/v2/queues/dead", json={}).status_code == 201  # in east
    for queue, metadata in (("near", {"_max_claim_count": 1}),
                            ("far", {"_max_claim_count": 1, "_flavor": "cold"})):
        assert client.simulate_put(f"/v2/queues/{queue}", json=metadata).status_code == 201
        post(client, queue, "m")
        claim_id, _ = claim(client, queue)
        assert client.simulate_delete(f"/v2/queues/{queue}/claims/{claim_id}").status_code == 204
    # near's exhausted message moves to dead, in east; far's stays in west, as without a DLQ
    assert client.simulate_post("/v2/queues/near/claims", json={}).status_code == 204
    assert client.simulate_get("/v2/queues/dead/stats").json["messages"]["total"] == 1
    assert client.simulate_get("/v2/queues/far/stats").json["messages"]["total"] == 1


# -- what a pool may name, and who may name it -------------------------------------------

NOAUTH_REFUSAL = ("The pools, flavors and queue templates routes are off under [auth] strategy = noauth, "
                  "where every caller is an admin: use token or keystone auth, or set [auth] "
                  "noauth_admin_routes = true where every caller is trusted.")


def test_under_noauth_the_operators_routes_answer_403_until_the_operator_turns_them_on(
        settings, clock, tmp_path):
    pools = PoolSettings(enabled=True, sqlite_dir=str(tmp_path))
    app = create_app(settings.replace(pools=pools), clock=clock)
    client = falcon.testing.TestClient(app, headers=headers("mallory"))
    target = tmp_path / "made" / "by" / "mallory.db"
    for result in (put_pool(client, "x", f"sqlite:///{target}"), client.simulate_get("/v2/pools"),
                   client.simulate_patch("/v2/pools/x", json={"weight": 1}),
                   client.simulate_delete("/v2/pools/x"), client.simulate_get("/v2/flavors"),
                   client.simulate_put("/v2/flavors/f", json={"pool_list": ["x"]}),
                   client.simulate_put("/v2/queue_templates/all",
                                       json={"pattern": "*", "metadata": {"_default_message_ttl": 60}}),
                   client.simulate_get("/v2/queue_templates"),
                   client.simulate_delete("/v2/queue_templates/all")):
        assert assert_error(result, 403)["description"] == NOAUTH_REFUSAL
    assert not (tmp_path / "made").exists()
    victim = falcon.testing.TestClient(app, headers=headers("victim"))
    assert victim.simulate_put("/v2/queues/orders", json={}).status_code == 201
    assert victim.simulate_get("/v2/queues/orders").json["_default_message_ttl"] == 3600


def test_a_sqlite_pool_is_an_existing_directory_s_file_under_the_operator_s_directory(pooled, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    for uri, description in (
            (f"sqlite:///{tmp_path}/missing/dir/x.db",
             "uri: the directory of a SQLite pool must exist; the operator makes it under "
             "[pools] sqlite_dir."),
            (f"sqlite:///{outside}/x.db", "uri: a SQLite pool is a file under [pools] sqlite_dir."),
            (f"sqlite:///{tmp_path}/../{outside.name}/x.db",
             "uri: a SQLite pool is sqlite:////ABSOLUTE/PATH, a normalised path (no ., .. or doubled /)."),
            ("sqlite:///:memory:",
             "uri: a SQLite pool is a file, not :memory: (a database that each connection would see "
             "empty).")):
        assert assert_error(put_pool(pooled, "x", uri), 400)["description"] == description
    assert not (tmp_path / "missing").exists() and not outside.exists()
    (tmp_path / "elsewhere").symlink_to(tmp_path.parent)
    body = assert_error(put_pool(pooled, "x", f"sqlite:///{tmp_path}/elsewhere/x.db"), 400)
    assert body["description"] == "uri: a SQLite pool is a file under [pools] sqlite_dir."
    assert not (tmp_path.parent / "x.db").exists()
    (tmp_path / "sub").mkdir()
    assert put_pool(pooled, "x", f"sqlite:///{tmp_path}/sub/x.db").status_code == 201


def test_no_spelling_of_the_default_sqlite_file_is_a_pool(pooled, settings, tmp_path):
    if not settings.storage_uri.startswith("sqlite:"):
        pytest.skip("the default store is not a SQLite file")
    default = settings.storage_uri.split("://", 1)[1][1:].partition("?")[0]
    (tmp_path / "alias.db").symlink_to(default)
    directory = default.rpartition("/")[0]
    assert directory == str(tmp_path)  # the suite's default file is in the test's directory
    for uri in (f"sqlite:///{default}", f"sqlite:///{default}?synchronous=full",
                f"sqlite:///{tmp_path}/alias.db"):
        body = assert_error(put_pool(pooled, "x", uri), 400)
        assert body["description"] == ("uri: this is the [storage] uri store, which holds the queues of no "
                                       "pool; a pool needs a store of its own."), uri


def test_a_network_pool_off_the_allow_list_is_refused_without_a_connection(pooled):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        for uri in (f"redis://127.0.0.1:{port}/0", f"mongodb://127.0.0.1:{port}/q",
                    f"swift://a%3Au:k@127.0.0.1:{port}/auth/v1.0"):
            body = assert_error(put_pool(pooled, "x", uri), 400)
            assert body["description"] == (f"uri: 127.0.0.1:{port} is not a store pools may use; the "
                                           "operator lists those in [pools] allowed_hosts.")
        assert select.select([listener], [], [], 0.3)[0] == []  # nobody knocked


@pytest.fixture
def guarded_redis(tmp_path):
    """A redis-server of the test's own that asks for a password."""
    if shutil.which("redis-server") is None:
        missing_server("redis-server")
    server = RedisServer(tmp_path / "redis", password="hunter2-s3cret")
    (tmp_path / "redis").mkdir()
    server.start()
    yield server
    server.stop()


def test_a_pool_s_password_is_masked_in_every_answer_error_and_log_line(settings, clock, tmp_path,
                                                                      guarded_redis, caplog):
    place = f"127.0.0.1:{guarded_redis.port}"
    app = create_app(pooled_settings(settings, tmp_path, allowed_hosts=(place,)), clock=clock)
    client = falcon.testing.TestClient(app, headers=headers("project-a"))
    secret = "hunter2-s3cret"
    wrong = assert_error(put_pool(client, "fast", f"redis://:wrong-{secret}@{place}/3"), 400)
    assert secret not in json.dumps(wrong)
    assert wrong["description"].startswith(f"uri: cannot connect to redis://:****@{place}/3: ")
    with caplog.at_level(logging.INFO, logger="zaqar_lite"):
        assert put_pool(client, "fast", f"redis://:{secret}@{place}/3").status_code == 201
    assert f"pool fast registered: redis://:****@{place}/3" in caplog.text
    assert secret not in caplog.text
    shown = f"redis://:****@{place}/3"
    assert client.simulate_get("/v2/pools/fast").json["uri"] == shown
    assert client.simulate_get("/v2/pools", params={"detailed": "true"}).json["pools"][0]["uri"] == shown
    assert client.simulate_patch("/v2/pools/fast", json={"weight": 5}).json["uri"] == shown
    assert client.simulate_patch("/v2/pools/fast", json={"uri": f"redis://:{secret}@{place}/4"}).json["uri"] \
        == f"redis://:****@{place}/4"
    assert client.simulate_put("/v2/queues/q", json={}).status_code == 201  # the password is used
    post(client, "q", "kept")
    assert secret not in caplog.text
