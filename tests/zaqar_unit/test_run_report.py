"""The Zaqar unit-test runner's verdict: pytest's JUnit report against the expected-failure list."""

from __future__ import annotations

from tests.zaqar_unit.run import EXPECTED_FAILURES, EXPECTED_TEST_COUNT, expected_failures, outcomes, report

PACKAGE = "zaqar.tests.unit.transport.wsgi.v2_0"
A = "test_claims.py::TestClaimsMongoDB::test_a"
B = "test_messages.py::TestMessagesMongoDB::test_b"
C = "test_queue_lifecycle.py::TestQueueLifecycleMongoDB::test_c"

JUNIT = f"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="{PACKAGE}.test_claims.TestClaimsMongoDB" name="test_a" time="0.1"/>
<testcase classname="{PACKAGE}.test_messages.TestMessagesMongoDB" name="test_b" time="0.1">
<failure message="MismatchError">'400 Bad Request' != '201 Created'</failure></testcase>
<testcase classname="{PACKAGE}.test_queue_lifecycle.TestQueueLifecycleMongoDB" name="test_c" time="0.1">
<skipped message="no"/></testcase>
</testsuite></testsuites>
"""


def test_outcomes_reads_each_test_of_the_junit_report(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    assert outcomes(junit) == {A: "passed", B: "failed", C: "skipped"}


def test_only_listed_failures_pass_and_a_listed_test_that_passes_fails(capsys):
    assert report({A: "passed", B: "failed"}, {B: "reason"}, count=2) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "zaqar unit: 1 passed, 1 failed, 0 skipped of 2 (1 failures listed)")
    assert report({A: "failed", B: "failed"}, {B: "reason"}, count=2) == 1
    assert report({A: "passed", B: "passed"}, {B: "reason"}, count=2) == 1
    assert "listed as expected to fail but passed: " + B in capsys.readouterr().out


def test_a_run_of_the_wrong_size_fails(capsys):
    assert report({A: "passed"}, {}, count=2) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "zaqar unit: ran 1 tests, expected 2"


def test_the_shipped_list_names_four_tests_each_with_a_reason():
    listed = expected_failures(EXPECTED_FAILURES)
    assert len(listed) == 4 and EXPECTED_TEST_COUNT - len(listed) == 92
    assert all(reason for reason in listed.values())
