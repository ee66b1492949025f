"""Pausing a queue (``_paused``) and the dead-letter circuit breaker (``_dead_letter_breaker``).

docs/api.rst, "Pausing a queue" and "Dead-letter circuit breaker". The tests
of pausing run on the store of ``$ZAQAR_LITE_TEST_STORE`` (the claim reads
``_paused`` from the metadata the store's own claim reads), as does one trip
of the breaker; the others are the service's rules, run once.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.helpers import JSON_PATCH, assert_error, claim, post
from zaqar_lite.config import MetricsSettings
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage

HOOK = "http://hooks.example.com:9/hook"
#: the rules these tests check are the service's; what each store does for them (a claim on a paused
#: queue, the breaker's counts, the held notice) is tests/storage/conformance/test_pause.py's
STORE_INDEPENDENT = pytest.mark.store_independent


@pytest.fixture
def settings(settings):
    """The suite's settings, with queue gauges read afresh at every scrape."""
    return settings.replace(metrics=MetricsSettings(census_max_age=0))


def patch(client, queue, *operations):
    return client.simulate_patch(f"/v2/queues/{queue}", body=json.dumps(list(operations)),
                                 headers={"Content-Type": JSON_PATCH})


def pause(client, queue):
    result = patch(client, queue, {"op": "add", "path": "/metadata/_paused", "value": True})
    assert result.status_code == 200, result.text
    return result.json


def resume(client, queue):
    result = patch(client, queue, {"op": "remove", "path": "/metadata/_paused"})
    assert result.status_code == 200, result.text
    return result.json


def claim_answer(client, queue, **params):
    return client.simulate_post(f"/v2/queues/{queue}/claims", params={"limit": 10, **params},
                                json={"ttl": 60, "grace": 60})


def scrape(client):
    result = client.simulate_get("/metrics")
    assert result.status_code == 200, result.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(result.text) for s in family.samples}


def test_a_paused_queue_accepts_posts_and_hands_out_nothing_until_resumed(client):
    (first,) = post(client, "jobs", {"n": 1})
    shown = pause(client, "jobs")
    assert shown["_paused"] is True
    (second,) = post(client, "jobs", {"n": 2})
    started = time.monotonic()
    assert claim_answer(client, "jobs").status_code == 204
    assert time.monotonic() - started < 1.0  # at once, no wait asked
    popped = client.simulate_delete("/v2/queues/jobs/messages", params={"pop": "5"})
    assert popped.status_code == 200 and popped.json["messages"] == []
    listed = client.simulate_get("/v2/queues/jobs/messages", params={"echo": "true"})
    assert [m["body"] for m in listed.json["messages"]] == [{"n": 1}, {"n": 2}]
    assert client.simulate_get("/v2/queues/jobs").json["_paused"] is True
    assert client.simulate_get("/v2/queues/jobs/stats").json["paused"] == {"by": "operator"}
    assert "_paused" not in resume(client, "jobs")
    _, claimed = claim(client, "jobs", limit=10)
    assert [m["id"] for m in claimed] == [first, second]


@STORE_INDEPENDENT
def test_an_unpaused_queue_shows_zaqars_representations_unchanged(client):
    post(client, "jobs", {"n": 1})
    assert "_paused" not in client.simulate_get("/v2/queues/jobs").json
    assert set(client.simulate_get("/v2/queues/jobs/stats").json) == {"messages"}


def test_resuming_by_false_works_as_removing(client):
    post(client, "jobs", {"n": 1})
    pause(client, "jobs")
    result = patch(client, "jobs", {"op": "replace", "path": "/metadata/_paused", "value": False})
    assert result.status_code == 200
    assert claim_answer(client, "jobs").status_code == 201


@STORE_INDEPENDENT
def test_a_pause_that_is_not_true_or_false_is_400_naming_the_key(client):
    client.simulate_put("/v2/queues/jobs")
    refused = patch(client, "jobs", {"op": "add", "path": "/metadata/_paused", "value": "yes"})
    body = assert_error(refused, 400)
    assert body["description"] == "_paused must be true or false, got a string."
    body = assert_error(client.simulate_put("/v2/queues/other", json={"_paused": 1}), 400)
    assert body["description"] == "_paused must be true or false, got 1."


def test_a_queue_created_paused_hands_out_nothing(client):
    assert client.simulate_put("/v2/queues/jobs", json={"_paused": True}).status_code == 201
    post(client, "jobs", {"n": 1})
    assert claim_answer(client, "jobs").status_code == 204


