"""Ordered message groups (zaqar_lite.claims.groups): names, held groups, what a claim or pop may take."""

from __future__ import annotations

import dataclasses

import pytest

from zaqar_lite.claims import groups, policy
from zaqar_lite.models import DeadLetterPolicy, Message


def message(message_id: str, group: str | None = None) -> Message:
    return Message(id=message_id, body=None, created=100.0, expires=200.0, group=group)


@pytest.mark.parametrize("value", ["a", "tenant-17/orders", "x" * 128, "~!"])
def test_valid_groups(value):
    assert groups.is_group(value)


@pytest.mark.parametrize("value", ["", "x" * 129, "two words", "caf\u00e9", "end\n", 3, None, ["a"]])
def test_invalid_groups(value):
    assert not groups.is_group(value)


def test_groups_of_names_each_group_once_and_nothing_for_ungrouped_messages():
    found = groups.groups_of([message("1", "a"), message("2"), message("3", "a"), message("4", "b")])
    assert found == {"a", "b"}
    assert groups.groups_of([message("1"), message("2")]) == set()


NOW = 150.0


def held(message_id: str, group: str) -> Message:
    """A message of ``group`` claimed until after NOW."""
    return Message(id=message_id, body=None, created=100.0, expires=200.0, group=group,
                   claim_id="c", claim_expires=NOW + 1)


def delayed(message_id: str, group: str) -> Message:
    """A message of ``group`` delayed until after NOW."""
    return Message(id=message_id, body=None, created=100.0, expires=200.0, group=group, delay_until=NOW + 1)


def test_a_group_gives_its_messages_in_order_in_place_of_its_first_candidate():
    a1, a2, a3, b1, b2, n1 = (message("a1", "a"), message("a2", "a"), message("a3", "a"),
                              message("b1", "b"), message("b2", "b"), message("n1"))
    members = {"a": [a1, a2, a3], "b": [b1, b2]}
    assert [m.id for m in groups.claimable([a1, b1, n1], members, NOW)] == [
        "a1", "a2", "a3", "b1", "b2", "n1"]
    assert [m.id for m in groups.claimable([n1, b1, a1, a2], members, NOW)] == [
        "n1", "b1", "b2", "a1", "a2", "a3"]


def test_a_group_with_any_claimed_message_gives_nothing():
    a1, b1 = message("a1", "a"), message("b1", "b")
    members = {"a": [a1, held("a2", "a"), message("a3", "a")], "b": [b1]}
    assert [m.id for m in groups.claimable([a1, b1], members, NOW)] == ["b1"]
    assert groups.is_held(members["a"], NOW) and not groups.is_held(members["b"], NOW)
    assert not groups.is_held([held("a2", "a")], NOW + 1)  # a lapsed claim holds nothing


def test_a_message_that_is_not_visible_ends_its_groups_run():
    a1, a3 = message("a1", "a"), message("a3", "a")
    members = {"a": [a1, delayed("a2", "a"), a3]}
    assert [m.id for m in groups.claimable([a1, a3], members, NOW)] == ["a1"]
    assert groups.claimable([a3], {"a": [delayed("a0", "a"), a3]}, NOW) == []


def test_a_group_missing_from_members_gives_nothing():
    assert groups.claimable([message("a1", "a")], {}, NOW) == []


def test_a_claim_takes_nothing_more_of_a_group_it_took_from():
    candidates = [message("a2", "a"), message("b1", "b"), message("n1")]
    members = {"a": [candidates[0]], "b": [candidates[1]]}
    assert [m.id for m in groups.claimable(candidates, members, NOW, taken={"a"})] == ["b1", "n1"]


@pytest.mark.parametrize(("removed", "frees"), [([], False), (["n1"], False), (["a1"], True),
                                                (["n1", "a1"], True), (["zz"], False)])
def test_removing_a_grouped_message_frees_its_group(removed, frees):
    assert groups.frees_a_group([message("a1", "a"), message("n1")], removed) is frees


