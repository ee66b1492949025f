"""What one request costs the server, counted, not timed: the budget of the request path.

Each request (a post of one message, a claim of 10, a delete with the claim id, a
release of one message and of a claim) goes through the real app
(``create_app`` on a real store, called through its WSGI interface: no HTTP
server, no socket of ours) once the app is warmed up, on a queue with default
settings and on one with a dead-letter queue. Its cost is the number of Python
bytecode instructions the interpreter executes for it (``sys.settrace`` with
``f_trace_opcodes``) in this thread, from the app's call to its last body byte:
falcon, zaqar-lite and the store's client library, but not the C code below them
(SQLite's engine, the JSON codec, hiredis), nor what the store server does, nor
the request's WSGI environ, built before the count (as a server builds it). That
number does not depend on the machine, its load or its clock, so a test can
compare it with a recorded budget (``request_cost.json``) on any machine:
``tests/test_request_budget.py``. Long polling is wired as a worker's is (the
store's wake-up channel): a write's wake-up is part of its cost.

Refresh the recorded counts, on purpose, with ``make budget``
(``python -m tests.budget --update``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib.metadata
import json
import platform
import statistics
import sys
import tempfile
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import falcon
import falcon.testing

from zaqar_lite.api.app import create_app
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.service import Messaging
from zaqar_lite.service.templates import QueueTemplates
from zaqar_lite.service.waiting.channels import channel_for
from zaqar_lite.service.waiting.long_poll import LongPoll
from zaqar_lite.service.waiting.room import WaitingRoom
from zaqar_lite.storage import open_deployment

#: the recorded counts, checked in
BUDGET_FILE = Path(__file__).with_name("request_cost.json")
#: a count may grow this much over the recorded one (1.25: 25 % more) before the test fails
GROWTH_ALLOWED = 1.25
#: a count below this share of the recorded one fails too: the budget is refreshed so that it stays tight
SHRINK_ALLOWED = 0.5
#: the command that writes BUDGET_FILE
REFRESH_COMMAND = "make budget  (python -m tests.budget --update)"
#: the queues measured: one with default settings, one with a dead-letter queue
QUEUES: dict[str, dict[str, Any]] = {
    "default": {},
    "dlq": {"_dead_letter_queue": "budget-dlq", "_max_claim_count": 100},
}
#: the requests measured, in the order of one round
REQUESTS = ("post", "claim", "delete", "release", "claim_release")
#: rounds run before counting: imports, caches and prepared statements of first use
WARM_ROUNDS = 1
#: rounds counted; a request's count is the median of its counts
COUNTED_ROUNDS = 3
#: messages posted per round (each post counted); a claim takes 10 of them
POSTS_PER_ROUND = 10
CLAIM_LIMIT = 10
#: the store kinds measured
STORES = ("sqlite", "redis")


class InstructionCounter:
    """Count the Python bytecode instructions this thread executes inside ``with counter:``."""

    def __init__(self) -> None:
        self.instructions = 0
        self._before: Any = None

    def _call(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return self._opcode

    def _opcode(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        if event == "opcode":
            self.instructions += 1
        return self._opcode

    def __enter__(self) -> InstructionCounter:
        self.instructions = 0
        self._before = sys.gettrace()  # a coverage tool's or a debugger's tracer, given back after
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._before)


@contextlib.contextmanager
def no_collection() -> Iterator[None]:
    """Keep the cyclic garbage collector (and the finalizers it would run) out of a count."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclasses.dataclass