def test_claims_taken_before_the_pause_run_as_usual(client):
    post(client, "jobs", {"n": 1}, {"n": 2})
    claim_id, claimed = claim(client, "jobs", limit=2)
    pause(client, "jobs")
    href = f"/v2/queues/jobs/claims/{claim_id}"
    assert client.simulate_patch(href, json={"ttl": 120, "grace": 60}).status_code == 204
    assert client.simulate_get(href).status_code == 200
    assert client.simulate_delete(f"/v2/queues/jobs/messages/{claimed[0]['id']}",
                                  params={"claim_id": claim_id}).status_code == 204
    assert client.simulate_delete(href).status_code == 204  # released: still nothing handed out
    assert claim_answer(client, "jobs").status_code == 204


def test_the_messages_of_a_paused_queue_expire_as_usual(client, settings, clock):
    post(client, "jobs", {"n": 1}, ttl=60)
    pause(client, "jobs")
    clock.advance(61)
    Messaging(open_storage(settings.storage_uri), settings, clock).sweep()
    stats = client.simulate_get("/v2/queues/jobs/stats").json
    assert stats["messages"]["total"] == 0


def test_a_waiting_claim_on_a_paused_queue_waits_out_its_wait(client):
    post(client, "jobs", {"n": 1})
    pause(client, "jobs")
    started = time.monotonic()
    assert claim_answer(client, "jobs", wait=1).status_code == 204
    assert 0.95 <= time.monotonic() - started < 3.0


def test_a_waiting_claim_is_answered_when_the_queue_is_resumed(client, other_client):
    (message_id,) = post(client, "jobs", {"n": 1})
    pause(client, "jobs")
    outcome = {}

    def wait_for_a_message() -> None:
        started = time.monotonic()
        outcome["result"] = claim_answer(client, "jobs", wait=10)
        outcome["took"] = time.monotonic() - started

    waiting = threading.Thread(target=wait_for_a_message)
    waiting.start()
    time.sleep(0.5)
    resume(other_client, "jobs")
    waiting.join(15)
    assert outcome["result"].status_code == 201
    assert [m["id"] for m in outcome["result"].json["messages"]] == [message_id]
    assert 0.4 <= outcome["took"] < 5


@STORE_INDEPENDENT
def test_metrics_show_each_paused_queue_and_how_many_are_paused(client):
    post(client, "a", {"n": 1})
    post(client, "b", {"n": 1})
    pause(client, "b")
    samples = scrape(client)
    labels = lambda queue: (("project", "project-a"), ("queue", queue))  # noqa: E731
    assert samples[("zaqar_lite_queue_paused", labels("a"))] == 0
    assert samples[("zaqar_lite_queue_paused", labels("b"))] == 1
    assert samples[("zaqar_lite_queues_paused", ())] == 1


# -- the dead-letter circuit breaker ------------------------------------------------

def poisoned_queue(client, breaker, dlq=True):
    """Make queue jobs dead-letter a message at its second claim, under ``breaker``."""
    if dlq:
        assert client.simulate_put("/v2/queues/jobs-dlq").status_code == 201
    metadata = {"_max_claim_count": 1, "_dead_letter_breaker": breaker}
    if dlq:
        metadata["_dead_letter_queue"] = "jobs-dlq"
    assert client.simulate_put("/v2/queues/jobs", json=metadata).status_code == 201, "queue"


def fail_all(client, queue, n):
    """Post n messages, claim them once and release the claim: the next claim dead-letters them."""
    post(client, queue, *({"n": i} for i in range(n)))
    claim_id, claimed = claim(client, queue, limit=n)
    assert len(claimed) == n
    assert client.simulate_delete(f"/v2/queues/{queue}/claims/{claim_id}").status_code == 204


def test_a_breaker_pauses_its_queue_when_dead_letters_pass_its_count(client):
    poisoned_queue(client, {"seconds": 60, "max_dead_letters": 2})
    fail_all(client, "jobs", 2)
    assert claim_answer(client, "jobs").status_code == 204  # moves 2: not more than 2
    assert "_paused" not in client.simulate_get("/v2/queues/jobs").json
    before = scrape(client).get(("zaqar_lite_dead_letter_breaker_trips_total", ()), 0.0)
    fail_all(client, "jobs", 1)
    post(client, "jobs", {"healthy": True})
    tripping = claim_answer(client, "jobs")  # moves the third and trips; keeps what it took
    assert [m["body"] for m in tripping.json["messages"]] == [{"healthy": True}]
    post(client, "jobs", {"later": True})
    shown = client.simulate_get("/v2/queues/jobs").json
    assert shown["_paused"] is True
    record = shown["_paused_by"]
    assert (record["by"], record["dead_letters"], record["claimed"]) == ("dead_letter_breaker", 3, 0)
    assert record["rule"] == "more than 2 dead letters within 60 s"
    assert client.simulate_get("/v2/queues/jobs/stats").json["paused"] == record
    assert claim_answer(client, "jobs").status_code == 204  # stays paused
    assert scrape(client)[("zaqar_lite_dead_letter_breaker_trips_total", ())] - before == 1
    resumed = resume(client, "jobs")
    assert "_paused_by" not in resumed and "_paused" not in resumed
    _, claimed = claim(client, "jobs")
    assert [m["body"] for m in claimed] == [{"later": True}]


