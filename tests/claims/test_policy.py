"""The message policy of ``zaqar_lite.claims.policy``, case by case, with no store.

Every expected value is written out by hand from the API reference
(``docs/api.rst``: "Claims", "Claim rules", "Dead-letter queues", "Delayed
delivery", "Expiry"). Times are offsets from one instant, ``NOW``, whose ISO form
is known: 1 700 000 000 s is 2023-11-14T22:13:20Z.
"""

from __future__ import annotations

import dataclasses

import pytest

from zaqar_lite import errors
from zaqar_lite.claims import policy
from zaqar_lite.models import Claim, ClaimRequest, DeadLetterPolicy, Message

NOW = 1_700_000_000.0
NOW_ISO = "2023-11-14T22:13:20Z"
Q, DLQ = "orders", "orders-dlq"
DEAD_LETTERS = DeadLetterPolicy(max_claim_count=3, queue=DLQ)


def message(message_id: str = "m1", **fields) -> Message:
    """A message posted 300 s before NOW with an hour to live, unless fields say otherwise."""
    values = {"body": {"n": 1}, "created": NOW - 300, "expires": NOW + 3300, **fields}
    return Message(id=message_id, **values)


def request(limit: int = 10, dead_letter: DeadLetterPolicy = DEAD_LETTERS) -> ClaimRequest:
    return ClaimRequest(claim_id="c-new", now=NOW, ttl=60, grace=30, limit=limit, dead_letter=dead_letter)


# -- times as shown (docs/api.rst, "Provenance": ISO-8601 UTC) -------------------------------

@pytest.mark.parametrize(("at", "text"), [
    (NOW, NOW_ISO),
    (NOW + 0.999, NOW_ISO),
    (NOW + 86_400, "2023-11-15T22:13:20Z"),
    (0.0, "1970-01-01T00:00:00Z"),
])
def test_times_are_shown_as_iso_8601_utc_to_the_second_with_a_z(at, text):
    shown = policy.provenance(message(created=at, dead_letter={"dead_lettered_at": at}))
    assert (shown["dead_lettered_at"], shown["first_posted_at"]) == (text, text)
    assert policy.released(message(), {"error": "x"}, at, 10).failures[0]["at"] == text


# -- visibility (docs/api.rst, "Expiry", "Delayed delivery"; base.py "visible") ------

@pytest.mark.parametrize(("fields", "visible"), [
    ({}, True),
    ({"expires": NOW + 0.001}, True),
    ({"expires": NOW}, False),
    ({"expires": NOW - 1}, False),
    ({"delay_until": NOW}, True),
    ({"delay_until": NOW - 1}, True),
    ({"delay_until": NOW + 0.001}, False),
    ({"claim_id": "c1", "claim_expires": NOW}, True),
    ({"claim_id": "c1", "claim_expires": NOW - 5}, True),
    ({"claim_id": "c1", "claim_expires": NOW + 0.001}, False),
], ids=["fresh", "expires-just-after-now", "expires-at-now", "expired", "delay-ends-at-now",
        "delay-ended", "delay-ends-just-after-now", "claim-ends-at-now", "claim-lapsed",
        "claim-ends-just-after-now"])
def test_a_message_is_visible_only_unexpired_unclaimed_and_undelayed(fields, visible):
    assert policy.is_visible(message(**fields), NOW) is visible


def test_the_visible_ones_of_a_batch_keep_their_order():
    batch = [message("m1"), message("m2", expires=NOW), message("m3", delay_until=NOW + 1),
             message("m4", claim_id="c1", claim_expires=NOW + 1),
             message("m5", claim_id="c1", claim_expires=NOW),
             message("m6", delay_until=NOW)]
    assert [m.id for m in policy.visible_only(batch, NOW)] == ["m1", "m5", "m6"]
    assert policy.visible_only([], NOW) == []


# -- claim expiry extension (docs/api.rst, "Claims") ---------------------------------

