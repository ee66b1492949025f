"""The few rules the plain records carry: claimed, delayed, ttl and age as shown, stats totals."""

from __future__ import annotations

import dataclasses

import pytest

from zaqar_lite.models import Claim, DeadLetterPolicy, Message, QueueStats, stored_message

NOW = 1_700_000_000.0


def message(**fields) -> Message:
    return Message(**{"id": "m1", "body": 1, "created": NOW - 100, "expires": NOW + 500, **fields})


@pytest.mark.parametrize(("fields", "claimed"), [
    ({}, False),
    ({"claim_id": "c1", "claim_expires": NOW + 0.5}, True),
    ({"claim_id": "c1", "claim_expires": NOW}, False),
    ({"claim_id": "c1", "claim_expires": None}, False),
    ({"claim_id": None, "claim_expires": NOW + 60}, False),
])
def test_a_message_is_claimed_only_while_a_named_claim_has_not_ended(fields, claimed):
    assert message(**fields).is_claimed(NOW) is claimed


@pytest.mark.parametrize(("delay_until", "delayed"), [(0.0, False), (NOW, False), (NOW + 0.5, True)])
def test_a_message_is_delayed_while_its_delay_ends_after_now(delay_until, delayed):
    assert message(delay_until=delay_until).is_delayed(NOW) is delayed


def test_the_ttl_is_the_lifetime_from_the_post():
    assert message().ttl() == 600
    assert message(expires=NOW + 500.4).ttl() == 600
    assert message(expires=NOW + 500.6).ttl() == 601


def test_the_ttl_of_a_dead_letter_counts_from_the_post_too():
    # created NOW - 100, moved at NOW - 50 with 900 s to live: 50 s before the move, 900 after
    moved = message(expires=NOW + 850, dead_letter={"reason": "expired", "dead_lettered_at": NOW - 50})
    assert (moved.ttl(), moved.age(NOW)) == (950, 100)
    assert message(dead_letter={"reason": "max_claims"}).ttl() == 600
    # a record written before ttls counted from the post alone changes nothing
    assert message(expires=NOW + 850, dead_letter={"ttl_since": NOW - 50}).ttl() == 950


def test_the_age_is_whole_seconds_since_the_post_and_never_negative():
    assert message().age(NOW) == 100
    assert message().age(NOW - 99.5) == 0
    assert message().age(NOW - 200) == 0
    assert Claim(id="c1", ttl=60, grace=60, created=NOW - 5.9, expires=NOW + 54.1).age(NOW) == 5
    assert Claim(id="c1", ttl=60, grace=60, created=NOW + 1, expires=NOW + 61).age(NOW) == 0


def test_the_total_of_queue_stats_is_every_unexpired_message():
    assert QueueStats(claimed=2, free=3, delayed=4).total == 9
    assert QueueStats(claimed=0, free=0, delayed=0).total == 0


@pytest.mark.parametrize(("policy", "counts"), [
    (DeadLetterPolicy(), False),
    (DeadLetterPolicy(max_claim_count=3), False),
    (DeadLetterPolicy(queue="dlq"), False),
    (DeadLetterPolicy(max_claim_count=3, queue="dlq"), True),
])
def test_claims_exhaust_messages_only_with_both_a_count_and_a_queue(policy, counts):
    assert policy.counts_claims is counts


def test_a_claimed_copy_is_the_message_with_the_claim_state_and_leaves_the_message_as_it_was():
    message = Message(id="m", body={"n": 1}, created=10.0, expires=310.0, client_id="c", claim_count=2,
                      failures=[{"error": "boom"}], marker=7, group="g", trace={"traceparent": "00-x"})
    before = dataclasses.asdict(message)
    copy = message.claimed(claim_id="k", claim_expires=70.0, claim_count=3, expires=400.0, delay_until=95.0)
    assert copy == Message(id="m", body={"n": 1}, created=10.0, expires=400.0, delay_until=95.0,
                           client_id="c", claim_id="k", claim_expires=70.0, claim_count=3,
                           failures=[{"error": "boom"}], marker=7, group="g", trace={"traceparent": "00-x"})
    assert dataclasses.asdict(message) == before


def test_a_stored_message_is_the_message_its_fields_make():
    fields = {"id": "m", "body": {"b": [1]}, "created": 1.0, "expires": 61.0, "delay_until": 0.0,
              "client_id": "c", "claim_id": None, "claim_expires": None, "claim_count": 0,
              "dlq_eligible": True, "failures": [], "dead_letter": None, "marker": 3, "dedup_id": None,
              "dedup_until": 0.0, "group": None, "trace": None}
    assert list(fields) == [field.name for field in dataclasses.fields(Message)]
    message = stored_message(dict(fields))
    assert message == Message(**fields)
    assert repr(message) == repr(Message(**fields))
    assert message.claimed("k", 90.0, 1, 61.0, 0.0).claim_id == "k" and message.claim_id is None
