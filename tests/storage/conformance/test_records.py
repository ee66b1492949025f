"""Versioned records on every driver: compare-and-set, listing by prefix and marker, deleting by version."""

from __future__ import annotations

import pytest

from tests.storage.conformance.conftest import P
from zaqar_lite import errors


def test_records_are_written_by_compare_and_set(driver):
    assert driver.put_record(P, "subscription", "s1", {"n": 1}, None) == 1
    with pytest.raises(errors.Conflict):
        driver.put_record(P, "subscription", "s1", {"n": 9}, None)
    assert driver.put_record(P, "subscription", "s1", {"n": 2}, 1) == 2
    with pytest.raises(errors.Conflict):
        driver.put_record(P, "subscription", "s1", {"n": 3}, 1)
    record = driver.get_record(P, "subscription", "s1")
    assert (record.value, record.version) == ({"n": 2}, 2)
    assert driver.get_record("project-b", "subscription", "s1") is None


def test_records_list_by_prefix_and_marker_and_delete_by_version(driver):
    for key in ("q1/b", "q1/a", "q2/c", "q1/c"):
        driver.put_record(P, "subscription", key, {"k": key}, None)
    assert [r.key for r in driver.list_records(P, "subscription", prefix="q1/")] == ["q1/a", "q1/b", "q1/c"]
    after_a = driver.list_records(P, "subscription", prefix="q1/", marker="q1/a", limit=1)
    assert [r.key for r in after_a] == ["q1/b"]
    assert driver.record_projects("subscription") == [P]
    assert driver.delete_record(P, "subscription", "q1/a", expected_version=2) is False
    assert driver.delete_record(P, "subscription", "q1/a", expected_version=1) is True
    assert driver.delete_record(P, "subscription", "q1/a") is False
    assert [r.key for r in driver.list_records(P, "subscription")] == ["q1/b", "q1/c", "q2/c"]
