"""The rules each store's queries prefilter (visibility, what a sweep takes) and the bulk delete.

Written out by hand from ``storage/base.py`` ("visible") and docs/api.rst: "The move" and
"Dead-lettering on expiry" (the sweep), "Delete messages by id".
"""

from __future__ import annotations

import pytest

from zaqar_lite.claims import policy
from zaqar_lite.models import DeadLetterPolicy, Message

NOW = 1_700_000_000.0
DEAD_LETTERS = DeadLetterPolicy(max_claim_count=2, queue="orders-dlq")


@pytest.mark.parametrize(("expires", "claim_expires", "delay_until", "visible"), [
    (NOW + 60, None, 0.0, True),
    (NOW + 0.001, None, 0.0, True),
    (NOW, None, 0.0, False),
    (NOW + 60, NOW, 0.0, True),
    (NOW + 60, NOW + 0.001, 0.0, False),
    (NOW + 60, None, NOW, True),
    (NOW + 60, None, NOW + 0.001, False),
    (NOW + 60, NOW - 30, NOW - 60, True),
], ids=["fresh", "expires-just-after-now", "expires-at-now", "claim-ended-at-now", "claimed",
        "delay-ends-at-now", "delayed", "claimed-once-and-matured"])
def test_stored_times_are_visible_when_unexpired_unclaimed_and_undelayed(expires, claim_expires, delay_until,
                                                                          visible):
    assert policy.visible_at(expires, claim_expires, delay_until, NOW) is visible


@pytest.mark.parametrize(("count", "dead_letter", "exhausted"), [
    (1, DEAD_LETTERS, False), (2, DEAD_LETTERS, True), (3, DEAD_LETTERS, True),
    (5, DeadLetterPolicy(max_claim_count=2), False), (5, DeadLetterPolicy(queue="orders-dlq"), False),
])
def test_a_count_is_exhausted_at_max_claims_once_a_dead_letter_queue_is_set(count, dead_letter, exhausted):
    assert policy.count_exhausted(count, dead_letter) is exhausted


@pytest.mark.parametrize(("expires", "claim_expires", "count", "swept"), [
    (NOW, None, 0, True),
    (NOW - 1, NOW + 60, 0, True),
    (NOW + 0.001, None, 0, False),
    (NOW + 60, None, 2, True),
    (NOW + 60, NOW, 2, True),
    (NOW + 60, NOW + 0.001, 2, False),
    (NOW + 60, None, 1, False),
], ids=["expired-at-now", "expired-while-claimed", "unexpired", "exhausted", "exhausted-claim-ended-at-now",
        "exhausted-still-claimed", "one-claim-left"])
def test_a_sweep_takes_expired_messages_and_exhausted_unclaimed_ones(expires, claim_expires, count, swept):
    assert policy.swept_at(expires, claim_expires, count, NOW, DEAD_LETTERS) is swept
    message = Message(id="m1", body=1, created=NOW - 60, expires=expires, claim_expires=claim_expires,
                      claim_id=None if claim_expires is None else "c1", claim_count=count)
    assert policy.is_swept(message, NOW, DEAD_LETTERS) is swept


def test_without_a_dead_letter_queue_a_sweep_takes_only_expired_messages():
    assert policy.swept_at(NOW + 60, None, 9, NOW, DeadLetterPolicy(max_claim_count=2)) is False
    assert policy.swept_at(NOW, None, 0, NOW, DeadLetterPolicy()) is True


FREE = Message(id="free", body=1, created=NOW, expires=NOW + 60)
MINE = Message(id="mine", body=1, created=NOW, expires=NOW + 60, claim_id="c1", claim_expires=NOW + 30)
THEIRS = Message(id="theirs", body=1, created=NOW, expires=NOW + 60, claim_id="c2", claim_expires=NOW + 30)
LAPSED = Message(id="lapsed", body=1, created=NOW, expires=NOW + 60, claim_id="c2", claim_expires=NOW)


def ids(split: tuple[list[Message], list[Message]]) -> tuple[list[str], list[str]]:
    return [m.id for m in split[0]], [m.id for m in split[1]]


def test_a_bulk_delete_without_claim_ids_removes_every_message_claimed_or_not():
    assert ids(policy.split_bulk_delete([FREE, MINE, THEIRS, LAPSED], None, NOW)) == (
        ["free", "mine", "theirs", "lapsed"], [])


def test_a_bulk_delete_with_claim_ids_keeps_messages_held_by_another_live_claim():
    assert ids(policy.split_bulk_delete([FREE, MINE, THEIRS, LAPSED], ["c1"], NOW)) == (
        ["free", "mine", "lapsed"], ["theirs"])
    assert ids(policy.split_bulk_delete([MINE, THEIRS], ["c1", "c2"], NOW)) == (["mine", "theirs"], [])
    assert ids(policy.split_bulk_delete([MINE, THEIRS], [], NOW)) == ([], ["mine", "theirs"])


def test_a_bulk_delete_of_nothing_removes_nothing():
    assert policy.split_bulk_delete([], ["c1"], NOW) == ([], [])
