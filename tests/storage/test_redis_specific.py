"""Redis-only behaviour: passwords, work per claim, scripts reloaded, key slots, forked drivers.

Kill -9 and outages, and several processes claiming at once, are tested on every
store in ``tests/storage/test_processes_and_outages.py``.
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from tests.conftest import missing_server
from tests.servers.redis import RedisServer
from zaqar_lite import errors
from zaqar_lite.models import ClaimRequest, DeadLetterPolicy, Message
from zaqar_lite.storage.redis.client import FirstTryRetry, library_for
from zaqar_lite.storage.redis.driver import RedisStorage
from zaqar_lite.storage.redis.pool import BoundedPool

P, Q, DLQ = "p", "q", "q-dlq"
NOW = 1_800_000_000.123456


@pytest.fixture
def own_server(tmp_path):
    """Start a redis-server of the test's own (options given by the test); stop it at the end."""
    if shutil.which("redis-server") is None:
        missing_server("redis-server")
    started: list[RedisServer] = []

    def start(*options: str, port: int | None = None, password: str | None = None) -> RedisServer:
        server = RedisServer(tmp_path, *options, port=port, password=password)
        server.start(attempts=5 if port is None else 1)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def store(redis_store_uri):
    storage = RedisStorage(redis_store_uri)
    yield storage
    storage.close()


def _messages(count: int, now: float = NOW, delay: float = 0.0, prefix: str = "m", ttl: float = 3600,
              ) -> list[Message]:
    return [Message(id=f"{prefix}{i}", body={"n": i, "text": "é"}, created=now, expires=now + ttl,
                    delay_until=now + delay if delay else 0.0, client_id="c")
            for i in range(count)]


def _claim(storage: RedisStorage, limit: int, now: float = NOW, queue: str = Q,
           dead_letter: DeadLetterPolicy | None = None, claim_id: str | None = None) -> list[str]:
    request = ClaimRequest(claim_id or f"claim-{now}-{limit}", now, 60, 60, limit,
                           dead_letter or DeadLetterPolicy())
    return [m.id for m in storage.claim_messages(P, queue, request).claimed]


def test_password_in_the_uri_is_used(own_server):
    server = own_server(password="s3cret")
    with pytest.raises(errors.StorageUnavailable):
        RedisStorage(server.uri()).post_messages(P, Q, _messages(1), NOW)
    storage = RedisStorage(f"redis://:s3cret@127.0.0.1:{server.port}/2")
    storage.post_messages(P, Q, _messages(1), NOW)
    assert storage.describe() == f"redis at 127.0.0.1:{server.port}/2"
    assert _claim(storage, 1) == ["m0"]


def _commands_run_by(server: RedisServer, action) -> tuple[object, int]:
    """Run ``action`` and count the data commands Redis executed for it (script calls included)."""
    with server.client() as admin:
        admin.config_resetstat()
        result = action()
        stats = admin.info("commandstats")
    bookkeeping = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_config|resetstat", "cmdstat_info",
                   "cmdstat_script|load", "cmdstat_ping")
    return result, sum(v["calls"] for k, v in stats.items() if k not in bookkeeping)


def test_claim_work_does_not_grow_with_delayed_or_claimed_messages(store, redis_server):
    store.post_messages(P, Q, _messages(1000, prefix="claimed"), NOW)
    assert len(_claim(store, 1000, claim_id="long")) == 1000
    store.post_messages(P, Q, _messages(1000, delay=900, prefix="delayed"), NOW)
    store.post_messages(P, Q, _messages(2, prefix="ready"), NOW)

    claimed, work = _commands_run_by(redis_server, lambda: _claim(store, 1, NOW + 1))
    assert claimed == ["ready0"]
    # two empty promotions, one head read, about 8 writes for the claimed message, the claim record
    assert work <= 20
    claimed, work = _commands_run_by(redis_server, lambda: _claim(store, 5, NOW + 2))
    assert claimed == ["ready1"]
    assert work <= 20
    claimed, work = _commands_run_by(redis_server, lambda: _claim(store, 5, NOW + 3))
    assert claimed == []
    assert work <= 5


