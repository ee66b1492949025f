"""Which tests the passes on other stores than SQLite skip (``tests/conftest.py``)."""

from __future__ import annotations

import pytest

from tests.conftest import same_on_every_store, start_rank


class Item:
    """The part of a collected test that ``same_on_every_store`` reads."""

    def __init__(self, *fixturenames: str, marked: bool = False) -> None:
        self.fixturenames = list(fixturenames)
        self.marks = [pytest.mark.store_independent.mark] if marked else []

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next((mark for mark in self.marks if mark.name == name), None)


def test_a_test_on_the_api_suites_store_runs_in_every_pass() -> None:
    assert same_on_every_store(Item("client", "settings", "store_uri", "clock")) is None


def test_a_test_on_the_end_to_end_store_runs_in_every_pass() -> None:
    assert same_on_every_store(Item("api", "server", "store", "data_dir")) is None


def test_a_marked_test_runs_in_the_sqlite_pass_only() -> None:
    reason = same_on_every_store(Item("bare", "client", "store_uri", marked=True))
    assert reason == "store independent: runs in the SQLite pass only"


def test_a_test_that_reaches_no_store_runs_in_the_sqlite_pass_only() -> None:
    assert same_on_every_store(Item("tmp_path")) == "uses no store: runs in the SQLite pass only"


def test_the_long_end_to_end_modules_start_after_the_slowest_groups_and_before_the_rest() -> None:
    ranks = [start_rank(f"{module}::test") for module in (
        "tests/spark/test_transforms.py", "tests/test_openapi_fuzz.py", "tests/e2e/test_redrive_tasks.py",
        "tests/e2e/test_groups.py", "tests/api/test_claims.py")]
    assert ranks == sorted(set(ranks))
