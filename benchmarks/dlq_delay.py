"""What dead-letter queues and delays cost, each as a ratio of two sides measured in one run.

(a) ``undelayed``: claim+delete on a queue that never uses delays, this working
    tree against the build of ``--base-commit`` (5c7a35c, the core before
    delays). The commit is unpacked with ``git archive`` into a temporary
    directory (no worktree is registered); both builds run from the same venv,
    each with ``PYTHONPATH`` and working directory set to its own checkout.
    The goal (docs/api.rst, "Delayed delivery": messages without a delay pay
    nothing for the feature): ratio >= 0.97. Diagnostic sides (``--no-diagnostics``
    leaves them out): over HTTP, the base build with this tree's
    ``zaqar_lite/server/gunicorn.py`` (its gunicorn worker settings), which separates the
    worker model from everything else; in the driver layer, this tree with
    claims reading only the ready index range, which shows what the second
    (matured-range) SELECT costs.
(b) ``delayed``: claim+delete of ready messages on a queue that also holds ten
    times as many still-delayed messages (posted with delay 900), against an
    identical queue that holds none, both in one store. Goal: ratio >= 0.9.
(c) ``dead-letter``: claim+delete on a queue with ``_max_claim_count`` 1 and a
    DLQ where every claim first meets one exhausted message (claim count 1,
    claim lapsed: what a claim and a release leave behind, written through the
    driver's post primitive), moves it and then claims the next, fresh one;
    against claim+delete on a plain queue. The server's sweeper is held off
    (it would move the exhausted messages itself).

Every comparison runs in rounds (``--rounds`` over HTTP, ``--driver-rounds`` in
the driver layer, whose turns are shorter); in each round every side gets
one turn, back to back, the order alternating between rounds, and each side's
queue is topped up before its turn (outside the timed part), so a claim never
finds it empty. The ratio given is the median of the per-round ratios.

Two layers are measured: ``http`` (``zaqar-lite serve`` on 127.0.0.1 loaded by
wrk with ``wrk/queue_load.lua``, the script of ``http_load.py``, in its
claim+delete mode, ``limit=1``) and ``driver`` (a Python loop calling the
service layer the API calls, ``Messaging.claim`` and
``Messaging.delete_message``, on a SQLite file, in one subprocess per build).
Each gives rates per wall-clock second and per CPU-second (of the server's
processes, or of the loop); the latter moves much less with the neighbours'
load. The driver layer also counts the SQL statements and the WAL pages of a
claim and of a delete, and shows the query plans of the claim's SELECTs.

Part (a) also runs on Redis (``--stores sqlite,redis``): each side gets a
database of its own on one throwaway redis-server (``bench_stores.py``), and
the server's CPU time during a turn counts with the side's (HTTP: with the
gunicorn processes'; driver: with the loop's). Against ``--base-commit
1ca13d6`` (the commit before long polling, retry backoff, deduplication,
groups and trace context) it measures what a queue that uses none of them pays.

Usage: ``python benchmarks/dlq_delay.py [--parts a,b,c] [--layers http,driver]
[--stores sqlite,redis] [--rounds 10] [--seconds 2] [--driver-rounds 40]
[--driver-seconds 0.25] [--json] [--save FILE]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from bench_stores import KINDS, Stores, stores
from http_load import BATCH, PROJECT, SESSIONS, call, cpu_seconds, run_wrk, serving, stock_queue

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CURRENT = "current"
DELAY = 900  # seconds: the default max_message_delay, so no delayed message matures during a run
CLAIM_TTL, CLAIM_GRACE = 300, 60
#: part -> (name, title, the rate compared (wall clock, then per CPU-second), goal for the ratio)
PARTS = {
    "a": ("undelayed", "claim+delete on a queue that never uses delays, this tree vs {base}",
          ("pairs_per_s", "pairs_per_cpu_s"), 0.97),
    "b": ("delayed", "claim+delete of ready messages next to 10x as many delayed (delay {delay}) "
          "vs none", ("claims_per_s", "claims_per_cpu_s"), 0.9),
    "c": ("dead-letter", "claim+delete where each claim first moves one exhausted message to the "
          "DLQ vs a plain queue", ("claims_per_s", "claims_per_cpu_s"), None),
}
QUEUE_A = "bench-undelayed"
QUEUE_B = {"delayed": "bench-ready-with-delayed", "none": "bench-ready-only"}
QUEUE_C = {"dlq": "bench-dlq-source", "plain": "bench-plain", "dead": "bench-dead-letters"}
DLQ_METADATA = {"_max_claim_count": 1, "_dead_letter_queue": QUEUE_C["dead"]}
NO_SWEEP = {"ZAQAR_LITE_SERVER_SWEEP_INTERVAL": "86400"}
SETTLE = 0.3  # seconds after wrk ends before a server's CPU time or a DLQ is read
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
READY_ONLY = "ready-only"  # worker variant: claims read only the ready range (diagnostic)
WITH_INDEX = "with-visibility-index"  # worker variant: the store gets this tree's extra index
VISIBILITY_INDEX = ("CREATE INDEX IF NOT EXISTS messages_by_visibility"
                    " ON messages (project, queue, delay_until, marker)")


# -- the driver worker: runs inside one build, driven by JSON lines on stdin ----------------


class Worker:
    """The service layer of one build on one SQLite file; each method answers one command."""

    def __init__(self, uri: str, variant: str | None = None) -> None:
        from zaqar_lite.config import load_settings
        from zaqar_lite.service import Messaging
        from zaqar_lite.storage import open_storage

        if variant == READY_ONLY:
            leave_out_matured_select()
        self.storage = open_storage(uri)
        if variant == WITH_INDEX:  # diagnostic: pay for the index this tree adds, nothing else
            storage: Any = self.storage
            storage._connection().execute(VISIBILITY_INDEX)
        self.messaging = Messaging(self.storage, load_settings(None, storage_uri=uri))
        self.client_id = str(uuid.uuid4())

    def create(self, queue: str, metadata: dict[str, Any]) -> dict[str, Any]:
        """Create a queue with metadata (validated as a PUT would)."""
        return {"created": self.messaging.create_queue(PROJECT, queue, metadata)}

    def stats(self, queue: str) -> dict[str, int]:
        """Return the queue's message counts."""
        stats, _ = self.messaging.queue_stats(PROJECT, queue)
        return {"free": stats.free, "delayed": stats.delayed, "claimed": stats.claimed}

    def post(self, queue: str, count: int, delay: int | None = None) -> dict[str, Any]:
        """Post ``count`` small messages in batches of BATCH, optionally delayed."""
        items = [{"body": {"event": "bench", "n": n}, "ttl": None, "delay": delay, "dlq_eligible": True}
                 for n in range(BATCH)]
        posted = 0
        while posted < count:
            batch = items[:min(BATCH, count - posted)]
            self.messaging.post(PROJECT, queue, self.client_id, batch, 100 * len(batch))
            posted += len(batch)
        return {"posted": posted}

    def stock(self, queue: str, target: int) -> dict[str, Any]:
        """Post until the queue holds ``target`` claimable messages."""
        return self.post(queue, max(0, target - self.stats(queue)["free"]))

    def pairs(self, queue: str, target: int) -> dict[str, Any]:
        """Append (exhausted, fresh) pairs until the queue holds ``target`` claimable messages.

        The exhausted message is stored as a claim and a release leave it: claim
        count 1, its claim lapsed. Written through the driver's own post primitive.
        """
        from zaqar_lite.models import Message

        missing = max(0, target - self.stats(queue)["free"]) // 2
        now = time.time()
        ttl = self.messaging.limits.default_message_ttl
        records = []
        for n in range(missing):
            records.append(Message(id=str(uuid.uuid4()), body={"event": "exhausted", "n": n}, created=now,
                                   expires=now + ttl, client_id=self.client_id,
                                   claim_id=str(uuid.uuid4()), claim_expires=now - 1, claim_count=1))
            records.append(Message(id=str(uuid.uuid4()), body={"event": "fresh", "n": n}, created=now,
                                   expires=now + ttl, client_id=self.client_id))
        for start in range(0, len(records), 1000):
            self.storage.post_messages(PROJECT, queue, records[start:start + 1000], now)
        return {"posted": len(records)}

    def run(self, queue: str, seconds: float, dead: str | None = None) -> dict[str, Any]:
        """Claim (limit 1) and delete the claimed message, over and over, for ``seconds``.

        Besides wall-clock rates it reports this process's CPU time (user + system):
        rates per CPU-second, and the median CPU time of one claim and of one delete.
        Time the process spends preempted by neighbours counts in the wall clock only.
        """
        moved_before = self.stats(dead)["free"] if dead else 0
        claim_cpu: list[float] = []
        delete_cpu: list[float] = []
        claims = claimed = empty = 0
        wall, cpu = time.perf_counter, time.process_time
        start, start_cpu = wall(), cpu()
        deadline = start + seconds
        while wall() < deadline:
            c0 = cpu()
            claim_id, messages, _ = self.messaging.claim(PROJECT, queue, 1, CLAIM_TTL, CLAIM_GRACE)
            c1 = cpu()
            for message in messages:
                self.messaging.delete_message(PROJECT, queue, message.id, claim_id)
            c2 = cpu()
            claims += 1
            claim_cpu.append(c1 - c0)
            if messages:
                claimed += len(messages)
                delete_cpu.append(c2 - c1)
            else:
                empty += 1
        elapsed, cpu_seconds = wall() - start, cpu() - start_cpu
        moved = self.stats(dead)["free"] - moved_before if dead else 0
        return {
            "seconds": elapsed, "cpu_seconds": cpu_seconds, "claims": claims, "claimed": claimed,
            "deleted": claimed, "empty_claims": empty, "moved": moved,
            "claims_per_s": claimed / elapsed, "pairs_per_s": claimed / elapsed,
            "moved_per_s": moved / elapsed,
            "claims_per_cpu_s": claimed / cpu_seconds, "pairs_per_cpu_s": claimed / cpu_seconds,
            "claim_ms": 1000 * statistics.median(claim_cpu),
            "delete_ms": 1000 * statistics.median(delete_cpu) if delete_cpu else 0.0,
        }

    def trace(self, queue: str, repeat: int = 100) -> dict[str, Any]:
        """Record the SQL statements of one claim and one delete, the query plans of the claim's
        SELECTs on messages, and the WAL pages a claim and a delete write, on average over
        ``repeat`` claims followed by ``repeat`` deletes.

        A commit appends every page it changed to the WAL once, so the WAL's size after a
        checkpoint (TRUNCATE, autocheckpoint off) counts the pages written. Needs this process
        to be the only one using the file.
        """
        statements: list[str] = []
        storage: Any = self.storage  # the SQLite driver: the benchmark looks inside on purpose
        conn = storage._connection()
        conn.set_trace_callback(statements.append)
        try:
            claim_id, messages, _ = self.messaging.claim(PROJECT, queue, 1, CLAIM_TTL, CLAIM_GRACE)
            claim_sql = list(statements)
            statements.clear()
            for message in messages:
                self.messaging.delete_message(PROJECT, queue, message.id, claim_id)
            delete_sql = list(statements)
        finally:
            conn.set_trace_callback(None)
        plans = []
        for sql in claim_sql:
            if sql.lstrip().upper().startswith("SELECT") and " FROM MESSAGES" in sql.upper():
                rows = conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
                plans.append({"sql": sql, "plan": [row[-1] for row in rows]})

        wal = Path(str(storage.path) + "-wal")
        frame = conn.execute("PRAGMA page_size").fetchone()[0] + 24

        def pages_written(action: Callable[[], Any]) -> float:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA wal_autocheckpoint=0")
            try:
                for _ in range(repeat):
                    action()
                return max(0, wal.stat().st_size - 32) / frame / repeat
            finally:
                conn.execute("PRAGMA wal_autocheckpoint=1000")

        held: list[tuple[str, str]] = []

        def claim() -> None:
            claim_id, messages, _ = self.messaging.claim(PROJECT, queue, 1, CLAIM_TTL, CLAIM_GRACE)
            held.extend((claim_id, m.id) for m in messages)

        def delete() -> None:
            claim_id, message_id = held.pop()
            self.messaging.delete_message(PROJECT, queue, message_id, claim_id)

        claim_pages = pages_written(claim)
        delete_pages = pages_written(delete) if len(held) == repeat else None
        return {"claim": claim_sql, "delete": delete_sql, "plans": plans,
                "claim_wal_pages": claim_pages, "delete_wal_pages": delete_pages}


