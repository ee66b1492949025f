"""SQLite group commit: concurrent writes of one process share one COMMIT, each still atomic and durable.

``SqliteConnected.transaction`` runs each write in a savepoint of the open
transaction of the process's write connection; the last writer to come
commits it for all (:mod:`zaqar_lite.storage.sqlite.client`).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from zaqar_lite import errors
from zaqar_lite.models import ClaimRequest, DeadLetterPolicy, Message
from zaqar_lite.storage.sqlite.client import SqliteConnected
from zaqar_lite.storage.sqlite.driver import SqliteStorage

P, Q = "p", "q"
NOW = 1_000_000.0


def _message(name: str) -> Message:
    return Message(id=name, body=name, created=NOW, expires=NOW + 3600)


def _stored_ids(path: str) -> set[str]:
    """Read the file as another process would: only what is committed."""
    with sqlite3.connect(path) as other:
        return {row[0] for row in other.execute("SELECT id FROM messages")}


def _waiting_for(store: SqliteStorage, writers: int) -> None:
    deadline = time.monotonic() + 10
    while store._waiting < writers:  # noqa: SLF001 - the driver's own count of queued writers
        assert time.monotonic() < deadline, "the writers never queued"
        time.sleep(0.005)


def _in_threads(*calls):
    """Start each call on a thread of its own; return the threads and the list of their errors."""
    outcomes: list[BaseException | None] = [None] * len(calls)

    def run(index, call):
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    return threads, outcomes


def _hold_the_writer(store: SqliteStorage, commits: list[str], first: threading.Event,
                     go: threading.Event, body=None):
    def write():
        with store.transaction() as db:
            db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
            if body is not None:
                body(db)
            first.set()
            assert go.wait(10)
    return write


def test_writes_that_wait_for_one_another_are_acknowledged_by_one_commit(tmp_path):
    path = str(tmp_path / "z.db")
    store = SqliteStorage(f"sqlite:///{path}")
    commits: list[str] = []
    first, go = threading.Event(), threading.Event()
    threads, outcomes = _in_threads(
        _hold_the_writer(store, commits, first, go,
                         lambda db: store._insert(db, P, Q, [_message("a")], NOW)))  # noqa: SLF001
    assert first.wait(10)
    more, more_outcomes = _in_threads(*(
        (lambda name=name: store.post_messages(P, Q, [_message(name)], NOW)) for name in ("b", "c", "d")))
    _waiting_for(store, 3)
    assert _stored_ids(path) == set()  # nothing committed while the batch is open
    go.set()
    for thread in threads + more:
        thread.join(10)
    assert outcomes + more_outcomes == [None] * 4
    assert commits == ["COMMIT"]
    assert _stored_ids(path) == {"a", "b", "c", "d"}
    # alone, a write is its own transaction
    store.post_messages(P, Q, [_message("e")], NOW)
    assert commits == ["COMMIT", "COMMIT"]
    assert _stored_ids(path) == {"a", "b", "c", "d", "e"}


def test_a_refused_write_in_a_batch_undoes_only_its_own_changes(tmp_path):
    path = str(tmp_path / "z.db")
    store = SqliteStorage(f"sqlite:///{path}")
    commits: list[str] = []
    first, go = threading.Event(), threading.Event()
    threads, outcomes = _in_threads(_hold_the_writer(store, commits, first, go))
    assert first.wait(10)

    def refused():
        with store.transaction() as db:
            store._insert(db, P, Q, [_message("undone")], NOW)  # noqa: SLF001
            raise errors.QueueDoesNotExist(Q, P)

    more, more_outcomes = _in_threads(
        lambda: store.post_messages(P, Q, [_message("kept-1")], NOW), refused,
        lambda: store.post_messages(P, Q, [_message("kept-2")], NOW))
    _waiting_for(store, 3)
    go.set()
    for thread in threads + more:
        thread.join(10)
    assert outcomes == [None]
    assert more_outcomes[0] is None and more_outcomes[2] is None
    assert isinstance(more_outcomes[1], errors.QueueDoesNotExist)
    assert commits == ["COMMIT"]
    assert _stored_ids(path) == {"kept-1", "kept-2"}
    listed = store.list_messages(P, Q, now=NOW, marker=None, limit=10, include_claimed=True,
                                 include_delayed=True, exclude_client_id=None)
    assert sorted(m.id for m in listed) == ["kept-1", "kept-2"]


def test_when_the_commit_fails_every_write_of_the_batch_is_refused_and_none_is_stored(tmp_path):
    path = str(tmp_path / "z.db")
    store = SqliteStorage(f"sqlite:///{path}")
    with store.transaction() as db:  # a deferred foreign key is checked by the COMMIT only
        db.execute("CREATE TABLE parent (id TEXT PRIMARY KEY)")
        db.execute("CREATE TABLE child (parent TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
    store._write_connection().execute("PRAGMA foreign_keys=ON")  # noqa: SLF001 - outside any transaction
    commits: list[str] = []
    first, go = threading.Event(), threading.Event()
    threads, outcomes = _in_threads(_hold_the_writer(
        store, commits, first, go, lambda db: db.execute("INSERT INTO child VALUES ('missing')")))
    assert first.wait(10)
    more, more_outcomes = _in_threads(*(
        (lambda name=name: store.post_messages(P, Q, [_message(name)], NOW)) for name in ("b", "c")))
    _waiting_for(store, 2)
    go.set()
    for thread in threads + more:
        thread.join(10)
    assert all(isinstance(outcome, errors.StorageUnavailable) for outcome in outcomes + more_outcomes)
    assert _stored_ids(path) == set()
    # the connection goes on: the next write is its own transaction
    store.post_messages(P, Q, [_message("after")], NOW)
    assert _stored_ids(path) == {"after"}


@pytest.mark.parametrize("writers", [8])
def test_many_threads_posting_at_once_lose_nothing_acknowledged(tmp_path, writers):
    path = str(tmp_path / "z.db")
    store = SqliteStorage(f"sqlite:///{path}")
    names = [[f"w{w}-{i}" for i in range(40)] for w in range(writers)]

    def post(batch):
        return lambda: [store.post_messages(P, Q, [_message(name)], NOW) for name in batch]

    threads, outcomes = _in_threads(*(post(batch) for batch in names))
    for thread in threads:
        thread.join(60)
    assert outcomes == [None] * writers
    assert _stored_ids(path) == {name for batch in names for name in batch}
    markers = [m.marker for m in store.list_messages(P, Q, now=NOW, marker=None, limit=1000,
                                                     include_claimed=True, include_delayed=True,
                                                     exclude_client_id=None)]
    assert markers == list(range(1, writers * 40 + 1))


def test_a_post_and_a_claim_read_the_metadata_they_are_planned_from_in_their_own_transaction(tmp_path):
    store = SqliteStorage(f"sqlite:///{tmp_path / 'z.db'}")
    store.create_queue(P, Q, {"_default_message_ttl": 600}, NOW)
    written: list[str] = []
    with store.transaction() as db:
        db.set_trace_callback(written.append)
    written.clear()
    planned_from: list[object] = []

    def post_plan(stored):
        planned_from.append(stored)
        return [_message("a")]

    store.post_planned(P, Q, post_plan, NOW)
    assert written[0] == "BEGIN IMMEDIATE" and written[-1] == "COMMIT"
    assert written[1].startswith("SELECT metadata FROM queues")
    assert written.count("COMMIT") == 1
    written.clear()

    def claim_plan(stored):
        planned_from.append(stored)
        return ClaimRequest("c1", NOW, 60, 60, 5, DeadLetterPolicy())

    assert [m.id for m in store.claim_planned(P, Q, claim_plan).claimed] == ["a"]
    assert written[0] == "BEGIN IMMEDIATE" and written[-1] == "COMMIT"
    assert written[1].startswith("SELECT metadata FROM queues")
    assert written.count("COMMIT") == 1
    assert planned_from == [{"_default_message_ttl": 600}] * 2


def test_a_plan_refused_changes_nothing(tmp_path):
    path = str(tmp_path / "z.db")
    store = SqliteStorage(f"sqlite:///{path}")

    def refused(stored):
        raise errors.QueueLimitReached(P, 0)

    with pytest.raises(errors.QueueLimitReached):
        store.post_planned(P, Q, refused, NOW)
    assert store.get_queue_metadata(P, Q) is None
    store.post_messages(P, Q, [_message("b")], NOW)
    assert _stored_ids(path) == {"b"}


# -- processes take turns writing one file -------------------------------------------------------

#: another process: opens the file, holds a write open until told on stdin, then commits it
_HOLDER = """
import sys
from zaqar_lite.models import Message
from zaqar_lite.storage.sqlite.driver import SqliteStorage
store = SqliteStorage(sys.argv[1])
with store.transaction() as db:
    store._insert(db, "p", "q", [Message(id="held", body="held", created=1e6, expires=1e6 + 3600)], 1e6)
    print("writing", flush=True)
    sys.stdin.readline()
