"""What ``sqs_localstack.py`` and ``sqs_moto.py`` share: run another project's SQS tests against a server.

Each of those two scripts takes a snapshot of a project that tests SQS (a bare git
directory or a checkout), copies its tests out of it, builds a virtualenv of its own
(once, under ``--cache-dir``, keyed by the snapshot's commit) with the packages the
tests need from PyPI, starts the server to judge on a free port of 127.0.0.1 and runs
the tests against it with pytest. The server is either zaqar-lite from a checkout
(``--code``, SQLite in a throwaway directory, ``noauth``, ``[sqs] default_account`` set to
the suite's own default account) or, to check that the script's count can be trusted, a
server that implements SQS fully: LocalStack's own provider (``--against localstack``,
``localstack-core`` run on the host) or moto's ``moto_server`` (``--against moto``).
Nothing leaves the machine while the tests run: every client is pointed at that loopback
URL, and the plugin below resolves only loopback names.

A small pytest plugin written next to the tests records each test's outcome, whether it is
marked ``aws_validated`` (LocalStack's marker for tests recorded against AWS), the crash
line of each failure and the last AWS action the test called with its answer; the script
prints the counts and can save them as JSON (``--json``). ``python
benchmarks/sqs_suites.py report A.json B.json -o FILE.md`` turns saved runs into a
Markdown page of the failures grouped by cause, most frequent first.

This module is a helper of scripts under ``benchmarks/``, not of the package: it imports
nothing from ``zaqar_lite``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "zaqar-lite" / "sqs-suites"
READY_MARK = ".sqs-suites-ready"
START_TIMEOUT = 60.0
HOST = "127.0.0.1"
#: the session (its leader's PID) of each server serving() runs, by URL: for the CPU it uses
SESSIONS: dict[str, int] = {}

PLUGIN = '''
"""Records every test's outcome for the sqs_suites scripts (written by them, loaded with -p)."""
import ipaddress
import json
import os
import socket

import botocore.client

_getaddrinfo = socket.getaddrinfo


def _loopback_only(host, *args, **kwargs):
    """Nothing leaves the machine: names LocalStack's tests build under localhost.localstack.cloud
    resolve to 127.0.0.1 (as that domain does) without asking DNS; any other name, or an address
    outside loopback, is refused."""
    name = host.decode() if isinstance(host, bytes) else host
    if name and name.rstrip(".").endswith("localhost.localstack.cloud"):
        host = "127.0.0.1"
    elif name and name != "localhost":
        try:
            if not ipaddress.ip_address(name.strip("[]")).is_loopback:
                raise socket.gaierror(f"{name}: outside this machine")
        except ValueError:
            raise socket.gaierror(f"{name}: only loopback names resolve in these runs") from None
    return _getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _loopback_only

_VALIDATED = set()
_RESULTS = {}
_LAST = {}
_make_api_call = botocore.client.BaseClient._make_api_call


def _recording_api_call(self, operation_name, api_params):
    """Note the last AWS action a test called and what came back (ok or the error code)."""
    _LAST["op"], _LAST["got"] = operation_name, "?"
    try:
        result = _make_api_call(self, operation_name, api_params)
    except Exception as exc:
        _LAST["got"] = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
        raise
    _LAST["got"] = "ok"
    return result


botocore.client.BaseClient._make_api_call = _recording_api_call


def pytest_runtest_setup(item):
    _LAST.clear()


def _gateway_on_endpoint():
    """LocalStack's tests build some URLs from its gateway's port (4566 unless told): the endpoint's."""
    port = os.environ.get("SQS_SUITES_GATEWAY_PORT")
    if port:
        from localstack import config

        gateway = config.HostAndPort(host="127.0.0.1", port=int(port))
        config.GATEWAY_LISTEN = config.UniqueHostAndPortList([gateway])