def test_claim_work_does_not_grow_with_messages_scheduled_days_ahead(store, redis_server):
    for start in range(0, 10_000, 1000):
        store.post_messages(P, Q, _messages(1000, delay=6 * 86400, prefix=f"scheduled{start}-"), NOW)
    store.post_messages(P, Q, _messages(1, prefix="ready"), NOW)
    claimed, work = _commands_run_by(redis_server, lambda: _claim(store, 5, NOW + 1))
    assert (claimed, work <= 20) == (["ready0"], True)


def test_a_delete_reads_its_message_once_and_nothing_of_groups_it_is_not_in(store, redis_server):
    store.post_messages(P, Q, _messages(2), NOW)
    assert _claim(store, 1, claim_id="c1") == ["m0"]

    _, work = _commands_run_by(redis_server, lambda: store.delete_message(P, Q, "m0", "c1", NOW + 1))
    # HMGET of the message, HGET of its claim's end, ZREM from six indexes, SREM from the claim, DEL
    assert work == 10
    assert [m.id for m in store.get_messages(P, Q, ["m0", "m1"], NOW + 1)] == ["m1"]


def test_a_script_carries_the_library_functions_it_calls_and_theirs_only():
    library = ("-- first\nlocal function first(x)\n  return x\nend\n\n"
               "-- second, which calls first\nlocal function second(x)\n  return first(x) + 1\nend\n"
               "local function unused()\n  return 0\nend\n")
    assert library_for("return second(1)", library) == (
        "-- first\nlocal function first(x)\n  return x\nend\n"
        "-- second, which calls first\nlocal function second(x)\n  return first(x) + 1\nend\n")
    assert library_for("return 1", library) == ""
    assert library_for("-- not second(1)\nreturn first('unused')  -- nor unused()", library) == (
        "-- first\nlocal function first(x)\n  return x\nend\n")


def test_scripts_are_loaded_again_after_the_server_forgets_them(store, redis_server):
    store.post_messages(P, Q, _messages(1), NOW)
    with redis_server.client() as admin:
        admin.script_flush()
    store.post_messages(P, Q, _messages(1, prefix="n"), NOW)
    with redis_server.client() as admin:
        admin.script_flush()
    assert _claim(store, 5) == ["m0", "n0"]


def test_every_key_of_a_project_shares_one_cluster_slot(store, redis_server):
    project = "tenant{x}:a/b"
    policy = DeadLetterPolicy(max_claim_count=1, queue=DLQ)
    store.create_queue(project, DLQ, {}, NOW)
    store.create_queue(project, Q, {"_max_claim_count": 1, "_dead_letter_queue": DLQ}, NOW)
    store.post_messages(project, Q, _messages(3), NOW)
    request = ClaimRequest("c1", NOW, 60, 60, 2, policy)
    store.claim_messages(project, Q, request)
    store.claim_messages(project, Q, ClaimRequest("c2", NOW + 61, 60, 60, 2, policy))
    store.put_record(project, "subscription", "s", {"a": 1}, None)
    assert store.get_messages(project, DLQ, ["m0", "m1"], NOW + 61) != []
    with redis_server.client() as plain:
        keys = [k for k in plain.scan_iter("*") if not k.startswith(("zl:projects", "zl:record-projects:"))]
    slots = {redis.crc.key_slot(k.encode()) for k in keys}
    assert len(keys) > 10
    assert slots == {redis.crc.key_slot(b"{tenant%7Bx%7D%3Aa%2Fb}")}
    assert [p for p, _, _ in store.all_queues()] == [project, project]


def test_projects_with_key_syntax_in_their_names_stay_apart(store):
    store.post_messages("a}:q:b", Q, _messages(1, prefix="x"), NOW)
    store.post_messages("a", Q, _messages(1, prefix="y"), NOW)
    assert [m.id for m in store.list_messages("a", Q, now=NOW, marker=None, limit=10, include_claimed=True,
                                              include_delayed=True, exclude_client_id=None)] == ["y0"]
    assert store.get_messages("a", Q, ["x0"], NOW) == []


@pytest.mark.parametrize("uri", ["sqlite:///x.db", "http://127.0.0.1:1/0"])
def test_uris_of_another_scheme_are_refused(uri):
    with pytest.raises(ValueError):
        RedisStorage(uri)


