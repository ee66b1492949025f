"""The release outcomes of ``claims.policy``: retry, postpone and reject, with literal cases."""

from __future__ import annotations

import dataclasses

from zaqar_lite.claims import policy
from zaqar_lite.models import DeadLetterPolicy, Message

NOW = 1_700_000_000.0
NOW_ISO = "2023-11-14T22:13:20Z"
DEAD_LETTERS = DeadLetterPolicy(max_claim_count=3, queue="orders-dlq")
HELD = Message(id="m1", body="job", created=NOW - 100, expires=NOW + 500, claim_id="c1",
               claim_expires=NOW + 60, claim_count=2)
#: a claim of a queue with a retry backoff fixed a 30 s wait after it
HELD_WITH_WAIT = dataclasses.replace(HELD, delay_until=NOW + 90)
REASON = {"error": "rate limited", "error_type": "RateLimited"}


def test_a_postpone_takes_back_the_claim_s_count_and_waits_its_delay_not_the_backoff():
    postponed = policy.released(HELD_WITH_WAIT, None, NOW, 10, 15, policy.POSTPONE)
    assert (postponed.claim_count, postponed.claim_expires, postponed.delay_until) == (1, NOW, NOW + 15)
    assert postponed.failures == [{"at": NOW_ISO, "claim_count": 1, "error_type": None, "error": None,
                                   "outcome": "postpone", "postponed": 1}]


def test_a_postpone_without_a_delay_is_claimable_at_once():
    postponed = policy.released(HELD_WITH_WAIT, REASON, NOW, 10, None, policy.POSTPONE)
    assert postponed.delay_until == 0.0
    assert policy.is_visible(postponed, NOW) is True


def test_a_retry_is_a_release_as_ever_and_records_nothing_without_a_reason():
    retried = policy.released(HELD_WITH_WAIT, None, NOW, 10, None, policy.RETRY)
    assert (retried.claim_count, retried.delay_until, retried.failures) == (2, NOW + 30, [])


def test_the_running_postpone_count_is_carried_by_every_later_entry():
    history = [{"at": "t", "claim_count": 1, "error_type": None, "error": None, "outcome": "postpone",
                "postponed": 4}]
    retried = policy.released(dataclasses.replace(HELD, failures=history), REASON, NOW, 10)
    assert retried.failures[-1] == {"at": NOW_ISO, "claim_count": 2, "error_type": "RateLimited",
                                    "error": "rate limited", "postponed": 4}
    postponed = policy.released(dataclasses.replace(HELD, failures=history), None, NOW, 1, 0, policy.POSTPONE)
    assert [entry["postponed"] for entry in postponed.failures] == [5]


def test_a_postpone_never_takes_the_count_below_zero():
    assert policy.released(dataclasses.replace(HELD, claim_count=0), None, NOW, 10, 0,
                           policy.POSTPONE).claim_count == 0


def test_a_reject_moves_the_message_with_its_reason_whatever_its_count():
    plan = policy.rejected(dataclasses.replace(HELD, claim_count=1), REASON, NOW, 10, "orders", DEAD_LETTERS)
    assert plan.deleted == [] and plan.claimed == []
    moved, = plan.moved
    assert (moved.claim_id, moved.claim_expires, moved.claim_count) == (None, None, 1)
    assert moved.expires == NOW + 500
    assert moved.dead_letter == {"source_queue": "orders", "reason": "rejected", "dead_lettered_at": NOW,
                                 "claim_count": 1, "last_claim_id": "c1"}
    assert moved.failures == [{"at": NOW_ISO, "claim_count": 1, "error_type": "RateLimited",
                               "error": "rate limited", "outcome": "reject"}]


def test_a_reject_deletes_without_a_dead_letter_queue_or_when_not_eligible():
    assert policy.rejected(HELD, None, NOW, 10, "orders", DeadLetterPolicy()).deleted == ["m1"]
    assert policy.rejected(dataclasses.replace(HELD, dlq_eligible=False), None, NOW, 10, "orders",
                           DEAD_LETTERS).deleted == ["m1"]


def test_a_reject_into_a_queue_with_no_max_claim_count_still_moves():
    plan = policy.rejected(HELD, None, NOW, 10, "orders", DeadLetterPolicy(queue="orders-dlq"))
    assert [m.id for m in plan.moved] == ["m1"]


def test_the_dead_letter_block_counts_outcomes_only_when_a_postpone_or_reject_happened():
    postponed = [{"at": "t", "claim_count": 0, "error_type": None, "error": None, "outcome": "postpone",
                  "postponed": 3}]
    rejected = dataclasses.replace(HELD, claim_count=3, failures=postponed,
                                   dead_letter={"source_queue": "orders", "reason": "rejected",
                                                "dead_lettered_at": NOW, "claim_count": 3})
    assert policy.provenance(rejected)["outcomes"] == {"retry": 2, "postpone": 3, "reject": 1}
    exhausted = dataclasses.replace(rejected, dead_letter={**rejected.dead_letter, "reason": "max_claims"})
    assert policy.provenance(exhausted)["outcomes"] == {"retry": 3, "postpone": 3, "reject": 0}
    plain = dataclasses.replace(exhausted, failures=[])
    assert "outcomes" not in policy.provenance(plain)
