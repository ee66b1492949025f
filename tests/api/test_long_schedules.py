"""Long schedules through HTTP: deliver_at, delays of days, include_schedule, cancelling by delete.

docs/api.rst, "Delayed delivery". The manual clock starts at 2100-01-01T00:00:00Z.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.api.helpers import assert_error, post

WEEK = 604800
#: the manual clock's start, 2100-01-01T00:00:00Z, in POSIX seconds
START = 4_102_444_800


@pytest.fixture
def weekly(make_client, settings):
    """A client of an app whose operator raised max_message_delay to 7 days."""
    limits = dataclasses.replace(settings.limits, max_message_delay=WEEK)
    return make_client({"Client-ID": "0f1e2d3c-4b5a-4968-8776-655443322110", "X-Project-ID": "project-a"},
                       limits=limits)


def listed(client, queue, **params):
    result = client.simulate_get(f"/v2/queues/{queue}/messages",
                                 params={"echo": "true", "include_delayed": "true", **params})
    assert result.status_code == 200, result.text
    return result.json["messages"]


def claimed(client, queue, ttl=60):
    """Claim a queue's messages; return their ids ([] when the claim answers 204)."""
    result = client.simulate_post(f"/v2/queues/{queue}/claims", json={"ttl": ttl, "grace": 60})
    assert result.status_code in (201, 204), result.text
    return [m["id"] for m in result.json["messages"]] if result.status_code == 201 else []


def post_result(client, queue, *items):
    return client.simulate_post(f"/v2/queues/{queue}/messages", json={"messages": list(items)})


def test_a_message_posted_with_deliver_at_is_claimable_then_and_not_before(client, clock):
    due, = post(client, "q", {"n": 1}, deliver_at="2100-01-01T00:10:00Z")
    at_once, = post(client, "q", {"n": 2}, deliver_at=START - 30)
    assert claimed(client, "q", ttl=3600) == [at_once]
    clock.advance(599)
    assert claimed(client, "q") == []
    clock.advance(1)
    assert claimed(client, "q") == [due]


def test_posix_seconds_and_offsets_name_the_same_time(client, clock):
    ids = post(client, "q", "a", deliver_at=START + 300)
    ids += post(client, "q", "b", deliver_at="2100-01-01T01:05:00+01:00")
    ids += post(client, "q", "c", deliver_at=START + 300.5)
    clock.advance(300)
    assert claimed(client, "q") == ids[:2]
    clock.advance(0.5)
    assert claimed(client, "q") == ids[2:]


def test_include_schedule_shows_when_a_delayed_message_is_due_and_nothing_else_changes(client, clock):
    held, = post(client, "q", "later", deliver_at="2100-01-01T00:15:00Z")
    ready, = post(client, "q", "now")
    plain = listed(client, "q")
    assert [sorted(m) for m in plain] == [["age", "body", "claim_count", "href", "id", "ttl"]] * 2
    shown = listed(client, "q", include_schedule="true", limit=1)
    assert [(m["id"], m["deliver_at"]) for m in shown] == [(held, "2100-01-01T00:15:00Z")]
    next_href = client.simulate_get("/v2/queues/q/messages", params={
        "echo": "true", "include_delayed": "true", "include_schedule": "true", "limit": 1}).json["links"][0]
    assert "include_schedule=true" in next_href["href"]
    assert [("deliver_at" in m) for m in listed(client, "q", include_schedule="true")] == [True, False]
    one = client.simulate_get(f"/v2/queues/q/messages/{held}", params={"include_schedule": "yes"}).json
    assert one["deliver_at"] == "2100-01-01T00:15:00Z"
    clock.advance(900)
    assert [("deliver_at" in m) for m in listed(client, "q", include_schedule="true")] == [False, False]
    assert ready


def test_include_schedule_must_be_a_boolean(client):
    result = client.simulate_get("/v2/queues/q/messages", params={"include_schedule": "soon"})
    body = assert_error(result, 400)
    assert body["description"].startswith("include_schedule must be true or false")


