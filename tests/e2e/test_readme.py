"""The README runs: its curl and Python examples, in order, against a real server, give the answers it shows.

The server is the quick start's: ``zaqar-lite serve`` (gunicorn, two gevent
workers) on a SQLite file, on a free loopback port. Each ``$`` command runs in
bash after the README's own set-up block (``ZAQAR``, ``CID``, ``zq``), with
``ZAQAR`` pointing at that server; ``MSG`` and ``CLAIM`` are taken from the
last claim's answer, as the README tells its reader to. Each answer's status
and shape are compared with what the README shows after the command
(``tests/e2e/readme_examples.py`` says how); a command shown without an answer
must succeed (2xx). The Python examples run in one namespace, in order, and
must print what the README shows they print (or nothing).

Not executed, each for the reason in :data:`NOT_EXECUTED`: the examples below,
and the blocks written without ``$`` prompts, which start processes of their
own rather than call the API (``make serve``, ``zaqar-lite serve
--with-notifier``, ``zaqar-lite dlq-generate`` / ``dlq-report``,
``spark-submit``, a mail server's settings).
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import readme_examples as readme
from tests.e2e.harness import SQLITE, RunningServer, start_server, stop_server

pytestmark = [pytest.mark.slow, pytest.mark.store_independent]

#: examples the test does not run, by their first line, and why
NOT_EXECUTED = {
    ".venv/bin/zaqar-lite serve --storage redis://":
        "needs a virtual environment without the redis extra (tests/test_extras.py checks the refusal)",
    ".venv/bin/zaqar-lite serve --config my.conf":
        "shows my.conf's mistake, not its text, and a server already on 127.0.0.1:8888 "
        "(tests/test_config_file.py and tests/e2e/test_server_process.py check these refusals)",
    "zq -X PUT $ZAQAR/v2/pools/east":
        "needs [pools] enabled and Redis stores at the addresses shown (tests/e2e/test_pools.py)",
    "zq -X POST $ZAQAR/v2/queues/payments-dlq/redrive -d '{\"async\": true":
        "its progress figures need a DLQ of hundreds of dead letters moving for seconds "
        "(tests/e2e/test_redrive_tasks.py)",
    "share = queue.signed_url(":
        "needs [signed_urls] secret_key, which the quick start's server has not "
        "(tests/e2e/test_signed_urls.py runs the same client calls)",
}
#: the address the README's examples name, replaced by the test server's
README_ADDRESS = "http://127.0.0.1:8888"
#: seconds a GET may be repeated until it shows what the README shows (the sweeper runs every second)
SETTLE = 15.0
#: curl's own configuration file: every curl of the examples also writes its status on stderr
CURLRC = '-w "%{stderr}status %{http_code}\\n"\n'


def not_executed(example: readme.Example) -> str | None:
    """Return why an example is not run, or None."""
    return next((why for start, why in NOT_EXECUTED.items() if example.first_line.startswith(start)), None)


@pytest.fixture(scope="module")
def quick_start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The quick start's server: the real gunicorn on SQLite, on a free loopback port, admin routes on."""
    directory = tmp_path_factory.mktemp("readme")
    # as the README asks before its queue templates: the admin routes on, for a trusted noauth server
    config = directory / "zaqar-lite.conf"
    config.write_text("[auth]\nnoauth_admin_routes = true\n")
    server = start_server(SQLITE.uri(directory), directory, extra_args=["--config", str(config)])
    try:
        yield server
    finally:
        stop_server(server)


