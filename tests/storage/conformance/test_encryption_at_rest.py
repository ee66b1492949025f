"""``_enable_encrypt_messages`` on every store: no plaintext body in what the store holds.

Each store is read raw, without zaqar-lite's drivers: the SQLite file (and its
write-ahead log) byte for byte, every Redis key of every primary, every
MongoDB document, every Swift object of the store's containers. A plain
queue's body posted beside the encrypted ones must be found there, so the
reading is known to see bodies at all.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from tests.storage.conftest import POOLS_PREFIX
from zaqar_lite import errors
from zaqar_lite.config import load_settings
from zaqar_lite.models import RedriveRequest
from zaqar_lite.service import Messaging

P, CLIENT = "p", "0a6b1ff4-9e0c-4a8e-8d1e-2bb64b7a44f1"
K1 = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
SECRET = "sealed-marker-5e1d"
REASON = "reason-marker-77c4"
CONTROL = "control-marker-9b2a"


def raw_sqlite(uri: str) -> bytes:
    path = Path(urllib.parse.urlsplit(uri).path)
    return b"".join(p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def raw_redis(uri: str) -> bytes:
    import redis
    from redis.cluster import RedisCluster

    parts = urllib.parse.urlsplit(uri)
    if parts.scheme.endswith("+cluster"):
        first = parts.netloc.rpartition("@")[2].split(",")[0]
        client = RedisCluster.from_url(f"redis://{first}/")
        nodes = [client.get_redis_connection(node) for node in client.get_primaries()]
    else:
        nodes = [redis.Redis.from_url(uri)]
    return b"\n".join(repr((key, redis_value(node, key))).encode() for node in nodes
                      for key in node.scan_iter(count=1000))


def redis_value(node, key: bytes) -> object:
    """Return a Redis key's whole value, whatever its type."""
    kind = node.type(key).decode()
    if kind == "hash":
        return node.hgetall(key)
    if kind == "list":
        return node.lrange(key, 0, -1)
    if kind == "set":
        return node.smembers(key)
    if kind == "zset":
        return node.zrange(key, 0, -1)
    return node.get(key)


def raw_mongodb(uri: str) -> bytes:
    import bson
    import pymongo

    client: pymongo.MongoClient[dict] = pymongo.MongoClient(uri)
    try:
        database = client.get_default_database()
        return b"".join(bson.encode(doc) for name in database.list_collection_names()
                        for doc in database[name].find())
    finally:
        client.close()


def raw_swift(uri: str) -> bytes:
    import swiftclient

    from zaqar_lite.storage.swift.layout import parse_uri

    options = parse_uri(uri)
    conn = swiftclient.Connection(options.auth_url, options.user, options.key,
                                  auth_version=options.auth_version)
    found = []
    for container in conn.get_account(full_listing=True)[1]:
        if container["name"].startswith(options.prefix):
            for obj in conn.get_container(container["name"], full_listing=True)[1]:
                found.append(conn.get_object(container["name"], obj["name"])[1])
    return b"".join(found)


def raw_store(uri: str) -> bytes:
    """Return everything the store of ``uri`` holds, as bytes (each store of a two-pool deployment)."""
    if uri.startswith(POOLS_PREFIX):
        directory, redis_uri = uri[len(POOLS_PREFIX):].split("|")
        return b"".join([*(raw_sqlite(f"sqlite:///{directory}/{name}.db") for name in ("default", "lite")),
                         raw_redis(redis_uri)])
    scheme = urllib.parse.urlsplit(uri).scheme
    reader = {"sqlite": raw_sqlite, "redis": raw_redis, "redis+cluster": raw_redis, "mongodb": raw_mongodb,
              "swift": raw_swift}[scheme]
    return reader(uri)


@pytest.fixture
def sealing(driver, clock) -> Messaging:
    """The service over the driver on a server with one encryption key."""
    settings = load_settings(None, storage_uri="sqlite:///unused.db").replace(encryption_keys=(K1,))
    return Messaging(driver, settings, clock)


def post(messaging: Messaging, queue: str, *bodies: object, delay: int | None = None) -> list[str]:
    items = [{"body": b, "ttl": None, "delay": delay, "dlq_eligible": True} for b in bodies]
    return messaging.post(P, queue, CLIENT, items, 10)