def test_scripts_flushed_from_redis_are_loaded_again(store, redis_server):
    store.post_messages(P, Q, _messages(1), NOW)
    with redis_server.client() as admin:
        admin.script_flush()
    store.post_messages(P, "new-queue", _messages(1, prefix="n"), NOW)  # SADD + script, one trip
    with redis_server.client() as admin:
        admin.script_flush()
    assert _claim(store, 5) == ["m0"]
    assert _claim(store, 5, queue="new-queue") == ["n0"]


def _post_in_child(storage: RedisStorage, results: multiprocessing.Queue) -> None:
    storage.post_messages(P, Q, _messages(1, prefix="child"), NOW)
    results.put(storage.client.client_id())


def test_a_driver_inherited_through_fork_opens_connections_of_its_own(store):
    store.post_messages(P, Q, _messages(1, prefix="parent"), NOW)  # the parent's thread has its connection
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_post_in_child, args=(store, results))
    child.start()
    child_connection = results.get(timeout=30)
    child.join(timeout=30)
    assert child.exitcode == 0
    assert child_connection != store.client.client_id()
    assert sorted(_claim(store, 10)) == ["child0", "parent0"]


def test_a_reply_left_unread_never_answers_the_next_command_of_the_pool(redis_store_uri):
    pool = BoundedPool.from_url(redis_store_uri, max_connections=1, timeout=5.0, decode_responses=True)
    client = redis.Redis(connection_pool=pool)
    with redis.Redis.from_url(redis_store_uri) as admin:
        connection = pool.get_connection()
        admin.client_pause(300)  # the reply is still on its way when the connection goes back
        connection.send_command("ECHO", "stale")
        pool.release(connection)
        assert client.echo("mine") == "mine"
        connection = pool.get_connection()  # a pipeline of two whose second reply was not read
        connection.send_packed_command(connection.pack_commands([("ECHO", "first"), ("ECHO", "second")]))
        assert connection.read_response() == "first"
        pool.release(connection)
        assert client.echo("own") == "own"
    pool.disconnect()


def test_an_exhausted_pool_makes_a_borrower_wait_then_fails_it_clearly(redis_store_uri):
    pool = BoundedPool.from_url(redis_store_uri, max_connections=2, timeout=0.2, decode_responses=True)
    lent = [pool.get_connection(), pool.get_connection()]
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError, match="No connection available"):
        pool.get_connection()
    assert time.monotonic() - started >= 0.2
    waiting = concurrent.futures.ThreadPoolExecutor(1).submit(pool.get_connection)
    time.sleep(0.05)
    assert not waiting.done()  # still blocked: both connections are lent
    pool.release(lent[1])
    assert waiting.result(timeout=5) is lent[1]  # the one given back, not a third
    pool.release(lent[0])
    pool.release(lent[1])
    assert pool.get_connection() is lent[1]  # the last given back is lent first
    assert len(pool._available_connections) == 1
    pool.disconnect()


_INTERRUPTED_UNDER_GEVENT = """
from gevent import monkey; monkey.patch_all()
import json, sys, gevent, redis
from zaqar_lite.storage.redis.client import RedisConnected
connected = RedisConnected(sys.argv[1])
admin = redis.Redis.from_url(sys.argv[1])
admin.client_pause(300)
with gevent.Timeout(0.05, False):
    connected.client.echo("timed out")
replies = [connected.client.echo("first")]
admin.client_pause(300)
waiting = gevent.spawn(connected.client.echo, "killed")
gevent.sleep(0.05)
waiting.kill()
replies.append(connected.client.echo("second"))
print(json.dumps(replies))
"""


def test_a_command_interrupted_under_gevent_leaves_no_reply_to_the_next_one(redis_store_uri):
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_UNDER_GEVENT, redis_store_uri],
                          capture_output=True, text=True, timeout=60, check=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert json.loads(done.stdout) == ["first", "second"]


def test_the_one_word_packer_packs_every_command_as_redis_py_does():
    from redis.connection import HiredisRespSerializer

    from zaqar_lite.storage.redis.pool import OneWordPacker

    general, packer = HiredisRespSerializer(), OneWordPacker()
    commands = [("EVALSHA", "ab12", 2, "zl:{p}:q:a:meta", b"raw", 1.5, "é"),
                ("CLIENT SETNAME", "worker"),  # a name of two words: split by redis-py
                ("SET", "k", memoryview(b"view")), ("SET", "k", bytearray(b"array"))]
    for command in commands:
        assert packer.pack(*command) == general.pack(*command)


