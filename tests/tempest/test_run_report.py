"""The tempest runner's verdict: tempest's totals against the expected-failure list."""

from __future__ import annotations

from tests.tempest.run import expected_failures, report, totals

A = "zaqar_tempest_plugin.tests.v2.test_queues.TestQueues.test_a"
B = "zaqar_tempest_plugin.tests.v2.test_queues.TestQueues.test_b"


def tempest_output(passed: int, failed: int) -> str:
    return ("======\nTotals\n======\nRan: 3 tests in 1.0 sec.\n"
            f" - Passed: {passed}\n - Skipped: 0\n - Expected Fail: 0\n"
            f" - Unexpected Success: 0\n - Failed: {failed}\n")


def test_totals_reads_tempests_closing_block():
    assert totals(tempest_output(2, 1)) == {"Passed": 2, "Skipped": 0, "Expected Fail": 0,
                                             "Unexpected Success": 0, "Failed": 1}


def test_the_list_holds_ids_and_reasons(tmp_path):
    listed = tmp_path / "expected.txt"
    listed.write_text(f"# a comment\n\n{A}  # Zaqar does X; zaqar-lite does Y because Z\n")
    assert expected_failures(listed) == {A: "Zaqar does X; zaqar-lite does Y because Z"}
    assert expected_failures(tmp_path / "missing.txt") == {}


def test_only_listed_failures_pass_and_a_listed_test_that_passes_fails(tmp_path, capsys):
    listed = tmp_path / "expected.txt"
    listed.write_text(f"{A}  # reason\n")
    assert report(1, tempest_output(2, 1), [A], "", count=3, expected_path=listed) == 0
    assert report(1, tempest_output(2, 1), [B], "", count=3, expected_path=listed) == 1
    assert report(0, tempest_output(3, 0), [], "", count=3, expected_path=listed) == 1
    assert "listed as expected to fail but passed: " + A in capsys.readouterr().out


def test_a_run_of_the_wrong_size_fails(tmp_path, capsys):
    assert report(0, tempest_output(3, 0), [], "", count=3, expected_path=tmp_path / "none") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "tempest: 3 passed, 0 failed, 0 skipped"
    assert report(0, tempest_output(2, 0), [], "", count=3, expected_path=tmp_path / "none") == 1
    assert report(0, tempest_output(0, 0), [], "", count=None, expected_path=tmp_path / "none") == 1