print("committed", flush=True)
sys.stdin.readline()
"""


def _holding_a_write(path: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, f"sqlite:///{path}"], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == "writing\n"
    return holder


def _impatient_store(path: str, monkeypatch) -> SqliteStorage:
    """A store whose SQLite connections never wait for a lock: a write meeting another process's
    write lock fails at once ("database is locked") instead of sleeping in SQLite's busy wait."""
    opened = SqliteConnected._open

    def impatient(self):
        conn = opened(self)
        conn.execute("PRAGMA busy_timeout=0")
        return conn

    monkeypatch.setattr(SqliteConnected, "_open", impatient)
    return SqliteStorage(f"sqlite:///{path}")


def test_a_process_waits_for_its_turn_to_write_not_in_sqlites_busy_wait(tmp_path, monkeypatch):
    path = str(tmp_path / "z.db")
    store = _impatient_store(path, monkeypatch)
    holder = _holding_a_write(path)
    try:
        threads, outcomes = _in_threads(lambda: store.post_messages(P, Q, [_message("mine")], NOW))
        threads[0].join(0.3)
        assert threads[0].is_alive(), f"the write did not wait for the other process's: {outcomes}"
        assert _stored_ids(path) == set()
        holder.communicate("\n\n", timeout=10)
        threads[0].join(10)
        assert outcomes == [None]  # it never met the other's SQLite lock: busy_timeout=0 would fail it
        assert _stored_ids(path) == {"held", "mine"}
    finally:
        holder.kill()
        holder.wait()


def test_a_process_killed_in_its_turn_lets_the_next_write(tmp_path, monkeypatch):
    path = str(tmp_path / "z.db")
    store = SqliteStorage(f"sqlite:///{path}")
    holder = _holding_a_write(path)
    threads, outcomes = _in_threads(lambda: store.post_messages(P, Q, [_message("mine")], NOW))
    threads[0].join(0.3)
    assert threads[0].is_alive()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    threads[0].join(10)
    assert outcomes == [None]
    assert _stored_ids(path) == {"mine"}  # the killed process's write was never committed


def test_each_process_takes_its_own_turn_after_a_fork(tmp_path):
    path = str(tmp_path / "z.db")
    store = SqliteStorage(f"sqlite:///{path}")
    store.post_messages(P, Q, [_message("parent")], NOW)  # the parent's write side is open
    parent_turns = store._writer[2].fileno()  # noqa: SLF001 - the parent's descriptor, which the child inherits
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's exit status is the assertion
        try:
            store.post_messages(P, Q, [_message("child")], NOW)
            os._exit(0 if store._writer[2].fileno() != parent_turns else 1)  # noqa: SLF001
        finally:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _stored_ids(path) == {"parent", "child"}