def test_a_script_runs_without_redis_py_s_per_command_recorder(store, monkeypatch):
    import redis.client

    store.create_queue(P, Q, {}, NOW)
    store.post_planned(P, Q, lambda metadata: _messages(1, prefix="first"), NOW)  # reads the metadata
    recorded: list[str] = []
    monkeypatch.setattr(redis.client, "record_operation_duration",
                        lambda **kwargs: recorded.append(kwargs["command_name"]))
    store.post_planned(P, Q, lambda metadata: _messages(1), NOW)  # as a post of the service
    assert sorted(_claim(store, 2)) == ["first0", "m0"]
    store.delete_message(P, Q, "m0", f"claim-{NOW}-2", NOW)
    assert recorded == []  # redis-py's execute_command records each command it runs


def test_a_script_on_a_connection_the_server_closed_runs_once_on_a_new_one(store, redis_server):
    store.post_messages(P, Q, _messages(1, prefix="before"), NOW)
    with redis_server.client() as admin:
        assert admin.client_kill_filter(_type="normal", skipme=True) >= 1  # the store's connection
        store.post_messages(P, Q, _messages(1, prefix="after"), NOW)
        assert sorted(_claim(store, 10)) == ["after0", "before0"]


class _Attempts:
    """An operation that fails with the given errors in turn, then answers "done"; what happened, in order."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.log: list[str] = []

    def do(self) -> str:
        self.log.append("do")
        if self.failures:
            raise self.failures.pop(0)
        return "done"

    def fail(self, error: Exception, *count: int) -> None:
        self.log.append(f"fail {type(error).__name__} {count}")


class _Backoff(ExponentialBackoff):
    """redis-py's backoff, its resets and computations logged (and no wait at all)."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(cap=0.5, base=0.05)
        self.log = log

    def reset(self) -> None:
        self.log.append("reset")

    def compute(self, failures: int) -> float:
        self.log.append(f"backoff {failures}")
        return 0.0


@pytest.mark.parametrize("failures", [
    (), (redis.ConnectionError("refused"),), (redis.ConnectionError("a"), redis.ConnectionError("b")),
    (redis.ConnectionError("a"),) * 3, (redis.ConnectionError("a"),) * 4, (redis.TimeoutError("slow"),),
    (redis.ConnectionError("a"), redis.TimeoutError("slow"))], ids=lambda f: f"{len(f)}-failures")
@pytest.mark.parametrize("retries", [0, 2, -1])
@pytest.mark.parametrize("counted", [False, True], ids=["fail(error)", "fail(error, count)"])
def test_the_first_try_retry_retries_as_redis_py_s_retry(failures, retries, counted):
    def run(kind: type[Retry]) -> tuple[list[str], str]:
        attempts = _Attempts(*failures)
        retry = kind(_Backoff(attempts.log), retries, supported_errors=(redis.ConnectionError,))
        try:
            outcome = retry.call_with_retry(attempts.do, attempts.fail, with_failure_count=counted)
        except redis.RedisError as exc:
            outcome = f"raised {exc}"
        return [entry for entry in attempts.log if entry != "reset"], outcome

    # the same attempts, failure handlers, waits and outcome; only the resets before a first try differ
    assert run(FirstTryRetry) == run(Retry)


def test_the_first_try_retry_skips_its_bookkeeping_when_the_first_try_answers():
    attempts = _Attempts()
    retry = FirstTryRetry(_Backoff(attempts.log), 2, supported_errors=(redis.ConnectionError,))
    assert retry.call_with_retry(attempts.do, attempts.fail) == "done"
    assert attempts.log == ["do"]
    attempts = _Attempts(redis.ConnectionError("refused"))
    retry = FirstTryRetry(_Backoff(attempts.log), 2, supported_errors=(redis.ConnectionError,))
    assert retry.call_with_retry(attempts.do, attempts.fail) == "done"
    assert attempts.log == ["do", "reset", "fail ConnectionError ()", "backoff 1", "do"]


def test_an_error_the_caller_says_is_not_retryable_is_raised_at_once():
    attempts = _Attempts(redis.ConnectionError("refused"))
    retry = FirstTryRetry(_Backoff(attempts.log), 2, supported_errors=(redis.ConnectionError,))
    with pytest.raises(redis.ConnectionError):
        retry.call_with_retry(attempts.do, attempts.fail, is_retryable=lambda error: False)
    assert attempts.log == ["do"]