@pytest.mark.parametrize(("expires", "extended"), [
    (NOW + 10, NOW + 90),
    (NOW + 89, NOW + 90),
    (NOW + 90, NOW + 90),
    (NOW + 91, NOW + 91),
    (NOW + 3600, NOW + 3600),
])
def test_a_claimed_message_lives_at_least_until_claim_end_plus_grace(expires, extended):
    assert policy.claimed_expiry(expires, NOW, 60, 30) == extended


# -- exhaustion (docs/api.rst, "The move") ------------------------------------------

@pytest.mark.parametrize(("count", "dead_letter", "exhausted"), [
    (2, DEAD_LETTERS, False),
    (3, DEAD_LETTERS, True),
    (4, DEAD_LETTERS, True),
    (0, DeadLetterPolicy(max_claim_count=1, queue=DLQ), False),
    (1, DeadLetterPolicy(max_claim_count=1, queue=DLQ), True),
    (9, DeadLetterPolicy(max_claim_count=3, queue=None), False),
    (9, DeadLetterPolicy(max_claim_count=None, queue=DLQ), False),
    (9, DeadLetterPolicy(), False),
], ids=["below-max", "at-max", "above-max", "max-1-fresh", "max-1-once", "count-without-dlq",
        "dlq-without-count", "no-policy"])
def test_a_message_is_exhausted_once_handed_out_max_times_and_only_with_both_keys(count, dead_letter,
                                                                                   exhausted):
    assert policy.is_exhausted(message(claim_count=count), dead_letter) is exhausted


# -- the move: new expiry and provenance (docs/api.rst, "The move", "Provenance") -----

@pytest.mark.parametrize(("reason", "messages_ttl"), [
    ("max_claims", None), ("expired", None), ("max_claims", 600), ("expired", 600)])
def test_the_provenance_record_of_a_move_says_where_from_why_and_when(reason, messages_ttl):
    dead_letter = DeadLetterPolicy(max_claim_count=3, queue=DLQ, messages_ttl=messages_ttl, on_expiry=True)
    assert policy.provenance_record(Q, reason, NOW, dead_letter) == {
        "source_queue": "orders", "reason": reason, "dead_lettered_at": NOW}


def test_the_provenance_record_of_a_move_into_the_default_dlq_says_so():
    dead_letter = DeadLetterPolicy(max_claim_count=3, queue="dead-letters", default_queue=True)
    assert policy.provenance_record(Q, "max_claims", NOW, dead_letter) == {
        "source_queue": "orders", "reason": "max_claims", "dead_lettered_at": NOW,
        "default_dead_letter_queue": True}
    moved = policy.dead_lettered(message("m1", claim_count=3, claim_id="c-last"), Q, "max_claims", NOW,
                                 dead_letter)
    assert moved.dead_letter == {
        "source_queue": "orders", "reason": "max_claims", "dead_lettered_at": NOW,
        "default_dead_letter_queue": True, "claim_count": 3, "last_claim_id": "c-last"}


FAILURE = {"at": "2023-11-14T22:12:00Z", "claim_count": 3, "error_type": "E", "error": "boom"}


def exhausted_message(**fields) -> Message:
    values = {"claim_count": 3, "claim_id": "c-last", "claim_expires": NOW - 1, "delay_until": NOW - 400,
              "failures": [FAILURE], "client_id": "client-1", "marker": 7, **fields}
    return message(**values)


def test_a_message_moved_for_its_count_keeps_id_body_count_failures_and_expiry_and_is_unclaimed():
    moved = policy.dead_lettered(exhausted_message(), Q, "max_claims", NOW, DEAD_LETTERS)
    assert moved == Message(
        id="m1", body={"n": 1}, created=NOW - 300, expires=NOW + 3300, delay_until=0.0,
        client_id="client-1", claim_id=None, claim_expires=None, claim_count=3, dlq_eligible=True,
        failures=[FAILURE], marker=7,
        dead_letter={"source_queue": "orders", "reason": "max_claims", "dead_lettered_at": NOW,
                     "claim_count": 3, "last_claim_id": "c-last"})
    assert moved.ttl() == 3600


