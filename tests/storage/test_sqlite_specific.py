"""SQLite-only behaviour: URIs, work done per claim, the layout and its migration by several processes.

Several processes claiming at once: ``tests/storage/test_processes_and_outages.py``.
"""

from __future__ import annotations

import multiprocessing
import sqlite3

import pytest

from zaqar_lite import errors
from zaqar_lite.models import ClaimRequest, DeadLetterPolicy, Message
from zaqar_lite.storage.sqlite.driver import SqliteStorage
from zaqar_lite.storage.sqlite.layout import parse_uri

P, Q = "p", "q"


@pytest.mark.parametrize("uri, path", [
    ("sqlite:///relative/zaqar.db", "relative/zaqar.db"),
    ("sqlite:////var/lib/zaqar.db", "/var/lib/zaqar.db"),
    ("sqlite:///zaqar.db?synchronous=normal", "zaqar.db"),
])
def test_uris_are_read_as_sqlalchemy_writes_them(uri, path):
    assert parse_uri(uri)[0] == path


@pytest.mark.parametrize("uri", ["sqlite://", "redis:///x.db"])
def test_uris_without_a_path_or_of_another_scheme_are_refused(uri):
    with pytest.raises(ValueError):
        parse_uri(uri)


@pytest.mark.parametrize("uri, absolute", [
    ("sqlite:/var/lib/zaqar.db", "sqlite:////var/lib/zaqar.db"),
    ("sqlite://host/var/lib/zaqar.db", "sqlite:////var/lib/zaqar.db"),
])
def test_uris_without_the_empty_host_are_refused_naming_the_absolute_form(uri, absolute):
    with pytest.raises(ValueError) as refused:
        parse_uri(uri)
    assert str(refused.value) == (
        f"{uri} is not a sqlite URI zaqar-lite reads: a sqlite URI has no host and starts with sqlite:/// "
        f"then the path; for the file /var/lib/zaqar.db write {absolute} "
        "(sqlite:///relative.db is a file in the working directory)")


