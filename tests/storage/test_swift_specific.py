"""Swift-only behaviour: a move cut between copy and delete, object names and markers, URIs.

Outages and racing claimers are tested on every store in
``tests/storage/test_processes_and_outages.py``.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time

import pytest

from zaqar_lite import errors
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.models import ClaimRequest, ClaimResult, DeadLetterPolicy, Message
from zaqar_lite.service import Messaging
from zaqar_lite.storage.swift import layout as swift_objects
from zaqar_lite.storage.swift.driver import SwiftStorage

P, Q, DLQ = "project-a", "orders", "orders-dlq"
NOW = ManualClock().now


@pytest.fixture
def store(swift_store_uri):
    storage = SwiftStorage(swift_store_uri)
    yield storage
    storage.close()


def _messages(count: int, prefix: str = "m") -> list[Message]:
    return [Message(id=f"{prefix}{i}", body={"n": i}, created=NOW, expires=NOW + 3600) for i in range(count)]


def _names(store: SwiftStorage, queue: str) -> list[str]:
    """Return the object names of a queue's messages, expired ones included."""
    container = swift_objects.project_container(store.options.prefix, P)
    return [name for name, _ in store.objects.rows(container, swift_objects.message_prefix(queue))]


def test_uri_gives_tempauth_user_key_and_options():
    options = swift_objects.parse_uri(
        "swift://test%3Atester:tes%40ting@127.0.0.1:8080/auth/v1.0?prefix=t1&settle=0.2&os_region_name=r1")
    assert (options.user, options.key, options.auth_url) == ("test:tester", "tes@ting",
                                                             "http://127.0.0.1:8080/auth/v1.0")
    assert (options.prefix, options.settle, options.os_options) == ("t1", 0.2, {"region_name": "r1"})


@pytest.mark.parametrize("uri", ["redis://x:1/0", "swift:///auth/v1.0", "swift://u:k@h:1/a?prefix=a.b",
                                 "swift://u:k@h:1/a?setle=1", "swift://u:k@h:1/a?operation_timeout=0"])
def test_uris_of_another_scheme_without_host_with_a_bad_prefix_or_option_are_refused(uri):
    with pytest.raises(ValueError):
        swift_objects.parse_uri(uri)


def test_message_names_sort_in_post_order_across_calls():
    clock = swift_objects.MarkerClock()
    markers = clock.take(P, Q, 3, NOW) + clock.take(P, Q, 2, NOW)
    names = [swift_objects.message_object(Q, m, f"id{9 - i}") for i, m in enumerate(markers)]
    assert sorted(names) == names
    assert all(swift_objects.message_id_of(n) == f"id{9 - i}" for i, n in enumerate(names))


def test_a_queue_markers_follow_its_own_posts_and_the_time_only():
    clock = swift_objects.MarkerClock()
    first = clock.take(P, Q, 2, NOW)
    clock.take(P, "other", 50, NOW)
    clock.take("project-b", Q, 50, NOW)
    assert clock.take(P, Q, 1, NOW) == [first[1] + 1000]
    assert clock.take(P, "other", 1, NOW + 1) == clock.take(P, Q, 1, NOW + 1)
    later, = clock.take(P, Q, 1, NOW + 1)
    assert clock.take(P, Q, 1, NOW - 60) == [later + 1000], "a clock step back keeps the order"


def test_queues_remembered_past_the_time_are_bounded_and_keep_their_order():
    clock = swift_objects.MarkerClock()
    last = [clock.take(P, f"q{i}", 3, NOW)[-1] for i in range(clock.AHEAD_LIMIT + 1)]
    assert len(clock._ahead) == clock.AHEAD_LIMIT + 1
    assert clock.take(P, "q0", 1, NOW) == [max(last) + 1000]
    assert len(clock._ahead) == 1