_SCRIPT_INTERRUPTED_UNDER_GEVENT = """
from gevent import monkey; monkey.patch_all()
import json, sys, gevent, redis
from zaqar_lite.storage.redis.client import RedisConnected
from zaqar_lite.storage.redis.pool import execute
connected = RedisConnected(sys.argv[1])
admin = redis.Redis.from_url(sys.argv[1])
admin.client_pause(300)
with gevent.Timeout(0.05, False):
    execute(connected.client, "EVAL", "return ARGV[1]", 0, "timed out")
replies = [execute(connected.client, "EVAL", "return ARGV[1]", 0, "first")]
admin.client_pause(300)
waiting = gevent.spawn(execute, connected.client, "EVAL", "return ARGV[1]", 0, "killed")
gevent.sleep(0.05)
waiting.kill()
replies.append(execute(connected.client, "EVAL", "return ARGV[1]", 0, "second"))
print(json.dumps(replies))
"""


def test_a_script_interrupted_under_gevent_leaves_no_reply_to_the_next_one(redis_store_uri):
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _SCRIPT_INTERRUPTED_UNDER_GEVENT, redis_store_uri],
                          capture_output=True, text=True, timeout=60, check=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert json.loads(done.stdout) == ["first", "second"]


@pytest.mark.parametrize("text", [
    json.dumps({"event": "order", "n": 1, "text": "é", "big": 2 ** 80, "f": 1.5e300, "nested": [None, True]}),
    json.dumps("a string"), json.dumps(12), json.dumps(-0.0), json.dumps([]), json.dumps({}), "NaN",
    ' {"a": 1}', '{"a": 1} ', '{"a": 1}\n', '{"a": 1}{"b": 2}', "", "{", '{"a": }', "\ufeff{}", "nul",
])
def test_a_stored_json_text_decodes_as_json_loads_decodes_it(text):
    from zaqar_lite.jsontext import stored_json

    try:
        expected: object = json.loads(text)
    except json.JSONDecodeError as exc:
        with pytest.raises(json.JSONDecodeError) as raised:
            stored_json(text)
        assert str(raised.value) == str(exc)
    else:
        decoded = stored_json(text)
        assert type(decoded) is type(expected)
        assert json.dumps(decoded) == json.dumps(expected)  # NaN included, which equals nothing