def test_a_relative_uri_without_slashes_is_refused_naming_the_file_it_would_open(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as refused:
        parse_uri("sqlite:zaqar.db")
    assert f"for the file {tmp_path}/zaqar.db write sqlite:///{tmp_path}/zaqar.db " in str(refused.value)


def _messages(count: int, now: float, delay: float = 0.0, prefix: str = "m") -> list[Message]:
    return [Message(id=f"{prefix}{i}", body=i, created=now, expires=now + 3600,
                    delay_until=now + delay if delay else 0.0) for i in range(count)]


def _claim_steps(storage: SqliteStorage, now: float) -> int:
    """Count SQLite virtual-machine steps of one claim of 10 (deterministic, unlike time)."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = storage._connection()
    conn.set_progress_handler(count, 1)
    try:
        claimed = storage.claim_messages(P, Q, ClaimRequest("c-" + str(now), now, 60, 60, 10)).claimed
    finally:
        conn.set_progress_handler(None, 1)
    assert len(claimed) == 10
    return steps


def test_still_delayed_messages_add_no_work_to_claims_of_ready_ones(tmp_path):
    now = 1_800_000_000.0
    plain = SqliteStorage(f"sqlite:///{tmp_path}/plain.db")
    plain.post_messages(P, Q, _messages(100, now), now)
    crowded = SqliteStorage(f"sqlite:///{tmp_path}/crowded.db")
    crowded.post_messages(P, Q, _messages(3000, now, delay=900, prefix="d"), now)
    crowded.post_messages(P, Q, _messages(100, now), now)
    assert _claim_steps(crowded, now) <= 1.2 * _claim_steps(plain, now)


def test_messages_scheduled_days_ahead_add_no_work_to_claims(tmp_path):
    now = 1_800_000_000.0
    plain = SqliteStorage(f"sqlite:///{tmp_path}/plain.db")
    plain.post_messages(P, Q, _messages(100, now), now)
    crowded = SqliteStorage(f"sqlite:///{tmp_path}/crowded.db")
    crowded.post_messages(P, Q, _messages(10_000, now, delay=6 * 86400, prefix="s"), now)
    crowded.post_messages(P, Q, _messages(100, now), now)
    # passing over 10^4 index entries alone would take more than 10^4 steps
    assert _claim_steps(crowded, now + 1) <= 1.2 * _claim_steps(plain, now + 1)


def _steps(storage: SqliteStorage, action) -> int:
    """Count the SQLite virtual-machine steps of ``action`` on the storage's connections of this thread."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    connections = {id(c): c for c in (storage._connection(), storage._write_connection())}.values()
    for conn in connections:
        conn.set_progress_handler(count, 1)
    try:
        action()
    finally:
        for conn in connections:
            conn.set_progress_handler(None, 1)
    return steps


def test_reading_and_releasing_a_claim_read_only_its_messages_however_many_are_scheduled(tmp_path):
    now = 1_800_000_000.0
    costs = []
    for name, scheduled in (("plain", 0), ("crowded", 10_000)):
        storage = SqliteStorage(f"sqlite:///{tmp_path}/{name}.db")
        storage.post_messages(P, Q, _messages(scheduled, now, delay=6 * 86400, prefix="s"), now)
        storage.post_messages(P, Q, _messages(10, now), now)
        storage.claim_messages(P, Q, ClaimRequest("c1", now, 60, 60, 10))
        costs.append((_steps(storage, lambda s=storage: s.get_claim(P, Q, "c1", now + 1)),
                      _steps(storage, lambda s=storage: s.release_claim(P, Q, "c1", now + 1))))
    (read_plain, release_plain), (read_crowded, release_crowded) = costs
    # before: both walked the queue's unexpired messages by expiry, more than 10^4 steps each
    assert (read_crowded <= 1.2 * read_plain, release_crowded <= 1.2 * release_plain) == (True, True)


# The layout before per-queue markers (zaqar-lite up to cfa1139), written out literally.
GLOBAL_MARKER_LAYOUT = """
CREATE TABLE IF NOT EXISTS queues (
    project TEXT NOT NULL, name TEXT NOT NULL, metadata TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (project, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    marker INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    project TEXT NOT NULL, queue TEXT NOT NULL,
    body TEXT NOT NULL, created REAL NOT NULL, expires REAL NOT NULL,
    delay_until REAL NOT NULL DEFAULT 0, client_id TEXT NOT NULL,
    claim_id TEXT, claim_expires REAL, claim_count INTEGER NOT NULL DEFAULT 0,
    dlq_eligible INTEGER NOT NULL DEFAULT 1, failures TEXT, dead_letter TEXT);
CREATE INDEX IF NOT EXISTS messages_by_queue ON messages (project, queue, marker);
CREATE INDEX IF NOT EXISTS messages_by_visibility ON messages (project, queue, delay_until, marker);
CREATE INDEX IF NOT EXISTS messages_by_expiry ON messages (project, queue, expires);
CREATE INDEX IF NOT EXISTS messages_by_claim ON messages (claim_id);
CREATE TABLE IF NOT EXISTS claims (
    id TEXT PRIMARY KEY, project TEXT NOT NULL, queue TEXT NOT NULL,
    ttl INTEGER NOT NULL, grace INTEGER NOT NULL, created REAL NOT NULL, expires REAL NOT NULL);
CREATE INDEX IF NOT EXISTS claims_by_queue ON claims (project, queue, expires);
CREATE TABLE IF NOT EXISTS records (
    kind TEXT NOT NULL, project TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    version INTEGER NOT NULL, PRIMARY KEY (kind, project, key)) WITHOUT ROWID;
"""


def _global_marker_file(path) -> None:
    """Write a file as the global-marker layout left it: markers 1-7 given, 5 and 7 since deleted."""
    now = 1_800_000_000.0
    with sqlite3.connect(path) as db:
        db.executescript(GLOBAL_MARKER_LAYOUT)
        db.executemany("INSERT INTO queues VALUES (?, ?, ?, ?)",
                       [(P, Q, '{"_max_claim_count": 3}', now), ("other", Q, "{}", now)])
        db.executemany(
            "INSERT INTO messages (marker, id, project, queue, body, created, expires, client_id,"
            " claim_count, failures, dead_letter) VALUES (?, ?, ?, ?, ?, ?, ?, 'c', ?, ?, ?)",
            [(1, "a1", P, Q, '"one"', now, now + 3600, 0, None, None),
             (2, "b1", "other", Q, '"b"', now, now + 3600, 0, None, None),
             (3, "a3", P, Q, '"three"', now, now + 3600, 2, '[{"reason": "x"}]', None),
             (4, "orphan", P, "no-row", '"o"', now, now + 3600, 0, None, None),
             (6, "dl", P, "dlq", '"dead"', now, now + 3600, 3, None, '{"reason": "max_claims"}'),
             (7, "gone", P, Q, '"gone"', now, now + 3600, 0, None, None)])
        db.execute("DELETE FROM messages WHERE id='gone'")


def _markers(storage: SqliteStorage, project: str, queue: str) -> list[tuple[str, int]]:
    found = storage.list_messages(project, queue, now=1_800_000_001.0, marker=None, limit=20,
                                  include_claimed=True, include_delayed=True, exclude_client_id=None)
    return [(m.id, m.marker) for m in found]


def test_a_file_of_the_global_marker_layout_is_migrated_on_open_keeping_its_messages(tmp_path):
    path = tmp_path / "old.db"
    _global_marker_file(path)
    uri = f"sqlite:///{path}"
    storage = SqliteStorage(uri)
    now = 1_800_000_001.0
    assert _markers(storage, P, Q) == [("a1", 1), ("a3", 3)]
    three = storage.get_messages(P, Q, ["a3"], now)[0]
    assert (three.body, three.claim_count, three.failures) == ("three", 2, [{"reason": "x"}])
    assert storage.get_messages(P, "dlq", ["dl"], now)[0].dead_letter == {"reason": "max_claims"}
    assert storage.get_queue_metadata(P, Q) == {"_max_claim_count": 3}
    assert storage.get_queue_metadata(P, "no-row") == {}
    assert _markers(storage, P, "no-row") == [("orphan", 4)]
    # every queue counts on from the highest marker the file ever gave (7, since deleted)
    storage.post_messages(P, Q, _messages(2, now, prefix="new"), now)
    storage.post_messages("other", Q, _messages(1, now, prefix="b-new"), now)
    assert _markers(storage, P, Q) == [("a1", 1), ("a3", 3), ("new0", 8), ("new1", 9)]
    assert _markers(storage, "other", Q) == [("b1", 2), ("b-new0", 8)]
    claimed = storage.claim_messages(P, Q, ClaimRequest("c1", now, 60, 60, 3)).claimed
    assert [m.id for m in claimed] == ["a1", "a3", "new0"]
    storage.delete_message(P, Q, "a1", "c1", now)
    assert [m.id for m in storage.pop_messages("other", Q, 5, now)] == ["b1", "b-new0"]

    reopened = SqliteStorage(uri)
    reopened.post_messages(P, Q, _messages(1, now, prefix="later"), now)
    assert _markers(reopened, P, Q) == [("a3", 3), ("new0", 8), ("new1", 9), ("later0", 10)]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4
        assert [row[1] for row in db.execute("PRAGMA table_info(messages)")] == LAYOUT_3_COLUMNS
        unique = {row[1]: row[2] for row in db.execute("PRAGMA index_list(messages)")}
    assert unique == {"messages_by_id": 1, "messages_by_queue": 1, "messages_by_visibility": 0,
                      "messages_by_expiry": 0, "messages_by_claim": 0, "messages_by_group": 0}


#: layout 1 (per-queue markers; no dedup table, dedup_id, group_name nor trace), as zaqar-lite wrote it
LAYOUT_1 = """
CREATE TABLE queues (project TEXT NOT NULL, name TEXT NOT NULL, metadata TEXT NOT NULL, created REAL NOT NULL,
    last_marker INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (project, name)) WITHOUT ROWID;
CREATE TABLE messages (id TEXT NOT NULL, project TEXT NOT NULL, queue TEXT NOT NULL, marker INTEGER NOT NULL,
    body TEXT NOT NULL, created REAL NOT NULL, expires REAL NOT NULL, delay_until REAL NOT NULL DEFAULT 0,
    client_id TEXT NOT NULL, claim_id TEXT, claim_expires REAL, claim_count INTEGER NOT NULL DEFAULT 0,
    dlq_eligible INTEGER NOT NULL DEFAULT 1, failures TEXT, dead_letter TEXT);
CREATE UNIQUE INDEX messages_by_id ON messages (id);
CREATE UNIQUE INDEX messages_by_queue ON messages (project, queue, marker);
CREATE INDEX messages_by_visibility ON messages (project, queue, delay_until, marker);
CREATE INDEX messages_by_expiry ON messages (project, queue, expires);
CREATE INDEX messages_by_claim ON messages (claim_id);
CREATE TABLE claims (id TEXT PRIMARY KEY, project TEXT NOT NULL, queue TEXT NOT NULL,
    ttl INTEGER NOT NULL, grace INTEGER NOT NULL, created REAL NOT NULL, expires REAL NOT NULL);
CREATE INDEX claims_by_queue ON claims (project, queue, expires);
CREATE TABLE records (kind TEXT NOT NULL, project TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    version INTEGER NOT NULL, PRIMARY KEY (kind, project, key)) WITHOUT ROWID;
PRAGMA user_version=1;
"""

#: what layout 2 added to layout 1: dedup ids and message groups (no trace column yet)
LAYOUT_2_ADDITIONS = """
ALTER TABLE messages ADD COLUMN dedup_id TEXT;
ALTER TABLE messages ADD COLUMN group_name TEXT;
CREATE INDEX messages_by_group ON messages (project, queue, group_name, marker) WHERE group_name IS NOT NULL;
CREATE TABLE dedup (project TEXT NOT NULL, queue TEXT NOT NULL, dedup_id TEXT NOT NULL,
    message_id TEXT NOT NULL, expires REAL NOT NULL, PRIMARY KEY (project, queue, dedup_id)) WITHOUT ROWID;
CREATE INDEX dedup_by_expiry ON dedup (project, queue, expires);
PRAGMA user_version=2;
"""

TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


def _layout_columns(path) -> tuple[int, list[str], set[str]]:
    """Return a file's layout number, its messages columns and its indexes of messages."""
    with sqlite3.connect(path) as db:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        columns = [row[1] for row in db.execute("PRAGMA table_info(messages)")]
        indexes = {row[1] for row in db.execute("PRAGMA index_list(messages)")}
    return version, columns, indexes


LAYOUT_3_COLUMNS = ["id", "project", "queue", "marker", "body", "created", "expires", "delay_until",
                    "client_id", "claim_id", "claim_expires", "claim_count", "dlq_eligible", "failures",
                    "dead_letter", "dedup_id", "group_name", "trace"]
LAYOUT_3_INDEXES = {"messages_by_id", "messages_by_queue", "messages_by_visibility", "messages_by_expiry",
                    "messages_by_claim", "messages_by_group"}


def test_a_file_of_layout_1_gains_dedup_ids_groups_and_traces_on_open_keeping_its_messages(tmp_path):
    path = tmp_path / "layout1.db"
    now = 1_800_000_000.0
    with sqlite3.connect(path) as db:
        db.executescript(LAYOUT_1)
        db.execute("INSERT INTO queues VALUES (?, ?, '{}', ?, 1)", (P, Q, now))
        db.execute("INSERT INTO messages (id, project, queue, marker, body, created, expires, client_id)"
                   " VALUES ('old', ?, ?, 1, '\"kept\"', ?, ?, 'c')", (P, Q, now, now + 3600))
    storage = SqliteStorage(f"sqlite:///{path}")
    assert _layout_columns(path) == (4, LAYOUT_3_COLUMNS, LAYOUT_3_INDEXES)
    grouped = Message(id="new", body="n", created=now, expires=now + 3600, dedup_id="d-1",
                      dedup_until=now + 300, group="g", trace=TRACE)
    assert storage.post_messages(P, Q, [grouped], now) == ["new"]
    again = Message(id="again", body="a", created=now, expires=now + 3600, dedup_id="d-1",
                    dedup_until=now + 300)
    assert storage.post_messages(P, Q, [again], now) == ["new"]
    found = storage.get_messages(P, Q, ["old", "new"], now)
    assert [(m.id, m.body, m.marker, m.dedup_id, m.group, m.trace) for m in found] == [
        ("old", "kept", 1, None, None, None),
        ("new", "n", 2, "d-1", "g",
         {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})]


def test_a_file_of_layout_2_gets_the_trace_column_keeping_its_groups_and_dedup_ids(tmp_path):
    path = tmp_path / "layout2.db"
    now = 1_800_000_001.0
    with sqlite3.connect(path) as db:
        db.executescript(LAYOUT_1 + LAYOUT_2_ADDITIONS)
        db.execute("INSERT INTO queues VALUES (?, ?, '{}', ?, 2)", (P, Q, now))
        db.executemany(
            "INSERT INTO messages (id, project, queue, marker, body, created, expires, client_id, dedup_id,"
            " group_name) VALUES (?, ?, ?, ?, '\"old\"', ?, ?, 'c', ?, 'g')",
            [("g1", P, Q, 1, now, now + 3600, "d-1"), ("g2", P, Q, 2, now, now + 3600, None)])
        db.execute("INSERT INTO dedup VALUES (?, ?, 'd-1', 'g1', ?)", (P, Q, now + 300))
    storage = SqliteStorage(f"sqlite:///{path}")
    assert _layout_columns(path) == (4, LAYOUT_3_COLUMNS, LAYOUT_3_INDEXES)
    # the remembered dedup_id still answers with its message
    repeated = Message(id="repeat", body="r", created=now, expires=now + 3600, dedup_id="d-1",
                       dedup_until=now + 300, trace=TRACE)
    traced = Message(id="new", body="traced", created=now, expires=now + 3600, trace=TRACE)
    assert storage.post_messages(P, Q, [repeated, traced], now) == ["g1", "new"]
    found = storage.get_messages(P, Q, ["g1", "g2", "new"], now)
    assert [(m.id, m.marker, m.dedup_id, m.group, m.trace) for m in found] == [
        ("g1", 1, "d-1", "g", None), ("g2", 2, None, "g", None),
        ("new", 3, None, None, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})]
    # the group still orders g2 after g1
    claimed = storage.claim_messages(P, Q, ClaimRequest("c1", now, 60, 60, 5)).claimed
    assert [m.id for m in claimed] == ["g1", "g2", "new"]