def pytest_collection_finish(session):
    _gateway_on_endpoint()
    for item in session.items:
        if item.get_closest_marker("aws_validated") is not None:
            _VALIDATED.add(item.nodeid)
        _RESULTS[item.nodeid] = {"outcome": "not run", "message": "", "detail": ""}


def _crash(report):
    longrepr = report.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        message = crash.message
    elif isinstance(longrepr, tuple):
        message = str(longrepr[-1])
    else:
        message = str(longrepr)
    return message, str(longrepr)[-4000:]


def pytest_runtest_logreport(report):
    entry = _RESULTS.setdefault(report.nodeid, {"outcome": "not run", "message": "", "detail": ""})
    if report.when == "call" and report.passed and entry["outcome"] == "not run":
        entry["outcome"] = "passed"
    elif report.skipped and entry["outcome"] in ("not run", "passed"):
        entry["outcome"] = "skipped"
        entry["message"] = _crash(report)[0]
    elif report.failed and entry["outcome"] not in ("failed", "error"):
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["message"], entry["detail"] = _crash(report)
        entry["phase"] = report.when
        entry["op"], entry["got"] = _LAST.get("op", "?"), _LAST.get("got", "?")


def pytest_sessionfinish(session, exitstatus):
    path = os.environ["SQS_SUITES_RESULTS"]
    with open(path, "w") as out:
        json.dump({"results": _RESULTS, "validated": sorted(_VALIDATED)}, out)