def test_a_dead_letter_ttl_sets_the_expiry_from_the_move_and_the_ttl_counts_from_the_post():
    dead_letter = DeadLetterPolicy(max_claim_count=3, queue=DLQ, messages_ttl=600)
    moved = policy.dead_lettered(exhausted_message(), Q, "max_claims", NOW, dead_letter)
    assert moved.expires == NOW + 600
    assert moved.dead_letter == {"source_queue": "orders", "reason": "max_claims", "dead_lettered_at": NOW,
                                 "claim_count": 3, "last_claim_id": "c-last"}
    # 300 s in the queue before the move, 600 after it
    assert (moved.ttl(), moved.age(NOW)) == (900, 300)


def test_a_message_moved_because_it_expired_gets_its_own_ttl_again_counted_from_the_move():
    expired = message(created=NOW - 120, expires=NOW, claim_count=0)
    moved = policy.dead_lettered(expired, Q, "expired", NOW, DEAD_LETTERS)
    assert moved.expires == NOW + 120
    assert moved.dead_letter == {"source_queue": "orders", "reason": "expired", "dead_lettered_at": NOW,
                                 "claim_count": 0, "last_claim_id": None}
    assert (moved.ttl(), moved.age(NOW)) == (240, 120)


@pytest.mark.parametrize(("lifetime", "swept_late_by", "messages_ttl", "ttl", "age"), [
    (60, 6, None, 126, 66),     # measured: ttl 60 was shown at age 66
    (60, 0, None, 120, 60),
    (60, 6, 600, 666, 66),
    (3600, 1, 86400, 90001, 3601),
])
def test_a_message_moved_on_expiry_never_shows_a_ttl_below_its_age(lifetime, swept_late_by, messages_ttl,
                                                                    ttl, age):
    created = NOW - lifetime - swept_late_by
    dead_letter = DeadLetterPolicy(queue=DLQ, messages_ttl=messages_ttl, on_expiry=True)
    moved = policy.dead_lettered(message(created=created, expires=created + lifetime), Q, "expired", NOW,
                                 dead_letter)
    assert (moved.ttl(), moved.age(NOW)) == (ttl, age)


def test_a_message_moved_because_it_expired_takes_the_dead_letter_ttl_when_set():
    dead_letter = DeadLetterPolicy(max_claim_count=3, queue=DLQ, messages_ttl=900, on_expiry=True)
    moved = policy.dead_lettered(message(created=NOW - 120, expires=NOW), Q, "expired", NOW, dead_letter)
    assert (moved.expires, moved.ttl()) == (NOW + 900, 1020)


# -- planning a claim (docs/api.rst, "Claims", "Claim counting", "The move") ---------

def test_a_claim_of_nothing_plans_nothing():
    assert policy.plan_claim([], request(), Q) == policy.Plan([], [], [])


def test_a_claim_takes_candidates_in_the_given_order_up_to_its_limit():
    candidates = [message(f"m{i}") for i in range(4)]
    plan = policy.plan_claim(candidates, request(limit=2), Q)
    assert [m.id for m in plan.claimed] == ["m0", "m1"]
    assert (plan.moved, plan.deleted) == ([], [])


def test_a_claimed_message_carries_the_claim_its_count_plus_one_and_no_delay():
    candidate = message(claim_count=1, claim_id="c-old", claim_expires=NOW - 10, delay_until=NOW - 5,
                        expires=NOW + 50)
    plan = policy.plan_claim([candidate], request(), Q)
    assert plan.claimed == [dataclasses.replace(
        candidate, claim_id="c-new", claim_expires=NOW + 60, claim_count=2, expires=NOW + 90,
        delay_until=0.0)]