def leave_out_matured_select() -> None:
    """Diagnostic only, in this process: claims read the ready range alone, not the matured one.

    This is wrong for delayed messages (they would never be claimed); it exists
    to show how much of the cost of undelayed claims the second SELECT is.
    """
    from zaqar_lite.storage.sqlite import driver as sqlite
    from zaqar_lite.storage.sqlite.statements import READY

    def ready_only(self: Any, db: Any, args: Mapping[str, Any], limit: int) -> list[Any]:
        found: list[Any] = self._select(db, READY, args, limit, "messages_by_visibility")
        return found

    sqlite.SqliteStorage._candidates = ready_only  # type: ignore[method-assign]


def worker_main(uri: str, variant: str | None) -> None:
    """Serve Worker commands: one JSON object per line in, one per line out."""
    worker = Worker(uri, variant)
    for line in sys.stdin:
        command = json.loads(line)
        method = getattr(worker, command.pop("op"))
        try:
            answer = method(**command)
        except Exception as exc:  # noqa: BLE001 - reported to the controller, which stops
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


class DriverWorker:
    """A worker subprocess running one build's code (``PYTHONPATH`` and cwd = its checkout)."""

    def __init__(self, checkout: Path, uri: str, log: Path, variant: str | None = None) -> None:
        env = dict(os.environ, PYTHONPATH=str(checkout))
        self.log = log
        argv = [sys.executable, str(Path(__file__).resolve()), "--worker", uri]
        if variant:
            argv += ["--worker-variant", variant]
        with log.open("wb") as err:
            self.proc = subprocess.Popen(argv,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         cwd=checkout, env=env, text=True)

    def ask(self, op: str, **kwargs: Any) -> dict[str, Any]:
        """Send one command and return the answer."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"op": op, **kwargs}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"driver worker died during {op}:\n{self.log.read_text()[-2000:]}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise SystemExit(f"driver worker failed on {op} {kwargs}: {answer['error']}")
        return answer

    def close(self) -> None:
        """Stop the worker."""
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def driver_worker(checkout: Path, uri: str, log: Path, variant: str | None = None) -> Iterator[DriverWorker]:
    """Run a DriverWorker for the duration of a block."""
    worker = DriverWorker(checkout, uri, log, variant)
    try:
        yield worker
    finally:
        worker.close()


# -- builds ---------------------------------------------------------------------------------


def git(*argv: str) -> str:
    """Run git in the repository and return its output."""
    return subprocess.run(["git", "-C", str(REPO), *argv], capture_output=True, text=True,
                          check=True).stdout.strip()


def unpack_commit(commit: str, target: Path) -> str:
    """Extract the tree of ``commit`` into ``target`` (no worktree is registered); return its hash."""
    full = git("rev-parse", "--verify", commit + "^{commit}")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", full],
                             capture_output=True, check=True).stdout
    target.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return full


def serve_command(storage: str, workers: int) -> list[str]:
    """The command that starts one build's server (run with that build's PYTHONPATH and cwd)."""
    return [sys.executable, "-m", "zaqar_lite", "serve", "--storage", storage, "--workers", str(workers)]


def build_env(checkout: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment that makes ``python -m zaqar_lite`` import the given checkout."""
    return {"PYTHONPATH": str(checkout), **(extra or {})}


