"""The example alert rules of ``etc/prometheus``: valid for Prometheus, and firing when they should.

``promtool`` (Debian ``prometheus``, installed by ``tests/install_servers.sh``)
checks the file and runs the rule unit tests of ``tests/prometheus/``, which
feed it series and say which alerts must fire, when, with which labels and text.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import missing_server

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "etc" / "prometheus" / "zaqar-lite-rules.yml"
RULE_TESTS = ROOT / "tests" / "prometheus" / "zaqar-lite-rules_test.yml"


@pytest.fixture(scope="module")
def promtool() -> str:
    """The path of ``promtool``."""
    found = shutil.which("promtool")
    if found is None:
        missing_server("promtool (Debian package prometheus)")
    return str(found)


def test_promtool_accepts_the_example_rules(promtool):
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True,
                             timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 4 rules found" in checked.stdout


def test_the_example_rules_fire_on_a_growing_dead_letter_queue_an_old_message_and_dead_letter_arrivals(
        promtool):
    tested = subprocess.run([promtool, "test", "rules", str(RULE_TESTS)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