def test_a_message_a_script_replies_with_reads_as_its_hash_reads(store):
    """Scripts reply with a message's values by position (``dump``), the driver's reads by field name."""
    from zaqar_lite.storage.redis.layout import REPLY_FIELDS

    library = (Path(__file__).resolve().parents[2] / "zaqar_lite/storage/redis/lua/_lib.lua").read_text()
    fields = library[library.index("local function message_fields"):]
    fields = fields[:fields.index("end")]
    assert tuple(re.findall(r"'(\w+)'", fields[fields.index("HMGET"):])) == REPLY_FIELDS
    plain, *_ = _messages(1, prefix="plain")
    full = Message(id="full", body=["é", {"n": None}], created=NOW, expires=NOW + 600, delay_until=0.0,
                   client_id="c", dlq_eligible=False, dedup_id="d-1", dedup_until=NOW + 60, group="g",
                   trace={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    store.post_messages(P, Q, [plain, full], NOW)
    claimed = store.claim_messages(P, Q, ClaimRequest("claim-1", NOW, 60, 60, 10, DeadLetterPolicy())).claimed
    read = store.get_messages(P, Q, ["plain0", "full"], NOW)
    assert [m.id for m in claimed] == ["plain0", "full"]
    assert claimed == read
    assert claimed[1].trace == full.trace and claimed[1].dlq_eligible is False and claimed[1].group == "g"
    assert claimed[0].client_id == "c" and claimed[0].dedup_id is None and claimed[0].failures == []


#: scenarios run by a store under gevent, in a process of their own (each prints its figures as JSON)
_SHARED_ROUND_TRIPS = """
from gevent import monkey; monkey.patch_all()
import json, sys, gevent, redis
from zaqar_lite.models import ClaimRequest, DeadLetterPolicy, Message
from zaqar_lite.storage.redis.driver import RedisStorage
store = RedisStorage(sys.argv[1])
admin = redis.Redis.from_url(sys.argv[1], decode_responses=True)
now = 1_800_000_000.0

def run(*args):
    return store._execute(store.client, *args)

def counts():
    info = admin.info("all")
    return info["total_reads_processed"], info["cmdstat_evalsha"]["calls"] if "cmdstat_evalsha" in info else 0

def outcome(greenlet):
    error = greenlet.exception
    return greenlet.value if error is None else f"{type(error).__name__}: {error}"

def claim(i):
    request = ClaimRequest(f"claim-{i}", now, 60, 60, 10, DeadLetterPolicy())
    return [m.id for m in store.claim_messages("p", f"q{i}", request).claimed]

scenario = sys.argv[2]
if scenario == "posts and claims":
    def post(i):  # to a queue not created: its project is registered in the same round trip
        message = Message(id=f"m{i}", body={"n": i}, created=now, expires=now + 3600, delay_until=0.0,
                          client_id="c")
        return store.post_messages("p", f"q{i}", [message], now)
    post("-warm"), claim("-warm")  # loads the scripts: the ones below run them by SHA
    figures = {}
    for name, action in (("posted", post), ("claimed", claim)):
        reads, scripts = counts()
        done = [gevent.spawn(action, i) for i in range(20)]
        gevent.joinall(done)
        after_reads, after_scripts = counts()
        figures[name] = {"replies": [outcome(g) for g in done], "reads": after_reads - reads - 1,
                         "scripts": after_scripts - scripts}
    print(json.dumps(figures))
elif scenario == "error":
    run("PING")
    reads, _ = counts()
    replies = [gevent.spawn(run, "EVAL", "return ARGV[1]", 0, "first"),
               gevent.spawn(run, "EVAL", "return redis.error_reply('refused')", 0),
               gevent.spawn(run, "EVAL", "return ARGV[1]", 0, "third")]
    gevent.joinall(replies)
    print(json.dumps({"replies": [outcome(g) for g in replies], "reads": counts()[0] - reads - 1,
                      "next": run("EVAL", "return ARGV[1]", 0, "next")}))
elif scenario == "killed":
    run("PING")
    admin.client_pause(5000, all=False)  # writes wait; a script flagged no-writes runs
    replies = [gevent.spawn(run, "EVAL", "#!lua flags=no-writes\\nreturn ARGV[1]", 0, "read"),
               gevent.spawn(run, "EVAL", "return redis.call('INCR', KEYS[1])", 1, "counter")]
    gevent.sleep(0.3)  # the first is answered, the second waits for the pause to end
    answered = replies[0].ready()
    killed = admin.client_kill_filter(_type="normal", skipme=True)
    gevent.sleep(0.1)
    admin.client_unpause()
    gevent.joinall(replies)
    print(json.dumps({"answered_before_kill": answered, "killed": killed,
                      "replies": [outcome(g) for g in replies], "counter": admin.get("counter")}))
elif scenario == "timeout":
    run("PING")
    admin.client_pause(300)
    def impatient():
        with gevent.Timeout(0.05):
            return run("EVAL", "return ARGV[1]", 0, "impatient")
    replies = [gevent.spawn(impatient), gevent.spawn(run, "EVAL", "return ARGV[1]", 0, "patient")]
    gevent.joinall(replies)
    connections = len(store._pool._available_connections)
    print(json.dumps({"replies": [outcome(g) for g in replies], "connections": connections,
                      "next": [run("EVAL", "return ARGV[1]", 0, "next"), store.client.echo("echo")]}))
"""


def _shared_round_trips(uri: str, scenario: str) -> dict:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _SHARED_ROUND_TRIPS, uri, scenario],
                          capture_output=True, text=True, timeout=60, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_concurrent_posts_and_claims_under_gevent_get_their_own_replies_over_shared_round_trips(
        redis_store_uri):
    figures = _shared_round_trips(redis_store_uri, "posts and claims")
    for name in ("posted", "claimed"):
        assert figures[name]["replies"] == [[f"m{i}"] for i in range(20)]
        assert figures[name]["scripts"] == 20
        assert figures[name]["reads"] * 4 <= 20  # alone, each script was a read of its own


def test_an_error_reply_in_a_shared_round_trip_fails_its_own_caller_only(redis_store_uri):
    figures = _shared_round_trips(redis_store_uri, "error")
    assert figures["replies"] == ["first", "ResponseError: refused", "third"]
    assert figures["reads"] == 1
    assert figures["next"] == "next"


def test_a_connection_killed_mid_round_trip_runs_each_unanswered_script_once_on_a_new_one(redis_store_uri):
    figures = _shared_round_trips(redis_store_uri, "killed")
    assert figures["answered_before_kill"] is True
    assert figures["killed"] >= 1
    assert figures["replies"] == ["read", 1]
    assert figures["counter"] == "1"


def test_a_caller_that_stops_waiting_leaves_its_reply_to_no_other(redis_store_uri):
    figures = _shared_round_trips(redis_store_uri, "timeout")
    assert figures["replies"] == ["Timeout: 0.05 seconds", "patient"]
    assert figures["connections"] == 1  # read to the end: the one connection is lent again, owing nothing
    assert figures["next"] == ["next", "echo"]


def _commands_by_name(server: RedisServer, action) -> dict[str, int]:
    """Run ``action`` and return how many times Redis ran each data command for it."""
    with server.client() as admin:
        admin.config_resetstat()
        action()
        stats = admin.info("commandstats")
    return {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()
            if k not in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_config|resetstat", "cmdstat_info",
                         "cmdstat_script|load", "cmdstat_ping")}