def test_a_file_of_layout_3_gets_due_times_every_queue_due_until_its_first_sweep(tmp_path):
    path = tmp_path / "layout3.db"
    now = 1_800_000_001.0
    with sqlite3.connect(path) as db:
        db.executescript(LAYOUT_1 + LAYOUT_2_ADDITIONS
                         + "ALTER TABLE messages ADD COLUMN trace TEXT; PRAGMA user_version=3;")
        db.executemany("INSERT INTO queues VALUES (?, ?, '{}', ?, 1)", [(P, "idle", now), (P, Q, now)])
        db.execute("INSERT INTO messages (id, project, queue, marker, body, created, expires, client_id)"
                   " VALUES ('old', ?, ?, 1, '\"kept\"', ?, ?, 'c')", (P, Q, now, now + 3600))
    storage = SqliteStorage(f"sqlite:///{path}")
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4
    assert [(p, q) for p, q, _ in storage.due_queues(now)] == [(P, "idle"), (P, Q)]
    for queue in ("idle", Q):
        storage.sweep_queue(P, queue, now, DeadLetterPolicy())
    assert list(storage.due_queues(now)) == []
    assert [(p, q) for p, q, _ in storage.due_queues(now + 3600)] == [(P, Q)]
    assert [m.id for m in storage.get_messages(P, Q, ["old"], now)] == ["old"]


def test_a_file_of_a_newer_layout_is_refused_with_its_version(tmp_path):
    path = tmp_path / "newer.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version=7")
    with pytest.raises(errors.StorageUnavailable, match="layout 7, made by a newer zaqar-lite"):
        SqliteStorage(f"sqlite:///{path}")


def _open_and_post(uri: str, prefix: str) -> None:
    now = 1_800_000_001.0
    SqliteStorage(uri).post_messages(P, Q, _messages(1, now, prefix=prefix), now)


def test_processes_opening_a_global_marker_file_at_once_migrate_it_once(tmp_path):
    path = tmp_path / "old.db"
    _global_marker_file(path)
    uri = f"sqlite:///{path}"
    workers = [multiprocessing.Process(target=_open_and_post, args=(uri, f"w{i}-")) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    found = _markers(SqliteStorage(uri), P, Q)
    assert found[:2] == [("a1", 1), ("a3", 3)]
    assert sorted(marker for _, marker in found[2:]) == [8, 9, 10, 11]
    assert sorted(message_id for message_id, _ in found[2:]) == ["w0-0", "w1-0", "w2-0", "w3-0"]