def test_a_candidate_at_max_claims_moves_and_the_claim_keeps_filling_from_later_ones():
    candidates = [message("m0", claim_count=2), message("m1", claim_count=3, claim_id="c-last"),
                  message("m2", claim_count=0), message("m3", claim_count=0)]
    plan = policy.plan_claim(candidates, request(limit=2), Q)
    assert [(m.id, m.claim_count, m.claim_id) for m in plan.claimed] == [("m0", 3, "c-new"),
                                                                         ("m2", 1, "c-new")]
    assert [(m.id, m.claim_count, m.claim_id, m.dead_letter["reason"]) for m in plan.moved] == [
        ("m1", 3, None, "max_claims")]
    assert plan.moved[0].dead_letter["last_claim_id"] == "c-last"
    assert plan.deleted == []


def test_an_exhausted_message_not_eligible_for_the_dlq_is_deleted_instead():
    candidates = [message("m0", claim_count=3, dlq_eligible=False), message("m1")]
    plan = policy.plan_claim(candidates, request(limit=1), Q)
    assert ([m.id for m in plan.claimed], plan.moved, plan.deleted) == (["m1"], [], ["m0"])


def test_exhausted_messages_beyond_a_full_claim_are_left_alone():
    candidates = [message("m0"), message("m1", claim_count=3), message("m2", claim_count=3,
                                                                       dlq_eligible=False)]
    plan = policy.plan_claim(candidates, request(limit=1), Q)
    assert ([m.id for m in plan.claimed], plan.moved, plan.deleted) == (["m0"], [], [])


def test_without_a_dead_letter_queue_a_high_count_is_claimed_and_still_counted():
    no_dlq = DeadLetterPolicy(max_claim_count=3)
    plan = policy.plan_claim([message(claim_count=7)], request(dead_letter=no_dlq), Q)
    assert [(m.id, m.claim_count) for m in plan.claimed] == [("m1", 8)]
    assert (plan.moved, plan.deleted) == ([], [])


def test_a_claim_continued_after_some_messages_takes_only_the_room_left():
    candidates = [message(f"m{i}") for i in range(3)]
    assert [m.id for m in policy.plan_claim(candidates, request(limit=3), Q, already_claimed=2).claimed] == [
        "m0"]
    full = policy.plan_claim([message("m0", claim_count=3)] + candidates, request(limit=3), Q,
                             already_claimed=3)
    assert full == policy.Plan([], [], [])


# -- planning a sweep (docs/api.rst, "The move", "Dead-lettering on expiry") ---------------

ON_EXPIRY = DeadLetterPolicy(max_claim_count=2, queue=DLQ, on_expiry=True)


def sweep_candidates() -> list[Message]:
    return [
        message("expired-at-now", expires=NOW),
        message("expired-not-eligible", expires=NOW - 1, dlq_eligible=False),
        message("exhausted-claim-ended-now", claim_count=2, claim_id="c1", claim_expires=NOW),
        message("exhausted-still-claimed", claim_count=2, claim_id="c1", claim_expires=NOW + 1),
        message("one-claim-left", claim_count=1),
        message("exhausted-not-eligible", claim_count=2, dlq_eligible=False),
        message("expires-just-after-now", expires=NOW + 0.001),
    ]


def test_a_sweep_moves_expired_and_exhausted_messages_and_deletes_those_not_eligible():
    plan = policy.plan_sweep(sweep_candidates(), Q, NOW, ON_EXPIRY)
    assert [(m.id, m.dead_letter["reason"]) for m in plan.moved] == [
        ("expired-at-now", "expired"), ("exhausted-claim-ended-now", "max_claims")]
    assert plan.deleted == ["expired-not-eligible", "exhausted-not-eligible"]
    assert plan.claimed == []


def test_without_dead_letter_on_expiry_a_sweep_discards_expired_messages():
    plan = policy.plan_sweep(sweep_candidates(), Q, NOW, DeadLetterPolicy(max_claim_count=2, queue=DLQ))
    assert [(m.id, m.dead_letter["reason"]) for m in plan.moved] == [("exhausted-claim-ended-now",
                                                                       "max_claims")]
    assert plan.deleted == ["expired-at-now", "expired-not-eligible", "exhausted-not-eligible"]


