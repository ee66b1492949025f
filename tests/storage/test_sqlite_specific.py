"""SQLite-only behaviour: URIs, work done per claim, several processes writing at once."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from zaqar_lite.models import ClaimRequest, Message
from zaqar_lite.storage.sqlite import SqliteStorage, parse_uri

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
        claimed = storage.claim_messages(P, Q, ClaimRequest("c-" + str(now), now, 60, 60, 10))
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


def _claim_all(uri: str, results: multiprocessing.Queue[list[str]]) -> None:
    storage = SqliteStorage(uri)
    got: list[str] = []
    now = 1_800_000_000.0
    while True:
        claimed = storage.claim_messages(P, Q, ClaimRequest(f"{os.getpid()}-{len(got)}", now, 600, 60, 3))
        if not claimed:
            break
        got.extend(m.id for m in claimed)
    results.put(got)


def test_processes_claiming_at_once_never_share_a_message(tmp_path):
    uri = f"sqlite:///{tmp_path}/shared.db?synchronous=normal"
    now = 1_800_000_000.0
    SqliteStorage(uri).post_messages(P, Q, _messages(300, now), now)
    results: multiprocessing.Queue[list[str]] = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=_claim_all, args=(uri, results)) for _ in range(4)]
    for worker in workers:
        worker.start()
    got = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=10)
    everything = [i for ids in got for i in ids]
    assert len(everything) == 300
    assert set(everything) == {f"m{i}" for i in range(300)}
