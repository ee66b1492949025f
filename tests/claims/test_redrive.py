"""The redrive rules: filters, targets, the moved message, batches, throttle.

docs/api.rst, "Redrive (zaqar-lite extension)".
"""

from __future__ import annotations

import pytest

from zaqar_lite.claims import redrive
from zaqar_lite.models import Message, RedriveFilter, RedriveRequest

NOW = 1_700_000_000.0
DLQ = "orders-dlq"
TIMEOUT = {"at": "2023-11-14T22:10:00Z", "claim_count": 1, "error_type": "TimeoutError",
           "error": "upstream timed out after 30 s"}
BAD_ID = {"at": "2023-11-14T22:11:00Z", "claim_count": 2, "error_type": "ValueError", "error": "bad id 42"}
#: "v2-" and sha1("ValueError: bad id <*>")[:12], of sha1("TimeoutError: upstream timed out after <*> s")[:12]
#: and sha1("(no reason given)")[:12], computed apart with hashlib
BAD_ID_SIGNATURE, TIMEOUT_SIGNATURE = "v2-5bc6c406f8f7", "v2-422a8c550d8e"
NO_REASON_SIGNATURE = "v2-49471713812f"


def dead_letter(message_id: str = "m1", source: str | None = "orders", failures=(TIMEOUT, BAD_ID),
                **fields) -> Message:
    record = {"source_queue": source, "reason": "max_claims", "dead_lettered_at": NOW - 60,
              "claim_count": 3, "last_claim_id": "c-last"}
    values = {"body": {"order": 17}, "created": NOW - 600, "expires": NOW + 3000, "claim_count": 3,
              "failures": list(failures), "dead_letter": record, **fields}
    return Message(id=message_id, **values)


# -- failures --------------------------------------------------------------------------------

def test_the_last_failure_is_the_latest_entry_of_the_history():
    assert redrive.last_failure(dead_letter()) == BAD_ID
    assert redrive.last_failure(dead_letter(failures=())) is None


def test_the_signature_of_a_message_is_that_of_its_last_failure():
    assert redrive.last_signature_id(dead_letter()) == BAD_ID_SIGNATURE
    assert redrive.last_signature_id(dead_letter(failures=[BAD_ID, TIMEOUT])) == TIMEOUT_SIGNATURE


def test_a_message_without_failures_has_the_no_reason_signature():
    assert redrive.last_signature_id(dead_letter(failures=())) == NO_REASON_SIGNATURE


# -- filters ---------------------------------------------------------------------------------

def test_a_message_without_provenance_never_matches_even_an_empty_filter():
    plain = Message(id="m1", body=1, created=NOW, expires=NOW + 60)
    assert redrive.matches(plain, RedriveFilter()) is False
    assert redrive.matches(plain, RedriveFilter(ids=frozenset({"m1"}))) is False


def test_an_empty_filter_matches_every_dead_letter():
    assert redrive.matches(dead_letter(), RedriveFilter()) is True
    assert redrive.matches(dead_letter(failures=(), source=None), RedriveFilter()) is True


@pytest.mark.parametrize(("wanted", "matched"), [
    (RedriveFilter(source_queue="orders"), True),
    (RedriveFilter(source_queue="payments"), False),
    (RedriveFilter(ids=frozenset({"m1", "m9"})), True),
    (RedriveFilter(ids=frozenset({"m9"})), False),
    (RedriveFilter(error_type="ValueError"), True),
    (RedriveFilter(error_type="TimeoutError"), False),
    (RedriveFilter(error_type="valueerror"), False),
    (RedriveFilter(signature=BAD_ID_SIGNATURE), True),
    (RedriveFilter(signature=TIMEOUT_SIGNATURE), False),
    (RedriveFilter(source_queue="orders", error_type="ValueError", signature=BAD_ID_SIGNATURE,
                   ids=frozenset({"m1"})), True),
    (RedriveFilter(source_queue="orders", error_type="ValueError", ids=frozenset({"m2"})), False),
    (RedriveFilter(source_queue="payments", error_type="ValueError"), False),
], ids=["source", "other-source", "ids", "other-ids", "last-error-type", "earlier-error-type",
        "error-type-exactly", "last-signature", "earlier-signature", "all-criteria", "one-criterion-fails",
        "source-fails"])
def test_every_criterion_given_must_hold_and_failures_compare_the_last_one(wanted, matched):
    assert redrive.matches(dead_letter(), wanted) is matched


