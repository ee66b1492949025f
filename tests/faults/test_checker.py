"""The checker on literal histories: valid ones pass, each kind of breach is found."""

from __future__ import annotations

import pytest

from tests.faults.checker import check
from tests.faults.history import FAIL, INFO, OK, Op

pytestmark = pytest.mark.store_independent
MAX = 3


def post(n, at, message_id=None, outcome=OK, status=201, error=None):
    value = {"n": n, "id": message_id if outcome == OK else None}
    if error:
        value["error"] = error
    return Op("producer-0", "post", at, at + 0.1, outcome, status, value)


def claim(claim_id, at, *messages, ttl=2, took=0.1, process="consumer-0"):
    return Op(process, "claim", at, at + took, OK, 201,
              {"ttl": ttl, "claim_id": claim_id,
               "messages": [{"id": i, "n": n, "claim_count": c} for i, n, c in messages]})


def end(f, message_id, claim_id, at, outcome=OK, status=204):
    return Op("consumer-0", f, at, at + 0.1, outcome, status, {"id": message_id, "claim_id": claim_id})


def read(at, queue=(), dlq=()):
    return Op("checker", "read", at, at + 0.1, OK, 200,
              {"queue": [{"id": i, "n": n, "claim_count": c} for i, n, c in queue],
               "dlq": [{"id": i, "n": n, "claim_count": c} for i, n, c in dlq]})


def kinds(ops, **options):
    return sorted({a.kind for a in check(ops, max_claim_count=MAX, **options)})


VALID = [
    post(1, 0.0, "m1"), post(2, 0.1, "m2"), post(3, 0.2, "m3"),
    claim("c1", 1.0, ("m1", 1, 1), ("m2", 2, 1)),
    end("delete", "m1", "c1", 1.2),
    end("release", "m2", "c1", 1.3),
    claim("c2", 1.5, ("m2", 2, 2)),          # released: may be claimed again at once
    claim("c3", 4.0, ("m2", 2, 3)),          # c2 lapsed at 3.5
    claim("c4", 7.0, ("m3", 3, 1)),
    read(20.0, queue=[("m3", 3, 1)], dlq=[("m2", 2, 3)]),
]


def test_a_valid_history_passes():
    assert check(VALID, max_claim_count=MAX) == []


def test_an_acknowledged_post_missing_at_the_end_is_lost():
    ops = VALID[:-1] + [read(20.0, queue=[], dlq=[("m2", 2, 3)])]
    assert kinds(ops) == ["lost"]


def test_an_unacknowledged_post_may_or_may_not_have_happened():
    timed_out = post(4, 0.3, outcome=INFO, status=None, error="connection reset")
    answered_503 = post(5, 0.4, outcome=INFO, status=503)
    assert kinds([*VALID[:-1], timed_out, answered_503, VALID[-1]]) == []
    applied = read(20.0, queue=[("m3", 3, 1), ("m4", 4, 0), ("m5", 5, 0)], dlq=[("m2", 2, 3)])
    assert kinds([*VALID[:-1], timed_out, answered_503, applied]) == []


def test_a_refused_post_that_shows_up_was_applied():
    refused = post(4, 0.3, outcome=FAIL, status=400)
    ops = [*VALID[:-1], refused, read(20.0, queue=[("m3", 3, 1), ("m4", 4, 0)], dlq=[("m2", 2, 3)])]
    assert kinds(ops) == ["refused-write-applied"]


def test_two_live_claims_on_one_message_are_a_double_hold():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 1), ttl=5),
           claim("c2", 2.0, ("m1", 1, 2), process="consumer-1"), read(20.0, queue=[("m1", 1, 2)])]
    assert kinds(ops) == ["double-hold"]


def test_the_clock_margin_excuses_a_claim_that_lapsed_early():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 1), ttl=5),
           claim("c2", 4.5, ("m1", 1, 2), process="consumer-1"), read(20.0, queue=[("m1", 1, 2)])]
    assert kinds(ops) == ["double-hold"]
    assert kinds(ops, clock_margin=2.0) == []


def test_a_claim_whose_answer_was_slow_may_have_been_granted_late():
    # c1 was sent at 1.0 but answered at 4.0: it may have been granted at 3.9 and c2 at 5.95
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 1), ttl=2, took=3.0),
           claim("c2", 5.9, ("m1", 1, 2), process="consumer-1"), read(20.0, queue=[("m1", 1, 2)])]
    assert kinds(ops) == []