class Answer:
    """What the app answered one request: its status, headers (lower-case names) and body."""

    status: str
    headers: dict[str, str]
    body: bytes

    @property
    def status_code(self) -> int:
        return int(self.status.split(" ", 1)[0])

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Session:
    """A client on the real app over one store, with a manual clock, and its counts."""

    HEADERS = {"Client-ID": str(uuid.UUID(int=1)), "X-Project-ID": "budget"}

    def __init__(self, storage_uri: str) -> None:
        self.clock = ManualClock()
        settings = load_settings(None, storage_uri=storage_uri)
        storage = open_deployment(settings)
        # long polling woken as a worker's is (server/gunicorn.py: worker_app): the store's own
        # wake-up channel, whose publishing after a write is part of that write's cost
        self.channel = channel_for(storage.name, storage_uri)
        templates = QueueTemplates(storage, settings)
        messaging = Messaging(storage, settings, self.clock, templates=templates)
        messaging.wake_ups_through(self.channel)
        room = WaitingRoom()
        self.channel.listen(room)
        long_poll = LongPoll(messaging, room, sees_every_write=self.channel.sees_every_write)
        self.app = create_app(settings, storage, self.clock, messaging=messaging, templates=templates,
                              long_poll=long_poll)
        self.counts: dict[str, dict[str, list[int]]] = {}

    def close(self) -> None:
        """Stop the wake-up channel's listener and remove what it left."""
        self.channel.close()

    def call(self, method: str, path: str, *, params: dict[str, Any] | None = None,
             document: Any = None, counter: InstructionCounter | None = None) -> Answer:
        """Answer one request (its body ``document`` as JSON) through the app's WSGI interface,
        counting the call with ``counter``."""
        body = b"" if document is None else json.dumps(document).encode()
        headers = {**self.HEADERS, **({"Content-Type": "application/json"} if document is not None else {})}
        environ = falcon.testing.create_environ(
            path=path, query_string=urllib.parse.urlencode(params or {}), method=method, headers=headers,
            body=body)
        started: list[tuple[str, list[tuple[str, str]]]] = []

        def start_response(status: str, response_headers: list[tuple[str, str]], *exc: object) -> None:
            started.append((status, response_headers))

        with counter if counter is not None else contextlib.nullcontext():
            answered = self.app(environ, start_response)
            content = b"".join(answered)
            close = getattr(answered, "close", None)
            if close is not None:
                close()
        status, response_headers = started[0]
        return Answer(status, {name.lower(): value for name, value in response_headers}, content)

    def request(self, queue: str, name: str, counted: bool, method: str, path: str, *,
                status: int, **kwargs: Any) -> Answer:
        """Answer one request, counting its instructions in a counted round; check its status."""
        counter = InstructionCounter() if counted else None
        result = self.call(method, path, counter=counter, **kwargs)
        assert result.status_code == status, f"{name} on {queue}: {result.status} {result.body!r}"
        if counter is not None:
            self.counts.setdefault(queue, {}).setdefault(name, []).append(counter.instructions)
        return result

    def round(self, queue: str, counted: bool) -> None:
        """Post, claim 10, delete one with the claim id, release one, release the claim, purge."""
        base = f"/v2/queues/{queue}"
        for n in range(POSTS_PER_ROUND):
            self.request(queue, "post", counted, "POST", f"{base}/messages", status=201,
                         document={"messages": [{"ttl": 300, "body": {"event": "order", "n": n}}]})
        claim = self.request(queue, "claim", counted, "POST", f"{base}/claims", status=201,
                             params={"limit": CLAIM_LIMIT}, document={"ttl": 300, "grace": 60})
        claim_id = claim.headers["location"].rsplit("/", 1)[1]
        ids = [message["id"] for message in claim.json["messages"]]
        assert len(ids) == CLAIM_LIMIT, claim.json
        self.request(queue, "delete", counted, "DELETE", f"{base}/messages/{ids[0]}", status=204,
                     params={"claim_id": claim_id})
        self.request(queue, "release", counted, "POST", f"{base}/messages/{ids[1]}/release",
                     status=204, params={"claim_id": claim_id})
        self.request(queue, "claim_release", counted, "DELETE", f"{base}/claims/{claim_id}", status=204)
        self.request(queue, "purge", False, "POST", f"{base}/purge", status=204, document={})

    def run(self, warm: int = WARM_ROUNDS, counted: int = COUNTED_ROUNDS) -> dict[str, dict[str, int]]:
        """Create the queues, warm up, count; return each queue's median count per request."""
        with no_collection():
            self._run(warm, counted)
        return {queue: {name: int(statistics.median(self.counts[queue][name])) for name in REQUESTS}
                for queue in QUEUES}

    def _run(self, warm: int, counted: int) -> None:
        self.request("budget-dlq", "create", False, "PUT", "/v2/queues/budget-dlq", status=201, document={})
        for queue, metadata in QUEUES.items():
            self.request(queue, "create", False, "PUT", f"/v2/queues/{queue}", status=201, document=metadata)
        for count in [False] * warm + [True] * counted:
            for queue in QUEUES:
                self.round(queue, count)