def test_a_planned_post_runs_only_the_commands_its_message_needs(store, redis_server):
    store.create_queue(P, Q, {}, NOW)
    store.post_messages(P, Q, _messages(1, prefix="first"), NOW)

    commands = _commands_by_name(redis_server, lambda: store._post(P, Q, _messages(1), "{}", NOW))
    # the guard's GET (the queue exists: no SET NX), the retry test, the marker, the message,
    # its three indexes, the due time lowered in one ZADD LT, and the waiting set's last score
    # (no TIME, no ZCOUNT: no claim waits)
    assert commands == {"get": 1, "exists": 1, "incr": 1, "hset": 1, "zadd": 4, "zrange": 1}
    assert [m.id for m in store.get_messages(P, Q, ["m0"], NOW)] == ["m0"]


def test_a_claim_reads_each_message_once_and_raises_their_expiries_in_one_command(store, redis_server):
    store.post_messages(P, Q, _messages(10, ttl=30), NOW)

    commands = _commands_by_name(redis_server, lambda: _claim(store, 10, claim_id="c10"))
    assert commands["hmget"] == 10  # one read a message, its reply made from it
    assert commands["hset"] == 11  # each message, and the claim record
    # the raised expiries, the claimed and counted indexes, the claims, the due time
    assert commands["zadd"] == 5
    assert sum(commands.values()) == 30
    claimed = store.claim_messages(P, Q, ClaimRequest("again", NOW + 200, 60, 60, 10, DeadLetterPolicy()))
    assert claimed.claimed == []
    assert [m.expires for m in store.get_messages(P, Q, ["m0", "m9"], NOW)] == [NOW + 120] * 2