class Shell:
    """Runs the README's ``$`` commands as its reader would, after its set-up block."""

    def __init__(self, url: str, directory: Path) -> None:
        self.url = url
        self.directory = directory
        self.setup = readme.setup_script(readme.README.read_text())
        self.variables = {"CID": str(uuid.uuid4()), "MSG": "", "CLAIM": ""}
        (directory / ".curlrc").write_text(CURLRC)

    def run(self, command: str) -> tuple[int | None, str]:
        """Run one command; return the HTTP status curl reported last (None if none) and its output."""
        assigned = "\n".join(f"{name}={value}" for name, value in self.variables.items())
        script = f"{self.setup}\nZAQAR={self.url}\n{assigned}\n{command}\n"
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.directory),
               "CURL_HOME": str(self.directory), "NO_PROXY": "127.0.0.1,localhost",
               "no_proxy": "127.0.0.1,localhost"}
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                              cwd=self.directory, env=env)
        statuses = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("status ")]
        return (int(statuses[-1]) if statuses else None), done.stdout

    def remember_claim(self, answer: Any) -> None:
        """Set MSG and CLAIM from a claim's answer, as the README tells its reader to."""
        messages = answer.get("messages") if isinstance(answer, dict) else None
        if isinstance(messages, list) and messages and "claim_id" in messages[0]:
            self.variables["MSG"] = messages[0]["id"]
            self.variables["CLAIM"] = messages[0]["claim_id"]


def _parsed(output: str) -> Any:
    try:
        return json.loads(output)
    except ValueError:
        return None


def _head_differences(shown: tuple[str, ...], output: str) -> list[str]:
    """Compare an ``HTTP/1.1 ...`` status line and header lines shown with curl -i's output."""
    head = output.replace("\r\n", "\n").split("\n\n", 1)[0].splitlines()
    problems = []
    if not head or head[0].split()[1:] != shown[0].split()[1:]:
        problems.append(f"status line: README shows {shown[0]!r}, got {head[0] if head else output!r}")
    headers = [line.split(":", 1) for line in head[1:] if ":" in line]
    for line in shown[1:]:
        name, value = (part.strip() for part in line.split(":", 1))
        if not any(n.strip().lower() == name.lower() and readme.string_pattern(value).fullmatch(v.strip())
                   for n, v in headers):
            problems.append(f"header {line!r} not among {head[1:]}")
    return problems


def _differences(step: readme.Step, status: int | None, output: str) -> list[str]:
    if step.shown and step.shown[0].startswith("HTTP/"):
        return _head_differences(step.shown, output)
    problems = [] if status is not None and 200 <= status < 300 else [f"status {status}, not 2xx"]
    if step.shown:
        problems += readme.differences(readme.shown_json("\n".join(step.shown)), _parsed(output))
    return problems


def _is_read(command: str) -> bool:
    return " -X " not in command or " -X GET " in command


def run_step(shell: Shell, step: readme.Step) -> None:
    """Run a command (a read again until it settles) and fail naming it when its answer drifted."""
    deadline = time.monotonic() + SETTLE
    while True:
        status, output = shell.run(step.command)
        problems = _differences(step, status, output)
        if not problems or not _is_read(step.command) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    shell.remember_claim(_parsed(output))
    shown = "\n".join(step.shown) or "(no answer shown: any 2xx)"
    assert not problems, (f"README.rst line {step.line}: $ {step.command}\nREADME shows:\n{shown}\n"
                          f"got (status {status}):\n{output}\n" + "\n".join(problems))


def run_python(example: readme.Example, namespace: dict[str, Any], url: str) -> None:
    """Run a Python example in the shared namespace and compare what it prints with the README."""
    printed = io.StringIO()
    code = compile(example.text.replace(README_ADDRESS, url), f"README.rst:{example.line}", "exec")
    with contextlib.redirect_stdout(printed):
        exec(code, namespace)  # the README's own example, run as its reader runs it
    expected = [line.rstrip() for line in (example.prints or "").splitlines()]
    got = [line.rstrip() for line in printed.getvalue().splitlines()]
    assert got == expected, f"README.rst line {example.line}: prints\n{printed.getvalue()}\nREADME shows\n" \
                            f"{example.prints}"


SHOWN_CLAIM = """{"messages": [{"id": "012d40d1-...",
  "href": "/v2/queues/orders/messages/012d40d1-...?claim_id=6de1df5e-ba0b-40c1-9094-a1d8bfa99042",
               "ttl": 600, "age": 0, "body": {"order": 1}, "claim_count": 1, "claim_id": "6de1df5e-..."}],
 "links": [...], ...}"""
CLAIMED = "c4222e81-381e-4e55-afe5-5293507e153c"
CLAIM_ID = "efc9b8a0-97b6-4aee-b9bf-cb67a5ddd4bf"