'''


def log(message: str) -> None:
    """Progress on stderr, so that stdout keeps only the counts."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


# -- the snapshot --------------------------------------------------------------------------------


def is_bare_git(path: Path) -> bool:
    """A git directory without a work tree (``HEAD`` and ``objects`` at its top)."""
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def snapshot_commit(path: Path) -> str:
    """The commit of a bare git directory or of a checkout (``unknown`` if it is neither)."""
    git_dir = ["--git-dir", str(path)] if is_bare_git(path) else ["-C", str(path)]
    done = subprocess.run(["git", *git_dir, "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def _tree(git_dir: Path, paths: Sequence[str]) -> list[tuple[str, str, str]]:
    """(mode, blob, path) of each file of HEAD under ``paths``."""
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "HEAD", "--", *paths],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    entries = [line.split(None, 3) for line in listing.split("\0") if line]
    return [(mode, sha, name) for mode, kind, sha, name in entries if kind == "blob"]


def extract(snapshot: Path, paths: Sequence[str], target: Path) -> list[str]:
    """Copy ``paths`` of the snapshot's HEAD (or of a checkout's files) into ``target``.

    A bare snapshot may list files whose contents it does not hold (its largest ones):
    those are left out of the copy and returned.
    """
    target.mkdir(parents=True, exist_ok=True)
    if not is_bare_git(snapshot):
        for rel in paths:
            source = snapshot / rel
            if source.is_dir():
                shutil.copytree(source, target / rel, dirs_exist_ok=True, symlinks=True)
            elif source.exists():
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / rel)
        return []
    missing = []
    with subprocess.Popen(
        ["git", "--git-dir", str(snapshot), "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as batch:
        assert batch.stdin is not None and batch.stdout is not None
        for mode, sha, name in _tree(snapshot, paths):
            batch.stdin.write(f"{sha}\n".encode())
            batch.stdin.flush()
            header = batch.stdout.readline().decode().split()
            if header[-1] == "missing":
                missing.append(name)
                continue
            data = batch.stdout.read(int(header[2]))
            batch.stdout.read(1)  # the newline after the contents
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if mode == "120000":
                path.unlink(missing_ok=True)
                path.symlink_to(data.decode())
            else:
                path.write_bytes(data)
                path.chmod(0o755 if mode == "100755" else 0o644)
        batch.stdin.close()
    return missing


def fill_from_wheel(package: str, names: Sequence[str], target: Path, workdir: Path) -> None:
    """Fill files a snapshot left out with the same files of ``package``'s newest wheel on PyPI."""
    if not names:
        return
    download = workdir / "wheel"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--only-binary",
            ":all:",
            "-d",
            str(download),
            package,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wheel = next(download.glob("*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        for name in names:
            log(f"{name} is not in the snapshot: taken from {wheel.name}")
            (target / name).write_bytes(archive.read(name))


# -- virtualenvs ---------------------------------------------------------------------------------


def _runs(python: str) -> bool:
    """Does this interpreter start (a pyenv shim of a version not selected does not)?"""
    return subprocess.run([python, "-c", "pass"], capture_output=True).returncode == 0


def find_python(versions: Sequence[str]) -> str:
    """The first interpreter found of ``versions`` (``3.13``, ...) on PATH or under pyenv; else ours."""
    pyenv = (
        subprocess.run(["pyenv", "root"], capture_output=True, text=True) if shutil.which("pyenv") else None
    )
    roots = [Path(pyenv.stdout.strip(), "versions")] if pyenv and pyenv.returncode == 0 else []
    for version in versions:
        candidates = [shutil.which(f"python{version}") or ""]
        candidates += [
            str(p) for root in roots for p in sorted(root.glob(f"{version}.*/bin/python{version}"))
        ]
        for candidate in candidates:
            if candidate and _runs(candidate):
                return candidate
    return sys.executable


def pip(venv: Path, args: Sequence[str], workdir: Path) -> None:
    """Run pip of ``venv``; its output goes to ``workdir/pip.log``, shown if it fails."""
    workdir.mkdir(parents=True, exist_ok=True)
    pip_log = workdir / "pip.log"
    with pip_log.open("a") as out:
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if done.returncode:
        raise SystemExit(f"pip {' '.join(args)} failed:\n{pip_log.read_text()[-3000:]}")


def ensure_venv(
    cache: Path, name: str, python: str, requirements: Sequence[str], key: str, editable: str | None = None
) -> Path:
    """A virtualenv of its own under ``cache`` with ``requirements`` installed, built once per ``key``.

    Two runs that need the same one at once build it once: the second waits on a lock file.
    """
    digest = hashlib.sha256(json.dumps([python, list(requirements), key]).encode()).hexdigest()[:12]
    venv = cache / f"{name}-{digest}"
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / READY_MARK).exists():
            return venv
        log(f"building {venv} (once; a few minutes)")
        subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True)
        pip(venv, ["install", "--upgrade", "pip"], venv)
        extra = ["-e", editable] if editable else []
        pip(venv, ["install", *requirements, *extra], venv)
        (venv / READY_MARK).write_text(key)
    return venv


# -- the server ----------------------------------------------------------------------------------


def _answers(url: str) -> bool:
    """Does anything answer HTTP at ``url`` (any status)?"""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


@contextlib.contextmanager
def serving(
    argv: Sequence[str], workdir: Path, probe: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[str]:
    """Run a server command (``{port}`` in it and in ``env`` is a free port) and yield its base URL.

    The server leads a session of its own and is stopped, its whole process group, on
    the way out; its output goes to ``workdir/server.log``.
    """
    port = free_port()
    url = f"http://{HOST}:{port}"
    workdir.mkdir(parents=True, exist_ok=True)
    server_log = workdir / "server.log"
    extra = {name: value.replace("{port}", str(port)) for name, value in (env or {}).items()}
    environment = dict(os.environ, XDG_RUNTIME_DIR=str(workdir), **extra)
    with server_log.open("wb") as out:
        proc = subprocess.Popen(
            [part.replace("{port}", str(port)) for part in argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=cwd,
            start_new_session=True,
        )
    SESSIONS[url] = proc.pid
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(url + probe):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{argv[0]} did not start:\n{server_log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def zaqar_lite_server(
    code: Path, python: str, workdir: Path, workers: int, account: str | None = None
) -> contextlib.AbstractContextManager[str]:
    """zaqar-lite of the checkout ``code`` on SQLite in ``workdir``, ``noauth``, on a free port.

    ``account`` is the SQS account of access keys that name none (``[sqs] default_account``), set
    where the checkout has that setting: the suite's own default account, as its reference server has.
    """
    database = workdir / "zaqar.db"
    argv = [
        python,
        "-m",
        "zaqar_lite",
        "serve",
        "--storage",
        f"sqlite:///{database}",
        "--workers",
        str(workers),
        "--bind",
        f"{HOST}:{{port}}",
    ]
    env = {"PYTHONPATH": str(code), "ZAQAR_LITE_AUTH_STRATEGY": "noauth"}
    config = code / "zaqar_lite" / "config"
    if account and any("default_account" in f.read_text() for f in config.glob("*.py")):
        env["ZAQAR_LITE_SQS_DEFAULT_ACCOUNT"] = account
    return serving(argv, workdir / "zaqar-lite", "/v2/ping", env=env, cwd=code)


#: LocalStack's runtime with its SQS provider, on the host (not in Docker): the gateway's certificate code
#: needs the pyOpenSSL API before 25 (and a cryptography that one builds on); cbor2 6 moved a module
#: it imports
LOCALSTACK_RUNTIME = [
    "localstack-core[base-runtime]",
    "moto-ext[server]",
    "cbor2<6",
    "jinja2",
    "pyopenssl<25",
    "cryptography<45",
    "service_identity",
]


@contextlib.contextmanager
def localstack_server(venv: Path, workdir: Path) -> Iterator[str]:
    """LocalStack's runtime with only SQS, in a process on a free port; queue URLs name that port.

    No DNS server, no events sent out, no certificate downloaded, nothing persisted.
    """
    env = {
        "GATEWAY_LISTEN": f"{HOST}:{{port}}",
        # queue URLs as LocalStack builds them by default, on this port (their host is never looked up
        # by the benchmark; the suites' runs resolve it to 127.0.0.1 without DNS)
        "LOCALSTACK_HOST": "localhost.localstack.cloud:{port}",
        "SERVICES": "sqs",
        "DNS_ADDRESS": "0",
        "DISABLE_EVENTS": "1",
        "SKIP_SSL_CERT_DOWNLOAD": "1",
        "LOCALSTACK_VOLUME_DIR": str(workdir / "ls-volume"),
        "FILESYSTEM_ROOT": str(workdir / "ls-fs"),
        "PERSISTENCE": "0",
        "LS_LOG": "warning",
    }
    argv = [str(venv / "bin" / "python"), "-m", "localstack.runtime.main"]
    with serving(argv, workdir / "localstack-server", "/_localstack/health", env=env, cwd=workdir) as url:
        yield url


def moto_server(venv: Path, workdir: Path) -> contextlib.AbstractContextManager[str]:
    """moto's own server (every service, SQS among them) from ``venv`` on a free port."""
    argv = [str(venv / "bin" / "python"), "-m", "moto.server", "-H", HOST, "-p", "{port}"]
    return serving(argv, workdir / "moto-server", "/moto-api/", env={"MOTO_PORT": "{port}"})


def judged_server(args: argparse.Namespace, venv: Path, work: Path) -> contextlib.AbstractContextManager[str]:
    """The server ``--against`` names: zaqar-lite of ``--code``, or moto_server of ``venv``, or LocalStack.

    LocalStack's runtime comes from a virtualenv of its own (built once, shared with sqs_compare.py).
    """
    if args.against == "moto":
        return moto_server(venv, work)
    if args.against == "localstack":
        runtime = ensure_venv(
            args.cache_dir,
            "bench-localstack",
            find_python(["3.13", "3.12", "3.11"]),
            LOCALSTACK_RUNTIME,
            "bench",
        )
        return localstack_server(runtime, work)
    return zaqar_lite_server(args.code.resolve(), args.python, work, args.workers, args.account)


# -- running and counting ------------------------------------------------------------------------


@dataclass
class Run:
    """The outcome of one run of a suite against one server."""

    suite: str
    target: str
    snapshot_commit: str
    code_commit: str
    seconds: float
    results: dict[str, dict[str, str]]
    validated: list[str] = field(default_factory=list)

    def count(self, nodeids: Sequence[str] | None = None) -> dict[str, int]:
        """Outcomes counted over ``nodeids`` (every test when ``None``)."""
        chosen = (
            self.results if nodeids is None else {n: self.results[n] for n in nodeids if n in self.results}
        )
        counts = collections.Counter(entry["outcome"] for entry in chosen.values())
        return {
            "total": len(chosen),
            **{k: counts.get(k, 0) for k in ("passed", "failed", "error", "skipped")},
        }

    def functions(self, nodeids: Sequence[str]) -> tuple[int, int]:
        """(test functions all of whose parametrized cases passed, test functions) among ``nodeids``."""
        cases: dict[str, list[str]] = collections.defaultdict(list)
        for nodeid in nodeids:
            cases[nodeid.split("[", 1)[0]].append(self.results.get(nodeid, {}).get("outcome", "not run"))
        return sum(all(o == "passed" for o in outcomes) for outcomes in cases.values()), len(cases)

    def to_json(self) -> dict[str, Any]:
        """Everything, for ``--json`` and for ``report``."""
        return self.__dict__.copy()


def run_pytest(
    venv: Path,
    rootdir: Path,
    targets: Sequence[str],
    env: dict[str, str],
    workdir: Path,
    extra: Sequence[str],
    timeout: int,
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Run pytest of ``venv`` in ``rootdir`` with the recording plugin; return results and validated ids."""
    plugin_dir = workdir / "plugin"
    plugin_dir.mkdir(parents=True, exist_ok=True)
    (plugin_dir / "sqs_suites_plugin.py").write_text(PLUGIN)
    results_file = workdir / "results.json"
    environment = dict(
        os.environ,
        **env,
        SQS_SUITES_RESULTS=str(results_file),
        PYTHONPATH=os.pathsep.join([str(plugin_dir), str(rootdir)]),
    )
    for name in ("VIRTUAL_ENV", "PYTHONHOME"):
        environment.pop(name, None)
    command = [
        str(venv / "bin" / "python"),
        "-m",
        "pytest",
        "-p",
        "sqs_suites_plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rN",
        "--tb=short",
        f"--timeout={timeout}",
        *extra,
        *targets,
    ]
    log(f"running {' '.join(command[3:])} in {rootdir}")
    with (workdir / "pytest.log").open("wb") as out:
        subprocess.run(command, cwd=rootdir, env=environment, stdout=out, stderr=subprocess.STDOUT)
    if not results_file.exists():
        raise SystemExit(f"pytest wrote no results:\n{(workdir / 'pytest.log').read_text()[-3000:]}")
    data = json.loads(results_file.read_text())
    return data["results"], data["validated"]


def code_commit(code: Path) -> str:
    """The commit of the zaqar-lite checkout, with ``+changes`` when its work tree differs from it."""
    head = snapshot_commit(code)
    dirty = subprocess.run(
        ["git", "-C", str(code), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return head + ("+changes" if dirty else "")


def common_arguments(parser: argparse.ArgumentParser, account: str) -> None:
    """The options both suite scripts take; ``account`` is the suite's default account id."""
    parser.add_argument("snapshot", type=Path, help="the suite's project: a bare git directory or a checkout")
    parser.add_argument(
        "--against",
        choices=("zaqar-lite", "localstack", "moto"),
        default="zaqar-lite",
        help="the server to judge: zaqar-lite from --code, or LocalStack or moto_server to check the count",
    )
    parser.add_argument("--code", type=Path, default=REPO, help="the zaqar-lite checkout to serve (this one)")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter that has zaqar-lite's dependencies (this one)",
    )
    parser.add_argument("--workers", type=int, default=2, help="zaqar-lite's gunicorn workers")
    parser.add_argument(
        "--account", default=account, help=f"zaqar-lite's [sqs] default_account (the suite's: {account})"
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=DEFAULT_CACHE, help="where the virtualenvs are kept"
    )
    parser.add_argument("--workdir", type=Path, help="keep the copy, logs and results here (a temp dir)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds one test may take")
    parser.add_argument("-k", dest="keyword", help="pytest -k: run only the matching tests")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--failures", type=int, default=15, help="print this many failure causes")


@contextlib.contextmanager
def working_directory(args: argparse.Namespace) -> Iterator[Path]:
    """``--workdir``, or a temporary directory removed afterwards."""
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        yield args.workdir.resolve()
    else:
        with tempfile.TemporaryDirectory(prefix="sqs-suites-") as tmp:
            yield Path(tmp)


def finish(run: Run, args: argparse.Namespace, lines: Sequence[str]) -> None:
    """Print the counts and the most frequent failure causes; save the JSON if asked."""
    served = {"zaqar-lite": run.code_commit, "moto": "moto_server"}.get(run.target, "its runtime on the host")
    print(f"{run.suite} against {run.target} ({served}), snapshot {run.snapshot_commit[:12]},", end=" ")
    print(f"{run.seconds:.0f} s")
    for line in lines:
        print(line)
    if args.failures:
        for count, cause, _ in failure_groups(run)[: args.failures]:
            print(f"  {count:4d}  {cause}")
    if args.json:
        args.json.write_text(json.dumps(run.to_json(), indent=1))


# -- failure causes ------------------------------------------------------------------------------

CLIENT_ERROR = re.compile(
    r"An error occurred \((?P<code>[^)]*)\) when calling the (?P<op>\w+) operation"
    r"(?: \(reached max retries: \d+\))?: ?(?P<text>.*)"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
DIFF_LINE = re.compile(r"^\s*\([+~-]\)")
NOISE = re.compile(r"[0-9a-f]{8}-[0-9a-f-]{27}|\b\d{3,}\b|'[^']{40,}'|https?://[^\s'\"]+|[0-9a-f]{32}")


def _normalise(text: str, width: int = 110) -> str:
    """A line with its ids, numbers, URLs and long strings blanked, so that like failures group."""
    return NOISE.sub("…", " ".join(text.split()))[:width]


def cause(entry: dict[str, str]) -> tuple[str, str]:
    """(the failure's cause, one line of it): the last action the test called, what was expected, what came.

    ``op``/``got`` are the last AWS action the test called before it failed and its answer
    (``ok`` or the error code), as the plugin recorded them.
    """
    message = ANSI.sub("", entry.get("message", ""))
    op, got = entry.get("op", "?"), entry.get("got", "?")
    lines = [line for line in message.strip().splitlines() if line.strip()] or ["(no message)"]
    match = CLIENT_ERROR.search(message)
    if match:
        return (
            f"{match['op']}: expected success, got {match['code']}: {_normalise(match['text'], 70)}",
            match.group(0)[:200],
        )
    if lines[0].startswith(">> match key"):
        diff = [line.strip() for line in lines if DIFF_LINE.match(line)]
        first = _normalise(diff[0], 90) if diff else "(no diff)"
        return f"{op} (answered {got}): snapshot differs: {first}", "; ".join(diff[:3])[:240]
    if "DID NOT RAISE" in lines[0]:
        return f"{op}: expected an error, got success", lines[0][:200]
    return f"{op} (answered {got}): {_normalise(lines[0])}", lines[0][:240]


def failure_groups(run: Run) -> list[tuple[int, str, list[tuple[str, str]]]]:
    """Failures and errors grouped by cause, most frequent first: (count, cause, [(test, excerpt)])."""
    groups: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for nodeid, entry in run.results.items():
        if entry["outcome"] in ("failed", "error"):
            key, excerpt = cause(entry)
            groups[key].append((nodeid, excerpt))
    return sorted(((len(v), k, v) for k, v in groups.items()), key=lambda item: (-item[0], item[1]))


def markdown(runs: Sequence[Run], title: str, references: Sequence[Run] = ()) -> str:
    """The failures page: the commits, the counts, then each suite's failures grouped by cause.

    A test that fails (or errs) against a reference server too (a run of the same suite with
    ``--against localstack`` or ``moto``) is marked so: the suite cannot pass it on any server
    run apart, as the scripts run them.
    """
    also: dict[str, str] = {}
    for ref in references:
        also.update({n: ref.target for n, e in ref.results.items() if e["outcome"] in ("failed", "error")})
    out = [f"# {title}", "", f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", ""]
    for run in runs:
        out.append(
            f"- **{run.suite}** against {run.target} {run.code_commit} (snapshot {run.snapshot_commit[:12]},"
            f" {run.seconds:.0f} s): {summary(run)}"
        )
    for run in runs:
        out += ["", f"## {run.suite}: failures by cause, most frequent first", ""]
        for count, key, tests in failure_groups(run):
            out.append(f"### {count} × {key}")
            out.append("")
            for nodeid, excerpt in tests[:6]:
                mark = f" (fails against {also[nodeid]} too)" if nodeid in also else ""
                out.append(f"- `{nodeid.rsplit('::', 1)[-1]}`{mark}: `{excerpt.replace('`', chr(39))}`")
            if len(tests) > 6:
                out.append(
                    f"- … and {len(tests) - 6} more: "
                    + ", ".join(
                        f"`{n.rsplit('::', 1)[-1]}`"
                        + (f" (fails against {also[n]} too)" if n in also else "")
                        for n, _ in tests[6:20]
                    )
                )
            out.append("")
    return "\n".join(out) + "\n"


def summary(run: Run) -> str:
    """One line of counts: validated (LocalStack) and all."""
    every = run.count()
    passing, functions = run.functions(list(run.results))
    text = (
        f"{every['passed']} of {every['total']} tests pass ({every['failed']} fail, {every['error']} errors,"
        f" {every['skipped']} skipped; {passing} of {functions} test functions pass in every case)"
    )
    if run.validated:
        validated = run.count(run.validated)
        good, functions = run.functions(run.validated)
        text = (
            f"aws.validated: {validated['passed']} of {validated['total']} tests pass, {good} of {functions}"
            f" test functions pass in every case; all: "
        ) + text
    return text


def write_atomically(path: Path, text: str) -> None:
    """Write a temp file next to ``path`` and rename it over ``path``."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
        out.write(text)
    os.replace(out.name, path)


def load_run(path: Path) -> Run:
    """A run saved with ``--json``."""
    return Run(**json.loads(path.read_text()))


def main(argv: list[str] | None = None) -> None:
    """``report RUN.json... [-o FILE.md] [--title T] [--reference REF.json]``: the failures page."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="the failures, grouped by cause, of runs saved with --json")
    report.add_argument("runs", type=Path, nargs="+")
    report.add_argument("-o", "--output", type=Path, help="write the page here atomically (else stdout)")
    report.add_argument("--title", default="SQS suites against zaqar-lite")
    report.add_argument(
        "--reference",
        type=Path,
        action="append",
        default=[],
        help="a run against LocalStack or moto_server (--json): mark the tests that fail there too",
    )
    args = parser.parse_args(argv)
    page = markdown([load_run(path) for path in args.runs], args.title, [load_run(p) for p in args.reference])
    if args.output:
        write_atomically(args.output, page)
    else:
        print(page, end="")


if __name__ == "__main__":
    main()
