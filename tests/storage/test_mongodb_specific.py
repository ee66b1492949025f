"""MongoDB-only behaviour: a server down at start, index use, guarded writes racing, TTL fields, URIs.

Outages and several processes claiming at once are tested on every store in
``tests/storage/test_processes_and_outages.py``.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import threading
import time

import pymongo
import pytest

from tests.conftest import missing_server
from tests.servers.mongodb import SecantusServer
from zaqar_lite import errors
from zaqar_lite.claims import policy
from zaqar_lite.models import ClaimRequest, DeadLetterPolicy, Message
from zaqar_lite.storage.mongodb import layout
from zaqar_lite.storage.mongodb.driver import MongoStorage

P, Q, DLQ = "p", "q", "q-dlq"
NOW = 1_800_000_000.0


def _messages(count: int, delay: float = 0.0, prefix: str = "m") -> list[Message]:
    return [Message(id=f"{prefix}{i}", body=i, created=NOW, expires=NOW + 3600,
                    delay_until=NOW + delay if delay else 0.0) for i in range(count)]


def _claim(storage: MongoStorage, claim_id: str, limit: int) -> list[str]:
    request = ClaimRequest(claim_id, NOW, 60, 60, limit)
    return [m.id for m in storage.claim_messages(P, Q, request).claimed]


@pytest.fixture
def store(mongodb_store_uri):
    storage = MongoStorage(mongodb_store_uri)
    yield storage
    storage.close()


@pytest.fixture
def raw(mongodb_store_uri):
    """The test database through a plain client, to look at documents and plans."""
    client: pymongo.MongoClient[dict] = pymongo.MongoClient(mongodb_store_uri)
    yield client.get_default_database()
    client.close()


# -- connecting ---------------------------------------------------------------------

def test_driver_starts_while_the_server_is_down_and_names_the_default_database():
    storage = MongoStorage("mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=200")
    try:
        assert "zaqar_lite" in storage.describe()
        with pytest.raises(errors.StorageUnavailable):
            storage.get_queue_metadata(P, Q)
    finally:
        storage.close()


def test_on_a_replica_set_writes_are_majority_acknowledged_retryable_and_posts_transactional(store):
    store.create_queue(P, Q, {}, NOW)
    assert store.post_messages(P, Q, _messages(2), NOW) == ["m0", "m1"]
    client = store._database().client
    assert client.admin.command("hello")["setName"]  # the suites' server is a replica set (of one)
    assert client.topology_description.topology_type_name == "ReplicaSetWithPrimary"
    assert client.write_concern.document == {"w": "majority"}
    assert client.options.retry_writes is True
    assert store._transactions() is True


def test_a_uri_write_concern_wins_over_majority():
    options = layout.client_options("mongodb://a:1/db?w=1&retryWrites=false")
    assert "w" not in options
    assert "retryWrites" not in options
    assert options["connectTimeoutMS"] == 3000


def test_uri_options_win_over_the_drivers_fail_fast_defaults():
    options = layout.client_options("mongodb://a:1,b:2/db?replicaSet=rs0&serverselectiontimeoutms=9000")
    assert "serverSelectionTimeoutMS" not in options
    assert options["socketTimeoutMS"] == 5000


# -- indexes ---------------------------------------------------------------------

def _plans(store: MongoStorage, raw, monkeypatch, operation) -> list[dict]:
    """Run ``operation`` and return the executionStats explain of every message query it made."""
    queries = []
    real_find = store._find

    def recording_find(query, index, limit=0, projection=None):
        queries.append((query, index, limit))
        return real_find(query, index, limit, projection)

    monkeypatch.setattr(store, "_find", recording_find)
    operation()
    plans = []
    for query, index, limit in queries:
        command = {"find": "messages", "filter": query, "sort": {"marker": 1}, "limit": limit, "hint": index}
        plans.append(raw.command("explain", command, verbosity="executionStats"))
    return plans


def _stages(plan: dict) -> list[dict]:
    found, todo = [], [plan["queryPlanner"]["winningPlan"]]
    while todo:
        stage = todo.pop()
        found.append(stage)
        todo += [stage[k] for k in ("inputStage",) if k in stage] + stage.get("inputStages", [])
    return found


def test_claims_read_ready_and_matured_messages_through_the_claim_index(store, raw, monkeypatch):
    store.post_messages(P, Q, _messages(30, delay=600, prefix="late"), NOW)
    store.post_messages(P, Q, _messages(3), NOW)
    plans = _plans(store, raw, monkeypatch, lambda: _claim(store, "c1", 2))
    assert plans, "the claim made no query"
    for plan in plans:
        scans = [s for s in _stages(plan) if s["stage"] == "IXSCAN"]
        assert [s["indexName"] for s in scans] == ["claim_candidates"]
        assert not any(s["stage"] == "COLLSCAN" for s in _stages(plan))
        # still-delayed messages are outside both index ranges: they are never read
        assert plan["executionStats"]["totalKeysExamined"] <= 3


def test_a_claim_reads_no_key_of_thousands_of_messages_scheduled_days_ahead(store, raw, monkeypatch):
    store.post_messages(P, Q, _messages(2000, delay=6 * 86400, prefix="scheduled"), NOW)
    store.post_messages(P, Q, _messages(2), NOW)
    claimed = []
    plans = _plans(store, raw, monkeypatch, lambda: claimed.extend(_claim(store, "c1", 5)))
    assert (claimed, len(plans)) == (["m0", "m1"], 2)
    # each query read again after the claim: at most the two messages it took, never a scheduled one
    assert all(p["executionStats"]["totalKeysExamined"] <= 2 for p in plans)
    assert all(p["executionStats"]["totalDocsExamined"] <= 2 for p in plans)


def test_listing_and_sweeping_use_indexes(store, raw, monkeypatch):
    store.post_messages(P, Q, _messages(5), NOW)
    _claim(store, "c1", 2)
    policy = DeadLetterPolicy(max_claim_count=1, queue=DLQ)
    plans = _plans(store, raw, monkeypatch, lambda: (
        store.list_messages(P, Q, now=NOW, marker=None, limit=10, include_claimed=False,
                            include_delayed=False, exclude_client_id=None),
        store.sweep_queue(P, Q, NOW + 3601, policy)))
    assert len(plans) >= 3
    for plan in plans:
        stages = [s["stage"] for s in _stages(plan)]
        assert "COLLSCAN" not in stages and "IXSCAN" in stages


def test_indexes_include_a_ttl_index_on_purge_at_an_hour_after_expiry(store, raw):
    ttl = raw.messages.index_information()["purge_after_expiry"]
    assert (ttl["key"], ttl["expireAfterSeconds"]) == ([("purge_at", 1)], 0)
    store.post_messages(P, Q, _messages(1), NOW)
    _claim(store, "c1", 1)  # the claim pushes the expiry; the purge date follows it
    doc = raw.messages.find_one({"_id": "m0"})
    assert doc["purge_at"].timestamp() == pytest.approx(doc["expires"] + layout.PURGE_MARGIN, abs=0.01)


# -- guarded writes racing -------------------------------------------------------

def test_claim_planned_on_a_stale_read_takes_nothing_and_moves_on(mongodb_store_uri, monkeypatch):
    slow, fast = MongoStorage(mongodb_store_uri), MongoStorage(mongodb_store_uri)
    slow.post_messages(P, Q, _messages(4), NOW)
    read_candidates = slow._visible_candidates
    taken: list[str] = []

    def candidates_then_lose_the_race(*args):
        found = read_candidates(*args)
        if not taken:
            taken.extend(_claim(fast, "fast", 2))
        return found

    monkeypatch.setattr(slow, "_visible_candidates", candidates_then_lose_the_race)
    assert _claim(slow, "slow", 2) == ["m2", "m3"]
    assert taken == ["m0", "m1"]
    claimed = {m.id: (m.claim_id, m.claim_count) for m in slow.get_messages(P, Q, ["m0", "m1", "m2"], NOW)}
    assert claimed == {"m0": ("fast", 1), "m1": ("fast", 1), "m2": ("slow", 1)}
    fast.close()
    slow.close()


def test_dead_letter_move_planned_on_a_stale_read_happens_once(mongodb_store_uri, raw, monkeypatch):
    slow, fast = MongoStorage(mongodb_store_uri), MongoStorage(mongodb_store_uri)
    policy = DeadLetterPolicy(max_claim_count=1, queue=DLQ)
    slow.post_messages(P, Q, _messages(1), NOW)
    _claim(slow, "c1", 1)
    later = NOW + 61
    real_find = slow._find
    moved_by_fast = []

    def find_then_lose_the_race(*args, **kwargs):
        found = real_find(*args, **kwargs)
        if found and not moved_by_fast:
            moved_by_fast.append(fast.sweep_queue(P, Q, later, policy).dead_lettered)
        return found

    monkeypatch.setattr(slow, "_find", find_then_lose_the_race)
    assert slow.sweep_queue(P, Q, later, policy).dead_lettered == 0
    assert moved_by_fast == [1]
    doc = raw.messages.find_one({"_id": "m0"})
    assert (doc["queue"], doc["marker"], doc["dead_letter"]["reason"]) == (DLQ, 1, "max_claims")
    fast.close()
    slow.close()


# -- posts -----------------------------------------------------------------------

def test_a_post_of_several_messages_is_stored_whole_or_not_at_all(store):
    if not store._transactions():
        pytest.skip("a standalone mongod has no multi-document transactions")
    store.post_messages(P, Q, _messages(1, prefix="dup"), NOW)
    batch = _messages(2, prefix="new") + _messages(1, prefix="dup")
    with pytest.raises(pymongo.errors.BulkWriteError):
        store.post_messages(P, Q, batch, NOW)
    assert [m.id for m in store.get_messages(P, Q, ["new0", "new1", "dup0"], NOW)] == ["dup0"]


def test_any_json_body_and_metadata_round_trip_even_where_bson_cannot_hold_them(store):
    bodies = [{"$ref": "queues", "$id": 1}, {"a\u0000b": 1}, {"a.b": {"$set": [1, {"$x": None}]}}]
    store.post_messages(P, Q, [Message(id=f"b{i}", body=body, created=NOW, expires=NOW + 60)
                               for i, body in enumerate(bodies)], NOW)
    assert [m.body for m in store.get_messages(P, Q, ["b0", "b1", "b2"], NOW)] == bodies
    store.set_queue_metadata(P, Q, {"com.example.owner": "ops", "$tag": 1})
    assert store.get_queue_metadata(P, Q) == {"com.example.owner": "ops", "$tag": 1}


# -- a connection lost mid-claim ------------------------------------------------------

def test_a_claim_whose_claim_record_write_loses_its_connection_is_storage_unavailable(tmp_path):
    """The claim's record is written last, after its messages: a connection closed then is an
    unreachable store (503), not an unknown error (500)."""
    server = SecantusServer(None, str(tmp_path), None, "--enable-test-commands")
    try:
        server.start()
    except RuntimeError as exc:
        missing_server(f"SecantusDB ({exc})")
    admin: pymongo.MongoClient[dict] = pymongo.MongoClient(server.uri)
    storage = MongoStorage(server.uri + "faults?serverSelectionTimeoutMS=1000&timeoutMS=2000")
    try:
        storage.create_queue(P, Q, {}, NOW)
        storage.post_messages(P, Q, _messages(2), NOW)
        # every insert into claims (the first try and the retries of the operation's 2 s) loses its
        # connection
        admin.admin.command({"configureFailPoint": "failCommand", "mode": "alwaysOn", "data": {
            "failCommands": ["insert"], "closeConnection": True, "appName": "zaqar-lite"}})
        with pytest.raises(errors.StorageUnavailable):
            _claim(storage, "c1", 2)
    finally:
        admin.admin.command({"configureFailPoint": "failCommand", "mode": "off"})
        admin.close()
        storage.close()
        server.stop()


def test_a_claim_write_applied_twice_counts_its_claims_and_moves_once(store):
    """A retried bulk write (its first try applied, its answer lost to a cut link) matches
    nothing: what it claimed and moved is read back, never counted as a negative move."""
    store.create_queue(P, Q, {}, NOW)
    store.post_messages(P, Q, _messages(2), NOW)
    read = store.get_messages(P, Q, ["m0", "m1"], NOW)
    claimed = dataclasses.replace(read[0], claim_id="c1", claim_expires=NOW + 60, claim_count=1)
    moved = dataclasses.replace(read[1], claim_count=1)
    plan = policy.Plan(claimed=[claimed], moved=[moved])
    dead_letter = DeadLetterPolicy(max_claim_count=1, queue=DLQ)
    first = store._apply_plan(P, Q, plan, read, dead_letter, NOW)
    again = store._apply_plan(P, Q, plan, read, dead_letter, NOW)
    assert ([m.id for m in first.claimed], first.moved) == (["m0"], 1)
    assert again.moved >= 0 and again.moved + len(again.claimed) <= 2


# -- an insert retried after its first try was applied ----------------------------------

class _AnswerLost:
    """A TCP relay to a file-backed SecantusDB that, once armed, passes the next insert into
    ``messages`` on, drops its answer, and kills and restarts the server (synced, so the insert
    survives; its record as a retryable write, kept in memory, does not) before closing the
    client's connection: pymongo retries the insert, and the server takes it for a new one."""

    def __init__(self, server: SecantusServer) -> None:
        self.server = server
        self.armed = threading.Event()
        self.restarts = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.uri = f"mongodb://127.0.0.1:{self.listener.getsockname()[1]}/"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.server.port))
            except OSError:
                client.close()
                continue
            tripped = threading.Event()
            threading.Thread(target=self._pump, args=(client, upstream, tripped, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, tripped, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, tripped: threading.Event,
              request: bool) -> None:
        try:
            while data := source.recv(65536):
                if request and self.armed.is_set() and b"insert\x00" in data and b"messages\x00" in data:
                    self.armed.clear()
                    tripped.set()
                elif not request and tripped.is_set():
                    self.server.stop(signal.SIGKILL)
                    self.server.start()
                    self.restarts += 1
                    break
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            end.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def answer_lost(tmp_path):
    server = SecantusServer(None, str(tmp_path), str(tmp_path / "data"))
    try:
        server.start()
    except RuntimeError as exc:
        missing_server(f"SecantusDB ({exc})")
    relay = _AnswerLost(server)
    yield relay
    relay.close()
    server.stop()


def test_a_post_whose_retried_insert_meets_its_own_first_try_is_stored_once(answer_lost):
    # the server restarts before the first try's connection closes: a budget that outlasts it
    storage = MongoStorage(answer_lost.uri
                           + "faults?serverSelectionTimeoutMS=20000&timeoutMS=30000&directConnection=true")
    raw: pymongo.MongoClient[dict] = pymongo.MongoClient(answer_lost.server.uri)
    try:
        storage.create_queue(P, Q, {}, NOW)
        answer_lost.armed.set()
        assert storage.post_messages(P, Q, _messages(2), NOW) == ["m0", "m1"]
        assert answer_lost.restarts == 1
        assert sorted(d["_id"] for d in raw.faults.messages.find({"queue": Q})) == ["m0", "m1"]
        assert [m.id for m in storage.get_messages(P, Q, ["m0", "m1"], NOW)] == ["m0", "m1"]
    finally:
        raw.close()
        storage.close()


def test_a_post_whose_id_another_message_holds_is_still_an_error(store):
    store.create_queue(P, Q, {}, NOW)
    store.post_messages(P, Q, _messages(1), NOW)
    with pytest.raises(pymongo.errors.BulkWriteError):
        store.post_messages(P, Q, [Message(id="m0", body="other", created=NOW, expires=NOW + 60)], NOW)
    assert [m.body for m in store.get_messages(P, Q, ["m0"], NOW)] == [0]


# -- the operation's time budget -------------------------------------------------------

def test_the_operation_budget_is_the_uris_timeoutms_or_eight_seconds():
    assert layout.operation_timeout("mongodb://h:1/db") == 8.0
    assert layout.operation_timeout("mongodb://h:1/db?replicaSet=rs0&timeoutms=2500") == 2.5
    assert layout.operation_timeout("mongodb://h:1/db?timeoutMS=0") is None


BUDGET_MS = 2000


@pytest.mark.parametrize("operation", ["claim", "post"])
def test_an_operation_on_a_paused_mongodb_answers_unavailable_within_its_budget(tmp_path, operation):
    """A paused server takes connections but answers nothing: the socket timeout, a retry over a
    new connection and its server selection added up past a client's 15 s before."""
    server = SecantusServer(None, str(tmp_path))
    try:
        server.start()
    except RuntimeError as exc:
        missing_server(f"SecantusDB ({exc})")
    storage = MongoStorage(server.uri + f"faults?timeoutMS={BUDGET_MS}")
    assert server.process is not None
    try:
        storage.create_queue(P, Q, {}, NOW)
        storage.post_messages(P, Q, _messages(2), NOW)
        os.killpg(server.process.pid, signal.SIGSTOP)
        started = time.monotonic()
        try:
            with pytest.raises(errors.StorageUnavailable):
                if operation == "claim":
                    _claim(storage, "c1", 2)
                else:
                    storage.post_messages(P, Q, _messages(1, prefix="late"), NOW)
            elapsed = time.monotonic() - started
        finally:
            os.killpg(server.process.pid, signal.SIGCONT)
        assert elapsed < BUDGET_MS / 1000 + 1.0, f"the {operation} took {elapsed:.1f} s"
        assert _claim(storage, "c2", 3)[:2] == ["m0", "m1"]
    finally:
        storage.close()
        server.stop()
