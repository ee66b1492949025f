"""HTTP load on zaqar-lite with wrk, next to a storage-free falcon app under the same gunicorn.

Three loads run against each server for ``--duration`` seconds each:

* ``post``: one message per POST;
* ``claim+delete``: claim ``limit=1`` (``--claim-limit``), then DELETE each message with the claim id
  from its href (a pair);
* ``mixed``: each cycle posts (``--post-ratio`` of cycles) or claims and deletes.

Figures are messages/s (posted, deleted, or both for mixed) and p50/p99 request
latency (wrk's, corrected for coordinated omission, and ``seen p99``: each request
counted once, as the script timed it; see ``wrk/queue_load.lua``), plus
zaqar-lite/minimal ratios, and the CPU a request costs: ``cpu us/req`` of the server's
processes (gunicorn's master and workers), ``store us/req`` of the store server
``--server`` started (zaqar-lite's and the floor's; the minimal app has none). Each load runs
in ``--rounds`` rounds in which the two servers take turns (in alternating order); rates and latencies are
medians over rounds, so that a burst of load from neighbours on a shared machine
hits both sides of a ratio alike and moves a median little.

``--floor`` adds a third server to the post load, the floor (``floor_app.py``):
the minimal app whose post also decodes the body, makes an id and stores the
message in one round trip to a store, through zaqar-lite's own connection code
(zaqar-lite's Redis, its own keys; or a SQLite file of its own), so that its row
and its ratio to the minimal app say how close a server that stores each
message before answering can come to the storage-free app; ``zl/floor`` gives
zaqar-lite's share of it. Its claims and deletes would be the minimal app's
fixed answers, so it takes no part in those loads.

``--server redis|mongodb|swift`` runs zaqar-lite on a throwaway server of that
kind, started and stopped with the suites' harness in ``tests/servers/``. A
claim on Swift waits the driver's settle time (0.5 s), one on SecantusDB can
take seconds: give those turns of 10 s (``--duration 20 --rounds 2``), since a
claim still in flight when a turn ends is not counted.

Usage: ``python benchmarks/http_load.py [--workers 2] [-c 8] [--duration 10] [--server KIND] [--floor]
[--json]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LUA_SCRIPT = HERE / "wrk" / "queue_load.lua"
LOADS = {"post": "post", "claim": "claim+delete", "mixed": "mixed"}
SERVERS = ("zaqar-lite", "minimal")
#: the server ``--floor`` adds, and the loads it takes part in (its claims and deletes store nothing)
FLOOR = "floor"
FLOOR_LOADS = ("post",)
#: the stores the floor writes to
FLOOR_SCHEMES = ("redis://", "sqlite://")
#: a load's ratios besides zaqar-lite/minimal (``ratio``) when the floor ran: (numerator, denominator)
FLOOR_RATIOS = {"floor_ratio": (FLOOR, "minimal"), "ratio_to_floor": ("zaqar-lite", FLOOR)}
STORE_SERVERS = ("redis", "mongodb", "swift")
MEDIAN_KEYS = ("messages_per_s", "p50_ms", "p99_ms")
#: the latency percentiles of the requests as the script timed them, each counted once (wrk's own,
#: p50_ms and p99_ms, are corrected for coordinated omission: see wrk/queue_load.lua)
SEEN_KEYS = ("seen_p50_ms", "seen_p99_ms")
SUMMED_KEYS = ("seconds", "requests", "posted", "claimed", "deleted", "empty_claims", "failures",
               "socket_errors", "cpu_s")
PROJECT = "bench"
BATCH = 20  # messages per POST when stocking the queue (the default per-request maximum)
START_TIMEOUT = 30.0
STOCK_TIMEOUT = 60.0
# A slow store (SecantusDB) can still be serving the requests wrk left in flight
# for many seconds after a turn, and the stats and stocking requests queue behind them.
REQUEST_TIMEOUT = 60.0


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def call(url: str, method: str, path: str, client_id: str, body: Any = None) -> tuple[int, bytes]:
    """Send one request with the headers every /v2 request needs; return status and body."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Client-ID": client_id, "X-Project-ID": PROJECT, "Content-Type": "application/json"}
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_until_ready(url: str, proc: subprocess.Popen[bytes] | None, log: Path | None) -> None:
    """Poll ``/v2/ping`` until it answers 204, the server exits, or START_TIMEOUT passes."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        with contextlib.suppress(OSError):
            if call(url, "GET", "/v2/ping", str(uuid.uuid4()))[0] == 204:
                return
        time.sleep(0.2)
    tail = log.read_text()[-2000:] if log and log.exists() else ""
    raise SystemExit(f"server at {url} did not become ready\n{tail}")


#: the session (process group leader's PID) of each server started by serving(), by URL
SESSIONS: dict[str, int] = {}
#: the PIDs of the store server store_server() started (zaqar-lite's store: its CPU counts with zaqar-lite's)
STORE_PIDS: set[int] = set()


def cpu_seconds(sessions: AbstractSet[int], pids: AbstractSet[int] = frozenset()) -> float:
    """CPU time used so far by the processes of these sessions and these PIDs (Linux /proc)."""
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is the state, field 3 of stat(5)
        if int(fields[3]) in sessions or int(entry.name) in pids:
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def store_cpu() -> float | None:
    """CPU seconds used so far by the store server store_server() started, or None when none was."""
    if not STORE_PIDS or not Path("/proc/self/stat").exists():
        return None
    return cpu_seconds(set(), STORE_PIDS)


def server_cpu(url: str) -> float | None:
    """CPU seconds used so far by the gunicorn processes of a server serving() started, or None."""
    if url not in SESSIONS or not Path("/proc/self/stat").exists():
        return None
    return cpu_seconds({SESSIONS[url]})


@contextlib.contextmanager
def serving(argv: list[str], workdir: Path, env: Mapping[str, str] | None = None,
            cwd: Path | None = None) -> Iterator[str]:
    """Run a server command on a free port (appended as ``--bind``) and yield its URL.

    Each server gets its own ``XDG_RUNTIME_DIR`` so the gunicorn control sockets
    of the two servers (and of anyone else's gunicorn) do not clash. ``env`` adds
    to (or overrides) the environment and ``cwd`` is the server's working
    directory (``python -m`` puts it first on ``sys.path``); the server's output
    goes to ``workdir/server.log``. The server leads a session of its own, noted
    in :data:`SESSIONS` under its URL.
    """
    bind = f"127.0.0.1:{free_port()}"
    workdir.mkdir()
    log = workdir / "server.log"
    env = dict(os.environ, XDG_RUNTIME_DIR=str(workdir), **(env or {}))
    with log.open("wb") as out:
        proc = subprocess.Popen([*argv, "--bind", bind], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=cwd, start_new_session=True)
    url = f"http://{bind}"
    SESSIONS[url] = proc.pid
    try:
        wait_until_ready(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def store_server(kind: str, directory: Path) -> Iterator[str]:
    """Start a throwaway store server of ``kind`` with the suites' harness and yield its storage URI.

    The harness picks free ports of 127.0.0.1 and keeps the server's files and
    logs in ``directory``. The server is stopped by its PIDs on the way out,
    whatever happened, a start that failed half-way included.
    """
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # tests.servers is not installed: it lives in the repository
    directory.mkdir()
    server: Any
    if kind == "redis":
        from tests.servers.redis import RedisServer

        server = RedisServer(directory)
    elif kind == "mongodb":
        from tests.servers.mongodb import SecantusServer

        server = SecantusServer(log_dir=str(directory))
    else:
        from tests.servers.swift import SwiftServer

        server = SwiftServer(directory)
    try:
        if kind == "swift":
            server.write_files()  # configs and rings come before the processes
        server.start()
        STORE_PIDS.update(store_pids(kind, server))
        if kind == "redis":
            yield server.uri()
        elif kind == "mongodb":
            yield server.uri + "zaqar_lite_bench"
        else:
            yield server.uri("bench")
    finally:
        STORE_PIDS.clear()
        server.stop()


def store_pids(kind: str, server: Any) -> set[int]:
    """The PIDs of a started store server of ``kind`` (Swift's: each of its processes)."""
    if kind == "redis":
        return {server.pid} if server.pid else set()
    if kind == "mongodb":
        return {server.process.pid} if server.process else set()
    return {process.pid for process in server.processes.values()}


def free_messages(url: str, queue: str, client_id: str) -> int:
    """Return how many messages of the queue are claimable now."""
    status, body = call(url, "GET", f"/v2/queues/{queue}/stats", client_id)
    if status != 200:
        raise SystemExit(f"GET /v2/queues/{queue}/stats -> {status} {body[:400]!r}")
    count: int = json.loads(body)["messages"]["free"]
    return count


def stock_queue(url: str, queue: str, client_id: str, target: int) -> int:
    """Post batches until the queue holds ``target`` free messages; return how many were posted."""
    missing = target - free_messages(url, queue, client_id)
    batch = {"messages": [{"body": {"event": "stock", "n": n}} for n in range(BATCH)]}
    deadline = time.monotonic() + STOCK_TIMEOUT
    posted = 0
    while posted < missing and time.monotonic() < deadline:
        status, body = call(url, "POST", f"/v2/queues/{queue}/messages", client_id, batch)
        if status != 201:
            raise SystemExit(f"POST /v2/queues/{queue}/messages -> {status} {body[:400]!r}")
        posted += BATCH
    return posted


def run_wrk(wrk: str, url: str, mode: str, args: argparse.Namespace, seconds: int,
            extra: Sequence[str] = ()) -> dict[str, Any]:
    """Run one load with wrk and return the figures its script printed.

    ``extra`` are the script's optional arguments after PROJECT (claim limit,
    delete mode, release ratio: see ``wrk/queue_load.lua``).
    """
    command = [wrk, "-t", str(args.concurrency), "-c", str(args.concurrency), "-d", f"{seconds}s",
               "--timeout", "10s", "-s", str(LUA_SCRIPT), url, "--",
               mode, args.queue, str(args.post_ratio), args.client_id, PROJECT, *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            figures: dict[str, Any] = json.loads(line.removeprefix("BENCH_JSON "))
            delivered = {"post": figures["posted"], "claim": figures["deleted"],
                         "mixed": figures["posted"] + figures["deleted"]}[mode]
            figures["messages_per_s"] = delivered / figures["seconds"]
            return figures
    raise SystemExit(f"wrk failed ({done.returncode}): {' '.join(command)}\n{done.stdout}{done.stderr}")


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge one server's rounds of a load: medians of the rates and latencies, sums of counts."""
    figures: dict[str, Any] = {key: statistics.median(r[key] for r in rounds) for key in MEDIAN_KEYS}
    figures.update({key: sum(r.get(key) or 0 for r in rounds) for key in SUMMED_KEYS})
    for key in SEEN_KEYS:  # none where wrk's LuaJIT has no ffi
        seen = [r.get(key) for r in rounds]
        figures[key] = statistics.median(seen) if None not in seen else None
    measured = all(r.get("cpu_s") is not None for r in rounds) and figures["requests"]
    figures["cpu_us_per_request"] = 1e6 * figures["cpu_s"] / figures["requests"] if measured else None
    if all("store_cpu_s" in r for r in rounds) and figures["requests"]:
        store_s = sum(r["store_cpu_s"] for r in rounds)
        figures["store_cpu_us_per_request"] = 1e6 * store_s / figures["requests"]
    figures["failure"] = next((r["failure"] for r in rounds if r["failure"]), None)
    figures["rounds"] = rounds
    return figures


def ratio(a: float | None, b: float | None) -> float | None:
    """Return a / b, or None when either is missing or b is zero."""
    return a / b if a is not None and b else None


def load_servers(urls: Mapping[str, str], mode: str) -> tuple[str, ...]:
    """The servers that take part in a load: zaqar-lite and the minimal app, and the floor in its loads."""
    return (*SERVERS, FLOOR) if FLOOR in urls and mode in FLOOR_LOADS else SERVERS


def run_load(urls: dict[str, str], mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one load in rounds, the servers taking turns, and return the merged figures and ratios."""
    seconds = args.duration // args.rounds
    servers = load_servers(urls, mode)
    rounds: dict[str, list[dict[str, Any]]] = {server: [] for server in servers}
    for turn in range(args.rounds):
        for server in servers if turn % 2 == 0 else reversed(servers):
            before, store_before = server_cpu(urls[server]), store_cpu()
            extra = [str(args.claim_limit)] if mode != "post" and args.claim_limit != 1 else []
            figures = run_wrk(args.wrk, urls[server], mode, args, seconds, extra)
            after, store_after = server_cpu(urls[server]), store_cpu()
            figures["cpu_s"] = after - before if before is not None and after is not None else None
            if server != "minimal" and store_before is not None and store_after is not None:
                figures["store_cpu_s"] = store_after - store_before
            rounds[server].append(figures)
    row = {server: combine(rounds[server]) for server in servers}
    keys = (*MEDIAN_KEYS, *SEEN_KEYS, "cpu_us_per_request")
    pairs = {"ratio": ("zaqar-lite", "minimal"), **(FLOOR_RATIOS if FLOOR in servers else {})}
    for name, (top, bottom) in pairs.items():
        row[name] = {key: ratio(row[top][key], row[bottom][key]) for key in keys}
    return row


def run_loads(urls: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """Warm the servers up, then run every load, stocking zaqar-lite's queue before it is consumed."""
    for url in urls.values():
        run_wrk(args.wrk, url, "post", args, args.warmup)
    results: dict[str, Any] = {}
    for mode in LOADS:
        stocked = 0
        if mode != "post":
            # A claim+delete pair costs two requests, so a queue holding what the post
            # load achieved in the same time lasts the whole load with room to spare.
            post_rate = results["post"]["zaqar-lite"]["messages_per_s"]
            # With several messages per claim a message costs little more than one request,
            # as a post does: stock twice as many.
            spare = 2 if args.claim_limit > 1 else 1
            target = max(1000, math.ceil(post_rate * args.duration * spare))
            stocked = stock_queue(urls["zaqar-lite"], args.queue, args.client_id, target)
        results[mode] = run_load(urls, mode, args)
        results[mode]["zaqar-lite"]["stocked"] = stocked
    return results


def number(value: float | None, digits: int) -> str:
    """Format a figure with ``digits`` decimals, or '-' when there is none.

    A figure so small that those decimals would keep less than two significant
    digits (a ratio on a slow store) gets the decimals it needs for two.
    """
    if value is None:
        return "-"
    if 0 < abs(value) < 10 ** (1 - digits):
        digits = 1 - math.floor(math.log10(abs(value)))
    return f"{value:.{digits}f}"


def table(results: dict[str, Any], settings: dict[str, Any]) -> str:
    """Render the figures as a plain-text table, followed by any failure or shortage."""
    lines = [
        "zaqar-lite vs minimal falcon app: {workers} workers, {concurrency} connections, "
        "{duration} s per load in {rounds} rounds, storage {storage}".format(**settings)
        + (f", claims of {settings['claim_limit']}" if settings.get("claim_limit", 1) != 1 else "")
        + (f", floor on {settings['floor']}" if settings.get("floor") else ""),
        f"{'load':<14}{'server':<12}{'msgs/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'requests':>10}{'non-2xx':>9}{'sock err':>9}{'cpu us/req':>11}{'seen p99':>10}"
        f"{'store us/req':>13}",
    ]
    notes = []
    for mode, title in LOADS.items():
        row = results[mode]
        for server in (*SERVERS, FLOOR):
            if server not in row:
                continue
            f = row[server]
            lines.append(f"{title if server == SERVERS[0] else '':<14}{server:<12}"
                         f"{f['messages_per_s']:>10.1f}{f['p50_ms']:>9.2f}{f['p99_ms']:>9.2f}"
                         f"{f['requests']:>10}{f['failures']:>9}{f['socket_errors']:>9}"
                         f"{number(f.get('cpu_us_per_request'), 0):>11}"
                         f"{number(f.get('seen_p99_ms'), 2):>10}"
                         f"{number(f.get('store_cpu_us_per_request'), 0) if server != 'minimal' else '':>13}")
            if f["failure"]:
                notes.append(f"{title} on {server}: {f['failures']} failed, first: {f['failure']}")
            if f["empty_claims"]:
                notes.append(f"{title} on {server}: {f['empty_claims']} claims found the queue empty")
            if not f["messages_per_s"]:
                notes.append(f"{title} on {server}: no message delivered in {f['seconds']:.0f} s")
        for name, label in (("ratio", "ratio"), ("floor_ratio", "floor/min"), ("ratio_to_floor", "zl/floor")):
            if name not in row:
                continue
            r = row[name]
            lines.append(f"{'':<14}{label:<12}{number(r['messages_per_s'], 3):>10}"
                         f"{number(r['p50_ms'], 2):>9}{number(r['p99_ms'], 2):>9}{'':>37}"
                         f"{number(r.get('cpu_us_per_request'), 2):>11}"
                         f"{number(r.get('seen_p99_ms'), 2):>10}")
    return "\n".join(lines + notes)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="benchmark this running zaqar-lite instead of starting one "
                        "(give it --workers workers so the minimal app matches)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of both servers (2)")
    parser.add_argument("--storage", help="storage URI of the started zaqar-lite "
                        "(default: a SQLite file in a temporary directory)")
    parser.add_argument("--server", choices=STORE_SERVERS,
                        help="run the started zaqar-lite on a throwaway server of this kind; on "
                        "swift and mongodb a claim takes 0.5 s or more: use turns of 10 s, "
                        "e.g. --duration 20 --rounds 2")
    parser.add_argument("-c", "--concurrency", type=int, default=8,
                        help="wrk connections, one per wrk thread (8)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per load and server (10)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="turns per load and server; --duration must be a multiple (5)")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of posting before the loads (2)")
    parser.add_argument("--post-ratio", type=float, default=0.5,
                        help="share of mixed-load cycles that post rather than claim+delete (0.5)")
    parser.add_argument("--claim-limit", type=int, default=1,
                        help="messages per claim of the claim+delete and mixed loads, each deleted by "
                             "its own request (1)")
    parser.add_argument("--queue", default="bench-http-load", help="queue name (bench-http-load)")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "wrk", help="wrk executable")
    parser.add_argument("--floor", action="store_true",
                        help="add the floor app (floor_app.py) to the post load: the minimal app storing "
                             "each post in one round trip to zaqar-lite's Redis, or to a SQLite file")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if min(args.workers, args.concurrency, args.rounds, args.warmup) < 1:
        parser.error("--workers, --concurrency, --rounds and --warmup must be at least 1")
    if args.duration < args.rounds or args.duration % args.rounds:
        parser.error("--duration must be a multiple of --rounds (wrk takes whole seconds)")
    if not 0 <= args.post_ratio <= 1:
        parser.error("--post-ratio must be between 0 and 1")
    if args.server and (args.storage or args.url):
        parser.error("--server starts the store of the started zaqar-lite: not with --storage or --url")
    if args.floor and (args.server not in (None, "redis")
                       or (args.storage and not args.storage.startswith(FLOOR_SCHEMES))):
        parser.error("--floor stores on Redis (redis://) or SQLite: not with another store")
    args.client_id = str(uuid.uuid4())
    return args


def floor_storage(storage: str, directory: str) -> str:
    """The floor's store: zaqar-lite's Redis (keys of its own), else a SQLite file of its own in
    ``directory``, with the options of zaqar-lite's SQLite URI (``synchronous``)."""
    if storage.startswith("redis://"):
        return storage
    query = storage.partition("?")[2] if storage.startswith("sqlite://") else ""
    return f"sqlite:///{directory}/floor.db" + (f"?{query}" if query else "")


def main(argv: list[str] | None = None) -> None:
    """Start the servers, run the loads and print the figures."""
    args = parse_args(argv)
    # The servers run in sessions of their own, so a plain kill of this process would leave
    # them behind; as an exception, SIGTERM unwinds the stack below and stops them.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="zaqar-lite-bench-") as tmp, contextlib.ExitStack() as stack:
        if args.server:
            storage = stack.enter_context(store_server(args.server, Path(tmp, args.server)))
        else:
            storage = args.storage or f"sqlite:///{tmp}/bench.db"
        workers = ["--workers", str(args.workers)]
        zaqar_command = [sys.executable, "-m", "zaqar_lite", "serve", "--storage", storage, *workers]
        minimal_command = [sys.executable, str(HERE / "minimal_app.py"), *workers]
        zaqar_url = args.url or stack.enter_context(serving(zaqar_command, Path(tmp, "zaqar")))
        minimal_url = stack.enter_context(serving(minimal_command, Path(tmp, "minimal")))
        urls = {"zaqar-lite": zaqar_url, "minimal": minimal_url}
        floor = floor_storage(storage, tmp) if args.floor else None
        if floor:
            floor_command = [sys.executable, str(HERE / "floor_app.py"), "--storage", floor, *workers]
            urls[FLOOR] = stack.enter_context(serving(floor_command, Path(tmp, FLOOR)))
        if args.url:
            wait_until_ready(args.url, None, None)
        results = run_loads(urls, args)
    settings = {"workers": args.workers, "concurrency": args.concurrency, "duration": args.duration,
                "rounds": args.rounds, "post_ratio": args.post_ratio, "claim_limit": args.claim_limit,
                "storage": args.url or storage, "floor": floor,
                "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if args.json:
        print(json.dumps({"settings": settings, "loads": results}, indent=2))
    else:
        print(table(results, settings))


if __name__ == "__main__":
    main()
