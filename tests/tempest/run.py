"""Run Zaqar's own API suite (zaqar-tempest-plugin, v2 tests) against a real zaqar-lite.

Usage (from the repository root, with the project's Python)::

    python -m tests.tempest.run [--venv .venv-tempest] [--concurrency 2] [--keep]

It starts ``zaqar-lite serve --with-notifier`` on SQLite with token auth on a free loopback port,
a Keystone v3 stand-in (``keystone_standin.py``) whose catalog points at it,
makes a tempest workspace (``tempest init``) in a temporary directory with
dynamic credentials (a new project, with its own fixed token, for each test
class, as in Zaqar's gate), runs ``tempest run``
(stestr) on ``zaqar_tempest_plugin.tests.v2``, prints a summary and stops
everything by PID. tempest and the plugin live in their own virtualenv
(``make tempest-venv``), never in the project's.

Exit status 0 when every test passed, or failed only as listed in
``expected_failures.txt`` (each with the Zaqar behaviour zaqar-lite does not
share); 1 otherwise, including a listed test that now passes (drop it from the
list and from the README).
"""

from __future__ import annotations

import argparse
import configparser
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.e2e.harness import start_server, stop_server
from tests.tempest.keystone_standin import KeystoneStandin, Project, User

HERE = Path(__file__).resolve().parent
EXPECTED_FAILURES = HERE / "expected_failures.txt"
TEST_REGEX = r"^zaqar_tempest_plugin\.tests\.v2\."
#: the number of tests zaqar-tempest-plugin 4.3.0 has under tests/v2
EXPECTED_TEST_COUNT = 135
#: projects the identity stand-in can hand out: more than the plugin's 8 test classes
PROJECTS = 16


def expected_failures(path: Path = EXPECTED_FAILURES) -> dict[str, str]:
    """Return {test id: reason} from the expected-failure list (``id  # reason`` lines)."""
    failures = {}
    if path.exists():
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                test_id, _, reason = line.partition("#")
                failures[test_id.strip()] = reason.strip()
    return failures


ADMIN = User(id="admin", name="admin", password="tempest-admin-password",
             project=Project(id="tempest-admin-project", token="tempest-admin-token-0123456789abcdef"),
             project_name="admin")


def project_pool(size: int) -> list[Project]:
    """Return the projects, each with its fixed token, the stand-in hands out to test classes."""
    return [Project(id=f"tempest-project-{i:02d}", token=f"tempest-token-{i:02d}-0123456789abcdef")
            for i in range(1, size + 1)]


def write_server_config(path: Path, pool: list[Project]) -> None:
    """Write a zaqar-lite config with token auth and one member token per project of the pool."""
    assert ADMIN.project is not None
    lines = ["[auth]", "strategy = token", "", "[tokens]",
             f"{ADMIN.project.token} = {ADMIN.project.id}:admin"]
    lines += [f"{p.token} = {p.id}:member" for p in pool]
    path.write_text("\n".join(lines) + "\n")


def write_tempest_config(workspace: Path, keystone_url: str) -> None:
    """Fill the workspace's etc/tempest.conf (written by ``tempest init``)."""
    conf_path = workspace / "etc" / "tempest.conf"
    conf = configparser.ConfigParser(interpolation=None)
    conf.optionxform = str  # type: ignore[assignment,method-assign]
    conf.read(conf_path)
    values = {
        # a new project (and user) for each test class, as in Zaqar's gate
        "auth": {"use_dynamic_credentials": "true", "create_isolated_networks": "false",
                 "admin_username": ADMIN.name, "admin_password": ADMIN.password,
                 "admin_project_name": ADMIN.project_name, "admin_domain_name": "Default"},
        "identity": {"uri_v3": f"{keystone_url}/v3", "auth_version": "v3", "region": "RegionOne"},
        "service_available": {"zaqar": "true", "neutron": "false"},
        "messaging": {"catalog_type": "messaging"},
    }
    for section, options in values.items():
        if not conf.has_section(section):
            conf.add_section(section)
        for key, value in options.items():
            conf.set(section, key, value)
    with open(conf_path, "w") as handle:
        conf.write(handle)


def totals(output: str) -> dict[str, int]:
    """Return the counts of tempest's closing ``Totals`` block (Passed, Skipped, Failed, ...)."""
    return {name: int(count) for name, count in re.findall(r"^ - ([A-Za-z ]+): (\d+)$", output, re.M)}