def test_without_a_dead_letter_queue_a_sweep_only_discards_expired_messages():
    for dead_letter in (DeadLetterPolicy(), DeadLetterPolicy(max_claim_count=2, on_expiry=True)):
        plan = policy.plan_sweep(sweep_candidates(), Q, NOW, dead_letter)
        assert (plan.moved, plan.deleted) == ([], ["expired-at-now", "expired-not-eligible"])


def test_an_expired_and_exhausted_message_is_moved_as_expired():
    plan = policy.plan_sweep([message("m1", expires=NOW - 1, claim_count=5)], Q, NOW, ON_EXPIRY)
    assert [(m.id, m.dead_letter["reason"], m.expires) for m in plan.moved] == [("m1", "expired", NOW + 299)]


def test_a_sweep_of_nothing_plans_nothing():
    assert policy.plan_sweep([], Q, NOW, ON_EXPIRY) == policy.Plan([], [], [])


# -- moves between queues (redrive) ---------------------------------------------------

READ = message(claim_count=3, claim_id="c-last", claim_expires=NOW - 10, dead_letter={"source_queue": Q})


@pytest.mark.parametrize(("current", "movable"), [
    (READ, True),
    (dataclasses.replace(READ, body="changed", failures=[FAILURE]), True),
    (dataclasses.replace(READ, expires=NOW), False),
    (dataclasses.replace(READ, claim_id="c-dlq", claim_expires=NOW + 60), False),
    (dataclasses.replace(READ, claim_id="c-dlq", claim_expires=NOW), False),
    (dataclasses.replace(READ, claim_expires=NOW - 1), False),
    (dataclasses.replace(READ, claim_count=4), False),
    (dataclasses.replace(READ, expires=NOW + 7200), False),
], ids=["unchanged", "other-fields-changed", "expired-at-now", "claimed-since", "claimed-and-released",
        "claim-end-changed", "count-changed", "expiry-renewed"])
def test_a_message_read_earlier_moves_only_if_unexpired_unclaimed_and_its_claim_state_unchanged(current,
                                                                                               movable):
    assert policy.still_movable(current, READ, NOW) is movable


# -- the claim rules of deletes and releases (docs/api.rst, "Claim rules") ----------------

FREE = message("m1")
HELD = message("m1", claim_id="c1", claim_expires=NOW + 60)
LAPSED = message("m1", claim_id="c1", claim_expires=NOW)


@pytest.mark.parametrize(("stored", "claim_id", "live"), [
    (FREE, None, False),
    (LAPSED, None, False),
    (HELD, "c1", True),
], ids=["not-claimed", "claim-ended-at-now", "held-by-the-claim-given"])
def test_a_change_is_allowed_when_unclaimed_without_claim_id_or_held_by_the_claim_given(stored, claim_id,
                                                                                         live):
    assert policy.check_claim_rules(stored, claim_id, live, NOW) is None


@pytest.mark.parametrize(("stored", "claim_id", "live", "error", "text"), [
    (HELD, None, False, errors.MessageIsClaimed,
     "Message m1 is claimed; it cannot be changed without its claim ID."),
    (HELD, "c9", False, errors.InvalidClaim, "Claim c9 does not exist or has expired."),
    (FREE, "c9", False, errors.InvalidClaim, "Claim c9 does not exist or has expired."),
    (FREE, "c2", True, errors.MessageNotClaimed, "Message m1 is not claimed; do not pass a claim ID."),
    (LAPSED, "c1", True, errors.MessageNotClaimed, "Message m1 is not claimed; do not pass a claim ID."),
    (HELD, "c2", True, errors.MessageIsClaimedBy, "Message m1 is not held by claim c2."),
], ids=["claimed-no-claim-id", "unknown-claim-on-claimed", "unknown-claim-on-free", "live-claim-free-message",
        "live-claim-message-lapsed-at-now", "held-by-another-claim"])