# -- rounds and ratios ----------------------------------------------------------------------


class Level:
    """How many claimable messages a queue is topped up to before a turn.

    It starts at ``--ready`` and grows to three times what the fastest turn so far
    would consume in a whole turn, so that no turn can run a queue dry.
    """

    def __init__(self, floor: int, seconds: float) -> None:
        self.value = floor
        self.seconds = seconds

    def saw(self, figures: Mapping[str, Any]) -> dict[str, Any]:
        """Take note of how fast a turn consumed; return its figures."""
        rate = (figures["claimed"] + figures.get("moved", 0)) / max(figures["seconds"], 1e-3)
        self.value = max(self.value, math.ceil(3 * rate * self.seconds))
        return dict(figures)


def interleave(sides: list[str], rounds: int,
               turn: Callable[[str], dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Give each side one turn per round, alternating the order; return each side's figures."""
    figures: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for number in range(rounds):
        for side in sides if number % 2 == 0 else reversed(sides):
            figures[side].append(turn(side))
    return figures


SUMMED = ("claims", "claimed", "deleted", "empty_claims", "moved", "failures", "socket_errors",
          "requests", "posted", "seconds", "cpu_seconds")


def compare(figures: dict[str, list[dict[str, Any]]], keys: tuple[str, ...],
            pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Summarise a comparison.

    Per side: medians of rates and times, sums of counts. Per (subject, reference)
    pair of sides and per key: the ratio of each round's two turns, their median
    (the ratio reported) and range, and the ratio of the per-side medians; also the
    ratio of the median claim times.
    """
    summary: dict[str, Any] = {}
    for side, turns in figures.items():
        side_summary: dict[str, Any] = {}
        for name in turns[0]:
            values = [t[name] for t in turns]
            if name in SUMMED:
                side_summary[name] = sum(values)
            elif all(isinstance(v, (int, float)) for v in values):
                side_summary[name] = statistics.median(values)
        side_summary["failure"] = next((t.get("failure") for t in turns if t.get("failure")), None)
        side_summary["rounds"] = turns
        summary[side] = side_summary
    ratios = []
    for subject, reference in pairs:
        entry: dict[str, Any] = {"subject": subject, "reference": reference, "by_key": {}}
        for key in keys:
            per_round = [s[key] / r[key] for s, r in zip(figures[subject], figures[reference], strict=True)
                         if r[key]]
            entry["by_key"][key] = {
                "round_ratios": per_round,
                "ratio": statistics.median(per_round) if per_round else None,
                "ratio_of_medians": (summary[subject][key] / summary[reference][key]
                                     if summary[reference][key] else None)}
        entry["claim_time_ratio"] = (summary[subject]["claim_ms"] / summary[reference]["claim_ms"]
                                     if summary[reference]["claim_ms"] else None)
        ratios.append(entry)
    return {"sides": summary, "keys": keys, "ratios": ratios}


# -- HTTP layer ----------------------------------------------------------------------------


def wrk_options(args: argparse.Namespace, queue: str) -> argparse.Namespace:
    """The option set http_load.run_wrk expects, for one queue."""
    return argparse.Namespace(concurrency=args.concurrency, queue=queue, post_ratio=0.0,
                              client_id=args.client_id)


class Server:
    """A zaqar-lite server started by http_load.serving: its URL and session."""

    def __init__(self, stack: contextlib.ExitStack, argv: list[str], workdir: Path,
                 env: Mapping[str, str], cwd: Path) -> None:
        self.url: str = stack.enter_context(serving(argv, workdir, env, cwd))
        self.session = SESSIONS[self.url]


def wrk_claims(args: argparse.Namespace, server: Server, queue: str,
               seconds: int | None = None, store_cpu: Callable[[], float] = lambda: 0.0) -> dict[str, Any]:
    """One timed turn of wrk's claim+delete load.

    Adds to http_load's figures the rates per second and per CPU-second of the
    server's processes (all its gunicorn processes, from /proc, read before wrk
    starts and SETTLE seconds after it ends, when requests it left in flight are done)
    and of the store's server when it has one (``store_cpu``).
    """
    cpu_before = cpu_seconds({server.session}) + store_cpu()
    figures = run_wrk(args.wrk, server.url, "claim", wrk_options(args, queue), seconds or args.seconds)
    time.sleep(SETTLE)
    figures["cpu_seconds"] = cpu_seconds({server.session}) + store_cpu() - cpu_before
    cpu = max(figures["cpu_seconds"], 1 / CLOCK_TICKS)
    figures["pairs_per_s"] = figures["deleted"] / figures["seconds"]
    figures["claims_per_s"] = figures["claimed"] / figures["seconds"]
    figures["pairs_per_cpu_s"] = figures["deleted"] / cpu
    figures["claims_per_cpu_s"] = figures["claimed"] / cpu
    figures["claim_ms"] = figures.get("claim_p50_ms") or figures["p50_ms"]
    for line in figures.pop("leftover", None) or []:  # deletes wrk left due: no claim may linger
        method, path = line.split(" ", 1)
        call(server.url, method, path, args.client_id)
    return figures


def http_queue(url: str, queue: str, client_id: str, metadata: dict[str, Any]) -> None:
    """Create a queue with metadata over HTTP."""
    status, body = call(url, "PUT", f"/v2/queues/{queue}", client_id, metadata)
    if status not in (201, 204):
        raise SystemExit(f"PUT /v2/queues/{queue} -> {status} {body[:400]!r}")


def http_stats(url: str, queue: str, client_id: str) -> dict[str, int]:
    """Return a queue's message counts over HTTP."""
    status, body = call(url, "GET", f"/v2/queues/{queue}/stats", client_id)
    if status != 200:
        raise SystemExit(f"GET /v2/queues/{queue}/stats -> {status} {body[:400]!r}")
    counts: dict[str, int] = json.loads(body)["messages"]
    return counts


def post_delayed(url: str, queue: str, client_id: str, target: int, delay: int) -> int:
    """POST messages with ``delay`` (batches, four requests in flight) until ``target`` are delayed."""
    missing = target - http_stats(url, queue, client_id)["delayed"]
    batch = {"messages": [{"body": {"event": "delayed", "n": n}, "delay": delay} for n in range(BATCH)]}

    def one(_: int) -> None:
        status, body = call(url, "POST", f"/v2/queues/{queue}/messages", client_id, batch)
        if status != 201:
            raise SystemExit(f"POST /v2/queues/{queue}/messages -> {status} {body[:400]!r}")

    requests = max(0, -(-missing // BATCH))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(requests)))
    return requests * BATCH


def hybrid_checkout(source: Path, donor: Path, module: str, target: Path, into: str | None = None) -> Path:
    """A copy of ``source``'s ``zaqar_lite`` package with one module taken from ``donor``.

    Diagnostic builds for part (a): the base with this tree's ``server/gunicorn.py``
    (its gunicorn worker settings, as the base's ``server.py``) separates the
    change of worker model from the rest;
    this tree with the base's ``storage/sqlite.py`` (in place of ``storage/sqlite/driver.py``,
    ``into``) isolates the SQLite driver,
    where delays live on the claim path (the service and API code of a claim and
    a delete are then this tree's on both sides).
    """
    shutil.copytree(source / "zaqar_lite", target / "zaqar_lite",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(donor / "zaqar_lite" / module, target / "zaqar_lite" / (into or module))
    return target


def http_part_a(args: argparse.Namespace, tmp: Path, base: Path, store: Stores) -> dict[str, Any]:
    """(a) over HTTP: each build's server (and the base with this tree's gunicorn module), one queue each."""
    sides = [(CURRENT, REPO), (args.base_label, base)]
    # the hybrids need a base whose SQLite driver is one module (5c7a35c), and a SQLite store
    old_sqlite = base / "zaqar_lite" / "storage" / "sqlite.py"
    diagnostics = args.diagnostics and store.kind == "sqlite" and old_sqlite.exists()
    if diagnostics:
        sides += [(args.hybrid_label, hybrid_checkout(base, REPO, "server/gunicorn.py",
                                                          tmp / "base-with-server", "server.py")),
                  (args.old_sqlite_label, hybrid_checkout(REPO, base, "storage/sqlite.py",
                                                          tmp / "current-with-base-sqlite",
                                                          "storage/sqlite/driver.py"))]
    level = Level(args.ready, args.seconds)
    with contextlib.ExitStack() as stack:
        servers = {}
        for side, checkout in sides:
            slug = f"a-http-{store.kind}-{side.replace('+', '-')}"
            servers[side] = Server(stack, serve_command(store.uri(slug), args.workers), tmp / slug,
                                   build_env(checkout), checkout)

        def turn(side: str, seconds: int | None = None) -> dict[str, Any]:
            stock_queue(servers[side].url, QUEUE_A, args.client_id, level.value)
            return level.saw(wrk_claims(args, servers[side], QUEUE_A, seconds, store.cpu_seconds))

        for side in servers:  # warm-up: start every worker and fill caches before timing
            turn(side, 1)
        figures = interleave(list(servers), args.rounds, turn)
    pairs = [(CURRENT, args.base_label)]
    if diagnostics:
        pairs += [(CURRENT, args.old_sqlite_label), (CURRENT, args.hybrid_label),
                  (args.hybrid_label, args.base_label)]
    return compare(figures, PARTS["a"][2], pairs)


def http_part_b(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """(b) over HTTP: one server, a queue with 10x delayed messages and one without."""
    storage = storage_uri(tmp / "b-http.db", args.synchronous)
    level = Level(args.ready, args.seconds)
    posted = 0
    with contextlib.ExitStack() as stack:
        server = Server(stack, serve_command(storage, args.workers), tmp / "b-http", build_env(REPO), REPO)

        def turn(side: str, seconds: int | None = None) -> dict[str, Any]:
            nonlocal posted
            if side == "delayed":  # ten delayed messages for each ready one
                posted += post_delayed(server.url, QUEUE_B["delayed"], args.client_id,
                                       10 * level.value, DELAY)
            stock_queue(server.url, QUEUE_B[side], args.client_id, level.value)
            return level.saw(wrk_claims(args, server, QUEUE_B[side], seconds))

        for side in QUEUE_B:
            turn(side, 1)
        figures = interleave(list(QUEUE_B), args.rounds, turn)
        after = http_stats(server.url, QUEUE_B["delayed"], args.client_id)
    result = compare(figures, PARTS["b"][2], [("delayed", "none")])
    result["notes"] = {"delayed_posted": posted, "delayed_at_end": after["delayed"],
                       "ready_level_at_end": level.value}
    return result


def http_part_c(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """(c) over HTTP: sweeper idle; a queue of (exhausted, fresh) pairs with a DLQ; a plain one."""
    storage = storage_uri(tmp / "c-http.db", args.synchronous)
    level = Level(args.ready, args.seconds)
    with contextlib.ExitStack() as stack:
        server = Server(stack, serve_command(storage, args.workers), tmp / "c-http",
                        build_env(REPO, NO_SWEEP), REPO)
        writer = stack.enter_context(driver_worker(REPO, storage, tmp / "c-http-writer.log"))
        http_queue(server.url, QUEUE_C["dead"], args.client_id, {})
        http_queue(server.url, QUEUE_C["dlq"], args.client_id, DLQ_METADATA)
        http_queue(server.url, QUEUE_C["plain"], args.client_id, {})

        def turn(side: str, seconds: int | None = None) -> dict[str, Any]:
            if side == "dlq":
                writer.ask("pairs", queue=QUEUE_C["dlq"], target=2 * level.value)
            else:
                stock_queue(server.url, QUEUE_C["plain"], args.client_id, level.value)
            before = http_stats(server.url, QUEUE_C["dead"], args.client_id)["free"]
            figures = wrk_claims(args, server, QUEUE_C[side], seconds)
            figures["moved"] = http_stats(server.url, QUEUE_C["dead"], args.client_id)["free"] - before
            figures["moved_per_s"] = figures["moved"] / figures["seconds"]
            return level.saw(figures)

        for side in ("dlq", "plain"):
            turn(side, 1)
        figures = interleave(["dlq", "plain"], args.rounds, turn)
    return compare(figures, PARTS["c"][2], [("dlq", "plain")])


# -- driver layer --------------------------------------------------------------------------


def driver_part_a(args: argparse.Namespace, tmp: Path, base: Path, store: Stores) -> dict[str, Any]:
    """(a) in the service layer: each build's own code on its own store (SQLite file, Redis database).

    On Redis the server's CPU time during a turn counts with the loop's (the claim
    and delete scripts run there); the median CPU time of a claim is the loop's alone.
    """
    sides: list[tuple[str, Path, str | None]] = [(CURRENT, REPO, None), (args.base_label, base, None)]
    diagnostics = args.diagnostics and store.kind == "sqlite"
    if diagnostics:
        sides += [(args.ready_only_label, REPO, READY_ONLY), (args.index_label, base, WITH_INDEX)]
    level = Level(args.ready, args.driver_seconds)
    with contextlib.ExitStack() as stack:
        workers = {side: stack.enter_context(driver_worker(
                       checkout, store.uri(f"a-driver-{side}"), tmp / f"a-driver-{store.kind}-{side}.log",
                       variant))
                   for side, checkout, variant in sides}

        def turn(side: str, seconds: float | None = None) -> dict[str, Any]:
            workers[side].ask("stock", queue=QUEUE_A, target=level.value)
            before = store.cpu_seconds()
            figures = workers[side].ask("run", queue=QUEUE_A, seconds=seconds or args.driver_seconds)
            return level.saw(with_store_cpu(figures, store.cpu_seconds() - before))

        for side in workers:
            turn(side, min(0.5, args.driver_seconds))
        figures = interleave(list(workers), args.driver_rounds, turn)
        traces = ({side: worker.ask("trace", queue=QUEUE_A) for side, worker in workers.items()}
                  if store.kind == "sqlite" else {})
    pairs = [(CURRENT, args.base_label)]
    if diagnostics:  # current/base = the three factors below, multiplied
        pairs += [(CURRENT, args.ready_only_label), (args.ready_only_label, args.index_label),
                  (args.index_label, args.base_label)]
    result = compare(figures, PARTS["a"][2], pairs)
    result["traces"] = traces
    return result


def with_store_cpu(figures: dict[str, Any], store_seconds: float) -> dict[str, Any]:
    """Add the CPU time of the store's server during a driver turn to the loop's, and rate again."""
    if store_seconds:
        figures["cpu_seconds"] += store_seconds
        figures["pairs_per_cpu_s"] = figures["claims_per_cpu_s"] = figures["claimed"] / figures["cpu_seconds"]
    return figures


def driver_part_b(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """(b) in the service layer: one SQLite file, a queue with 10x delayed messages and one without."""
    level = Level(args.ready, args.driver_seconds)
    uri = storage_uri(tmp / "b-driver.db", args.driver_synchronous)
    with driver_worker(REPO, uri, tmp / "b-driver.log") as worker:

        def turn(side: str, seconds: float | None = None) -> dict[str, Any]:
            if side == "delayed":
                delayed = worker.ask("stats", queue=QUEUE_B["delayed"])["delayed"]
                worker.ask("post", queue=QUEUE_B["delayed"], count=max(0, 10 * level.value - delayed),
                           delay=DELAY)
            worker.ask("stock", queue=QUEUE_B[side], target=level.value)
            return level.saw(worker.ask("run", queue=QUEUE_B[side], seconds=seconds or args.driver_seconds))

        for side in QUEUE_B:
            turn(side, min(0.5, args.driver_seconds))
        figures = interleave(list(QUEUE_B), args.driver_rounds, turn)
        traces = {side: worker.ask("trace", queue=queue) for side, queue in QUEUE_B.items()}
        after = worker.ask("stats", queue=QUEUE_B["delayed"])
    result = compare(figures, PARTS["b"][2], [("delayed", "none")])
    result["traces"] = traces
    result["notes"] = {"delayed_at_end": after["delayed"], "ready_level_at_end": level.value}
    return result


def driver_part_c(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """(c) in the service layer: a DLQ-backed queue of (exhausted, fresh) pairs and a plain one."""
    level = Level(args.ready, args.driver_seconds)
    uri = storage_uri(tmp / "c-driver.db", args.driver_synchronous)
    with driver_worker(REPO, uri, tmp / "c-driver.log") as worker:
        worker.ask("create", queue=QUEUE_C["dead"], metadata={})
        worker.ask("create", queue=QUEUE_C["dlq"], metadata=DLQ_METADATA)
        worker.ask("create", queue=QUEUE_C["plain"], metadata={})

        def turn(side: str, seconds: float | None = None) -> dict[str, Any]:
            if side == "dlq":
                worker.ask("pairs", queue=QUEUE_C["dlq"], target=2 * level.value)
            else:
                worker.ask("stock", queue=QUEUE_C["plain"], target=level.value)
            return level.saw(worker.ask("run", queue=QUEUE_C[side], seconds=seconds or args.driver_seconds,
                                        dead=QUEUE_C["dead"]))

        for side in ("dlq", "plain"):
            turn(side, min(0.5, args.driver_seconds))
        figures = interleave(["dlq", "plain"], args.driver_rounds, turn)
        traces = {side: worker.ask("trace", queue=QUEUE_C[side]) for side in ("dlq", "plain")}
    result = compare(figures, PARTS["c"][2], [("dlq", "plain")])
    result["traces"] = traces
    return result


def part_a(args: argparse.Namespace, tmp: Path, base: Path) -> dict[str, dict[str, Any]]:
    """Run part (a) on every store and layer asked for: SQLite's layers named plainly, others' suffixed."""
    layers: dict[str, dict[str, Any]] = {}
    for kind in args.stores:
        for layer in args.layers:
            synchronous = args.synchronous if layer == "http" else args.driver_synchronous
            with stores(kind, tmp / f"stores-{kind}-{layer}", synchronous) as store:
                run = http_part_a if layer == "http" else driver_part_a
                layers[layer if kind == "sqlite" else f"{layer}-{kind}"] = run(args, tmp, base, store)
    return layers


# -- output --------------------------------------------------------------------------------


def storage_uri(path: Path, synchronous: str) -> str:
    """A SQLite URI for a file, with a synchronous mode."""
    return f"sqlite:///{path}?synchronous={synchronous}"


def statement_kinds(statements: list[str]) -> str:
    """Summarise SQL statements as counts by their first word(s), e.g. '2 SELECT, 1 UPDATE'."""
    counts: dict[str, int] = {}
    for sql in statements:
        words = sql.split()
        kind = " ".join(words[:2]) if words[0].upper() == "BEGIN" else words[0].upper()
        if kind == "SELECT":
            table = words[words.index("FROM") + 1] if "FROM" in words else "?"
            kind = f"SELECT {table}"
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def rate_name(key: str) -> str:
    """'pairs_per_cpu_s' -> 'msgs/cpu-s', 'claims_per_s' -> 'claims/s'."""
    return key.replace("pairs", "msgs").replace("_per_cpu_s", "/cpu-s").replace("_per_s", "/s")


def side_lines(layer: str, result: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Return a layer's row per side, and the notes of the first failure of each side that had one."""
    lines, notes = [], []
    for index, (side, f) in enumerate(result["sides"].items()):
        errors = f.get("failures", 0) + f.get("socket_errors", 0)
        p99 = f"{f['p99_ms']:8.1f}" if "p99_ms" in f else f"{'-':>8}"
        delete = f"{f['delete_ms']:8.3f}" if "delete_ms" in f else f"{'-':>8}"
        claim = f"{f['claim_ms']:9.3f}" if layer.startswith("driver") else f"{f['claim_ms']:9.2f}"
        lines.append(f"  {layer if index == 0 else '':<13}{side:<13}{f['pairs_per_s']:8.1f}"
                     f"{f['claims_per_s']:9.1f}{f.get('moved_per_s', 0.0):8.1f}"
                     f"{f['pairs_per_cpu_s']:11.1f}"
                     f"{claim}{delete}{p99}{f['empty_claims']:6d}{errors:7d}")
        if f.get("failure"):
            notes.append(f"  {layer} {side}: first failure: {f['failure']}")
    return lines, notes


def ratio_lines(layer: str, result: dict[str, Any], metrics: tuple[str, ...],
                goal: float | None) -> list[str]:
    """Return a layer's ratios of each metric (with the goal's verdict) and of a claim's CPU time."""
    lines = []
    for r in result["ratios"]:
        for metric in metrics:
            k = r["by_key"][metric]
            ratios = k["round_ratios"]
            verdict = ""
            if goal is not None and k["ratio"] is not None:
                verdict = f"; goal >= {goal}: {'met' if k['ratio'] >= goal else 'MISSED'}"
            spread = f"{min(ratios):.3f}..{max(ratios):.3f}" if ratios else "-"
            lines.append(f"  {'':<7}ratio {rate_name(metric)} {r['subject']}/{r['reference']} = "
                         f"{k['ratio']:.3f} (median of {len(ratios)} rounds, range {spread}; "
                         f"of medians {k['ratio_of_medians']:.3f}){verdict}")
        if layer.startswith("driver") and r["claim_time_ratio"]:
            lines.append(f"  {'':<7}      median CPU time of a claim {r['subject']}/{r['reference']} = "
                         f"{r['claim_time_ratio']:.3f} (higher is slower)")
    return lines


def trace_lines(layer: str, result: dict[str, Any]) -> list[str]:
    """Return a layer's SQL per claim and delete, and each distinct query plan once."""
    lines = []
    for side, trace in result.get("traces", {}).items():
        lines.append(f"  SQL, {layer} {side}: claim {len(trace['claim'])} statements "
                     f"({statement_kinds(trace['claim'])}), {trace['claim_wal_pages']:.1f} WAL pages; "
                     f"delete {len(trace['delete'])} ({statement_kinds(trace['delete'])}), "
                     f"{trace['delete_wal_pages'] or 0:.1f} WAL pages")
        seen = set()
        for plan in trace["plans"]:
            where = plan["sql"].split(" WHERE ", 1)[-1].split(" AND expires")[0]
            shape = (where.split(" AND marker")[0], tuple(plan["plan"]))
            if shape not in seen:
                seen.add(shape)
                lines.append(f"    plan of SELECT ... WHERE {where} ...: " + "; ".join(plan["plan"]))
    return lines


def part_lines(key: str, layers: dict[str, dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """Render one part: a row per side and layer, the ratios, the SQL per claim and the plans."""
    name, title, metrics, goal = PARTS[key]
    lines = [f"({key}) {name}: " + title.format(base=args.base_label, delay=DELAY)]
    lines.append(f"  {'layer':<13}{'side':<13}{'msgs/s':>8}{'claims/s':>9}{'moved/s':>8}{'msgs/cpu-s':>11}"
                 f"{'claim ms':>9}{'del ms':>8}{'p99 ms':>8}{'empty':>6}{'errors':>7}")
    notes = []
    for layer, result in layers.items():
        rows, failures = side_lines(layer, result)
        lines += rows + ratio_lines(layer, result, metrics, goal)
        notes += failures
        if key == "c":
            s = result["sides"]["dlq"]
            lines.append(f"  {'':<7}moved {s['moved']} messages to the DLQ while claiming "
                         f"{s['claimed']} ({s['moved'] / max(1, s['claimed']):.2f} per claimed message)")
        if result.get("notes"):
            lines.append(f"  {'':<7}" + "; ".join(f"{k.replace('_', ' ')} {v}"
                                                  for k, v in result["notes"].items()))
    for layer, result in layers.items():
        lines += trace_lines(layer, result)
    return lines + notes


def render(results: dict[str, dict[str, dict[str, Any]]], settings: dict[str, Any],
           args: argparse.Namespace) -> str:
    """Render every part as text."""
    load = " ".join(f"{x:.1f}" for x in settings["load_before"])
    lines = [
        f"dlq_delay {settings['date']}, {settings['cpus']} cpus, load average {load} before: "
        f"http {settings['workers']} workers, {settings['concurrency']} wrk connections, "
        f"{settings['rounds']} rounds x {settings['seconds']} s per side, SQLite synchronous="
        f"{settings['synchronous']}; driver {settings['driver_rounds']} rounds x "
        f"{settings['driver_seconds']} s "
        f"per side, synchronous={settings['driver_synchronous']}; queues topped up to at least "
        f"{settings['ready']} claimable messages before each turn",
        f"current = working tree at {settings['head']}"
        f"{' + uncommitted changes' if settings['dirty'] else ''}; "
        f"{args.base_label} = {settings['base_commit']}",
        "msgs/s: claimed-and-deleted messages per second; claims/s: messages claimed per second; "
        "msgs/cpu-s: claimed-and-deleted messages per CPU-second of the server's processes (http) or "
        "of the driver loop; claim ms: http p50 latency of the claim requests, driver median CPU time of one "
        "claim (del ms: of one delete); ratios: median over rounds of each round's ratio",
    ]
    if args.diagnostics and "a" in results:
        lines.append(f"diagnostic sides: {args.old_sqlite_label} = this tree with the "
                     f"zaqar_lite/storage/sqlite.py of {args.base_label} (no delays in the store); "
                     f"{args.hybrid_label} = {args.base_label} with this tree's "
                     f"zaqar_lite/server/gunicorn.py (its gunicorn settings); "
                     f"{args.ready_only_label} = this tree "
                     "with claims reading only the ready range (wrong for delayed messages); "
                     f"{args.index_label} = {args.base_label} on a store with this tree's index "
                     "messages_by_visibility")
    for key, layers in results.items():
        lines.append("")
        lines.extend(part_lines(key, layers, args))
    return "\n".join(lines)


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="a,b,c", help="which comparisons: a, b, c (all)")
    parser.add_argument("--layers", default="http,driver", help="http and/or driver (both)")
    parser.add_argument("--stores", default="sqlite",
                        help="stores of part a: sqlite and/or redis (sqlite); parts b and c use SQLite")
    parser.add_argument("--base-commit", default="5c7a35c", help="the build without delays (5c7a35c)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per server (2)")
    parser.add_argument("-c", "--concurrency", type=int, default=8, help="wrk connections (8)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds per HTTP comparison (10)")
    parser.add_argument("--seconds", type=int, default=2, help="seconds of wrk per side and round (2)")
    parser.add_argument("--driver-rounds", type=int, default=40, help="rounds per driver comparison (40)")
    parser.add_argument("--driver-seconds", type=float, default=0.25,
                        help="seconds of the driver loop per side and round (0.25)")
    parser.add_argument("--ready", type=int, default=2000,
                        help="claimable messages each queue is topped up to before a turn; part b "
                             "adds ten times as many delayed ones (2000)")
    parser.add_argument("--synchronous", choices=("full", "normal"), default="full",
                        help="SQLite synchronous mode of the servers' stores (full, zaqar-lite's default)")
    parser.add_argument("--driver-synchronous", choices=("full", "normal"), default="normal",
                        help="SQLite synchronous mode of the driver layer's stores (normal: no fsync "
                             "per commit, whose time on a shared disk swamps the differences measured)")
    parser.add_argument("--no-diagnostics", dest="diagnostics", action="store_false",
                        help="leave out the diagnostic sides of part a")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "wrk", help="wrk executable")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    parser.add_argument("--save", type=Path, help="also write every figure as JSON to this file")
    parser.add_argument("--worker", metavar="URI", help=argparse.SUPPRESS)
    parser.add_argument("--worker-variant", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    args.layers = [p.strip() for p in args.layers.split(",") if p.strip()]
    args.stores = [p.strip() for p in args.stores.split(",") if p.strip()]
    if set(args.parts) - set(PARTS) or set(args.layers) - {"http", "driver"} or set(args.stores) - set(KINDS):
        parser.error("--parts takes a, b, c; --layers takes http, driver; --stores takes sqlite, redis")
    if min(args.workers, args.concurrency, args.rounds, args.driver_rounds, args.seconds, args.ready) < 1 \
            or args.driver_seconds <= 0:
        parser.error("every count and duration must be positive")
    args.client_id = str(uuid.uuid4())
    args.base_label = args.base_commit[:7]
    args.hybrid_label = args.base_label + "+srv"
    args.old_sqlite_label = "cur+oldsqlite"
    args.ready_only_label = "current-1sel"
    args.index_label = args.base_label + "+idx"
    return args


def main(argv: list[str] | None = None) -> None:
    """Unpack the base commit when needed, run the chosen parts and layers, print the figures."""
    args = parse_args(argv)
    if args.worker:
        worker_main(args.worker, args.worker_variant)
        return
    if "http" in args.layers and not shutil.which(args.wrk):
        raise SystemExit(f"wrk not found ({args.wrk}); install it or give --wrk, or use --layers driver")
    settings = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "workers": args.workers,
        "concurrency": args.concurrency, "rounds": args.rounds, "seconds": args.seconds,
        "driver_rounds": args.driver_rounds,
        "driver_seconds": args.driver_seconds, "ready": args.ready, "synchronous": args.synchronous,
        "driver_synchronous": args.driver_synchronous,
        "head": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--", "zaqar_lite")),
        "cpus": os.cpu_count(), "load_before": os.getloadavg(),
    }
    results: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="zaqar-lite-dlq-delay-") as name:
        tmp = Path(name)
        base = tmp / "base"
        if "a" in args.parts:
            settings["base_commit"] = unpack_commit(args.base_commit, base)
        else:
            settings["base_commit"] = git("rev-parse", "--verify", args.base_commit + "^{commit}")
        runners: dict[str, dict[str, Callable[[], dict[str, Any]]]] = {
            "b": {"http": lambda: http_part_b(args, tmp), "driver": lambda: driver_part_b(args, tmp)},
            "c": {"http": lambda: http_part_c(args, tmp), "driver": lambda: driver_part_c(args, tmp)},
        }
        for key in args.parts:
            results[key] = part_a(args, tmp, base) if key == "a" else {
                layer: runners[key][layer]() for layer in args.layers}
    settings["load_after"] = os.getloadavg()
    document = json.dumps({"settings": settings, "results": results}, indent=2)
    if args.save:
        args.save.write_text(document + "\n")
    if args.json:
        print(document)
    else:
        print(render(results, settings, args))


if __name__ == "__main__":
    main()