def test_deleting_a_scheduled_message_cancels_it(client, clock):
    held, kept = post(client, "q", "cancel me", "keep me", deliver_at="2100-01-01T00:10:00Z")
    assert client.simulate_delete(f"/v2/queues/q/messages/{held}").status_code == 204
    assert [m["id"] for m in listed(client, "q")] == [kept]
    clock.advance(600)
    assert claimed(client, "q") == [kept]


def test_a_raised_limit_accepts_a_week_of_delay_deliver_at_and_queue_default(weekly, clock):
    delayed, = post(weekly, "q", "a week", delay=WEEK)
    scheduled, = post(weekly, "q", "in six days", deliver_at="2100-01-07T00:00:00Z")
    assert weekly.simulate_put("/v2/queues/d", json={"_default_message_delay": WEEK}).status_code == 201
    defaulted, = post(weekly, "d", "by default")
    shown = listed(weekly, "q", include_schedule="true")
    assert [(m["id"], m["deliver_at"], m["ttl"]) for m in shown] == [
        (delayed, "2100-01-08T00:00:00Z", WEEK + 3600), (scheduled, "2100-01-07T00:00:00Z", 6 * 86400 + 3600)]
    clock.advance(6 * 86400)
    assert claimed(weekly, "q") == [scheduled]
    clock.advance(86400)
    assert claimed(weekly, "q") == [delayed]
    assert claimed(weekly, "d") == [defaulted]


def test_a_given_ttl_counts_from_the_post_as_zaqars(weekly, clock):
    short, = post(weekly, "q", "gone before due", delay=7200, ttl=3600)
    assert listed(weekly, "q") != []
    clock.advance(3600)
    assert listed(weekly, "q") == []
    clock.advance(3600)
    assert claimed(weekly, "q") == []
    assert short


@pytest.mark.store_independent
@pytest.mark.parametrize(("item", "words"), [
    ({"body": 1, "deliver_at": "2100-01-01T00:15:01Z"},
     "messages[0].deliver_at is 901 s ahead; this server delivers at most 900 s ahead (max_message_delay)."),
    ({"body": 1, "deliver_at": START - 31},
     "messages[0].deliver_at is 31 s in the past; it may be at most 30 s in the past (it then means now)."),
    ({"body": 1, "deliver_at": START + 60, "delay": 0},
     "messages[0] gives both delay and deliver_at; give one of them."),
    ({"body": 1, "deliver_at": "2100-01-01T00:10:00"},
     "messages[0].deliver_at must be an ISO 8601 time with a UTC offset (2026-11-29T08:00:00Z) "
     "or POSIX seconds: the time has no UTC offset (add Z)."),
    ({"body": 1, "deliver_at": "next tuesday"},
     "messages[0].deliver_at must be an ISO 8601 time with a UTC offset (2026-11-29T08:00:00Z) "
     "or POSIX seconds, got a string that is not a time."),
    ({"body": 1, "delay": 901}, None),
])
def test_a_schedule_out_of_range_or_malformed_is_400_and_nothing_is_stored(client, item, words):
    first = post_result(client, "q", {"body": "fine"}, item)
    body = assert_error(first, 400)
    if words is not None:
        assert body["description"] == words.replace("messages[0]", "messages[1]")
    assert client.simulate_get("/v2/queues/q/stats").json["messages"]["total"] == 0


@pytest.mark.store_independent
@pytest.mark.parametrize("value", [True, None, {"at": 1}, [START]])
def test_a_deliver_at_of_another_json_type_is_400(client, value):
    body = assert_error(post_result(client, "q", {"body": 1, "deliver_at": value}), 400)
    assert "deliver_at" in body["description"]


@pytest.mark.store_independent
def test_a_raised_limit_still_refuses_a_delay_beyond_it(weekly):
    body = assert_error(post_result(weekly, "q", {"body": 1, "delay": WEEK + 1}), 400)
    assert "delay" in body["description"]
    body = assert_error(post_result(weekly, "q", {"body": 1, "deliver_at": START + WEEK + 1}), 400)
    assert body["description"].endswith("this server delivers at most 604800 s ahead (max_message_delay).")
    assert_error(weekly.simulate_put("/v2/queues/d", json={"_default_message_delay": WEEK + 1}), 400)
