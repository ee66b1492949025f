"""What a driver remembers per queue is bounded: the LRU cache, and the Redis driver on a real server."""

from __future__ import annotations

import threading

import pytest

from zaqar_lite import errors
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage
from zaqar_lite.storage.cache import LRUCache
from zaqar_lite.storage.redis.driver import RedisStorage

P = "p"
CLIENT = "3b6b3e4f-5a8c-4c1e-9f0e-8d2f1a7b6c5d"
ITEM = {"body": {"n": 1}, "ttl": None, "delay": None, "dlq_eligible": True}
BOUND = 5


# -- the cache ------------------------------------------------------------------

def test_the_cache_keeps_the_most_recently_used_entries_up_to_its_size():
    cache: LRUCache[int, str] = LRUCache(3)
    for i in range(10):
        cache.put(i, f"v{i}")
        assert len(cache) == min(i + 1, 3)
    assert [i for i in range(10) if i in cache] == [7, 8, 9]
    assert cache.get(9) == "v9"
    assert cache.get(6) is None


def test_reading_an_entry_makes_it_the_last_to_be_forgotten():
    cache: LRUCache[str, int] = LRUCache(3)
    for key in "abc":
        cache.put(key, 1)
    assert cache.get("a") == 1  # now b is the least recently used
    cache.put("d", 1)
    assert sorted(k for k in "abcd" if k in cache) == ["a", "c", "d"]
    cache.put("c", 2)  # a write refreshes too: a is the oldest now
    cache.put("e", 1)
    assert sorted(k for k in "abcde" if k in cache) == ["c", "d", "e"]
    assert cache.get("c") == 2


def test_an_empty_string_is_an_entry_and_pop_forgets_one():
    cache: LRUCache[str, str] = LRUCache(2)
    cache.put("missing-queue", "")
    assert cache.get("missing-queue") == ""
    cache.pop("missing-queue")
    cache.pop("never-there")
    assert cache.get("missing-queue") is None
    assert len(cache) == 0


def test_get_or_make_makes_only_on_a_miss():
    cache: LRUCache[str, str] = LRUCache(2)
    made: list[str] = []

    def make(key: str) -> str:
        made.append(key)
        return key.upper()

    assert [cache.get_or_make(k, lambda k=k: make(k)) for k in ("a", "a", "b", "c", "a")] == \
        ["A", "A", "B", "C", "A"]
    assert made == ["a", "b", "c", "a"]  # a was forgotten when c came in


def test_a_cache_of_size_0_remembers_nothing_and_a_negative_size_is_refused():
    cache: LRUCache[str, str] = LRUCache(0)
    cache.put("a", "x")
    assert len(cache) == 0
    assert cache.get("a") is None
    with pytest.raises(ValueError, match="cannot be negative"):
        LRUCache(-1)


def test_threads_sharing_a_cache_never_push_it_over_its_size():
    cache: LRUCache[tuple[int, int], int] = LRUCache(100)
    failures: list[BaseException] = []
    over: list[int] = []
    start = threading.Barrier(8)

    def work(thread: int) -> None:
        try:
            start.wait()
            for i in range(5000):
                cache.put((thread, i), i)
                cache.get((thread, i - 50))
                if i % 7 == 0:
                    cache.pop((thread, i - 3))
                if len(cache) > 100:
                    over.append(len(cache))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert over == []
    assert len(cache) == 100


# -- the Redis driver on a real server --------------------------------------------

@pytest.fixture
def settings():
    return load_settings(None, storage_uri="sqlite:///unused.db")


@pytest.fixture
def store(redis_store_uri):
    storage = open_storage(redis_store_uri, queue_cache_size=BOUND)
    assert isinstance(storage, RedisStorage)
    yield storage
    storage.close()


@pytest.fixture
def worker(store, settings):
    return Messaging(store, settings, ManualClock(1_800_000_000.0))


@pytest.fixture
def other_worker(redis_store_uri, settings):
    storage = open_storage(redis_store_uri, queue_cache_size=BOUND)
    yield Messaging(storage, settings, ManualClock(1_800_000_000.0))
    storage.close()


def _touch(worker: Messaging, queue: str) -> list[str]:
    """Post one message to a queue and claim it; return the ids claimed."""
    posted = worker.post(P, queue, CLIENT, [ITEM], 20)
    _, claimed, _ = worker.claim(P, queue, 1, 60, 60)
    assert [m.id for m in claimed] == posted
    return posted


def test_touching_more_queues_than_the_bound_keeps_each_cache_at_the_bound(store, worker):
    for i in range(3 * BOUND):
        _touch(worker, f"q{i}")
    assert (len(store._metadata), len(store._names)) == (BOUND, BOUND)
    assert [f"q{i}" for i in range(3 * BOUND) if (P, f"q{i}") in store._metadata] == \
        [f"q{i}" for i in range(2 * BOUND, 3 * BOUND)]


def test_a_forgotten_queue_is_read_again_and_a_remembered_one_is_not(worker, store):
    for i in range(BOUND + 1):
        _touch(worker, f"q{i}")
    assert store._metadata_text(P, f"q{BOUND}")[1]  # the most recent: from memory
    assert not store._metadata_text(P, "q0")[1]  # forgotten when q5 came in: read again
    assert store._metadata_text(P, "q0")[1]  # and remembered
    assert (P, "q1") not in store._metadata  # which forgot the least recently used