def test_a_change_breaking_the_claim_rules_raises_the_documented_error(stored, claim_id, live, error, text):
    with pytest.raises(error) as raised:
        policy.check_claim_rules(stored, claim_id, live, NOW)
    assert type(raised.value) is error
    assert str(raised.value) == text


@pytest.mark.parametrize(("error", "family"), [
    (errors.MessageIsClaimed, errors.ClaimRuleViolation), (errors.InvalidClaim, errors.ClaimRuleViolation),
    (errors.MessageNotClaimed, errors.ClaimRuleViolation), (errors.MessageIsClaimedBy,
                                                            errors.ClaimRuleViolation)])
def test_every_claim_rule_error_is_a_claim_rule_violation(error, family):
    assert issubclass(error, family)


# -- releasing one message (docs/api.rst, "Release one message (zaqar-lite extension)") ---

def test_a_release_without_a_reason_ends_the_claim_now_and_keeps_count_and_history():
    released = policy.released(dataclasses.replace(HELD, claim_count=2, failures=[FAILURE]), None, NOW, 10)
    assert released == dataclasses.replace(HELD, claim_count=2, failures=[FAILURE], claim_expires=NOW)
    assert policy.is_visible(released, NOW) is True


def test_a_release_with_a_reason_appends_time_count_type_and_text():
    released = policy.released(dataclasses.replace(HELD, claim_count=2),
                               {"error": "upstream timed out after 30 s", "error_type": "TimeoutError"},
                               NOW, 10)
    assert released.failures == [{"at": NOW_ISO, "claim_count": 2, "error_type": "TimeoutError",
                                  "error": "upstream timed out after 30 s"}]
    assert (released.claim_id, released.claim_expires, released.claim_count) == ("c1", NOW, 2)


def test_a_release_with_only_an_error_text_records_no_type():
    released = policy.released(HELD, {"error": "boom"}, NOW, 10)
    assert released.failures == [{"at": NOW_ISO, "claim_count": 0, "error_type": None, "error": "boom"}]


def test_the_failure_history_keeps_only_the_last_entries():
    history = [{"at": "old", "claim_count": n, "error_type": None, "error": str(n)} for n in (1, 2, 3)]
    released = policy.released(dataclasses.replace(HELD, claim_count=4, failures=history),
                               {"error": "4"}, NOW, 3)
    assert [f["error"] for f in released.failures] == ["2", "3", "4"]
    kept = policy.released(dataclasses.replace(HELD, failures=history[:2]), {"error": "x"}, NOW, 3)
    assert [f["error"] for f in kept.failures] == ["1", "2", "x"]


# -- the provenance block shown in a DLQ (docs/api.rst, "Provenance") -----------------

def test_the_provenance_block_shows_the_record_with_iso_times_and_the_failures():
    moved = message("m1", created=NOW - 81, claim_count=3, failures=[FAILURE],
                    dead_letter={"source_queue": "orders", "reason": "max_claims", "dead_lettered_at": NOW,
                                 "ttl_since": NOW, "claim_count": 3, "last_claim_id": "c-last"})
    assert policy.provenance(moved) == {
        "source_queue": "orders", "reason": "max_claims", "dead_lettered_at": NOW_ISO, "claim_count": 3,
        "first_posted_at": "2023-11-14T22:11:59Z", "last_claim_id": "c-last", "failures": [FAILURE]}


def test_the_provenance_block_of_a_move_into_the_default_dlq_says_so_and_others_do_not():
    moved = message("m1", created=NOW - 81, claim_count=3,
                    dead_letter={"source_queue": "orders", "reason": "max_claims", "dead_lettered_at": NOW,
                                 "default_dead_letter_queue": True, "claim_count": 3, "last_claim_id": "c"})
    assert policy.provenance(moved) == {
        "source_queue": "orders", "reason": "max_claims", "dead_lettered_at": NOW_ISO, "claim_count": 3,
        "first_posted_at": "2023-11-14T22:11:59Z", "last_claim_id": "c", "failures": [],
        "default_dead_letter_queue": True}


