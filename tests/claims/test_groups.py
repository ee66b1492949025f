"""Ordered message groups (zaqar_lite.claims.groups): group names, heads, what a claim or pop may take."""

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


def test_only_heads_and_ungrouped_messages_are_claimable_in_their_order():
    candidates = [message("a1", "a"), message("n1"), message("b2", "b"), message("a2", "a"),
                  message("c1", "c")]
    heads = {"a": "a1", "b": "b1", "c": "c1"}
    assert [m.id for m in groups.claimable(candidates, heads)] == ["a1", "n1", "c1"]


def test_a_group_missing_from_heads_gives_nothing():
    assert groups.claimable([message("a1", "a")], {}) == []


def test_a_pop_takes_nothing_more_of_a_group_it_took_from():
    candidates = [message("a2", "a"), message("b1", "b"), message("n1")]
    heads = {"a": "a2", "b": "b1"}
    assert [m.id for m in groups.claimable(candidates, heads, taken={"a"})] == ["b1", "n1"]


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