def run_tempest(venv: Path, workspace: Path, concurrency: int, env: dict[str, str],
                only: str | None) -> tuple[int, str]:
    """Run the v2 tests (those matching ``only`` too) in the workspace; return tempest's status and output."""
    regex = TEST_REGEX + (f".*(?:{only})" if only else "")
    command = [str(venv / "bin" / "tempest"), "run", "--regex", regex, "--concurrency", str(concurrency)]
    result = subprocess.run(command, cwd=workspace, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return result.returncode, result.stdout


def failing_ids(venv: Path, workspace: Path, env: dict[str, str]) -> list[str]:
    """Return the ids of the tests the last run failed (without their ``[id-...]`` tags)."""
    result = subprocess.run([str(venv / "bin" / "stestr"), "failing", "--list"], cwd=workspace, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True)
    return sorted({line.split("[")[0].strip() for line in result.stdout.splitlines()
                   if line.startswith("zaqar_tempest_plugin.")})


def main(argv: list[str] | None = None) -> int:
    """Run the suite; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=Path(".venv-tempest"),
                        help="virtualenv holding tempest and zaqar-tempest-plugin (default .venv-tempest)")
    parser.add_argument("--concurrency", type=int, default=2, help="test workers (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace and logs")
    parser.add_argument("--only", metavar="REGEX",
                        help="run only the v2 tests whose id matches (e.g. test_queues); no count check")
    args = parser.parse_args(argv)
    venv = args.venv.resolve()
    if not (venv / "bin" / "tempest").exists():
        print(f"tempest is not installed in {venv}: run `make tempest-venv`", file=sys.stderr)
        return 1

    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="zaqar-lite-tempest-"))
    pool = project_pool(PROJECTS)
    config = tmp / "zaqar-lite.conf"
    write_server_config(config, pool)
    # tempest keeps its workspace registry under $HOME: give it one of its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "ZAQAR_LITE_"))}
    env["HOME"] = str(tmp)
    server = keystone = None
    status = 1
    try:
        server = start_server(f"sqlite:///{tmp / 'zaqar.db'}", tmp, workers=2,
                              extra_args=["--config", str(config), "--with-notifier"], token=pool[0].token)
        keystone = KeystoneStandin(ADMIN, pool, server.url)
        keystone.start()
        workspace = tmp / "workspace"
        subprocess.run([str(venv / "bin" / "tempest"), "init", "--workspace-path",
                        str(tmp / "workspace.yaml"), str(workspace)],
                       env=env, stdin=subprocess.DEVNULL, capture_output=True, check=True)
        write_tempest_config(workspace, keystone.url)
        ready = time.monotonic()
        code, output = run_tempest(venv, workspace, args.concurrency, env, args.only)
        ran = time.monotonic()
        print(f"tempest: setup {ready - started:.1f} s, tests {ran - ready:.1f} s "
              f"(concurrency {args.concurrency})")
        status = report(code, output, failing_ids(venv, workspace, env) if code else [],
                        server_log=server.log_tail(60), count=None if args.only else EXPECTED_TEST_COUNT)
    finally:
        if keystone is not None:
            keystone.stop()
        if server is not None:
            stop_server(server)
        if args.keep:
            print(f"tempest: workspace and logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


def report(code: int, output: str, failed: list[str], server_log: str, count: int | None,
           expected_path: Path = EXPECTED_FAILURES) -> int:
    """Print the summary of a run against the expected failures; return the exit status."""
    counts = totals(output)
    expected = expected_failures(expected_path) if count else {}
    unexpected = [t for t in failed if t not in expected]
    fixed = [t for t in expected if t not in failed]
    ran = sum(counts.get(k, 0) for k in ("Passed", "Failed", "Skipped"))
    print("== zaqar-tempest-plugin v2 API tests ==")
    if code and not failed or ran == 0 or count is not None and ran != count:
        # no per-test failures to show: tempest itself broke (configuration, discovery)
        print(output[-8000:])
        print(f"tempest ran {ran} tests (expected {count}), exit status {code}")
        print("zaqar-lite log (tail):\n" + server_log)
        return 1
    for test_id in failed:
        why = expected.get(test_id)
        print(f"  FAIL {test_id}" + (f"  (expected: {why})" if why else ""))
    for test_id in fixed:
        print(f"  listed as expected to fail but passed: {test_id}")
    if unexpected:
        blocks = re.split(r"\n(?=\{\d+\} |=+\n)", output)
        for block in blocks:
            if any(t in block for t in unexpected) and "Traceback" in block:
                print(block[:4000])
    if expected:
        print(f"tempest: {len(failed) - len(unexpected)} failures listed in {expected_path.name}")
    print(f"tempest: {counts.get('Passed', 0)} passed, {counts.get('Failed', 0)} failed, "
          f"{counts.get('Skipped', 0)} skipped")
    return 1 if unexpected or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
