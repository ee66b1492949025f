"""Deduplicated posts (zaqar_lite.claims.dedup): the window, the ids, one post's duplicates."""

from __future__ import annotations

import pytest

from zaqar_lite.claims import dedup


@pytest.mark.parametrize(("metadata", "seconds"), [
    (None, 300), ({}, 300), ({"_dedup_window": 10}, 10), ({"_dedup_window": 86400}, 86400),
    ({"_max_claim_count": 3}, 300)])
def test_the_window_is_the_queues_dedup_window_or_300_seconds(metadata, seconds):
    assert dedup.window(metadata) == seconds


def test_the_window_ends_that_many_seconds_after_the_first_post():
    assert dedup.window_end({"_dedup_window": 60}, 1000.5) == 1060.5
    assert dedup.window_end(None, 1000.0) == 1300.0


@pytest.mark.parametrize("value", ["a", "order-17", "x" * 128, "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "A9~"])
def test_valid_dedup_ids(value):
    assert dedup.is_dedup_id(value)


@pytest.mark.parametrize("value", ["", "x" * 129, "has space", "tab\t", "caf\u00e9", "new\nline", "end\n",
                                   17, None, ["a"]])
def test_invalid_dedup_ids(value):
    assert not dedup.is_dedup_id(value)


@pytest.mark.parametrize(("ids", "stored_as"), [
    ([], []),
    ([None, None], [0, 1]),
    (["a", "b", "c"], [0, 1, 2]),
    (["a", None, "a", "b", "a", "b"], [0, 1, 0, 3, 0, 3]),
    ([None, "x", "x"], [0, 1, 1]),
])
def test_a_message_repeating_an_earlier_id_of_its_post_is_stored_as_that_one(ids, stored_as):
    assert dedup.collapse(ids) == stored_as