def test_a_forgotten_queue_is_planned_with_metadata_changed_meanwhile(worker, other_worker):
    worker.create_queue(P, "q0", {})
    _touch(worker, "q0")
    other_worker.update_queue(P, "q0", [("add", "_default_message_ttl", 120)])
    for i in range(1, BOUND + 1):
        _touch(worker, f"q{i}")  # q0 is forgotten
    posted, = worker.post(P, "q0", CLIENT, [ITEM], 20)
    stored, = worker.storage.get_messages(P, "q0", [posted], 1_800_000_000.0)
    assert stored.expires == 1_800_000_000.0 + 120


def test_a_remembered_queue_whose_metadata_changed_is_caught_by_the_stale_check(worker, other_worker, store):
    worker.create_queue(P, "q0", {})
    _touch(worker, "q0")
    for i in range(1, BOUND):
        _touch(worker, f"q{i}")  # the cache is full; q0 is still in it
    other_worker.update_queue(P, "q0", [("add", "_default_message_ttl", 120)])
    assert store._metadata.get((P, "q0")) == "{}"  # what this worker plans with: stale now
    posted, = worker.post(P, "q0", CLIENT, [ITEM], 20)
    assert store._metadata.get((P, "q0")) == '{"_default_message_ttl": 120}'
    stored, = worker.storage.get_messages(P, "q0", [posted], 1_800_000_000.0)
    assert stored.expires == 1_800_000_000.0 + 120


def test_a_post_refused_by_remembered_metadata_is_judged_again_on_what_is_stored(worker, other_worker, store):
    worker.create_queue(P, "q0", {"_max_messages_post_size": 1000})
    _touch(worker, "q0")
    other_worker.update_queue(P, "q0", [("replace", "_max_messages_post_size", 4000)])
    assert store._metadata.get((P, "q0")) == '{"_max_messages_post_size": 1000}'
    posted, = worker.post(P, "q0", CLIENT, [ITEM], 2000)
    assert store._metadata.get((P, "q0")) == '{"_max_messages_post_size": 4000}'
    assert [m.id for m in worker.storage.get_messages(P, "q0", [posted], 1_800_000_000.0)] == [posted]


def test_a_post_allowed_by_remembered_metadata_is_refused_by_what_is_stored(worker, other_worker, store):
    worker.create_queue(P, "q0", {"_max_messages_post_size": 4000})
    _touch(worker, "q0")
    other_worker.update_queue(P, "q0", [("replace", "_max_messages_post_size", 1000)])
    with pytest.raises(errors.InvalidBody, match="may not exceed 1000 bytes"):
        worker.post(P, "q0", CLIENT, [ITEM], 2000)
    listed = worker.storage.list_messages(P, "q0", now=1_800_000_000.0, marker=None, limit=10,
                                          include_claimed=True, include_delayed=True,
                                          exclude_client_id=None)
    assert len(listed) == 1  # only the one _touch posted


def test_claims_dead_letter_into_a_queue_whose_names_were_forgotten(worker, store):
    worker.create_queue(P, "dlq", {})
    worker.create_queue(P, "src", {"_max_claim_count": 1, "_dead_letter_queue": "dlq"})
    exhausted, = worker.post(P, "src", CLIENT, [ITEM], 20)
    claim_id, claimed, _ = worker.claim(P, "src", 1, 60, 60)
    assert [m.id for m in claimed] == [exhausted]
    worker.release_claim(P, "src", claim_id)  # claimed once: the next claim dead-letters it
    for i in range(2 * BOUND):
        _touch(worker, f"q{i}")
    assert (P, "dlq") not in store._names and (P, "src") not in store._names
    assert worker.claim(P, "src", 1, 60, 60)[1] == []
    listed = worker.storage.list_messages(P, "dlq", now=1_800_000_000.0, marker=None, limit=10,
                                          include_claimed=True, include_delayed=True,
                                          exclude_client_id=None)
    assert [m.id for m in listed] == [exhausted]


def test_a_sweep_over_every_queue_leaves_the_remembered_queues_alone(worker, store):
    for i in range(BOUND):
        _touch(worker, f"hot{i}")
    for i in range(3 * BOUND):
        store.create_queue(P, f"z-cold{i}", {}, 0.0)  # swept after the hot ones
    worker.sweep()
    hot = {(P, f"hot{i}") for i in range(BOUND)}
    assert {key for key in hot if key in store._names} == hot
    assert {key for key in hot if key in store._metadata} == hot


def test_threads_reading_while_others_fill_and_forget_see_only_stored_values():
    cache: LRUCache[tuple[str, str], str] = LRUCache(8)
    failures: list[BaseException] = []

    def reader() -> None:
        try:
            for n in range(20_000):
                value = cache.get(("p", f"q{n % 16}"))
                assert value is None or value == f"q{n % 16}"
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            failures.append(exc)

    def writer() -> None:
        for n in range(20_000):
            key = ("p", f"q{n % 16}")
            if n % 3:
                cache.put(key, key[1])
            else:
                cache.pop(key)

    threads = [threading.Thread(target=f) for f in (reader, reader, writer, writer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(cache) <= 8
