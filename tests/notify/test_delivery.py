"""Webhook delivery by a real notifier process to a real receiver: order, retries, suspension, resume."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator

import pytest

from tests.notify.conftest import PATIENT, NotifierProcesses, wait_until
from tests.notify.streams import acknowledged_numbers, check_stream, number, post_numbered

NO_RETRY_DELAYS = {"retries_with_no_delay": 2, "minimum_delay_retries": 0, "maximum_delay_retries": 0,
                   "minimum_delay": 0, "maximum_delay": 0}


@pytest.fixture(scope="module")
def notifier(storage_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotifierProcesses]:
    """One notifier process serving every test of the module (each test has its own project)."""
    processes = NotifierProcesses(storage_uri, tmp_path_factory.mktemp("notifier"))
    processes.start()
    yield processes
    processes.stop_all()


def subscribe(api, queue: str, url: str, **options) -> str:
    result = api.post(f"/v2/queues/{queue}/subscriptions", json={"subscriber": url, "options": options})
    assert result.status_code == 201, result.text
    return result.json()["subscription_id"]


def shown(api, queue: str, subscription_id: str) -> dict:
    result = api.get(f"/v2/queues/{queue}/subscriptions/{subscription_id}")
    assert result.status_code == 200, result.text
    return result.json()


@pytest.mark.slow
def test_hundreds_of_messages_arrive_in_order_while_the_subscriber_fails_at_random(api, receiver, notifier):
    receiver.behave("orders", fail_rate=0.3, delay=0.001)
    subscribe(api, "orders", receiver.url("orders"), _retry_policy=PATIENT)
    post_numbered(api, "orders", 300)
    wait_until(lambda: len(acknowledged_numbers(receiver.deliveries("orders"))) == 300, 60,
               "300 acknowledged deliveries")
    deliveries = receiver.deliveries("orders")
    assert check_stream(deliveries, 300) == 0
    assert sum(not d.acknowledged for d in deliveries) > 30
    assert receiver.overlaps == []


def test_the_webhook_body_is_the_message_with_queue_name_and_message_type(api, receiver, notifier):
    subscribe(api, "shapes", receiver.url("shapes"))
    result = api.post("/v2/queues/shapes/messages", json={"messages": [{"body": {"k": [1, 2]}, "ttl": 600}]})
    message_id = result.json()["resources"][0].rsplit("/", 1)[1]
    wait_until(lambda: receiver.acknowledged("shapes"), 15, "one delivery")
    delivery = receiver.acknowledged("shapes")[0]
    assert delivery.body == {"body": {"k": [1, 2]}, "ttl": 600,
                             "queue_name": "shapes", "Message_Type": "Notification"}
    assert delivery.headers["Content-Type"] == "application/json"
    assert delivery.headers["X-Zaqar-Lite-Message-Id"] == message_id


def test_post_data_post_headers_and_the_signature_arrive_as_configured(api, receiver, notifier):
    template = '{"workflow_id": "wf-1", "params": {"env": {"notification": "$zaqar_message$"}}}'
    subscribe(api, "templated", receiver.url("templated"), post_data=template,
              post_headers={"X-Auth-Token": "abc"}, secret="s3cret")
    post_numbered(api, "templated", 1)
    wait_until(lambda: receiver.acknowledged("templated"), 15, "one delivery")
    delivery = receiver.acknowledged("templated")[0]
    assert delivery.body["workflow_id"] == "wf-1"
    assert delivery.body["params"]["env"]["notification"]["body"] == {"n": 0}
    assert delivery.headers["X-Auth-Token"] == "abc"
    expected = "sha256=" + hmac.new(b"s3cret", delivery.raw, hashlib.sha256).hexdigest()
    assert delivery.headers["X-Zaqar-Lite-Signature"] == expected


def test_only_messages_posted_after_the_subscription_are_delivered(api, receiver, notifier):
    post_numbered(api, "late", 3)
    subscribe(api, "late", receiver.url("late"))
    post_numbered(api, "late", 2, start=3)
    wait_until(lambda: len(receiver.acknowledged("late")) >= 2, 15, "two deliveries")
    time.sleep(0.3)
    assert [number(d) for d in receiver.deliveries("late")] == [3, 4]


def test_5xx_answers_are_retried_after_the_policy_delays(api, receiver, notifier):
    receiver.behave("busy", fail_first=3, fail_status=503)
    policy = {"retries_with_no_delay": 1, "minimum_delay_retries": 3, "minimum_delay": 1, "maximum_delay": 1,
              "maximum_delay_retries": 0}
    subscription_id = subscribe(api, "busy", receiver.url("busy"), _retry_policy=policy)
    post_numbered(api, "busy", 1)
    wait_until(lambda: receiver.acknowledged("busy"), 20, "the delivery after three 503s")
    deliveries = receiver.deliveries("busy")
    assert [(number(d), d.acknowledged) for d in deliveries] == [(0, False)] * 3 + [(0, True)]
    starts = [d.started for d in deliveries]
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    assert gaps[0] < 0.5 and min(gaps[1:]) > 0.8, gaps
    delivery = shown(api, "busy", subscription_id)["delivery"]
    assert delivery["delivered"] == 1 and delivery["failed_attempts"] == 0
    assert delivery["last_error"].startswith("HTTP 503")


def test_a_queue_retry_policy_applies_when_the_subscription_has_none(api, receiver, notifier):
    api.put("/v2/queues/strict", json={"_retry_policy": {**NO_RETRY_DELAYS, "retries_with_no_delay": 0}})
    receiver.behave("strict", always_fail=True)
    subscription_id = subscribe(api, "strict", receiver.url("strict"))
    post_numbered(api, "strict", 1)
    wait_until(lambda: shown(api, "strict", subscription_id)["status"] == "suspended", 15, "the suspension")
    assert len(receiver.deliveries("strict")) == 1


def test_an_exhausted_policy_suspends_and_resume_delivers_the_rest_in_order(api, receiver, notifier):
    receiver.behave("down", always_fail=True)
    subscription_id = subscribe(api, "outage", receiver.url("down"), _retry_policy=NO_RETRY_DELAYS)
    post_numbered(api, "outage", 5)
    wait_until(lambda: shown(api, "outage", subscription_id)["status"] == "suspended", 15, "the suspension")
    state = shown(api, "outage", subscription_id)["delivery"]
    assert state["last_error"].startswith("HTTP 500")
    assert state["suspended_at"] and state["last_error_at"] and state["delivered"] == 0
    assert [number(d) for d in receiver.deliveries("down")] == [0, 0, 0]
    post_numbered(api, "outage", 5, start=5)
    time.sleep(0.5)
    assert len(receiver.deliveries("down")) == 3
    receiver.behave("down")
    assert api.post(f"/v2/queues/outage/subscriptions/{subscription_id}/resume").status_code == 204
    wait_until(lambda: len(acknowledged_numbers(receiver.deliveries("down"))) == 10, 15, "ten deliveries")
    check_stream(receiver.deliveries("down"), 10)
    assert shown(api, "outage", subscription_id)["status"] == "active"


def test_resuming_a_subscriber_url_resumes_it_in_every_queue_of_the_project(api, receiver, notifier):
    receiver.behave("shared", always_fail=True)
    ids = {queue: subscribe(api, queue, receiver.url("shared"), _retry_policy=NO_RETRY_DELAYS)
           for queue in ("left", "right")}
    for queue in ids:
        post_numbered(api, queue, 2)
    wait_until(lambda: all(shown(api, q, s)["status"] == "suspended" for q, s in ids.items()), 15,
               "both suspensions")
    receiver.behave("shared")
    result = api.post("/v2/subscriptions/resume", json={"subscriber": receiver.url("shared")})
    assert result.json() == {"resumed": 2}
    wait_until(lambda: len(receiver.acknowledged("shared")) == 4, 15, "four deliveries")
    acknowledged = receiver.acknowledged("shared")
    by_queue = {q: [number(d) for d in acknowledged if d.body["queue_name"] == q] for q in ids}
    assert by_queue == {"left": [0, 1], "right": [0, 1]}


def test_a_delayed_message_holds_back_the_ones_posted_after_it(api, receiver, notifier):
    subscribe(api, "timed", receiver.url("timed"))
    posted = time.monotonic()
    post_numbered(api, "timed", 1, delay=2)
    post_numbered(api, "timed", 1, start=1)
    wait_until(lambda: len(receiver.acknowledged("timed")) == 2, 15, "two deliveries")
    deliveries = receiver.acknowledged("timed")
    assert [number(d) for d in deliveries] == [0, 1]
    assert deliveries[0].started - posted > 1.5


def test_a_deleted_subscription_gets_nothing_more(api, receiver, notifier):
    subscription_id = subscribe(api, "gone", receiver.url("gone"))
    post_numbered(api, "gone", 1)
    wait_until(lambda: receiver.acknowledged("gone"), 15, "one delivery")
    assert api.delete(f"/v2/queues/gone/subscriptions/{subscription_id}").status_code == 204
    post_numbered(api, "gone", 3, start=1)
    time.sleep(0.5)
    assert [number(d) for d in receiver.deliveries("gone")] == [0]
    assert json.loads(api.get("/v2/queues/gone/subscriptions").text)["subscriptions"] == []


def test_a_tripped_dead_letter_breaker_tells_the_queues_subscriber_and_no_consumer(api, receiver, notifier):
    assert api.put("/v2/queues/work-dlq").status_code == 201
    assert api.put("/v2/queues/work", json={
        "_dead_letter_queue": "work-dlq", "_max_claim_count": 1,
        "_dead_letter_breaker": {"seconds": 600, "max_dead_letters": 0}}).status_code == 201
    subscribe(api, "work", receiver.url("work"))
    posted = api.post("/v2/queues/work/messages", json={"messages": [{"body": {"job": "poison"}}]})
    assert posted.status_code == 201
    claimed = api.post("/v2/queues/work/claims", json={"ttl": 60, "grace": 60})
    assert api.delete(claimed.headers["Location"]).status_code == 204
    assert api.post("/v2/queues/work/claims", json={"ttl": 60, "grace": 60}).status_code == 204  # trips
    wait_until(lambda: any(d.body["body"].get("event") == "queue_paused"
                           for d in receiver.acknowledged("work")), 15, "the pause notice")
    notice = next(d.body["body"] for d in receiver.acknowledged("work") if d.body["body"].get("event"))
    record = api.get("/v2/queues/work").json()["_paused_by"]
    assert notice == {"event": "queue_paused", "queue": "work", **record}
    assert record["dead_letters"] == 1
    resumed = api.patch("/v2/queues/work", json=[{"op": "remove", "path": "/metadata/_paused"}],
                        headers={"Content-Type": "application/openstack-messaging-v2.0-json-patch"})
    assert resumed.status_code == 200
    assert api.post("/v2/queues/work/claims", json={"ttl": 60, "grace": 60}).status_code == 204