def test_a_dead_letter_leaves_its_group_and_its_provenance_keeps_the_groups_name():
    dead = policy.dead_lettered(message("a1", "payments"), "orders", policy.REASON_MAX_CLAIMS, 150.0,
                                DeadLetterPolicy(max_claim_count=1, queue="orders-dlq"))
    assert dead.group is None
    assert dead.dead_letter == {"source_queue": "orders", "reason": "max_claims", "dead_lettered_at": 150.0,
                                "claim_count": 0, "last_claim_id": None, "group": "payments"}
    assert policy.provenance(dead)["group"] == "payments"


def test_an_ungrouped_dead_letter_records_no_group():
    dead = policy.dead_lettered(message("n1"), "orders", policy.REASON_MAX_CLAIMS, 150.0,
                                DeadLetterPolicy(max_claim_count=1, queue="orders-dlq"))
    assert "group" not in dead.dead_letter
    assert "group" not in policy.provenance(dead)


def test_a_group_whose_first_message_is_back_from_a_claim_is_available_from_it():
    back = Message(id="a1", body=None, created=100.0, expires=200.0, group="a", claim_count=1,
                   claim_expires=NOW - 5)
    members = [back, held("a2", "a"), message("a3", "a")]
    assert not groups.is_held(members, NOW)
    assert [m.id for m in groups.takeable(members, NOW)] == ["a1"]
    assert groups.is_held([message("a1", "a"), held("a2", "a")], NOW)  # never claimed: it waits


def test_groups_go_in_the_order_since_when_their_first_message_is_available():
    back = Message(id="a1", body=None, created=100.0, expires=200.0, group="a", claim_count=1,
                   claim_expires=140.0, marker=1)
    b1 = Message(id="b1", body=None, created=110.0, expires=200.0, group="b", marker=2)
    n1 = Message(id="n1", body=None, created=90.0, expires=200.0, marker=3)
    a2 = Message(id="a2", body=None, created=100.0, expires=200.0, group="a", marker=4)
    members = {"a": [back, a2], "b": [b1]}
    assert [m.id for m in groups.claimable([back, b1, n1, a2], members, NOW)] == ["b1", "a1", "a2", "n1"]
    assert groups.available_since(back) == 140.0


def test_a_listing_is_ordered_by_the_same_rule():
    rows = [("a1", "a", True, False, True, 140.0), ("b1", "b", True, False, False, 0.0),
            ("n1", None, True, False, False, 0.0), ("a2", "a", True, False, False, 0.0),
            ("c1", "c", True, False, False, 0.0), ("c2", "c", False, True, True, 0.0),
            ("d1", "d", False, False, False, 0.0), ("d2", "d", True, False, False, 0.0)]
    assert groups.listing_order(rows) == ["b1", "a1", "a2", "n1"]


def test_a_claim_answers_nothing_of_a_group_after_a_message_of_it_it_lost():
    planned = [message("a1", "a"), message("a2", "a"), message("n1"), message("b1", "b")]
    won = [planned[1], planned[2], planned[3]]
    assert [m.id for m in groups.kept_in_order(planned, won)] == ["n1", "b1"]


def test_what_a_claim_won_and_does_not_answer_is_given_back_claimable_at_once_and_uncounted():
    planned = [message("a1", "a"), message("a2", "a"), message("a3", "a"), message("n1")]
    won = [dataclasses.replace(m, claim_id="c", claim_expires=160.0, claim_count=1) for m in planned[1:]]
    kept = groups.kept_in_order(planned, won)
    unanswered = groups.unanswered(won, kept)
    assert [m.id for m in unanswered] == ["a2", "a3"]
    back = policy.claim_undone(unanswered[0], 130.0)
    assert (back.claim_expires, back.claim_count) == (130.0, 0)
    assert policy.is_visible(back, 130.0)
    assert not policy.is_visible(unanswered[0], 130.0)