def test_a_claim_count_going_backwards_is_found():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 2)), claim("c2", 4.0, ("m1", 1, 1)),
           read(20.0, queue=[("m1", 1, 2)])]
    assert kinds(ops) == ["count-backwards"]


def test_a_final_count_below_a_claimed_one_goes_backwards():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 2)), read(20.0, queue=[("m1", 1, 1)])]
    assert kinds(ops) == ["count-backwards"]


def test_a_message_handed_out_past_the_maximum_is_over_claimed():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 4)), read(20.0, dlq=[("m1", 1, 4)])]
    assert kinds(ops) == ["over-claimed"]


def test_an_exhausted_message_left_in_the_queue_was_not_moved():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 3)), read(20.0, queue=[("m1", 1, 3)])]
    assert kinds(ops) == ["exhausted-not-moved"]


def test_a_message_in_the_dlq_before_its_claims_ran_out_moved_early():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 1)), read(20.0, dlq=[("m1", 1, 1)])]
    assert kinds(ops) == ["dlq-early"]


def test_a_message_in_both_queues_appears_twice():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 3)),
           read(20.0, queue=[("m1", 1, 3)], dlq=[("m1", 1, 3)])]
    assert "duplicate-id" in kinds(ops)


def test_two_posts_given_one_id_are_found():
    ops = [post(1, 0.0, "m1"), post(2, 0.1, "m1"), read(20.0, queue=[("m1", 1, 0)])]
    assert "duplicate-id" in kinds(ops)


def test_a_message_handed_out_after_its_delete_is_resurrected():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 1)), end("delete", "m1", "c1", 1.2),
           claim("c2", 5.0, ("m1", 1, 2)), read(20.0)]
    assert kinds(ops) == ["resurrected"]


def test_a_message_still_queued_after_its_delete_answered_is_a_lost_delete():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 1)), end("delete", "m1", "c1", 1.2),
           read(20.0, queue=[("m1", 1, 1)])]
    assert kinds(ops) == ["delete-lost"]


def test_a_body_nobody_posted_is_a_phantom():
    ops = [post(1, 0.0, "m1"), read(20.0, queue=[("m1", 1, 0), ("m9", 9, 0)])]
    assert kinds(ops) == ["phantom"]


def test_an_answer_other_than_503_to_a_store_fault_is_a_server_error():
    ops = [post(1, 0.0, "m1"), post(2, 0.1, outcome=INFO, status=500), read(20.0, queue=[("m1", 1, 0)])]
    assert kinds(ops) == ["server-error"]


def test_a_request_unanswered_within_the_clients_timeout_is_a_hang():
    ops = [post(1, 0.0, "m1"), post(2, 0.1, outcome=INFO, status=None, error="ReadTimeout: read timed out"),
           read(20.0, queue=[("m1", 1, 0)])]
    assert kinds(ops) == ["hang"]


def test_a_run_whose_final_read_never_succeeded_did_not_recover():
    assert kinds([post(1, 0.0, "m1")]) == ["no-recovery"]


def post_expiring(n, at, message_id, outcome=OK, status=201):
    return Op("expirer-0", "post-expiring", at, at + 0.1, outcome, status,
              {"n": n, "id": message_id if outcome == OK else None})


def read_expiry(at, expiring=(), expired=()):
    op = read(at)
    op.value["expiring"] = [{"id": i, "n": n, "claim_count": 0} for i, n in expiring]
    op.value["expired"] = [{"id": i, "n": n, "claim_count": 0} for i, n in expired]
    return op


def test_expired_messages_in_their_dlq_are_valid():
    ops = [post_expiring(1, 0, "e1"), post_expiring(2, 1, None, outcome=INFO, status=None),
           read_expiry(10, expired=[("e1", 1), ("e2", 2)])]
    assert kinds(ops) == []


@pytest.mark.parametrize(("final", "kind"), [
    ({"expiring": [("e1", 1)]}, "expired-not-moved"),
    ({}, "lost"),
    ({"expired": [("e1", 1), ("e9", 9)]}, "phantom"),
    ({"expired": [("e1", 2)]}, "phantom"),
    ({"expiring": [("e1", 1)], "expired": [("e1", 1)]}, "duplicate-id"),
])
def test_an_expired_message_not_in_its_dlq_or_a_stranger_there_is_found(final, kind):
    assert kind in kinds([post_expiring(1, 0, "e1"), read_expiry(10, **final)])