def test_a_message_without_failures_matches_no_error_type_but_the_no_reason_signature():
    bare = dead_letter(failures=())
    assert redrive.matches(bare, RedriveFilter(error_type="TimeoutError")) is False
    assert redrive.matches(bare, RedriveFilter(signature=NO_REASON_SIGNATURE)) is True


def test_a_last_failure_without_a_type_matches_no_error_type():
    untyped = dead_letter(failures=[{"at": "x", "claim_count": 1, "error_type": None, "error": "boom"}])
    assert redrive.matches(untyped, RedriveFilter(error_type="TimeoutError")) is False


# -- where a dead letter goes ----------------------------------------------------------------------

@pytest.mark.parametrize(("message", "destination", "target"), [
    (dead_letter(), None, "orders"),
    (dead_letter(), "orders-replay", "orders-replay"),
    (dead_letter(source=None), "orders-replay", "orders-replay"),
    (dead_letter(source=None), None, None),
    (dead_letter(source=""), None, None),
    (dead_letter(source=DLQ), None, None),
    (dead_letter(), DLQ, None),
    (Message(id="m1", body=1, created=NOW, expires=NOW + 60), None, None),
], ids=["source", "destination", "destination-without-source", "no-source", "empty-source",
        "source-is-this-queue", "destination-is-this-queue", "no-provenance"])
def test_a_dead_letter_goes_to_the_destination_else_its_source_never_to_its_own_queue(message, destination,
                                                                                       target):
    assert redrive.target_queue(message, DLQ, destination) == target


# -- the redriven message ------------------------------------------------------------------------

def test_a_redriven_message_is_ordinary_again_with_its_id_body_age_and_history():
    moved = redrive.redriven(dead_letter(claim_id="c-dlq", claim_expires=NOW - 5, client_id="client-1",
                                         marker=12), NOW, 60)
    assert moved == Message(id="m1", body={"order": 17}, created=NOW - 600, expires=NOW + 3000,
                            delay_until=0.0, client_id="client-1", claim_id=None, claim_expires=None,
                            claim_count=0, dlq_eligible=True, failures=[TIMEOUT, BAD_ID], dead_letter=None,
                            marker=12)


@pytest.mark.parametrize(("expires", "kept"), [
    (NOW + 3000, NOW + 3000),
    (NOW + 61, NOW + 61),
    (NOW + 60, NOW + 60),
    (NOW + 59, NOW + 60),
    (NOW - 10, NOW + 60),
])
def test_a_redriven_message_keeps_its_expiry_but_lives_at_least_the_minimum_ttl(expires, kept):
    assert redrive.redriven(dead_letter(expires=expires), NOW, 60).expires == kept


# -- batches and throttle -------------------------------------------------------------------

def selected(count: int) -> list[tuple[Message, str]]:
    return [(dead_letter(f"m{i}"), "orders") for i in range(count)]


@pytest.mark.parametrize(("count", "rate", "sizes"), [
    (0, None, []),
    (1, None, [1]),
    (100, None, [100]),
    (250, None, [100, 100, 50]),
    (250, 1000.0, [100, 100, 50]),
    (250, 100.0, [100, 100, 50]),
    (250, 50.0, [50, 50, 50, 50, 50]),
    (5, 2.9, [2, 2, 1]),
    (3, 0.5, [1, 1, 1]),
])
def test_batches_hold_at_most_100_messages_or_one_seconds_worth(count, rate, sizes):
    batches = list(redrive.batches(selected(count), rate))
    assert [len(b) for b in batches] == sizes
    assert [m.id for b in batches for m, _ in b] == [f"m{i}" for i in range(count)]


@pytest.mark.parametrize(("done", "now", "rate", "wait"), [
    (10, NOW + 1, None, 0.0),
    (10, NOW, 5.0, 2.0),
    (10, NOW + 1, 5.0, 1.0),
    (10, NOW + 2, 5.0, 0.0),
    (10, NOW + 3, 5.0, 0.0),
    (1, NOW, 0.5, 2.0),
    (0, NOW, 5.0, 0.0),
])
def test_a_throttled_redrive_waits_until_done_moves_took_done_over_rate_seconds(done, now, rate, wait):
    assert redrive.throttle_wait(NOW, done, now, rate) == wait


