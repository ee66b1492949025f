"""The README's quick start as a newcomer runs it: `make serve` in a fresh checkout, curl, Ctrl-C.

``make quickstart`` runs this (and ``make test`` runs that, beside lint). It
copies this checkout's files (those git tracks, with their changes, and new
ones it does not ignore) into a temporary directory, so the copy has no
virtual environment: ``make serve`` there builds one as it would for anyone,
with the base install only (no extra), from the locks. A base dependency
missing from setup.cfg then stops the server, and this check fails.

The server listens on a free loopback port and keeps its SQLite file in the
temporary directory (``ZAQAR_LITE_SERVER_BIND`` and ``ZAQAR_LITE_STORAGE_URI``;
nothing else differs from ``make serve``). The check pings it, posts a
message, claims it and deletes it over HTTP as the README's curl section does,
asks ``zaqar-lite dlq-report --help`` (which needs no extra) and the report
itself (which names the spark extra), then stops everything with SIGINT to
``make``'s process group, as a terminal's Ctrl-C does, and requires a stop
within seconds without a traceback. The temporary directory is removed at the
end, whatever the outcome.

Usage: python3 tests/quickstart.py [--keep]   (run from anywhere; stdlib only)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
#: seconds for `make serve` to build its virtual environment and answer: minutes on a busy machine
START_TIMEOUT = 600.0
#: seconds for everything to stop after Ctrl-C
STOP_TIMEOUT = 20.0
PORT_ATTEMPTS = 3


class QuickStartFailed(Exception):
    """A step of the quick start did not go as the README says."""


def free_port() -> int:
    """Return a TCP port on loopback that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def copy_checkout(destination: Path) -> None:
    """Copy the files of this checkout that git tracks or would track (no venv, no build output)."""
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise QuickStartFailed(f"cannot list the checkout's files with git: {exc}") from None
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the work tree is left out
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def newcomer_environment(port: int, data: Path) -> dict[str, str]:
    """Return the environment of a newcomer's shell: no zaqar-lite settings but the port and the file."""
    inherited = ("ZAQAR_LITE_", "VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    env["ZAQAR_LITE_SERVER_BIND"] = f"{HOST}:{port}"
    env["ZAQAR_LITE_STORAGE_URI"] = f"sqlite:///{data / 'zaqar.db'}"
    return env


class Api:
    """Requests to the server with the README's two headers (``zq`` there)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://{HOST}:{port}"
        self.headers = {"Client-ID": str(uuid.uuid4()), "X-Project-ID": "demo",
                        "Content-Type": "application/json"}
        # loopback only, whatever proxies the environment names
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(self, method: str, path: str, body: Any = None, timeout: float = 10) -> tuple[int, Any]:
        """Return the status and the decoded JSON answer (None when empty)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=self.headers)
        try:
            with self.opener.open(request, timeout=timeout) as answer:
                status, text = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read()
        return status, json.loads(text) if text else None


def expect(condition: bool, what: str) -> None:
    """Fail the quick start saying ``what`` was expected, unless it holds."""
    if not condition:
        raise QuickStartFailed(what)


class Serving:
    """``make serve`` in the copy, in a process group of its own, its output in a log file."""

    def __init__(self, checkout: Path, port: int, log_path: Path) -> None:
        self.port = port
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(["make", "serve"], cwd=checkout, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                            env=newcomer_environment(port, checkout.parent))

    def log(self) -> str:
        """Return what ``make serve`` has written so far."""
        return self.log_path.read_text(errors="replace")

    def wait_until_it_answers(self, api: Api) -> None:
        """Wait until ``/v2/ping`` answers 204 from our own server, or fail if ``make serve`` ends first."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise QuickStartFailed(f"make serve exited with {self.process.returncode} before answering")
            # another program could have taken the port meanwhile: only our server's line proves it is ours
            if f"Listening at: http://{HOST}:{self.port} " in self.log():
                with contextlib.suppress(OSError):
                    if api.call("GET", "/v2/ping", timeout=2)[0] == 204:
                        return
            time.sleep(0.2)
        raise QuickStartFailed(f"no answer to /v2/ping within {START_TIMEOUT:.0f} s")

    def lost_the_port(self) -> bool:
        """Return whether the server could not listen because another program took its port."""
        return "is already in use" in self.log() or "Connection in use" in self.log()

    def interrupt(self) -> int:
        """Press Ctrl-C: SIGINT to make, the gunicorn master and its workers; return make's status."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(STOP_TIMEOUT)
        finally:
            self.kill()

    def kill(self) -> None:
        """Kill whatever is left of the process group (nothing, after a clean stop)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)


def check_the_curl_steps(api: Api) -> None:
    """Ping, post a message, claim it and delete it, as the README's curl section does."""
    status, _ = api.call("GET", "/v2/ping")
    expect(status == 204, f"GET /v2/ping answers 204, got {status}")
    status, posted = api.call("POST", "/v2/queues/orders/messages",
                              {"messages": [{"body": {"order": 1}, "ttl": 600}]})
    expect(status == 201 and len(posted["resources"]) == 1, f"a post answers 201 and one href, got {status}")
    status, claimed = api.call("POST", "/v2/queues/orders/claims?limit=1", {"ttl": 60, "grace": 60})
    expect(status == 201, f"a claim answers 201, got {status}")
    (message,) = claimed["messages"]
    expect(message["body"] == {"order": 1}, f"the claim hands out the message posted, got {message}")
    expect(message["href"].split("?")[0] == posted["resources"][0], "the claimed message is the one posted")
    status, _ = api.call("DELETE", message["href"])
    expect(status == 204, f"deleting the claimed message with its claim id answers 204, got {status}")
    status, _ = api.call("POST", "/v2/queues/orders/claims?limit=1", {"ttl": 60, "grace": 60})
    expect(status == 204, f"after the delete nothing is left to claim (204), got {status}")


