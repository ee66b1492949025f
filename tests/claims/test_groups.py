"""Ordered message groups (zaqar_lite.claims.groups): group names, held groups, what a claim or pop may take."""

from __future__ import annotations

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
    assert [m.id for m in groups.claimable([a1, b1, n1], members, NOW)] == ["a1", "a2", "a3", "b1", "b2", "n1"]
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