def test_a_posted_message_s_hash_holds_each_of_its_fields_set_and_no_other(store, redis_server):
    """What post.lua stores, read back field by field with a raw client: a plain message, one with a
    dedup_id, one with a group, a delayed one and one posted with its claim (as a copy keeps it)."""
    messages = [
        Message(id="plain", body={"n": 1, "text": "é"}, created=NOW, expires=NOW + 600, delay_until=0.0,
                client_id="c"),
        Message(id="dedup", body=[1], created=NOW, expires=NOW + 600, delay_until=0.0, client_id="c",
                dedup_id="d-1", dedup_until=NOW + 30),
        Message(id="grouped", body="x", created=NOW, expires=NOW + 600, delay_until=0.0, group="g-1",
                trace={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}),
        Message(id="delayed", body=None, created=NOW, expires=NOW + 600, delay_until=NOW + 30, client_id="c",
                dlq_eligible=False),
        Message(id="claimed", body={}, created=NOW - 60, expires=NOW + 600, delay_until=0.0, client_id="c",
                claim_id="claim-1", claim_expires=NOW + 60, claim_count=2,
                failures=[{"at": "2027-01-15T08:00:00Z", "claim_count": 1, "error_type": None,
                           "error": "é"}]),
    ]
    assert store.post_messages(P, Q, messages, NOW) == [m.id for m in messages]
    common = {"q": Q, "created": "1800000000.123456", "expires": "1800000600.123456", "delay_until": "0.0",
              "claim_count": "0", "dlq_eligible": "1"}
    expected = {
        "plain": {**common, "marker": "1", "body": '{"n": 1, "text": "\\u00e9"}', "client_id": "c"},
        "dedup": {**common, "marker": "2", "body": "[1]", "client_id": "c", "dedup_id": "d-1"},
        "grouped": {**common, "marker": "3", "body": '"x"', "group": "g-1",
                    "trace": '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'},
        "delayed": {**common, "marker": "4", "body": "null", "client_id": "c",
                    "delay_until": "1800000030.123456", "dlq_eligible": "0"},
        "claimed": {**common, "marker": "5", "body": "{}", "client_id": "c", "created": "1799999940.123456",
                    "claim_id": "claim-1", "claim_expires": "1800000060.123456", "claim_count": "2",
                    "failures": '{"at": "2027-01-15T08:00:00Z", "claim_count": 1, "error_type": null, '
                                '"error": "\\u00e9"}'},
    }
    with redis_server.client() as raw:
        stored = {m.id: raw.hgetall(f"zl:{{{P}}}:m:{m.id}") for m in messages}
    for message_id, fields in expected.items():
        assert stored[message_id] == fields, message_id


def _script_arguments(server: RedisServer, action) -> list[list[str]]:
    """Run ``action`` and return the ARGV of each script call Redis was sent for it (seen by MONITOR),
    each as it was escaped there (a quote, a backslash and a control character are escaped)."""
    with socket.create_connection(("127.0.0.1", server.port)) as monitor, monitor.makefile("rb") as lines:
        monitor.sendall(b"MONITOR\r\n")
        assert lines.readline() == b"+OK\r\n"
        action()
        with server.client() as admin:
            admin.echo("monitored")
        calls = []
        for line in lines:
            words = re.findall(r'"((?:[^"\\]|\\.)*)"', line.decode())
            if words == ["ECHO", "monitored"]:
                return calls
            if words[0] in ("EVALSHA", "EVAL") and "[0 lua]" not in line.decode():
                calls.append(words[3 + int(words[2]):])
    raise AssertionError("MONITOR ended early")


def test_a_post_sends_each_value_of_its_message_once(store, redis_server):
    queue = "q-once"
    store.post_messages(P, queue, _messages(1, prefix="warm"), NOW)  # the script is loaded: run by SHA
    message = Message(id="m-once", body={"n": 1}, created=NOW, expires=NOW + 600, delay_until=0.0,
                      client_id="c-once", claim_id="k-once", claim_expires=NOW + 60, claim_count=1,
                      dedup_id="d-once", dedup_until=NOW + 30, group="g-once")

    (argv,) = _script_arguments(redis_server, lambda: store.post_messages(P, queue, [message], NOW))
    sent = argv[2:]  # after the key prefixes (ARGV[1..2]), which name the queue as every key does
    # the queue's name, the message's fields that post.lua reads and stores, its time made now
    for value in (queue, "d-once", "g-once", "k-once", "c-once", "1800000000.123456", "1800000060.123456"):
        assert sum(argument.count(value) for argument in sent) == 1, value
    assert store.get_messages(P, queue, ["m-once"], NOW)[0].group == "g-once"


def test_a_claim_that_counts_no_claims_sends_no_dead_letter_argument(store, redis_server):
    """A queue's dead-letter queue for expired messages only: a claim, which moves nothing, is not sent
    its name nor a moved message's expiry."""
    policy = DeadLetterPolicy(queue="dlq-unread", messages_ttl=3600, on_expiry=True)
    store.post_messages(P, Q, _messages(2), NOW)
    assert _claim(store, 1, dead_letter=policy, claim_id="warm") == ["m0"]

    (argv,) = _script_arguments(redis_server, lambda: _claim(store, 1, dead_letter=policy, claim_id="c-2"))
    assert not [argument for argument in argv if "dlq-unread" in argument or "1800003600.123456" in argument]
    assert store.get_claim(P, Q, "c-2", NOW)[1][0].id == "m1"