def test_a_move_cut_between_copy_and_delete_leaves_a_duplicate_the_next_sweep_removes(store, monkeypatch):
    messaging = Messaging(store, load_settings(None, storage_uri="sqlite:///unused.db"), lambda: NOW)
    messaging.create_queue(P, DLQ, {})
    messaging.create_queue(P, Q, {"_max_claim_count": 1, "_dead_letter_queue": DLQ})
    store.post_messages(P, Q, _messages(1), NOW)
    policy = DeadLetterPolicy(max_claim_count=1, queue=DLQ)
    first = store.claim_messages(P, Q, ClaimRequest("c1", NOW, 60, 60, 1, policy))
    assert [m.id for m in first.claimed] == ["m0"]
    later = NOW + 61
    real_delete = store.objects.delete

    def crash_on_source_delete(container: str, name: str) -> bool:
        if name.startswith(swift_objects.message_prefix(Q)):
            raise RuntimeError("process killed between the DLQ copy and the source delete")
        return real_delete(container, name)

    monkeypatch.setattr(store.objects, "delete", crash_on_source_delete)
    with pytest.raises(RuntimeError):
        store.claim_messages(P, Q, ClaimRequest("c2", later, 60, 60, 1, policy))
    monkeypatch.undo()

    assert len(_names(store, Q)) == 1 and len(_names(store, DLQ)) == 1
    assert [m.id for m in store.get_messages(P, DLQ, ["m0"], later)] == ["m0"]
    assert [m.id for m in store.get_messages(P, Q, ["m0"], later)] == ["m0"]

    result = store.sweep_queue(P, Q, later + 1, policy)
    assert result.dead_lettered == 1
    assert _names(store, Q) == [] and len(_names(store, DLQ)) == 1
    assert store.claim_messages(P, Q, ClaimRequest("c3", later + 1, 60, 60, 1, policy)) == ClaimResult()
    moved = store.get_messages(P, DLQ, ["m0"], later + 1)[0]
    assert (moved.body, moved.claim_count, moved.dead_letter["reason"]) == ({"n": 0}, 1, "max_claims")
    assert moved.dead_letter["dead_lettered_at"] == later


@pytest.mark.parametrize("queue", [".", "..", "a.b"])
def test_dot_queue_names_and_odd_ids_stay_inside_their_own_objects(store, queue):
    assert store.create_queue(P, queue, {"k": queue}, NOW) is True
    store.post_messages(P, queue, _messages(1), NOW)
    assert store.get_queue_metadata(P, queue) == {"k": queue}
    assert [n for n, _ in store.list_queues(P, marker=None, limit=10)] == [queue]
    assert [m.id for m in store.get_messages(P, queue, ["m0"], NOW)] == ["m0"]
    with pytest.raises(errors.InvalidClaim):
        store.delete_message(P, queue, "m0", "bad\x00claim/..", NOW)
    assert store.get_record(P, "subscription", f"{queue}/\x00") is None


def test_a_post_swift_stores_but_does_not_list_is_refused_not_acknowledged(store, swift_server):
    # Claims and lookups find messages through the listing; the object server answers a
    # PUT whose listing update failed with 201 (the update waits for an object updater).
    store.create_queue(P, Q, {}, NOW)
    assert store.get_queue_metadata(P, Q) == {}  # the proxy has the container's details at hand
    swift_server.stop_server("container")
    try:
        with pytest.raises(errors.StorageUnavailable):
            store.post_messages(P, Q, _messages(1), NOW)
    finally:
        swift_server.start_server("container")
    assert store.claim_messages(P, Q, ClaimRequest("c1", NOW, 60, 60, 5)) == ClaimResult()
    assert store.post_messages(P, Q, _messages(1, "again"), NOW) == ["again0"]
    claimed = store.claim_messages(P, Q, ClaimRequest("c2", NOW, 60, 60, 5))
    assert [m.id for m in claimed.claimed] == ["again0"]


def test_a_deduplicated_post_whose_write_is_slower_than_settle_still_stores_its_message(store, monkeypatch):
    # A loaded Swift: the dedup object's write returns after more than `settle` seconds.
    real_create = store.objects.create

    def slow_create(container: str, name: str, *args, **kwargs):
        sent = real_create(container, name, *args, **kwargs)
        if name.startswith(swift_objects.dedup_prefix(Q)):
            time.sleep(store.options.settle + 0.2)
        return sent

    monkeypatch.setattr(store.objects, "create", slow_create)
    message = Message(id="m0", body="payment 17", created=NOW, expires=NOW + 3600,
                      dedup_id="payment-17", dedup_until=NOW + 300)
    assert store.post_messages(P, Q, [message], NOW) == ["m0"]
    assert [m.body for m in store.get_messages(P, Q, ["m0"], NOW)] == ["payment 17"]
    retried = dataclasses.replace(message, id="m1")
    assert store.post_messages(P, Q, [retried], NOW + 1) == ["m0"]
    assert [m.id for m in store.list_messages(P, Q, now=NOW + 1, marker=None, limit=10, include_claimed=True,
                                              include_delayed=True, exclude_client_id=None)] == ["m0"]


BUDGET = 2.0  # the test URI's operation_timeout, below the driver's timeout (3 s) and its retry