# -- redrive tasks ---------------------------------------------------------------------------

def redrive(at, outcome=OK, status=202, took=0.1):
    return Op("redriver-0", "redrive", at, at + took, outcome, status,
              {"task_id": "t" if outcome == OK else None})


#: m1 exhausted (3 claims), moved to the DLQ once c3 lapsed (at 9), redriven by a task started at 10
EXHAUSTED = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 1)), claim("c2", 4.0, ("m1", 1, 2)),
             claim("c3", 7.0, ("m1", 1, 3))]


def test_a_redriven_message_back_in_its_queue_starts_its_claims_again():
    ops = [*EXHAUSTED, redrive(10.0), claim("c4", 11.0, ("m1", 1, 1)), claim("c5", 14.0, ("m1", 1, 2)),
           read(20.0, queue=[("m1", 1, 2)])]
    assert kinds(ops) == []
    assert kinds([*EXHAUSTED, redrive(10.0), read(20.0, queue=[("m1", 1, 0)])]) == []


def test_a_count_reset_without_a_redrive_after_the_exhausting_claim_goes_backwards():
    early = [*EXHAUSTED[:3], redrive(5.0), EXHAUSTED[3], claim("c4", 11.0, ("m1", 1, 1)),
             read(20.0, queue=[("m1", 1, 1)])]
    assert kinds(early) == ["count-backwards", "exhausted-not-moved"]
    refused = [*EXHAUSTED, redrive(10.0, outcome=FAIL, status=409), read(20.0, queue=[("m1", 1, 0)])]
    assert kinds(refused) == ["count-backwards", "exhausted-not-moved"]


def test_a_message_not_exhausted_is_not_redriven():
    ops = [post(1, 0.0, "m1"), claim("c1", 1.0, ("m1", 1, 1)), claim("c2", 4.0, ("m1", 1, 2)), redrive(7.0),
           claim("c3", 8.0, ("m1", 1, 1)), read(20.0, queue=[("m1", 1, 1)])]
    assert kinds(ops) == ["count-backwards"]


def test_a_redriven_message_whose_count_was_not_reset_to_zero_is_found():
    ops = [*EXHAUSTED, redrive(10.0), claim("c4", 11.0, ("m1", 1, 2)), read(20.0, queue=[("m1", 1, 2)])]
    assert kinds(ops) == ["redrive-count"]
    # a claim that got no answer may have taken it once in between
    unseen = Op("consumer-1", "claim", 10.5, 10.6, INFO, 503, {"ttl": 2, "claim_id": None, "messages": []})
    assert kinds([*ops[:-2], unseen, *ops[-2:]]) == []


def test_a_redrive_task_that_failed_is_found():
    final = read(20.0, queue=[("m1", 1, 0)])
    final.value["redrive_tasks"] = [{"id": "t", "status": "failed", "moved": 0, "remaining": 1,
                                     "error": "storage unavailable"}]
    assert kinds([*EXHAUSTED, redrive(10.0), final]) == ["redrive-failed"]
    final.value["redrive_tasks"][0].update(status="completed", remaining=0, error=None)
    assert kinds([*EXHAUSTED, redrive(10.0), final]) == []


# -- subscriptions ---------------------------------------------------------------------------

def subscribe(subscription_id):
    return Op("subscriber", "subscribe", -1.0, -0.9, OK, 201,
              {"subscriber": f"http://127.0.0.1:1/{subscription_id}", "subscription_id": subscription_id})


def post_notified(n, at, message_id, outcome=OK, status=201, took=0.1):
    return Op("herald-0", "post-notified", at, at + took, outcome, status,
              {"n": n, "id": message_id if outcome == OK else None})


def deliver(subscription_id, message_id, n, at):
    return Op("webhook", "deliver", at, at, OK, 204,
              {"subscription_id": subscription_id, "path": "/", "id": message_id, "n": n})