def test_no_body_of_an_encrypted_queue_lies_in_plaintext_in_the_store(sealing, driver_uri, clock):
    sealing.create_queue(P, "dlq", {})
    sealing.create_queue(P, "vault", {"_enable_encrypt_messages": True, "_max_claim_count": 1,
                                      "_dead_letter_queue": "dlq"})
    sealing.create_queue(P, "open", {})
    post(sealing, "vault", {"card": SECRET}, SECRET)
    [held] = post(sealing, "vault", "to be edited", delay=60)
    sealing.edit_delayed_message(P, "vault", held, {"body": [SECRET]}, 10)
    post(sealing, "open", {"note": CONTROL})
    claim_id, claimed, _ = sealing.claim(P, "vault", limit=1, ttl=60, grace=60)
    assert [m.body for m in claimed] == [{"card": SECRET}]
    sealing.release_message(P, "vault", claimed[0].id, claim_id, {"error_type": "CardError",
                                                                 "error": f"declined {REASON}"})
    [opened], _ = sealing.get_messages(P, "vault", [claimed[0].id])
    assert [(f["error_type"], f["error"]) for f in opened.failures] == [("CardError", f"declined {REASON}")]
    clock.advance(61)
    sealing.sweep()  # released with the count used up: dead-lettered into dlq, as stored

    dead, _, _ = sealing.dead_letters(P, "dlq", 10)
    assert [m.body for m in dead] == [{"card": SECRET}]
    assert [f["error"] for f in dead[0].failures] == [f"declined {REASON}"]
    result, _ = sealing.redrive(P, "dlq", RedriveRequest(limit=10))
    assert result.redriven == 1
    listed, _ = sealing.list_messages(P, "vault", client_id="other", marker=None, limit=10, echo=True,
                                      include_claimed=True, include_delayed=True)
    # (Swift lists a redriven message by its post time, the others after their earlier ones)
    assert sorted(json.dumps(m.body) for m in listed) == ['"sealed-marker-5e1d"', '["sealed-marker-5e1d"]',
                                                          '{"card": "sealed-marker-5e1d"}']
    # a reject's reason is sealed as a release's, and shown in plaintext in the DLQ it goes to
    claim_id, claimed, _ = sealing.claim(P, "vault", limit=3, ttl=60, grace=60)
    [poison] = [m for m in claimed if m.body == {"card": SECRET}]
    sealing.release_message(P, "vault", poison.id, claim_id, {"error": f"poison {REASON}"}, None, "reject")
    dead, _, _ = sealing.dead_letters(P, "dlq", 10)
    assert [(m.id, m.failures[-1]["error"], m.failures[-1]["outcome"]) for m in dead] == [
        (poison.id, f"poison {REASON}", "reject")]

    held_by_the_store = raw_store(driver_uri)
    assert CONTROL.encode() in held_by_the_store
    assert SECRET.encode() not in held_by_the_store
    assert REASON.encode() not in held_by_the_store
    assert b"CardError" in held_by_the_store  # the error type is stored in plaintext (docs/api.rst)
    assert json.dumps("zaqar_lite:encrypted").encode()[1:-1] in held_by_the_store


def test_a_pop_that_meets_a_body_it_cannot_decrypt_puts_back_everything_it_took(sealing, driver, clock):
    sealing.create_queue(P, "vault", {"_enable_encrypt_messages": True})
    ids = post(sealing, "vault", SECRET, {"n": 2})
    keyless = Messaging(driver, load_settings(None, storage_uri="sqlite:///unused.db"), clock)
    with pytest.raises(errors.MessageUnreadable) as raised:
        keyless.pop(P, "vault", 5)
    assert raised.value.unreadable == ids
    clock.advance(1)
    back, _ = sealing.list_messages(P, "vault", client_id="other", marker=None, limit=10, echo=True,
                                    include_claimed=True, include_delayed=True)
    assert [(m.id, m.body) for m in back] == [(ids[0], SECRET), (ids[1], {"n": 2})]


def test_a_claim_that_meets_a_body_it_cannot_decrypt_changes_nothing(sealing, driver, clock):
    sealing.create_queue(P, "dlq", {})
    sealing.create_queue(P, "vault", {"_enable_encrypt_messages": True, "_max_claim_count": 1,
                                      "_dead_letter_queue": "dlq", "_retry_backoff": {"base": 30}})
    ids = post(sealing, "vault", SECRET, {"n": 2})
    keyless = Messaging(driver, load_settings(None, storage_uri="sqlite:///unused.db"), clock)
    with pytest.raises(errors.MessageUnreadable) as raised:
        keyless.claim(P, "vault", limit=5, ttl=60, grace=60)
    assert raised.value.unreadable == ids
    stats, _ = sealing.queue_stats(P, "vault")
    assert (stats.free, stats.claimed, stats.delayed) == (2, 0, 0)
    clock.advance(61)
    sealing.sweep()  # the claim no consumer saw used no count: nothing is dead-lettered
    dead, _, _ = sealing.dead_letters(P, "dlq", 10)
    assert dead == []
    _, claimed, _ = sealing.claim(P, "vault", limit=5, ttl=60, grace=60)
    assert [(m.id, m.body, m.claim_count) for m in claimed] == [(ids[0], SECRET, 1), (ids[1], {"n": 2}, 1)]