def claimed(**changes: Any) -> dict[str, Any]:
    message = {"id": CLAIMED, "href": f"/v2/queues/orders/messages/{CLAIMED}?claim_id={CLAIM_ID}", "ttl": 600,
               "age": 7, "body": {"order": 1}, "claim_count": 1, "claim_id": CLAIM_ID, **changes}
    return {"messages": [message], "links": [{"rel": "next", "href": "/v2/queues/orders/claims"}]}


def test_an_answer_matches_what_the_readme_shows_by_shape_where_values_change() -> None:
    assert readme.differences(readme.shown_json(SHOWN_CLAIM), claimed()) == []
    assert readme.differences(readme.shown_json(SHOWN_CLAIM), {**claimed(), "count": 1}) == []
    assert readme.differences(readme.shown_json('{"subscription_id": "1b71dd52f85b..."}'),
                              {"subscription_id": "516b2644ef3f448f834ac3c2843c664a"}) == []
    assert readme.differences(readme.shown_json('{"at": "2026-11-22T02:34:58Z", "ttl": 86401}'),
                              {"at": "2027-01-01T00:00:00Z", "ttl": 86399}) == []


@pytest.mark.parametrize(("answer", "problem"), [
    (claimed(ttl=3600), "answer.messages[0].ttl: README shows 600, got 3600"),
    (claimed(claim_count=2), "answer.messages[0].claim_count: README shows 1, got 2"),
    (claimed(body={"order": 2}), "answer.messages[0].body.order: README shows 1, got 2"),
    (claimed(claim_id="no-id"), "answer.messages[0].claim_id: README shows '6de1df5e-...', got 'no-id'"),
    (claimed(dead_letter={}), "answer.messages[0]: key 'dead_letter' not shown in the README"),
    (claimed(age=-1), "answer.messages[0].age: README shows 0, got -1"),
    ({"messages": []}, "answer.messages: README shows 1 items, got 0"),
    ({"links": []}, "answer: README shows key 'messages', missing"),
])
def test_an_answer_that_drifted_from_the_readme_is_a_difference_naming_where(answer, problem) -> None:
    assert problem in readme.differences(readme.shown_json(SHOWN_CLAIM), answer)


def test_a_shown_status_line_and_headers_are_compared_with_curl_i() -> None:
    step = readme.Step(1, "curl -i -X PUT ...", ("HTTP/1.1 201 Created", "location: /v2/queues/orders"))
    answer = "HTTP/1.1 201 Created\r\nServer: gunicorn\r\nlocation: /v2/queues/orders\r\n\r\n"
    assert _differences(step, 201, answer) == []
    assert _differences(step, 204, answer.replace("201 Created", "204 No Content")) == [
        "status line: README shows 'HTTP/1.1 201 Created', got 'HTTP/1.1 204 No Content'"]
    assert _differences(step, 201, answer.replace("orders", "other")) == [
        "header 'location: /v2/queues/orders' not among ['Server: gunicorn', 'location: /v2/queues/other']"]


def test_a_command_shown_without_an_answer_must_succeed() -> None:
    step = readme.Step(1, "zq -X PUT $ZAQAR/v2/queues/payments-dlq", ())
    assert _differences(step, 201, "") == []
    assert _differences(step, 400, '{"title": "Invalid API request"}') == ["status 400, not 2xx"]


def test_every_example_not_run_is_in_the_readme_and_says_why() -> None:
    found = readme.examples(readme.README.read_text())
    for start in NOT_EXECUTED:
        assert sum(e.first_line.startswith(start) for e in found) == 1, start
    assert sum(e.kind == "python" for e in found) >= 3
    assert sum(len(e.steps) for e in found if not not_executed(e)) >= 30


def test_the_readme_examples_give_the_answers_it_shows(quick_start_server: RunningServer,
                                                       tmp_path: Path) -> None:
    shell = Shell(quick_start_server.url, tmp_path)
    namespace: dict[str, Any] = {"__name__": "readme"}
    for example in readme.examples(readme.README.read_text()):
        if not_executed(example):
            continue
        if example.kind == "python":
            run_python(example, namespace, quick_start_server.url)
            continue
        for step in example.steps:
            run_step(shell, step)