def _pausing_proxy_after_first_claim_write(store, swift_server, monkeypatch) -> list[int]:
    """SIGSTOP the Swift proxy right after the claim's first message write lands; return the paused PIDs."""
    paused: list[int] = []
    real_write = store.objects.write

    def write(container, name, body, content_type, headers=None):
        sent = real_write(container, name, body, content_type, headers)
        if headers and "If-Match" in headers and not paused:
            paused.append(swift_server.processes["proxy"].pid)
            os.kill(paused[0], signal.SIGSTOP)
        return sent

    monkeypatch.setattr(store.objects, "write", write)
    return paused


def test_a_claim_cut_by_a_paused_swift_answers_unavailable_within_its_budget_and_loses_nothing(
        swift_store_uri, swift_server, monkeypatch):
    store = SwiftStorage(f"{swift_store_uri}&operation_timeout={BUDGET:g}")
    try:
        store.post_messages(P, Q, _messages(4), NOW)
        paused = _pausing_proxy_after_first_claim_write(store, swift_server, monkeypatch)
        started = time.monotonic()
        try:
            with pytest.raises(errors.StorageUnavailable):
                store.claim_messages(P, Q, ClaimRequest("c1", NOW, 60, 60, 4))
            elapsed = time.monotonic() - started
        finally:
            for pid in paused:
                os.kill(pid, signal.SIGCONT)
        assert paused, "the claim never wrote a message"
        assert elapsed < BUDGET + 1.0, f"the claim took {elapsed:.1f} s"
        monkeypatch.undo()
        # the message it marked stays held until that claim lapses; the others are claimable now
        every = store.list_messages(P, Q, now=NOW, marker=None, limit=10, include_claimed=True,
                                    include_delayed=True, exclude_client_id=None)
        assert sorted(m.id for m in every) == ["m0", "m1", "m2", "m3"]
        now = store.claim_messages(P, Q, ClaimRequest("c2", NOW + 1, 60, 60, 4))
        assert [m.id for m in now.claimed] == ["m1", "m2", "m3"]
        lapsed = store.claim_messages(P, Q, ClaimRequest("c3", NOW + 60.5, 60, 60, 4))
        assert [m.id for m in lapsed.claimed] == ["m0"]
    finally:
        store.close()


def test_a_post_of_many_to_a_paused_swift_answers_unavailable_within_its_budget(
        swift_store_uri, swift_server):
    store = SwiftStorage(f"{swift_store_uri}&operation_timeout={BUDGET:g}")
    try:
        store.create_queue(P, Q, {}, NOW)
        pid = swift_server.processes["proxy"].pid
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        try:
            with pytest.raises(errors.StorageUnavailable):
                store.post_messages(P, Q, _messages(20), NOW)
            elapsed = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
        assert elapsed < BUDGET + 1.0, f"the post took {elapsed:.1f} s"
        assert store.post_messages(P, Q, _messages(1, "again"), NOW) == ["again0"]
    finally:
        store.close()


def test_a_claim_that_loses_a_groups_first_message_gives_its_later_ones_back_at_once(store, monkeypatch):
    # A competitor's claim lands on g0 after this claim wrote it and before its read-back: this
    # claim must not answer g1 and g2 (they would go before g0), and must not hide them either.
    grouped = [dataclasses.replace(m, group="g") for m in _messages(3, "g")]
    store.post_messages(P, Q, [*grouped, *_messages(1, "free")], NOW)
    container = swift_objects.project_container(store.options.prefix, P)
    real_write = store.objects.write
    overwritten: list[str] = []

    def competitor_lands_after(container_name, name, body, content_type, headers=None):
        sent = real_write(container_name, name, body, content_type, headers)
        if headers and "If-Match" in headers and name.endswith("_g0") and not overwritten:
            overwritten.append(name)
            mine = store._load(container, name)[0]
            real_write(container_name, name, swift_objects.message_body(
                dataclasses.replace(mine, claim_id="competitor")), content_type)
        return sent

    monkeypatch.setattr(store.objects, "write", competitor_lands_after)
    result = store.claim_messages(P, Q, ClaimRequest("c1", NOW, 60, 60, 4))
    monkeypatch.undo()
    assert overwritten, "the claim never wrote g0"
    assert [m.id for m in result.claimed] == ["free0"]
    back = {m.id: m for m in store.get_messages(P, Q, ["g1", "g2"], NOW)}
    assert [back[i].claim_count for i in ("g1", "g2")] == [0, 0]
    # the competitor holds the group; once its claim lapses the group comes back whole, in order
    assert store.claim_messages(P, Q, ClaimRequest("c2", NOW + 1, 60, 60, 4)) == ClaimResult()
    lapsed = store.claim_messages(P, Q, ClaimRequest("c3", NOW + 60.5, 60, 60, 4))
    assert [m.id for m in lapsed.claimed if m.group] == ["g0", "g1", "g2"]