NOTIFIED = [subscribe("s1"), subscribe("s2"),
            post_notified(1, 0.0, "n1"), post_notified(2, 1.0, "n2"), post_notified(3, 2.0, "n3"),
            deliver("s1", "n1", 1, 0.5), deliver("s2", "n1", 1, 0.5), deliver("s1", "n2", 2, 1.5),
            deliver("s2", "n2", 2, 1.6), deliver("s1", "n3", 3, 2.5), deliver("s2", "n3", 3, 2.5), read(20.0)]


def test_deliveries_in_order_at_least_once_are_valid():
    again = [*NOTIFIED[:8], deliver("s1", "n2", 2, 1.7), *NOTIFIED[8:]]   # the newest one, again
    assert kinds(NOTIFIED) == [] and kinds(again) == []


def test_an_acknowledged_post_a_subscription_never_got_is_undelivered():
    ops = [op for op in NOTIFIED if not (op.f == "deliver" and op.value == deliver("s2", "n2", 2, 0).value)]
    assert kinds(ops) == ["undelivered"]
    unacknowledged = [*NOTIFIED[:-1], post_notified(4, 3.0, None, outcome=INFO, status=None), NOTIFIED[-1]]
    assert kinds(unacknowledged) == []


def test_a_post_delivered_before_one_acknowledged_before_it_is_out_of_order():
    ops = [*NOTIFIED[:2], post_notified(1, 0.0, "n1"), post_notified(2, 1.0, "n2"),
           deliver("s1", "n2", 2, 1.5), deliver("s1", "n1", 1, 1.6), read(20.0)]
    assert kinds(ops) == ["out-of-order", "undelivered"]


def test_a_redelivery_of_an_older_message_after_a_newer_one_is_found():
    ops = [*NOTIFIED[:-1], deliver("s1", "n1", 1, 3.0), NOTIFIED[-1]]
    assert kinds(ops) == ["redelivered-older"]


def test_a_delivery_of_a_message_nobody_posted_there_is_a_phantom():
    assert kinds([*NOTIFIED[:-1], deliver("s1", "n9", 9, 3.0), NOTIFIED[-1]]) == ["phantom"]
    assert kinds([*NOTIFIED[:-1], deliver("s1", "n3", 4, 3.0), NOTIFIED[-1]]) == ["phantom"]


def test_a_post_slower_than_the_visibility_lag_may_be_passed_by():
    slow = [*NOTIFIED[:-1], post_notified(4, 3.0, "n4", took=2.5), NOTIFIED[-1]]
    assert kinds(slow) == ["undelivered"]
    assert kinds(slow, visibility_lag=2.0) == []


def test_on_clock_markers_a_post_near_a_clock_step_may_be_passed_by():
    step = Op("nemesis", "start", 2.8, 2.8, OK, None, {"at": 2.8, "fault": "clock-step", "duration": 1.0,
                                                       "size": -5.0})
    heal = Op("nemesis", "heal", 3.8, 3.8, OK, None, {})
    ops = [*NOTIFIED[:-1], step, post_notified(4, 3.0, "n4"), heal, post_notified(5, 8.0, "n5"),
           deliver("s1", "n5", 5, 8.5), deliver("s2", "n5", 5, 8.5), NOTIFIED[-1]]
    assert kinds(ops) == ["undelivered"]
    assert kinds(ops, clock_markers=True) == []


def test_a_message_dead_lettered_before_its_delete_may_be_redriven_back_and_handed_out_again():
    # c3 may have lapsed before the delete came (answered late): the message was in the DLQ, the
    # delete of a message absent from its queue is a 204, and the task at 10 moved it back
    late = [*EXHAUSTED[:3], claim("c3", 7.0, ("m1", 1, 3), took=2.5), end("delete", "m1", "c3", 9.6)]
    assert kinds([*late, redrive(10.0), read(20.0, queue=[("m1", 1, 0)])]) == []
    again = claim("c4", 11.0, ("m1", 1, 1))
    assert kinds([*late, redrive(10.0), again, read(20.0, queue=[("m1", 1, 1)])]) == []
    assert kinds([*late, read(20.0, queue=[("m1", 1, 0)])]) == ["count-backwards", "delete-lost",
                                                                "exhausted-not-moved"]
    not_exhausted = [*EXHAUSTED[:3], end("delete", "m1", "c2", 4.5), redrive(10.0),
                     read(20.0, queue=[("m1", 1, 2)])]
    assert kinds(not_exhausted) == ["delete-lost"]