def test_a_batch_is_grouped_by_target_keeping_post_order():
    first, second, third = dead_letter("m1"), dead_letter("m2"), dead_letter("m3")
    groups = redrive.by_target([(first, "a"), (second, "b"), (third, "a")])
    assert groups == {"a": [first, third], "b": [second]}
    assert list(groups) == ["a", "b"]
    assert redrive.by_target([]) == {}


def test_a_dry_run_shows_ten_and_moves_go_by_hundreds():
    assert (redrive.SAMPLE_SIZE, redrive.BATCH_SIZE) == (10, 100)


# -- what a redrive selects ------------------------------------------------------------------

def test_a_dead_letter_is_selected_for_its_source_queue_or_the_destination():
    assert redrive.selected_target(dead_letter(), DLQ, RedriveRequest(limit=10), NOW) == "orders"
    request = RedriveRequest(limit=10, destination="orders-retry")
    assert redrive.selected_target(dead_letter(), DLQ, request, NOW) == "orders-retry"


def test_a_claimed_dead_letter_is_not_selected_until_its_claim_ends():
    claimed = dead_letter(claim_id="c1", claim_expires=NOW + 30)
    assert redrive.selected_target(claimed, DLQ, RedriveRequest(limit=10), NOW) is None
    assert redrive.selected_target(claimed, DLQ, RedriveRequest(limit=10), NOW + 30) == "orders"


def test_a_dead_letter_the_filter_refuses_or_with_nowhere_to_go_is_not_selected():
    wrong_source = RedriveRequest(limit=10, filter=RedriveFilter(source_queue="payments"))
    assert redrive.selected_target(dead_letter(), DLQ, wrong_source, NOW) is None
    assert redrive.selected_target(dead_letter(source=DLQ), DLQ, RedriveRequest(limit=10), NOW) is None
    plain = Message(id="m1", body=1, created=NOW, expires=NOW + 60)
    assert redrive.selected_target(plain, DLQ, RedriveRequest(limit=10, destination="orders"), NOW) is None


# -- groups by signature (the console) ----------------------------------------------------------


def test_dead_letters_group_by_their_last_signature_largest_group_first():
    letters = [dead_letter("a", failures=(BAD_ID,)), dead_letter("b", failures=(BAD_ID, TIMEOUT)),
               dead_letter("c", failures=(TIMEOUT, BAD_ID)), dead_letter("d", failures=())]
    groups = redrive.by_last_signature(letters)
    assert [(g.signature_id, g.signature, [m.id for m in g.messages]) for g in groups] == [
        (BAD_ID_SIGNATURE, "ValueError: bad id <*>", ["a", "c"]),
        (TIMEOUT_SIGNATURE, "TimeoutError: upstream timed out after <*> s", ["b"]),
        (NO_REASON_SIGNATURE, "(no reason given)", ["d"]),
    ]


def test_a_group_is_what_a_signature_filter_selects():
    letters = [dead_letter("a", failures=(BAD_ID,)), dead_letter("b", failures=(BAD_ID, TIMEOUT))]
    for group in redrive.by_last_signature(letters):
        wanted = RedriveFilter(signature=group.signature_id)
        assert [m.id for m in letters if redrive.matches(m, wanted)] == [m.id for m in group.messages]


# -- a redrive of a queue that is no dead-letter queue --------------------------------------

NOT_A_DLQ = ("Queue plain is no queue's dead-letter queue: no queue of this project names it as "
             "_dead_letter_queue, nor is it the default dead-letter queue; redrive the queue a "
             "_dead_letter_queue names.")


def test_a_queue_no_queue_names_as_its_dlq_is_said_to_be_no_dead_letter_queue():
    queues = [("orders", {"_dead_letter_queue": "orders-dlq"}), ("plain", {}), ("orders-dlq", {})]
    assert redrive.not_a_dead_letter_queue("plain", queues, None) == NOT_A_DLQ
    assert redrive.not_a_dead_letter_queue("plain", [], "dead-letters") == NOT_A_DLQ


def test_a_queue_named_as_a_dlq_or_the_default_dlq_is_a_dead_letter_queue():
    queues = [("orders", {"_dead_letter_queue": "orders-dlq"}), ("orders-dlq", {})]
    assert redrive.not_a_dead_letter_queue("orders-dlq", queues, None) is None
    assert redrive.not_a_dead_letter_queue("dead-letters", [], "dead-letters") is None
