"""Schemathesis over docs/openapi.yaml against a real ``zaqar-lite serve`` on SQLite: zero failures.

Every check is on (``--checks all``), in every phase: examples, coverage, fuzzing
and the stateful phase, which follows the document's links (create a queue, post
to it, claim, read, renew and release the claim, delete and release claimed
messages, subscribe and change the subscription). The hooks and settings are in
tests/fuzz/. The number of cases per operation is bounded so the run takes about
a minute on two cores; ``ZAQAR_LITE_FUZZ_EXAMPLES`` raises it and
``ZAQAR_LITE_FUZZ_SEED`` explores another seed (the default seed is fixed, so a run
is reproducible).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import missing_server
from tests.e2e.harness import start_server, stop_server

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tests" / "fuzz" / "schemathesis.toml"
OPENAPI = ROOT / "docs" / "openapi.yaml"
MAX_EXAMPLES = int(os.environ.get("ZAQAR_LITE_FUZZ_EXAMPLES", "25"))
SEED = os.environ.get("ZAQAR_LITE_FUZZ_SEED", "20")
RUN_TIMEOUT = 900
HTTP_METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}


@pytest.fixture
def server(tmp_path):
    # a signing key, so that the share operation signs rather than answering 403, and an
    # encryption key, so that _enable_encrypt_messages: true is accepted as documented
    config = tmp_path / "zaqar-lite.conf"
    config.write_text("[signed_urls]\nsecret_key = fuzz-signing-key\n"
                      "[encryption]\nkeys = fuzz:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")
    running = start_server(f"sqlite:///{tmp_path}/zaqar.db", tmp_path, workers=2,
                           extra_args=["--config", str(config)])
    yield running
    stop_server(running)


def documented_operations() -> int:
    """Return how many operations (path and method) docs/openapi.yaml describes."""
    paths = yaml.safe_load(OPENAPI.read_text())["paths"]
    return sum(1 for item in paths.values() for key in item if key in HTTP_METHODS)


def schemathesis_command() -> list[str]:
    """Return the command that runs the schemathesis CLI of this Python."""
    script = Path(sys.executable).with_name("schemathesis")
    return [str(script)] if script.exists() else [sys.executable, "-m", "schemathesis.cli"]


def test_schemathesis_finds_no_difference_between_the_document_and_the_server(server, tmp_path):
    if importlib.util.find_spec("schemathesis") is None:
        missing_server("schemathesis (the test extra)")
    command = [
        *schemathesis_command(), "--config-file", str(CONFIG), "--no-color", "run", str(OPENAPI),
        "--url", server.url, "--checks", "all", "--max-examples", str(MAX_EXAMPLES), "--seed", SEED,
        "--header", f"Client-ID: {uuid.uuid4()}", "--header", "X-Project-ID: fuzz",
        "--report-dir", str(tmp_path / "report"),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-20000:] + "\n--- server log ---\n" + server.log_tail(50)
    # every phase ran and passed, the stateful one included, on every operation
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert f"\u2705 {phase}" in output, output[-4000:]
    operations = documented_operations()
    assert f"Selected: {operations}/{operations}" in output and f"Tested: {operations}" in output, \
        output[-4000:]
    assert "Traceback" not in server.log(), server.log_tail(100)