def test_the_provenance_block_of_a_message_without_a_record_is_empty_but_shaped():
    assert policy.provenance(message("m1", created=NOW, claim_count=2)) == {
        "source_queue": None, "reason": None, "dead_lettered_at": "1970-01-01T00:00:00Z", "claim_count": 2,
        "first_posted_at": NOW_ISO, "last_claim_id": None, "failures": []}


# -- editing a delayed message -----------------------------------------------------------------

@pytest.mark.parametrize(("fields", "editable"), [
    ({"delay_until": NOW + 1}, True),
    ({"delay_until": NOW}, False),  # the delay ended at this instant: the message is visible
    ({"delay_until": 0.0}, False),
    ({"delay_until": NOW + 60, "expires": NOW}, False),
    ({"delay_until": NOW + 60, "claim_id": "c1", "claim_expires": NOW + 1}, False),
    ({"delay_until": NOW + 60, "claim_id": "c1", "claim_expires": NOW}, True),  # its claim lapsed
])
def test_only_a_delayed_unclaimed_unexpired_message_is_editable(fields, editable):
    assert policy.is_editable(message(**fields), NOW) is editable


@pytest.mark.parametrize(("fields", "reason"), [
    ({"delay_until": NOW}, f"its delay ended at {NOW_ISO}"),
    ({"delay_until": 0.0}, "it was never delayed"),
    ({"delay_until": NOW + 60, "claim_id": "c1", "claim_expires": NOW + 60}, "it is claimed"),
])
def test_an_edit_refused_names_why(fields, reason):
    with pytest.raises(errors.MessageNotEditable) as refused:
        policy.check_editable(message(**fields), NOW)
    assert str(refused.value) == (f"Message m1 cannot be edited: {reason}. Only a message that is still "
                                  "delayed, unclaimed and unexpired can be edited.")


def test_an_edit_replaces_the_body_and_counts_ttl_and_delay_from_now():
    before = message(delay_until=NOW + 60, marker=7)
    after = policy.edited(before, {"body": None, "ttl": 600, "delay": 30}, NOW)
    assert (after.body, after.expires, after.delay_until, after.ttl()) == (None, NOW + 600, NOW + 30, 900)
    assert (after.id, after.marker, after.created) == ("m1", 7, NOW - 300)


def test_an_edit_keeps_what_it_does_not_name_and_a_zero_delay_frees_the_message():
    before = message(delay_until=NOW + 60)
    assert policy.edited(before, {"ttl": 60}, NOW) == dataclasses.replace(before, expires=NOW + 60)
    freed = policy.edited(before, {"delay": 0}, NOW)
    assert (freed.body, freed.expires, freed.delay_until) == ({"n": 1}, NOW + 3300, 0.0)
    assert policy.is_visible(freed, NOW)


def test_a_renewed_claim_is_a_new_lease_whose_age_counts_from_the_renewal():
    renewed = policy.renewed_claim("c1", 1000.0, 120, 30)
    assert renewed == Claim("c1", 120, 30, created=1000.0, expires=1120.0)
    assert renewed.age(1007.5) == 7


@pytest.mark.parametrize(("count", "undone"), [(1, 0), (3, 2), (0, 0)])
def test_an_undone_claim_leaves_its_message_visible_at_once_with_its_count_as_before(count, undone):
    held = message(claim_id="c", claim_expires=NOW + 60, claim_count=count, delay_until=NOW + 90)
    back = policy.claim_undone(held, NOW)
    assert (back.claim_expires, back.delay_until, back.claim_count) == (NOW, 0.0, undone)
    assert policy.is_visible(back, NOW)
