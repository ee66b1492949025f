"""zaqar-lite against OpenStack Zaqar on the same kind of Redis, loaded with wrk in one run.

Servers, each under gunicorn with the same worker count and worker settings,
each on its own store on 127.0.0.1:

* ``zaqar``: OpenStack Zaqar (``zaqar[redis]`` from PyPI, in a virtualenv of its
  own that this script creates once under ``--cache-dir``), noauth, Redis as
  message and management store, on a throwaway redis-server of its own;
* ``lite-redis``: zaqar-lite on another throwaway redis-server;
* ``lite-sqlite``: zaqar-lite on a SQLite file;
* ``lite-mongodb``: zaqar-lite on SecantusDB, a MongoDB wire-protocol server
  (indicative only: it is not mongod, and much slower; measured on its own at
  the end, one short turn per load on a small claim queue).

Loads, each in ``--rounds`` rounds in which every server gets one turn of wrk,
the order rotating from round to round:

* ``post``: one message per POST;
* ``claim``: ``POST .../claims?limit=10``, then one bulk
  ``DELETE .../messages?ids=...&claim_ids=...`` of the claimed messages, from a
  queue pre-filled with ``--claim-queue`` (50,000) messages and topped up to
  that before every turn;
* ``mixed``: on a queue with a dead-letter queue configured
  (``_max_claim_count`` 1): each cycle posts one message (half of the cycles),
  or claims one and deletes it, or releases its claim (``--release-ratio`` of
  the claims), so that the next claim of a released message moves it to the DLQ;
* ``held`` (with ``--held-claims N``): ``claim`` again once the first N
  messages of the queue are held by long claims, as slow consumers leave them.

After each turn the script waits until the server's processes are idle, so
that what wrk left in flight does not run into the next server's turn.

Then the claim cost as the queue grows (``--growth-sizes``, 1k to 100k) on
zaqar-lite on Redis: claim ``limit=10`` and release, on one queue of each size
(topped up before each turn, so the size stays put), the sizes taking turns.
Then the unmodified ``zaqar-bench`` of the same Zaqar package against
zaqar-lite (and against Zaqar itself, for reference): did every request succeed?

Usage: ``python benchmarks/zaqar_compare.py [--workers 2] [-c 8] [--duration 10]
[--rounds 5] [--servers zaqar,lite-redis,lite-sqlite,lite-mongodb] [--json]``
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.client
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from http_load import BATCH, SESSIONS, call, cpu_seconds, free_messages, run_wrk, serving

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # for tests.servers: the throwaway Redis and SecantusDB servers

SERVERS = ("zaqar", "lite-redis", "lite-sqlite", "lite-mongodb")
LABELS = {"zaqar": "zaqar (redis)", "lite-redis": "lite redis", "lite-sqlite": "lite sqlite",
          "lite-mongodb": "lite mongodb*"}
REFERENCE, SUBJECT = "zaqar", "lite-redis"
LOADS = {"post": "post 1 msg", "claim": "claim10+del", "mixed": "mixed+DLQ", "held": "claim, held"}
QUEUES = {"post": "bench-post", "claim": "bench-claim", "mixed": "bench-mixed"}
DLQ = "bench-mixed-dlq"
DLQ_METADATA = {"_max_claim_count": 1, "_dead_letter_queue": DLQ}
CLAIM_LIMIT = 10
GOALS = {"post": 3.0, "claim": 10.0, "held": 10.0}
#: the latency goal: zaqar-lite's p99 at wrk's connections, as the requests were timed one by one
#: (``seen_p99_ms``: wrk's own p99 is corrected for coordinated omission, see benchmarks/README.rst)
P99_GOAL_MS = 10.0
#: how far apart zaqar-lite's rates may be over the rounds of a load: the largest at most this much above
#: the smallest
ROUNDS_SPREAD_GOAL = 0.15
HELD_TTL = 3600  # seconds the claims holding the head of the queue in the "held" load last
ZAQAR_SPEC = "zaqar[redis]"
# gunicorn serves Zaqar; the others are what zaqar-bench imports without the package declaring them.
ZAQAR_EXTRAS = ("gunicorn", "gevent", "marktime", "python-zaqarclient", "openstacksdk")
READY_MARK = ".zaqar-lite-bench-ready"
WSGI_MODULE = "zaqar_bench_wsgi"
WSGI_WRAPPER = '''"""WSGI entry point: Zaqar's wsgi transport, configured from $ZAQAR_BENCH_CONFIG."""
import os

from oslo_config import cfg
from oslo_log import log

from zaqar import bootstrap
from zaqar.common import consts

CONF = cfg.CONF
log.register_options(CONF)
CONF(args=[], project="zaqar", prog="zaqar-queues",
     default_config_files=[os.environ["ZAQAR_BENCH_CONFIG"]])