@STORE_INDEPENDENT
def test_dead_letters_in_windows_apart_do_not_add_up(client, clock):
    poisoned_queue(client, {"seconds": 60, "max_dead_letters": 2})
    fail_all(client, "jobs", 2)
    assert claim_answer(client, "jobs").status_code == 204
    clock.advance(61)
    fail_all(client, "jobs", 2)
    assert claim_answer(client, "jobs").status_code == 204
    assert "_paused" not in client.simulate_get("/v2/queues/jobs").json


@STORE_INDEPENDENT
def test_a_share_breaker_trips_when_dead_letters_pass_its_share_of_messages_claimed(client):
    poisoned_queue(client, {"seconds": 60, "max_share": 0.5, "min_claimed": 4})
    fail_all(client, "jobs", 3)  # 3 claimed
    post(client, "jobs", {"ok": 1})
    result = claim_answer(client, "jobs")  # 3 dead letters, 1 claimed: 3 > 0.5 * 4
    assert result.status_code == 201
    shown = client.simulate_get("/v2/queues/jobs").json
    assert shown["_paused"] is True
    assert (shown["_paused_by"]["dead_letters"], shown["_paused_by"]["claimed"]) == (3, 4)


@STORE_INDEPENDENT
def test_the_sweep_counts_its_dead_letters_toward_the_breaker(client, settings, clock):
    assert client.simulate_put("/v2/queues/jobs-dlq").status_code == 201
    assert client.simulate_put("/v2/queues/jobs", json={
        "_dead_letter_queue": "jobs-dlq", "_dead_letter_on_expiry": True,
        "_dead_letter_breaker": {"seconds": 600, "max_dead_letters": 1}}).status_code == 201
    post(client, "jobs", {"n": 1}, {"n": 2}, ttl=60)
    clock.advance(61)
    Messaging(open_storage(settings.storage_uri), settings, clock).sweep()
    shown = client.simulate_get("/v2/queues/jobs").json
    assert shown["_paused"] is True and shown["_paused_by"]["dead_letters"] == 2


@STORE_INDEPENDENT
def test_an_operators_pause_is_kept_when_the_breaker_trips(client):
    poisoned_queue(client, {"seconds": 60, "max_dead_letters": 0})
    fail_all(client, "jobs", 1)
    pause(client, "jobs")
    resume(client, "jobs")
    pause(client, "jobs")
    assert claim_answer(client, "jobs").status_code == 204  # paused: no claim, no dead letter
    shown = client.simulate_get("/v2/queues/jobs").json
    assert shown["_paused"] is True and "_paused_by" not in shown


@STORE_INDEPENDENT
def test_a_trip_tells_the_queues_subscribers_with_a_notice_no_consumer_gets(client):
    poisoned_queue(client, {"seconds": 60, "max_dead_letters": 0})
    created = client.simulate_post("/v2/queues/jobs/subscriptions", json={"subscriber": HOOK, "ttl": 3600})
    assert created.status_code == 201, created.text
    fail_all(client, "jobs", 1)
    assert claim_answer(client, "jobs").status_code == 204  # trips
    listed = client.simulate_get("/v2/queues/jobs/messages",
                                 params={"echo": "true", "include_claimed": "true"}).json["messages"]
    (notice,) = listed
    assert notice["body"]["event"] == "queue_paused"
    assert notice["body"]["queue"] == "jobs"
    assert notice["body"]["by"] == "dead_letter_breaker"
    resume(client, "jobs")
    assert claim_answer(client, "jobs").status_code == 204  # held: no consumer gets it


@STORE_INDEPENDENT
def test_a_trip_without_subscriptions_posts_no_notice(client):
    poisoned_queue(client, {"seconds": 60, "max_dead_letters": 0})
    fail_all(client, "jobs", 1)
    assert claim_answer(client, "jobs").status_code == 204
    assert client.simulate_get("/v2/queues/jobs/stats").json["messages"]["total"] == 0


@STORE_INDEPENDENT
def test_a_wrong_breaker_is_400_naming_the_rule(client):
    body = assert_error(client.simulate_put("/v2/queues/jobs", json={
        "_dead_letter_breaker": {"seconds": 60}}), 400)
    assert body["description"] == "_dead_letter_breaker needs max_dead_letters, max_share or both."
