"""Queues on every driver: creation, listing, deletion, the walk over all, stats, metadata changed since."""

from __future__ import annotations

import pytest

from tests.storage.conformance.conftest import CLIENT, DLQ, P, Q, claim, listed, post
from zaqar_lite import errors

# -- queues -------------------------------------------------------------------

def test_create_queue_reports_creation_once_and_keeps_first_metadata(messaging):
    assert messaging.create_queue(P, Q, {"a": 1}) is True
    assert messaging.create_queue(P, Q, {"a": 2}) is False
    assert messaging.queue_metadata(P, Q)["a"] == 1


def test_queue_list_is_ordered_paginated_and_filtered_by_name(messaging):
    for name in ("c", "a", "b-x", "d-x"):
        messaging.create_queue(P, name, {})
    page = messaging.list_queues(P, marker=None, limit=2, name=None, filters={})
    assert [n for n, _ in page] == ["a", "b-x"]
    page = messaging.list_queues(P, marker="b-x", limit=10, name=None, filters={})
    assert [n for n, _ in page] == ["c", "d-x"]
    named = messaging.list_queues(P, marker=None, limit=10, name="-x", filters={})
    assert [n for n, _ in named] == ["b-x", "d-x"]
    assert messaging.count_queues(P) == 4


def test_queues_and_messages_of_one_project_are_invisible_to_another(messaging):
    post(messaging, "secret")
    assert messaging.list_queues("project-b", marker=None, limit=10, name=None, filters={}) == []
    assert listed(messaging, project="project-b") == []
    assert claim(messaging, project="project-b")[1] == []


def test_deleting_a_queue_deletes_its_messages(messaging):
    post(messaging, 1, 2)
    messaging.delete_queue(P, Q)
    messaging.delete_queue(P, Q)
    assert listed(messaging) == []
    assert messaging.storage.get_queue_metadata(P, Q) is None


def test_setting_metadata_of_missing_queue_raises(driver):
    with pytest.raises(errors.QueueDoesNotExist):
        driver.set_queue_metadata(P, "missing", {})


def test_all_queues_reads_a_page_at_a_time_and_yields_each_queue_once(driver):
    driver.all_queues_page = 3
    for project in ("project-a", "project-b"):
        for i in range(7):
            driver.create_queue(project, f"q{i}", {"n": i}, 0.0)
    walk = driver.all_queues()
    first = next(walk)
    # created after the walk began, past its first page: only a walk that reads as it goes sees it
    driver.create_queue(first[0], "q9", {"n": 9}, 0.0)
    seen = [first, *walk]
    assert len(seen) == 15
    assert sorted((p, q, m["n"]) for p, q, m in seen) == sorted([
        *(("project-a", f"q{i}", i) for i in range(7)), *(("project-b", f"q{i}", i) for i in range(7)),
        (first[0], "q9", 9)])


# -- stats --------------------------------------------------------------------

def test_stats_count_claimed_free_and_delayed_apart(messaging):
    ids = post(messaging, 1, 2, 3)
    post(messaging, "later", delay=100)
    claim(messaging, limit=1)
    stats, _ = messaging.queue_stats(P, Q)
    assert (stats.claimed, stats.free, stats.delayed, stats.total) == (1, 2, 1, 4)
    assert stats.oldest.id == ids[0]


def test_stats_of_empty_queue_have_no_oldest(messaging):
    stats, _ = messaging.queue_stats(P, "empty")
    assert (stats.total, stats.oldest, stats.newest) == (0, None, None)


# -- queue metadata another worker changed ------------------------------------

def test_posts_follow_a_default_delay_another_worker_set_since(messaging, other_worker, clock):
    messaging.create_queue(P, Q, {})
    before, = post(messaging, "before")  # this worker has read the queue's metadata
    other_worker.update_queue(P, Q, [("add", "_default_message_delay", 60)])
    after, = post(messaging, "after")
    assert listed(messaging) == [before]
    clock.advance(60)
    assert listed(messaging) == [before, after]


def test_a_post_after_another_worker_deleted_the_queue_creates_it_again(messaging, other_worker):
    messaging.create_queue(P, Q, {"_default_message_delay": 60})
    post(messaging, "first")
    other_worker.delete_queue(P, Q)
    second, = post(messaging, "second")
    assert listed(messaging) == [second]
    assert messaging.queue_metadata(P, Q)["_default_message_delay"] == 0
    assert [q for p, q, _ in messaging.storage.all_queues() if p == P] == [Q]


def test_a_post_size_limit_raised_by_another_worker_applies_at_once(messaging, other_worker):
    messaging.create_queue(P, Q, {"_max_messages_post_size": 100})
    item = {"body": "x", "ttl": None, "delay": None, "dlq_eligible": True}
    with pytest.raises(errors.InvalidBody):
        messaging.post(P, Q, CLIENT, [item], 200)
    other_worker.update_queue(P, Q, [("replace", "_max_messages_post_size", 300)])
    stored = messaging.post(P, Q, CLIENT, [item], 200)
    assert listed(messaging) == stored
    other_worker.update_queue(P, Q, [("replace", "_max_messages_post_size", 150)])
    with pytest.raises(errors.InvalidBody):
        messaging.post(P, Q, CLIENT, [item], 200)


def test_claims_follow_a_dead_letter_queue_another_worker_configured(messaging, other_worker, clock):
    messaging.create_queue(P, Q, {})
    messaging.create_queue(P, DLQ, {})
    exhausted, = post(messaging, "fails")
    assert claim(messaging, ttl=60)[1] == [exhausted]  # this worker has read the metadata
    clock.advance(61)
    other_worker.update_queue(P, Q, [("add", "_max_claim_count", 1), ("add", "_dead_letter_queue", DLQ)])
    assert claim(messaging)[1] == []
    assert listed(messaging, queue=DLQ) == [exhausted]