def check_the_report_without_its_extra(venv: Path, directory: Path) -> None:
    """``dlq-report --help`` answers in the base install; the report itself names the spark extra."""
    command = [str(venv / "bin" / "zaqar-lite"), "dlq-report"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZAQAR_LITE_")}
    shown = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=60, cwd=directory,
                           env=env)
    expect(shown.returncode == 0 and shown.stdout.startswith("usage: zaqar-lite dlq-report "),
           f"dlq-report --help answers without the spark extra, got {shown.returncode}: {shown.stderr}")
    run = subprocess.run([*command, "--storage", f"sqlite:///{directory / 'zaqar.db'}"], capture_output=True,
                         text=True, timeout=60, cwd=directory, env=env)
    expect(run.returncode == 1 and run.stderr.startswith(
        "Error: the DLQ report needs PySpark: pip install 'zaqar-lite[spark]' (")
        and "Traceback" not in run.stderr, f"the report without its extra names it, got {run.stderr!r}")


def check_the_stop(serving: Serving, status: int) -> None:
    """Ctrl-C stopped make, the master and each worker, at once and without a traceback."""
    log = serving.log()
    # make passes Ctrl-C on: it dies of SIGINT itself (a shell says 130) once the server has stopped
    expect(status in (0, 130, -signal.SIGINT), f"make serve ends with 0 or SIGINT after Ctrl-C, got {status}")
    expect("Traceback" not in log, "no traceback in the server's output")
    expect("Shutting down: Master" in log, "the gunicorn master says it stopped")
    booted = log.count("Booting worker with pid")
    expect(booted >= 1 and log.count("Worker exiting") == booted, "each worker stopped (none was killed)")


def run_quick_start(directory: Path, step: Callable[[str], None]) -> None:
    """Run every step in ``directory``; raise QuickStartFailed (with the server's log) on the first miss."""
    checkout = directory / "zaqar-lite"
    copy_checkout(checkout)
    step(f"copied the checkout to {checkout}")
    for attempt in range(PORT_ATTEMPTS):
        port = free_port()
        serving = Serving(checkout, port, directory / f"make-serve-{attempt}.log")
        started = time.monotonic()
        try:
            try:
                serving.wait_until_it_answers(Api(port))
            except QuickStartFailed:
                if serving.lost_the_port() and attempt < PORT_ATTEMPTS - 1:
                    continue
                raise
            step(f"make serve answered /v2/ping on port {port} after {time.monotonic() - started:.1f} s")
            check_the_curl_steps(Api(port))
            step("ping, post, claim and delete answered as the README says")
            check_the_report_without_its_extra(checkout / ".venv", directory)
            step("dlq-report --help answered without the spark extra; the report named the extra")
            stopping = time.monotonic()
            status = serving.interrupt()
            check_the_stop(serving, status)
            step(f"Ctrl-C stopped make serve in {time.monotonic() - stopping:.1f} s, without a traceback")
            return
        except (QuickStartFailed, OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
            serving.kill()
            tail = "\n".join(serving.log().splitlines()[-60:])
            raise QuickStartFailed(f"{exc}\n--- make serve's output (last lines) ---\n{tail}") from None
        finally:
            serving.kill()


@contextlib.contextmanager
def scratch_directory(keep: bool) -> Iterator[Path]:
    """A temporary directory, removed at the end unless ``keep``."""
    path = Path(tempfile.mkdtemp(prefix="zaqar-lite-quickstart-"))
    try:
        yield path
    finally:
        if keep:
            print(f"quickstart: kept {path}", flush=True)
        else:
            shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Run the quick start; return 0 when every step went as the README says, else 1."""
    started = time.monotonic()
    with scratch_directory("--keep" in argv) as directory:
        try:
            run_quick_start(directory, lambda text: print(f"quickstart: {text}", flush=True))
        except QuickStartFailed as exc:
            print(f"quickstart: FAILED: {exc}", file=sys.stderr, flush=True)
            print("quickstart: 0 passed, 1 failed", flush=True)
            return 1
    print(f"quickstart: the README's quick start works from a fresh checkout "
          f"({time.monotonic() - started:.0f} s)", flush=True)
    print("quickstart: 1 passed, 0 failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
