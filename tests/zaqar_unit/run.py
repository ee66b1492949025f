"""Run Zaqar 23's own black-box wsgi v2 unit tests over HTTP against a real zaqar-lite.

Usage (from the repository root, with the project's Python)::

    python -m tests.zaqar_unit.run [--venv .venv-zaqar-unit] [--keep] [-k EXPR]

Zaqar's ``zaqar`` 23.x distribution ships its unit tests; ``make zaqar-unit-venv`` installs it
with ``--no-deps`` (``zaqar-requirements.txt``) and only what its wsgi v2 tests import
(``requirements.txt``) in a virtualenv of their own. This starts ``zaqar-lite serve`` on SQLite
(noauth, encryption keys set, one worker) on a free loopback port and runs, in that virtualenv,
the suite's three black-box classes -- the ones whose tests only speak HTTP to the API::

    test_claims.py::TestClaimsMongoDB              20 tests
    test_messages.py::TestMessagesMongoDB          55 tests
    test_queue_lifecycle.py::TestQueueLifecycleMongoDB  21 tests

with pytest and our plugin ``http_adapter.py``, which sends each of their simulated falcon
requests to the server over HTTP. The other classes of ``zaqar/tests/unit/transport/wsgi/v2_0/``
are not black-box: the ``*FaultyDriver`` ones load a faulty storage driver in-process, the
pooled, pools, flavors and default-limits ones reconfigure Zaqar (pooling, other limits), the
subscriptions and topics ones read Zaqar's storage controllers, ``test_auth``, ``test_home``,
``test_media_type``, ``test_urls``, ``test_validation`` and ``test_purge`` call the app or
Zaqar's helpers directly.

Exit status 0 when all 96 ran and failed only as listed in ``expected_failures.txt`` (each with
the reason); 1 otherwise, including a listed test that now passes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from tests.e2e.harness import start_server, stop_server
from tests.tempest import run as tempest_run

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
EXPECTED_FAILURES = HERE / "expected_failures.txt"
#: the black-box classes, and how many tests zaqar 23.0.1 has in them
CLASSES = ("test_claims.py::TestClaimsMongoDB", "test_messages.py::TestMessagesMongoDB",
           "test_queue_lifecycle.py::TestQueueLifecycleMongoDB")
EXPECTED_TEST_COUNT = 96
#: a fixed test key (32 bytes, base64): the suite posts to queues with _enable_encrypt_messages
ENCRYPTION_KEY = "zaqar-unit:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="


def expected_failures(path: Path = EXPECTED_FAILURES) -> dict[str, str]:
    """Return {test id: reason} from this suite's expected-failure list, in the tempest list's format."""
    return tempest_run.expected_failures(path)


def outcomes(junit_xml: Path) -> dict[str, str]:
    """Return {``file.py::Class::test``: passed|failed|skipped} from pytest's JUnit XML report."""
    results = {}
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)
        test_id = f"{module[0].rsplit('.', 1)[-1]}.py::{module[-1]}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            results[test_id] = "failed"
        elif case.find("skipped") is not None:
            results[test_id] = "skipped"
        else:
            results[test_id] = "passed"
    return results


def report(results: dict[str, str], expected: dict[str, str], count: int | None) -> int:
    """Print the summary of a run against the expected failures; return the exit status."""
    failed = sorted(t for t, outcome in results.items() if outcome == "failed")
    unexpected = [t for t in failed if t not in expected]
    fixed = [t for t in expected if results.get(t) != "failed"] if count else []
    print("== Zaqar 23's own wsgi v2 unit tests (black-box classes) over HTTP ==")
    for test_id in failed:
        why = expected.get(test_id)
        print(f"  FAIL {test_id}" + (f"  (expected: {why})" if why else ""))
    for test_id in fixed:
        print(f"  listed as expected to fail but {results.get(test_id, 'did not run')}: {test_id}")
    totals = {k: sum(1 for v in results.values() if v == k) for k in ("passed", "failed", "skipped")}
    print(f"zaqar unit: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped"
          f" of {len(results)}" + (f" ({len(failed) - len(unexpected)} failures listed)" if failed else ""))
    if count is not None and len(results) != count:
        print(f"zaqar unit: ran {len(results)} tests, expected {count}")
        return 1
    return 1 if unexpected or fixed else 0


def main(argv: list[str] | None = None) -> int:
    """Run the suite; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=Path(".venv-zaqar-unit"),
                        help="virtualenv holding zaqar 23 and its tests' imports (default .venv-zaqar-unit)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and logs")
    parser.add_argument("-k", dest="only", metavar="EXPR", help="pytest -k expression; no count check")
    args = parser.parse_args(argv)
    python = args.venv.resolve() / "bin" / "python"
    locate = "import os, zaqar.tests; print(os.path.dirname(zaqar.tests.__file__))"
    found = (subprocess.run([str(python), "-c", locate], capture_output=True, text=True)
             if python.exists() else None)
    if found is None or found.returncode:
        print(f"zaqar's tests are not installed in {args.venv}: run `make zaqar-unit-venv`", file=sys.stderr)
        return 1
    tests_dir = Path(found.stdout.strip())
    suite = tests_dir / "unit" / "transport" / "wsgi" / "v2_0"

    tmp = Path(tempfile.mkdtemp(prefix="zaqar-lite-zaqar-unit-"))
    config = tmp / "zaqar-lite.conf"
    config.write_text(f"[encryption]\nkeys = {ENCRYPTION_KEY}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "ZAQAR_"))}
    server = None
    status = 1
    started = time.monotonic()
    try:
        server = start_server(f"sqlite:///{tmp / 'zaqar.db'}", tmp, workers=1,
                              extra_args=["--config", str(config)])
        env.update({
            "ZAQAR_LITE_UNIT_URL": server.url,
            # the plugin comes from this repository; nothing else of it is imported there
            "PYTHONPATH": str(ROOT),
            # Zaqar's @requires_mongodb runs a test only when this is set: the server stands in
            "ZAQAR_TEST_MONGODB": "1",
            "ZAQAR_TESTS_CONFIGS_DIR": str(tests_dir / "etc"),
        })
        junit = tmp / "junit.xml"
        command = [str(python), "-m", "pytest", "-p", "no:cacheprovider",
                   "-p", "tests.zaqar_unit.http_adapter", "-q", "-rf", f"--junitxml={junit}",
                   "--rootdir", str(suite),
                   *(str(suite / c) for c in CLASSES)]
        if args.only:
            command += ["-k", args.only]
        result = subprocess.run(command, cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(f"zaqar unit: {time.monotonic() - started:.1f} s")
        if not junit.exists():
            print(result.stdout[-8000:])
            return 1
        results = outcomes(junit)
        status = report(results, expected_failures(), None if args.only else EXPECTED_TEST_COUNT)
        if status:
            print(result.stdout[-12000:])
            print("zaqar-lite log (tail):\n" + server.log_tail(60))
    finally:
        if server is not None:
            stop_server(server)
        if args.keep:
            print(f"zaqar unit: logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