log.setup(CONF, "zaqar")
boot = bootstrap.Bootstrap(CONF)
CONF.drivers.transport = consts.TRANSPORT_WSGI
application = boot.transport.app
'''
ZAQAR_CONFIG = """[DEFAULT]
# noauth: no keystone middleware; the project comes from X-Project-ID
auth_strategy =
pooling = False
debug = False

[drivers]
transport = wsgi
message_store = redis
management_store = redis

[drivers:message_store:redis]
uri = {uri}

[drivers:management_store:redis]
uri = {uri}
"""
ZAQAR_BENCH_ARGS = ("-pp", "1", "-pw", "2", "-cp", "1", "-cw", "2", "-op", "1", "-ow", "1")
FILL_THREADS = 4
FILL_TIMEOUT = 300.0
INSTALL_TIMEOUT = 1200.0


def log(message: str) -> None:
    """Say what is happening, on stderr (the figures go to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- Zaqar's virtualenv and files ---------------------------------------------------------------


def ensure_zaqar_venv(venv: Path, spec: str) -> Path:
    """Create (once) a virtualenv with Zaqar from PyPI; return it. Reused while ``spec`` is the same."""
    mark = venv / READY_MARK
    wanted = json.dumps({"spec": spec, "extras": list(ZAQAR_EXTRAS)})
    if mark.exists() and mark.read_text() == wanted:
        return venv
    log(f"creating {venv} with pip install '{spec}' {' '.join(ZAQAR_EXTRAS)} (a few minutes, once)")
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                    spec, *ZAQAR_EXTRAS], check=True, timeout=INSTALL_TIMEOUT)
    mark.write_text(wanted)
    return venv


def zaqar_version(venv: Path) -> str:
    """The installed Zaqar's version."""
    done = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import importlib.metadata as m; print(m.version('zaqar'))"],
                          capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


def write_zaqar_files(directory: Path, redis_uri: str) -> Path:
    """Write Zaqar's config file and the WSGI wrapper module into ``directory``; return the config."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{WSGI_MODULE}.py").write_text(WSGI_WRAPPER)
    config = directory / "zaqar.conf"
    config.write_text(ZAQAR_CONFIG.format(uri=redis_uri))
    return config


def lite_gunicorn_settings(workers: int) -> dict[str, Any]:
    """zaqar-lite's own gunicorn settings (worker class, threads, keep-alive...), read from its Server."""
    from zaqar_lite.config import load_settings
    from zaqar_lite.server.gunicorn import Server

    cfg = Server(load_settings(None, bind="127.0.0.1:0", workers=workers)).cfg
    return {"workers": cfg.workers, "worker_class": cfg.worker_class_str, "threads": cfg.threads,
            "keepalive": cfg.keepalive, "timeout": cfg.timeout, "graceful_timeout": cfg.graceful_timeout,
            "backlog": cfg.backlog}


def zaqar_command(venv: Path, app_dir: Path, gunicorn: dict[str, Any]) -> list[str]:
    """gunicorn serving Zaqar with zaqar-lite's worker settings (``--bind`` is added by serving()).

    zaqar-lite's own worker class extends gunicorn's gevent worker (read deadlines, balanced
    accepts) and does not exist in Zaqar's virtualenv: Zaqar gets gunicorn's gevent worker.
    """
    worker_class = gunicorn["worker_class"]
    if worker_class.startswith("zaqar_lite."):
        worker_class = "gevent"
    return [str(venv / "bin" / "gunicorn"), "--chdir", str(app_dir),
            "--workers", str(gunicorn["workers"]), "--worker-class", worker_class,
            "--threads", str(gunicorn["threads"]), "--keep-alive", str(gunicorn["keepalive"]),
            "--timeout", str(gunicorn["timeout"]), "--graceful-timeout", str(gunicorn["graceful_timeout"]),
            "--backlog", str(gunicorn["backlog"]), "--no-control-socket", f"{WSGI_MODULE}:application"]


def lite_command(storage: str, workers: int) -> list[str]:
    """``zaqar-lite serve`` on a store (``--bind`` is added by serving())."""
    return [sys.executable, "-m", "zaqar_lite", "serve", "--storage", storage, "--workers", str(workers)]


# -- queues --------------------------------------------------------------------------------------


def expect(status: int, body: bytes, allowed: Sequence[int], what: str) -> None:
    """Stop with the exact exchange when a set-up request is answered unexpectedly."""
    if status not in allowed:
        raise SystemExit(f"{what} -> {status} {body[:600]!r}")


def create_queue(url: str, client_id: str, queue: str, metadata: dict[str, Any] | None = None) -> None:
    """PUT a queue (with metadata), 201 or 204."""
    status, body = call(url, "PUT", f"/v2/queues/{queue}", client_id, metadata or {})
    expect(status, body, (201, 204), f"PUT /v2/queues/{queue} {json.dumps(metadata or {})}")


def post_batches(url: str, queue: str, client_id: str, count: int, threads: int = FILL_THREADS) -> float:
    """Post ``count`` messages in batches of 20, ``threads`` requests at a time; return the seconds."""
    sizes = [BATCH] * (count // BATCH) + ([count % BATCH] if count % BATCH else [])
    started = time.monotonic()

    def post(size: int) -> None:
        batch = {"messages": [{"body": {"event": "stock", "n": n}, "ttl": 3600} for n in range(size)]}
        status, body = call(url, "POST", f"/v2/queues/{queue}/messages", client_id, batch)
        expect(status, body, (201,), f"POST /v2/queues/{queue}/messages ({size} messages)")
        if time.monotonic() - started > FILL_TIMEOUT:
            raise SystemExit(f"filling {queue} at {url} took over {FILL_TIMEOUT:.0f} s")

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(post, size) for size in sizes]:
            future.result()
    return time.monotonic() - started


def top_up(url: str, queue: str, client_id: str, target: int) -> int:
    """Post until the queue holds ``target`` free messages; return how many were posted."""
    missing = target - free_messages(url, queue, client_id)
    if missing > 0:
        post_batches(url, queue, client_id, missing)
    return max(missing, 0)


def send_leftovers(url: str, client_id: str, figures: dict[str, Any]) -> None:
    """Send the deletes and releases a wrk run left due, so no claim lingers (404 is fine)."""
    for line in figures.get("leftover") or []:
        method, path = line.split(" ", 1)
        call(url, method, path, client_id)


# -- one wrk turn --------------------------------------------------------------------------------


def wrk_turn(args: argparse.Namespace, url: str, mode: str, queue: str, seconds: int,
             extra: Sequence[str] = (), post_ratio: float = 0.5) -> dict[str, Any]:
    """One timed wrk run of queue_load.lua; adds claims/s and posted+deleted messages/s."""
    options = argparse.Namespace(concurrency=args.concurrency, queue=queue, post_ratio=post_ratio,
                                 client_id=args.client_id)
    figures = run_wrk(args.wrk, url, mode, options, seconds, extra)
    figures["claims_per_s"] = figures["claims"] / figures["seconds"]
    if not figures["requests"]:  # nothing answered: wrk's percentiles say 0, which would read as fast
        figures["p50_ms"] = figures["p99_ms"] = figures["seen_p50_ms"] = figures["seen_p99_ms"] = None
    return figures


# The processes of each server (its gunicorn's session, its store's PID), to wait after a turn
# until the server has finished the requests wrk left in flight, before the next server's turn.
WATCHED: dict[str, tuple[set[int], set[int]]] = {}


def watch(url: str, sessions: Sequence[int] = (), pids: Sequence[int] = ()) -> None:
    """Note the processes behind a server."""
    watched = WATCHED.setdefault(url, (set(), set()))
    watched[0].update(sessions)
    watched[1].update(pids)


def server_cpu(url: str) -> tuple[float, float] | None:
    """CPU seconds used so far by a server's gunicorn processes and by its store, None if unknown."""
    if url not in WATCHED or not Path("/proc/self/stat").exists():
        return None
    sessions, pids = WATCHED[url]
    return cpu_seconds(sessions), cpu_seconds(set(), pids)


def settle(url: str, limit: float, window: float = 0.25, idle: float = 0.15) -> float:
    """Wait until the server's processes use less than ``idle`` of a core, at most ``limit`` s."""
    if url not in WATCHED or limit <= 0 or not Path("/proc/self/stat").exists():
        return 0.0
    started = time.monotonic()
    before = cpu_seconds(*WATCHED[url])
    while time.monotonic() - started < limit:
        time.sleep(window)
        after = cpu_seconds(*WATCHED[url])
        if after - before < idle * window:
            break
        before = after
    return time.monotonic() - started


def median(rounds: list[dict[str, Any]], key: str) -> float | None:
    """The median of a figure over rounds (None when no round has it)."""
    values = [r[key] for r in rounds if r.get(key) is not None]
    return statistics.median(values) if values else None


SUMMED = ("seconds", "requests", "posted", "claimed", "deleted", "released", "claims", "empty_claims",
          "failures", "socket_errors", "settle_s", "cpu_s", "store_cpu_s")
#: ``p50_ms``/``p99_ms`` are wrk's (corrected for coordinated omission), ``seen_*`` every request as the
#: script timed it, ``claim_*`` the claims alone (see wrk/queue_load.lua)
MEDIANS = ("messages_per_s", "claims_per_s", "p50_ms", "p99_ms", "seen_p50_ms", "seen_p99_ms",
           "claim_p50_ms", "claim_p99_ms")


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One server's rounds of a load: medians of rates and latencies, sums of counts."""
    figures: dict[str, Any] = {key: median(rounds, key) for key in MEDIANS}
    figures.update({key: sum(r.get(key) or 0 for r in rounds) for key in SUMMED})
    delivered = sum(r["messages_per_s"] * r["seconds"] for r in rounds)
    figures["overall_messages_per_s"] = delivered / figures["seconds"] if figures["seconds"] else None
    measured = all(r.get("cpu_s") is not None for r in rounds)
    figures["cpu_ms_per_msg"] = 1000 * figures["cpu_s"] / delivered if measured and delivered else None
    figures["store_cpu_ms_per_msg"] = (1000 * figures["store_cpu_s"] / delivered
                                       if measured and delivered else None)
    figures["failure"] = next((r["failure"] for r in rounds if r["failure"]), None)
    figures["rounds"] = [{k: v for k, v in r.items() if k != "leftover"} for r in rounds]
    return figures


def rotate(items: Sequence[str], turn: int) -> list[str]:
    """The turn order of a round: rotated by one each round, reversed every other round."""
    order = list(items[turn % len(items):]) + list(items[:turn % len(items)])
    return order[::-1] if turn % 2 else order


def interleave(sides: Sequence[str], rounds: int,
               turn: Callable[[str], dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Run ``rounds`` rounds of one turn per side; return each side's figures per round."""
    figures: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for n in range(rounds):
        for side in rotate(sides, n):
            figures[side].append(turn(side))
    return figures


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None."""
    return a / b if a is not None and b else None


def paired_ratios(subject: list[dict[str, Any]], reference: list[dict[str, Any]], key: str) -> list[float]:
    """Per-round ratios subject/reference of one figure (both turns taken within the same round)."""
    return [s[key] / r[key] for s, r in zip(subject, reference, strict=True) if r.get(key) and
            s.get(key) is not None]


# -- the loads -----------------------------------------------------------------------------------


def prepare(args: argparse.Namespace, server: str, url: str, claim_queue: int) -> float:
    """Create the queues (the mixed one with its DLQ), warm up, fill the claim queue; return its seconds."""
    for queue in (QUEUES["post"], QUEUES["claim"], DLQ):
        create_queue(url, args.client_id, queue)
    create_queue(url, args.client_id, QUEUES["mixed"], DLQ_METADATA)
    log(f"{server}: warming up ({args.warmup} s of posts), "
        f"filling {QUEUES['claim']} with {claim_queue} messages")
    wrk_turn(args, url, "post", QUEUES["post"], args.warmup)
    seconds = post_batches(url, QUEUES["claim"], args.client_id, claim_queue)
    log(f"{server}: filled in {seconds:.1f} s ({claim_queue / seconds:.0f} msgs/s in 20-message posts, "
        f"{FILL_THREADS} at a time)")
    post_batches(url, QUEUES["mixed"], args.client_id, args.mixed_stock)
    return seconds


def load_turn(args: argparse.Namespace, url: str, load: str, seconds: int, claim_queue: int,
              top_ups: bool = True) -> dict[str, Any]:
    """One timed turn of a load on one server; the claim and mixed queues are topped up first.

    ``cpu_s`` is the CPU time the server's processes used from the start of the
    turn until they had finished what wrk left in flight (top-ups excluded).
    """
    if load in ("claim", "held") and top_ups:
        top_up(url, QUEUES["claim"], args.client_id, claim_queue)
    elif load == "mixed" and top_ups:
        top_up(url, QUEUES["mixed"], args.client_id, args.mixed_stock)
    cpu_before = server_cpu(url)
    if load == "post":
        figures = wrk_turn(args, url, "post", QUEUES["post"], seconds)
    else:
        if load in ("claim", "held"):
            figures = wrk_turn(args, url, "claim", QUEUES["claim"], seconds, (str(CLAIM_LIMIT), "bulk", "0"))
        else:
            figures = wrk_turn(args, url, "mixed", QUEUES["mixed"], seconds,
                               ("1", "each", str(args.release_ratio)), post_ratio=0.5)
        send_leftovers(url, args.client_id, figures)
    figures["settle_s"] = settle(url, args.settle_max)
    cpu_after = server_cpu(url)
    if cpu_before is not None and cpu_after is not None:
        figures["cpu_s"] = cpu_after[0] + cpu_after[1] - cpu_before[0] - cpu_before[1]
        figures["store_cpu_s"] = cpu_after[1] - cpu_before[1]
    return figures


def hold_head(url: str, queue: str, client_id: str, count: int) -> float:
    """Claim the first ``count`` free messages for HELD_TTL s, as slow consumers do; return the seconds."""
    started = time.monotonic()
    held = 0
    while held < count:
        status, body = call(url, "POST", f"/v2/queues/{queue}/claims?limit={min(BATCH, count - held)}",
                            client_id, {"ttl": HELD_TTL, "grace": 60})
        expect(status, body, (201,), f"POST /v2/queues/{queue}/claims (holding the head)")
        held += len(json.loads(body)["messages"])
        if time.monotonic() - started > FILL_TIMEOUT:
            raise SystemExit(f"holding {count} messages of {queue} at {url} took over {FILL_TIMEOUT:.0f} s")
    return time.monotonic() - started


def run_loads(args: argparse.Namespace, urls: dict[str, str]) -> dict[str, Any]:
    """Prepare every server's queues, then run the three loads, the servers taking turns in rounds."""
    servers = list(urls)
    seconds = args.duration // args.rounds
    fills = {server: prepare(args, server, url, args.claim_queue) for server, url in urls.items()}
    results: dict[str, Any] = {}
    for load in (name for name in LOADS if name != "held" or args.held_claims):
        if load == "held":
            for server, url in urls.items():
                log(f"{server}: holding the first {args.held_claims} messages of {QUEUES['claim']} with "
                    f"claims of {HELD_TTL} s")
                top_up(url, QUEUES["claim"], args.client_id, args.claim_queue)
                hold_head(url, QUEUES["claim"], args.client_id, args.held_claims)
        log(f"load {load}: {args.rounds} rounds of {seconds} s per server")

        def turn(server: str, load: str = load) -> dict[str, Any]:
            return load_turn(args, urls[server], load, seconds, args.claim_queue)

        rounds = interleave(servers, args.rounds, turn)
        results[load] = {server: combine(rounds[server]) for server in servers}
        if REFERENCE in servers:
            for server in servers:
                results[load][server]["vs_zaqar_per_round"] = paired_ratios(
                    rounds[server], rounds[REFERENCE], "messages_per_s")
    results["dlq"] = {server: free_messages(url, DLQ, args.client_id) for server, url in urls.items()}
    results["fill_seconds"] = fills
    return results


def run_mongodb(args: argparse.Namespace, tmp: Path) -> dict[str, Any] | None:
    """The indicative MongoDB column: zaqar-lite on SecantusDB, started last, one turn per load.

    Not interleaved with the others: a claim on SecantusDB can take seconds, so the
    server keeps working on wrk's last requests long after a turn ends, and would
    slow down whichever server came next.
    """
    from tests.servers.mongodb import SecantusServer

    mongo = SecantusServer(log_dir=str(tmp))
    try:
        mongo.start()
    except RuntimeError as exc:
        log(f"no MongoDB column: {exc}")
        return None
    try:
        log("starting lite-mongodb (SecantusDB)")
        with serving(lite_command(mongo.uri + "zaqar_lite_bench", args.workers), tmp / "lite-mongodb",
                     cwd=REPO) as url:
            fill = prepare(args, "lite-mongodb", url, args.mongodb_claim_queue)
            results: dict[str, Any] = {"fill_seconds": fill}
            for load in ("post", "mixed", "claim"):  # claim last: its requests outlast the turn the most
                log(f"lite-mongodb: load {load} for {args.mongodb_seconds} s")
                results[load] = combine([load_turn(args, url, load, args.mongodb_seconds,
                                                   args.mongodb_claim_queue, top_ups=False)])
            return results
    finally:
        mongo.stop()


def add_ratios(loads: dict[str, Any], servers: Sequence[str]) -> None:
    """Each server's figures as ratios to Zaqar's (``vs_zaqar``)."""
    for load in (name for name in LOADS if name in loads):
        ref = loads[load].get(REFERENCE)
        for server in servers:
            if ref is not None and server in loads[load]:
                f = loads[load][server]
                f["vs_zaqar"] = {key: ratio(f[key], ref[key])
                                 for key in (*MEDIANS, "overall_messages_per_s", "cpu_ms_per_msg")}


def run_growth(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """Claim limit=10 + release on queues of each size, the sizes taking turns; figures per size."""
    seconds = args.growth_duration // args.growth_rounds
    queues = {size: f"bench-growth-{size}" for size in args.growth_sizes}
    for size, queue in queues.items():
        create_queue(url, args.client_id, queue)
        log(f"lite-redis: filling {queue} with {size} messages")
        post_batches(url, queue, args.client_id, size)

    def turn(size_name: str) -> dict[str, Any]:
        size = int(size_name)
        top_up(url, queues[size], args.client_id, size)
        figures = wrk_turn(args, url, "claim", queues[size], seconds, (str(CLAIM_LIMIT), "bulk", "1"))
        send_leftovers(url, args.client_id, figures)
        figures["settle_s"] = settle(url, args.settle_max)
        return figures

    log(f"claim cost vs queue size: {args.growth_rounds} rounds of {seconds} s per size")
    rounds = interleave([str(size) for size in args.growth_sizes], args.growth_rounds, turn)
    return {size: combine(rounds[size]) for size in rounds}


# -- zaqar-bench ---------------------------------------------------------------------------------


class RecordingProxy(http.server.ThreadingHTTPServer):
    """Forward every request to ``upstream`` unchanged; keep each exchange not answered 2xx."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.failures: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), ProxyHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    """One exchange through RecordingProxy."""

    protocol_version = "HTTP/1.1"
    server: RecordingProxy
    HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}

    def forward(self) -> None:
        """Send the request upstream as it came; answer with what came back."""
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in self.HOP}
        upstream = http.client.HTTPConnection(*self.server.upstream, timeout=30)
        try:
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            resp = upstream.getresponse()
            data = resp.read()
        finally:
            upstream.close()
        if not 200 <= resp.status < 300:
            with self.server.lock:
                self.server.failures.append({
                    "request": f"{self.command} {self.path}", "request_headers": headers,
                    "request_body": body.decode(errors="replace"), "status": resp.status,
                    "response_headers": dict(resp.getheaders()),
                    "response_body": data.decode(errors="replace")[:2000]})
        self.send_response_only(resp.status, resp.reason)
        for key, value in resp.getheaders():
            if key.lower() not in self.HOP | {"content-length"}:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = forward

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet."""


@contextlib.contextmanager
def recording_proxy(upstream: str) -> Iterator[RecordingProxy]:
    """A RecordingProxy in a thread, shut down afterwards."""
    proxy = RecordingProxy(upstream)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()


def zaqar_bench(venv: Path, url: str, seconds: int, workdir: Path) -> dict[str, Any]:
    """Run the unmodified zaqar-bench against ``url``; return its JSON, its error lines and a verdict."""
    command = [str(venv / "bin" / "zaqar-bench"), "-s", url, "-t", str(seconds), *ZAQAR_BENCH_ARGS,
               "--nodebug"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}  # noauth, whatever the shell has
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120, env=env,
                          cwd=workdir, check=False)
    report = next((json.loads(line) for line in reversed(done.stdout.splitlines())
                   if line.startswith("{")), None)
    errors = [line for line in done.stderr.splitlines() if line.startswith("Could not")]
    result: dict[str, Any] = {"command": command, "returncode": done.returncode, "report": report,
                              "error_lines": errors[:20], "error_count": len(errors)}
    if report is None:
        result["ok"] = False
        result["output"] = (done.stdout + done.stderr)[-3000:]
        return result
    roles = {}
    for role in ("producer", "consumer", "observer"):
        r = report[role]
        roles[role] = {"requests": r["total_reqs"], "succeeded": r["successful_reqs"],
                       "reqs_per_s": r["reqs_per_sec"], "ms_per_req": r.get("ms_per_req")}
    roles["consumer"]["messages"] = report["consumer"].get("messages_processed")
    result["roles"] = roles
    result["ok"] = (done.returncode == 0 and not errors and
                    all(r["requests"] > 0 and r["requests"] == r["succeeded"] for r in roles.values()))
    return result


def run_zaqar_bench(args: argparse.Namespace, venv: Path, urls: dict[str, str], tmp: Path) -> dict[str, Any]:
    """zaqar-bench against each chosen server; a failed zaqar-lite run is repeated through a recorder."""
    results: dict[str, Any] = {}
    for server in args.zaqar_bench_servers:
        if server not in urls:
            continue
        log(f"zaqar-bench against {server} for {args.zaqar_bench_seconds} s")
        workdir = tmp / f"zaqar-bench-{server}"
        workdir.mkdir(exist_ok=True)
        result = zaqar_bench(venv, urls[server], args.zaqar_bench_seconds, workdir)
        if server != REFERENCE and (not result["ok"] or args.record):
            log(f"zaqar-bench against {server} again, through a recording proxy")
            with recording_proxy(urls[server]) as proxy:
                result["recorded"] = zaqar_bench(venv, proxy.url, args.zaqar_bench_seconds, workdir)
                result["recorded"]["non_2xx"] = proxy.failures[:10]
                result["recorded"]["non_2xx_count"] = len(proxy.failures)
        results[server] = result
    return results


# -- output --------------------------------------------------------------------------------------


def num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    """A figure, or '-'."""
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def render(results: dict[str, Any], settings: dict[str, Any]) -> str:
    """The figures as plain-text tables, the goals and any failure."""
    lines = [
        f"zaqar-lite vs OpenStack Zaqar {settings['zaqar_version']} (redis): {settings['workers']} gunicorn "
        f"workers each ({settings['gunicorn']['worker_class']}, {settings['gunicorn']['threads']} threads, "
        f"keep-alive {settings['gunicorn']['keepalive']}), wrk {settings['concurrency']} connections, "
        f"{settings['duration']} s per load and server in {settings['rounds']} rounds",
        f"{'load':<16}{'server':<15}{'msgs/s':>9}{'x zaqar':>8}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'p99 x zq':>9}{'seen p50':>9}{'seen p99':>9}{'seen x zq':>10}{'claim p50':>10}{'claim p99':>10}"
        f"{'requests':>9}{'non-2xx':>8}{'sockerr':>8}",
    ]
    notes: list[str] = []
    loads = results.get("loads", {})
    lines += load_lines(loads, settings, notes)
    if loads and REFERENCE in settings["servers"] and SUBJECT in settings["servers"]:
        lines += goal_lines(loads)
    if "dlq" in loads:
        lines.append("messages moved to the DLQ by the mixed load: " + ", ".join(
            f"{LABELS[s]} {loads['dlq'][s]}" for s in settings["servers"] if s in loads["dlq"]))
    if "lite-mongodb" in settings["servers"]:
        notes.append(f"* lite mongodb: zaqar-lite on SecantusDB, a MongoDB wire-protocol server written in "
                     f"Python (not mongod), indicative only; measured after the others, one "
                     f"{settings['mongodb_seconds']} s turn per load, claim queue of "
                     f"{settings['mongodb_claim_queue']} messages.")
    growth = results.get("growth")
    if growth:
        lines += growth_lines(growth, settings, notes)
    bench = results.get("zaqar_bench")
    if bench:
        lines += bench_lines(bench, settings, notes)
    for part, error in results.get("errors", {}).items():
        notes.append(f"{part} FAILED: {error.strip().splitlines()[-1]}")
    return "\n".join(lines + ([""] + notes if notes else []))


def load_lines(loads: dict[str, Any], settings: dict[str, Any], notes: list[str]) -> list[str]:
    """A row per load and server; what went wrong in a turn goes to ``notes``."""
    lines = []
    for load, title in LOADS.items():
        if load not in loads:
            continue
        if load == "held":
            held = settings["held_claims"]
            title = f"claim, {held / 1000:g}k held" if held >= 1000 else f"claim, {held} held"
        for i, (server, f) in enumerate((s, loads[load][s]) for s in settings["servers"] if s in loads[load]):
            vs = f.get("vs_zaqar", {})
            lines.append(
                f"{title if i == 0 else '':<16}{LABELS[server]:<15}{num(f['messages_per_s']):>9}"
                f"{num(vs.get('messages_per_s'), 2):>8}{num(f['p50_ms'], 2):>8}{num(f['p99_ms'], 1):>8}"
                f"{num(vs.get('p99_ms'), 2):>9}{num(f.get('seen_p50_ms'), 2):>9}"
                f"{num(f.get('seen_p99_ms'), 1):>9}{num(vs.get('seen_p99_ms'), 2):>10}"
                f"{num(f['claim_p50_ms'], 2):>10}{num(f['claim_p99_ms'], 1):>10}"
                f"{f['requests']:>9}{f['failures']:>8}{f['socket_errors']:>8}")
            notes += turn_notes(f"{title} on {server}", f)
    return lines


def turn_notes(where: str, f: dict[str, Any]) -> list[str]:
    """What went wrong in one load's turns on one server."""
    notes = []
    if f["failure"]:
        notes.append(f"{where}: {f['failures']} not 2xx, first: {f['failure']}")
    if not f["requests"]:
        notes.append(f"{where}: no request was answered within the turn")
    if f.get("settle_s", 0) > 2:
        notes.append(f"{where}: after its turns, {f['settle_s']:.1f} s in all until "
                     "it had finished the requests wrk left in flight")
    if f["empty_claims"]:
        notes.append(f"{where}: {f['empty_claims']} claims answered 204 "
                     "(nothing claimable)")
    return notes


def goal_lines(loads: dict[str, Any]) -> list[str]:
    """zaqar-lite on Redis against Zaqar on Redis, load by load, with the goals' verdicts."""
    lines = ["", "goals, zaqar-lite on Redis / Zaqar on Redis, in this run: ratio of the medians over "
             "rounds (pooled: all rounds' messages / all rounds' seconds; per round: the ratios "
             "within each round):"]
    for load in (name for name in LOADS if name in loads):
        f = loads[load][SUBJECT]
        per_round = f["vs_zaqar_per_round"]
        spread = (f"; per round: median {statistics.median(per_round):.2f}, "
                  f"{min(per_round):.2f}-{max(per_round):.2f}") if per_round else ""
        goal = GOALS.get(load)
        rate = f["vs_zaqar"]["messages_per_s"]
        pooled = f["vs_zaqar"].get("overall_messages_per_s")
        judged = rate if rate is not None else pooled
        verdict = "" if goal is None or judged is None else f", goal >= {goal:.0f}x: " + (
            "met" if judged >= goal else "NOT met")
        name = "claim, held" if load == "held" else LOADS[load]
        lines.append(f"  {name:<12} msgs/s {num(rate, 2)}x (pooled {num(pooled, 2)}x{spread}){verdict}")
        lines.append(f"  {'':<12} {p99_line(f, loads[load][REFERENCE])}")
        rates = [r["messages_per_s"] for r in f["rounds"] if r.get("messages_per_s")]
        if len(rates) > 1:
            apart = max(rates) / min(rates) - 1
            lines.append(f"  {'':<12} rounds' msgs/s {min(rates):.0f}-{max(rates):.0f}, the largest "
                         f"{100 * apart:.0f}% above the smallest, goal <= {100 * ROUNDS_SPREAD_GOAL:.0f}%: "
                         + ("met" if apart <= ROUNDS_SPREAD_GOAL else "NOT met"))
        cpu = f["vs_zaqar"].get("cpu_ms_per_msg")
        if cpu:
            ref = loads[load][REFERENCE]
            lines.append(f"  {'':<12} server CPU per message {num(f['cpu_ms_per_msg'], 3)} vs "
                         f"{num(ref['cpu_ms_per_msg'], 3)} ms (of which Redis "
                         f"{num(f['store_cpu_ms_per_msg'], 3)} vs "
                         f"{num(ref['store_cpu_ms_per_msg'], 3)}): "
                         f"Zaqar uses {1 / cpu:.2f}x as much")
    return lines


def p99_line(f: dict[str, Any], ref: dict[str, Any]) -> str:
    """zaqar-lite's p99 against Zaqar's and the 10 ms goal, judged on the requests' own timing.

    wrk's p99 is shown too, not judged: wrk corrects its histogram for coordinated
    omission, so a few scheduler stalls of the shared cores make its whole tail
    (benchmarks/README.rst, "wrk's p99 is not the requests' p99").
    """
    seen, seen_ref = f.get("seen_p99_ms"), ref.get("seen_p99_ms")
    if seen is None:
        judged = "p99 as timed: - (not timed: wrk's LuaJIT without ffi, or figures saved before)"
    else:
        vs = ratio(seen, seen_ref)
        judged = (f"p99 as timed {num(seen)} vs {num(seen_ref)} ms ({num(vs, 2)}x)"
                  + ("" if vs is None else (", lower: met" if vs < 1 else ", lower: NOT met"))
                  + f", goal <= {P99_GOAL_MS:g} ms: " + ("met" if seen <= P99_GOAL_MS else "NOT met"))
    return (f"{judged}; wrk's p99 (not judged) {num(f['p99_ms'])} vs {num(ref['p99_ms'])} ms "
            f"({num(f['vs_zaqar']['p99_ms'], 2)}x)")


def growth_lines(growth: dict[str, Any], settings: dict[str, Any], notes: list[str]) -> list[str]:
    """The claim cost by queue size, and the ratio of the largest to the smallest."""
    lines = ["", f"claim cost vs queue size, zaqar-lite on Redis: claim limit={CLAIM_LIMIT} + release, "
             f"{settings['growth_duration']} s per size in {settings['growth_rounds']} rounds",
             f"{'messages':>10}{'claims/s':>10}{'claim p50':>10}{'claim p99':>10}{'p50 all':>9}"
             f"{'p99 all':>9}{'non-2xx':>8}"]
    for size, f in growth.items():
        lines.append(f"{int(size):>10}{num(f['claims_per_s']):>10}{num(f['claim_p50_ms'], 2):>10}"
                     f"{num(f['claim_p99_ms'], 1):>10}{num(f['p50_ms'], 2):>9}{num(f['p99_ms'], 1):>9}"
                     f"{f['failures']:>8}")
        if f["failure"]:
            notes.append(f"growth {size}: first failure: {f['failure']}")
    sizes = list(growth)
    small, large = growth[sizes[0]], growth[sizes[-1]]
    lines.append(f"{'ratio':>10}{num(ratio(large['claims_per_s'], small['claims_per_s']), 2):>10}"
                 f"{num(ratio(large['claim_p50_ms'], small['claim_p50_ms']), 2):>10}"
                 f"{num(ratio(large['claim_p99_ms'], small['claim_p99_ms']), 2):>10}"
                 f"   ({int(sizes[-1])} / {int(sizes[0])} messages)")
    return lines


def bench_lines(bench: dict[str, Any], settings: dict[str, Any], notes: list[str]) -> list[str]:
    """zaqar-bench's counts per server; its errors and recorded non-2xx exchanges go to ``notes``."""
    lines = ["", "zaqar-bench (unmodified, from the same Zaqar package), "
             f"{settings['zaqar_bench_seconds']} s, "
             + " ".join(ZAQAR_BENCH_ARGS),
             f"{'server':<15}{'producer ok/req':>17}{'consumer ok/req':>17}{'observer ok/req':>17}"
             f"{'msgs consumed':>15}  every request succeeded"]
    for server, r in bench.items():
        if "roles" not in r:
            lines.append(f"{LABELS[server]:<15} zaqar-bench failed: {r.get('output', '')[-400:]}")
            continue
        cells = "".join(f"{r['roles'][role]['succeeded']:>9}/{r['roles'][role]['requests']:<7}"
                        for role in ("producer", "consumer", "observer"))
        lines.append(f"{LABELS[server]:<15}{cells}{r['roles']['consumer']['messages'] or 0:>15}  "
                     f"{'yes' if r['ok'] else 'NO'}")
        if r["error_lines"]:
            notes.append(f"zaqar-bench on {server}: {r['error_count']} errors, "
                         f"first: {r['error_lines'][0]}")
        recorded = r.get("recorded")
        if recorded:
            notes.append(f"zaqar-bench on {server} through the recorder: "
                         f"{recorded['non_2xx_count']} non-2xx")
            for x in recorded["non_2xx"][:5]:
                notes.append(f"  {x['request']} {x['request_body'][:300]} -> {x['status']} "
                             f"{x['response_body'][:500]}")
    return lines


# -- main ----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default=",".join(SERVERS),
                        help=f"servers to run, comma-separated, among {','.join(SERVERS)} (all)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of every server (2)")
    parser.add_argument("-c", "--concurrency", type=int, default=8,
                        help="wrk connections, one per thread (8)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per load and server (10)")
    parser.add_argument("--rounds", type=int, default=5, help="turns per load and server (5)")
    parser.add_argument("--warmup", type=int, default=1, help="seconds of posting per server first (1)")
    parser.add_argument("--claim-queue", type=int, default=50_000,
                        help="messages in the claim load's queue, kept topped up (50000)")
    parser.add_argument("--mixed-stock", type=int, default=1000,
                        help="free messages in the mixed load's queue before each turn (1000)")
    parser.add_argument("--release-ratio", type=float, default=0.1,
                        help="share of the mixed load's claims released instead of deleted (0.1)")
    parser.add_argument("--held-claims", type=int, default=0,
                        help="also run the claim load with this many messages at the head of the queue "
                        "held by long claims, as slow consumers leave them (0: not run; try 10000)")
    parser.add_argument("--mongodb-claim-queue", type=int, default=2000,
                        help="messages in the claim queue of the MongoDB column (2000: SecantusDB is slow)")
    parser.add_argument("--mongodb-seconds", type=int, default=4,
                        help="seconds of each load in the MongoDB column, one turn each (4)")
    parser.add_argument("--growth-sizes", default="1000,10000,100000",
                        help="queue sizes for the claim cost on zaqar-lite on Redis ('' skips it)")
    parser.add_argument("--growth-duration", type=int, default=6, help="seconds per size (6)")
    parser.add_argument("--growth-rounds", type=int, default=3, help="turns per size (3)")
    parser.add_argument("--zaqar-bench-servers", default="lite-redis,zaqar",
                        help="servers zaqar-bench runs against ('' skips it) (lite-redis,zaqar)")
    parser.add_argument("--zaqar-bench-seconds", type=int, default=10, help="zaqar-bench's -t (10)")
    parser.add_argument("--record", action="store_true",
                        help="also run zaqar-bench against zaqar-lite through a proxy that records "
                        "every non-2xx exchange (done anyway when a run fails)")
    parser.add_argument("--skip-loads", action="store_true", help="only the growth and zaqar-bench parts")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                        / "zaqar-lite-bench",
                        help="where Zaqar's virtualenv is kept (~/.cache/zaqar-lite-bench)")
    parser.add_argument("--zaqar-spec", default=ZAQAR_SPEC, help=f"pip requirement for Zaqar ({ZAQAR_SPEC})")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "wrk", help="wrk executable")
    parser.add_argument("--settle-max", type=float, default=10.0,
                        help="after each turn, wait at most this long for the server to finish the "
                        "requests wrk left in flight (10; 0: do not wait)")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    parser.add_argument("--json-out", type=Path, help="also write every figure as JSON to this file")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="print the tables of a saved --json/--json-out file, run nothing")
    args = parser.parse_args(argv)
    args.servers = [s for s in args.servers.split(",") if s]
    args.zaqar_bench_servers = [s for s in args.zaqar_bench_servers.split(",") if s]
    args.growth_sizes = [int(s) for s in args.growth_sizes.split(",") if s]
    unknown = set(args.servers + args.zaqar_bench_servers) - set(SERVERS)
    if unknown:
        parser.error(f"unknown servers: {', '.join(sorted(unknown))}")
    if "lite-mongodb" in args.zaqar_bench_servers:
        parser.error("zaqar-bench does not run against lite-mongodb (SecantusDB is too slow for it)")
    if args.duration < args.rounds or args.duration % args.rounds:
        parser.error("--duration must be a multiple of --rounds (wrk takes whole seconds)")
    if args.growth_sizes and (args.growth_duration < args.growth_rounds
                              or args.growth_duration % args.growth_rounds):
        parser.error("--growth-duration must be a multiple of --growth-rounds")
    if args.render:
        return args
    if shutil.which(args.wrk) is None:
        parser.error(f"wrk not found ({args.wrk}): apt-get install wrk")
    if shutil.which("redis-server") is None:
        parser.error("redis-server not found: apt-get install redis-server")
    args.client_id = str(uuid.uuid4())
    return args


def guarded(part: str, results: dict[str, Any], run: Callable[[], Any]) -> Any:
    """Run one part; should it fail, keep the figures of the others and say why this one has none."""
    try:
        return run()
    except Exception as exc:  # one part failing must not lose the figures of the others
        log(f"{part} failed: {exc!r}")
        results.setdefault("errors", {})[part] = traceback.format_exc()[-3000:]
        return None


def start_server(server: str, args: argparse.Namespace, venv: Path, gunicorn: dict[str, Any], tmp: Path,
                 stack: contextlib.ExitStack) -> str:
    """Start one server (and its Redis), to be stopped by ``stack``; return its URL."""
    from tests.servers.redis import RedisServer

    log(f"starting {server}")
    store_pids: list[int] = []
    if server in ("zaqar", "lite-redis"):
        redis_dir = tmp / f"redis-{server}"
        redis_dir.mkdir()
        redis = RedisServer(redis_dir)
        redis.start()
        stack.callback(redis.stop)
        store_pids = [redis.pid] if redis.pid else []
    if server == "zaqar":
        config = write_zaqar_files(tmp / "zaqar-app", redis.uri().removesuffix("/0"))
        command = zaqar_command(venv, tmp / "zaqar-app", gunicorn)
        env = {"ZAQAR_BENCH_CONFIG": str(config)}
    elif server == "lite-redis":
        command, env = lite_command(redis.uri(), args.workers), {}
    else:
        command, env = lite_command(f"sqlite:///{tmp}/bench.db", args.workers), {}
    url: str = stack.enter_context(serving(command, tmp / server, env=env, cwd=REPO))
    watch(url, sessions=[SESSIONS[url]], pids=store_pids)
    return url


def add_mongodb(results: dict[str, Any], mongodb: dict[str, Any] | None) -> None:
    """Add the MongoDB column, measured on its own after the others, to the loads' figures."""
    if mongodb is None:
        return
    loads = results.setdefault("loads", {})
    for load in (name for name in LOADS if name in mongodb):
        loads.setdefault(load, {})["lite-mongodb"] = mongodb[load]
    loads.setdefault("fill_seconds", {})["lite-mongodb"] = mongodb["fill_seconds"]


def main(argv: list[str] | None = None) -> None:
    """Start every server, run the loads, the growth and zaqar-bench, print the figures."""
    args = parse_args(argv)
    if args.render:
        saved = json.loads(args.render.read_text())
        print(report(saved.pop("settings"), saved))
        return
    started = time.monotonic()
    venv = ensure_zaqar_venv(args.cache_dir / "zaqar-venv", args.zaqar_spec)
    gunicorn = lite_gunicorn_settings(args.workers)
    settings: dict[str, Any] = {
        "zaqar_version": zaqar_version(venv), "workers": args.workers, "gunicorn": gunicorn,
        "concurrency": args.concurrency, "duration": args.duration, "rounds": args.rounds,
        "claim_queue": args.claim_queue, "growth_duration": args.growth_duration,
        "growth_rounds": args.growth_rounds, "zaqar_bench_seconds": args.zaqar_bench_seconds,
        "mongodb_seconds": args.mongodb_seconds, "mongodb_claim_queue": args.mongodb_claim_queue,
        "held_claims": args.held_claims,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(),
        "load_average_before": os.getloadavg(),
    }
    main_servers = [] if args.skip_loads else [s for s in args.servers if s != "lite-mongodb"]
    wanted = set(main_servers) | set(args.zaqar_bench_servers)
    if args.growth_sizes:
        wanted.add("lite-redis")
    with tempfile.TemporaryDirectory(prefix="zaqar-compare-") as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        urls = {server: start_server(server, args, venv, gunicorn, tmp, stack)
                for server in SERVERS if server in wanted}
        results: dict[str, Any] = {}
        if main_servers:
            results["loads"] = run_loads(args, {s: urls[s] for s in main_servers})
        if args.growth_sizes:
            results["growth"] = guarded("growth", results, lambda: run_growth(args, urls["lite-redis"]))
        if args.zaqar_bench_servers:
            results["zaqar_bench"] = guarded("zaqar-bench", results,
                                             lambda: run_zaqar_bench(args, venv, urls, tmp))
        stack.close()  # stop the others before the MongoDB column starts
        if not args.skip_loads and "lite-mongodb" in args.servers:
            add_mongodb(results, guarded("lite-mongodb", results, lambda: run_mongodb(args, tmp)))
        settings["servers"] = [s for s in SERVERS if s in args.servers and
                               s in results.get("loads", {}).get("post", {})]
        if "loads" in results:
            add_ratios(results["loads"], settings["servers"])
    settings["load_average_after"] = os.getloadavg()
    settings["seconds"] = round(time.monotonic() - started, 1)
    figures = json.dumps({"settings": settings, **results}, indent=2)
    if args.json_out:
        args.json_out.write_text(figures + "\n")
    print(figures if args.json else report(settings, results))


def report(settings: dict[str, Any], results: dict[str, Any]) -> str:
    """The tables, then when, where and how long."""
    return (render(results, settings) + f"\n\n{settings['date']}, {settings['cpus']} cpus, load average "
            f"{settings['load_average_before'][0]:.1f} before and {settings['load_average_after'][0]:.1f} "
            f"after; {settings['seconds']:.0f} s in all")


if __name__ == "__main__":
    main()