def measure(storage_uri: str, **rounds: int) -> dict[str, dict[str, int]]:
    """Return the instruction count of each request on each queue, on the store of ``storage_uri``."""
    session = Session(storage_uri)
    try:
        return session.run(**rounds)
    finally:
        session.close()


@contextlib.contextmanager
def sqlite_uri() -> Iterator[str]:
    """A SQLite store in a temporary directory, as the API suite opens it."""
    with tempfile.TemporaryDirectory() as directory:
        yield f"sqlite:///{directory}/zaqar.db?synchronous=normal"


@contextlib.contextmanager
def redis_uri() -> Iterator[str]:
    """A throwaway redis-server of its own (``tests/servers/redis.py``), stopped by its PID at the end."""
    from tests.servers.redis import RedisServer

    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            yield server.uri()
        finally:
            server.stop()


def versions() -> dict[str, str]:
    """The versions a count depends on: the interpreter's bytecode, falcon's code and the Redis client's."""
    try:
        redis_client = importlib.metadata.version("redis")
    except importlib.metadata.PackageNotFoundError:
        redis_client = "not installed"
    return {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "falcon": falcon.__version__, "redis-py": redis_client}


def load_budget(path: Path = BUDGET_FILE) -> dict[str, Any]:
    """Read the recorded budget."""
    budget: dict[str, Any] = json.loads(path.read_text())
    return budget


def write_budget(costs: dict[str, dict[str, dict[str, int]]], path: Path = BUDGET_FILE) -> None:
    """Write the counts of every store measured (keeping the recorded counts of a store not measured)."""
    old = load_budget(path)["stores"] if path.exists() else {}
    document = {
        "about": "Python bytecode instructions one request executes through the real app "
                 "(tests/budget/__init__.py); tests/test_request_budget.py fails a count over "
                 f"{GROWTH_ALLOWED:.0%} or under {SHRINK_ALLOWED:.0%} of these. "
                 f"Refresh: {REFRESH_COMMAND}.",
        **versions(),
        "stores": {**old, **costs},
    }
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")


def over_budget(measured: dict[str, dict[str, int]], recorded: dict[str, dict[str, int]],
                store: str) -> list[str]:
    """Return a line per count over or under its allowed range, or missing (empty: within budget)."""
    problems = []
    for queue in QUEUES:
        for name in REQUESTS:
            count = measured[queue][name]
            budget = recorded.get(queue, {}).get(name)
            if budget is None:
                problems.append(f"{store} {queue} {name}: {count} instructions, no recorded count")
            elif count > budget * GROWTH_ALLOWED:
                problems.append(f"{store} {queue} {name}: {count} instructions, over "
                                f"{GROWTH_ALLOWED:.0%} of the recorded {budget} ({count / budget:.0%})")
            elif count < budget * SHRINK_ALLOWED:
                problems.append(f"{store} {queue} {name}: {count} instructions, under "
                                f"{SHRINK_ALLOWED:.0%} of the recorded {budget} ({count / budget:.0%}): "
                                "refresh the budget so that it stays tight")
    return problems
