"""WSGI servers side by side: the storage-free app and zaqar-lite under each candidate, with wrk.

Each candidate that imports here serves, with 2 worker processes (``--workers``):

* the storage-free falcon app (``minimal_app.py``);
* zaqar-lite on SQLite (a file of its own per candidate);
* zaqar-lite on Redis (one throwaway server, started by the suites' harness,
  a queue of its own per candidate), unless ``--apps`` leaves it out.

Candidates: gunicorn with zaqar-lite's gevent worker (today's server),
gunicorn's own gevent worker on ``gevent.pywsgi`` (``gunicorn-pywsgi``), its
gthread worker, gunicorn with meinheld's worker, granian's WSGI interface,
uWSGI (``pyuwsgi``) with 8 threads a worker and with its gevent loop
(``uwsgi-gevent``: a greenlet per request, the standard library patched), and
waitress, cheroot and bjoern under a small pre-fork master of this script (the
socket bound once, then ``--workers`` forks; cheroot's workers each bind with
``SO_REUSEPORT``). Threaded servers get 8 threads per worker, as gunicorn's
gthread does by default. Every candidate serves the same app objects
(zaqar-lite's ``worker_app``, built in each worker after the fork; metrics on,
in a multiprocess directory made before the fork).

For each app the loads of ``http_load.py`` (``post`` and ``claim+delete``, the
same wrk script) run in ``--rounds`` rounds; in each round every candidate takes
a turn, in an order rotated from round to round, so that a burst from the
neighbours of a shared machine spreads over all of them. Printed: messages/s,
p50/p99 (medians over rounds), server CPU per request (all of the server's
processes), the busiest worker's share of the workers' CPU (0.5 is an even
split) and each candidate's throughput as a share of gunicorn-gevent's.

Then, unless ``--no-checks``, each candidate serves zaqar-lite on SQLite once
more for a short check of the guarantees of ``zaqar-lite serve``:

* ``slowloris``: ``--slow`` connections send a header line every 0.5 s; the
  latency of a ping on a new connection while they trickle, and how many the
  server closed within ``--slow-for`` s (the gevent worker's header deadline is
  10 s by default);
* ``long polls``: ``--waiters`` claims ``?wait=20`` on an empty queue, then a
  ping on a new connection: answered at once only if a waiting claim holds no
  thread;
* ``graceful stop``: 6 requests under way (claims ``?wait=3``, fewer than any
  worker's threads), SIGTERM to the
  server after 1 s: how many were answered (any HTTP status) rather than cut;
* ``metrics``: 10 posts on new connections, then 4 scrapes of ``/metrics``: how
  many scrapes count all 10 (the workers' counts added up);
* ``access log``: whether the server's output has a line for the pings.

Usage: ``python benchmarks/servers.py [--workers 2] [-c 8] [--duration 9] [--rounds 3] [--json]``;
``python benchmarks/servers.py serve CANDIDATE APP STORAGE --workers 2 --bind HOST:PORT`` serves one.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from http_load import (  # noqa: E402
    SESSIONS,
    call,
    combine,
    cpu_seconds,
    run_wrk,
    serving,
    stock_queue,
    store_server,
)

#: candidate -> the module it needs
CANDIDATES = {
    "gunicorn-gevent": "gevent",
    "gunicorn-pywsgi": "gevent",
    "gunicorn-gthread": "gunicorn",
    "gunicorn-meinheld": "meinheld",
    "granian": "granian",
    "uwsgi": "pyuwsgi",
    "uwsgi-gevent": "pyuwsgi",
    "waitress": "waitress",
    "cheroot": "cheroot",
    "bjoern": "bjoern",
}
BASELINE = "gunicorn-gevent"
LOADS = {"post": "post", "claim": "claim+delete"}
#: threads per worker of the threaded candidates (gunicorn gthread's default here)
THREADS = 8
#: connections a worker of an event-loop candidate may hold
CONNECTIONS = 10000


# ---------------------------------------------------------------- serving one candidate

class LazyApp:
    """A WSGI callable that builds the benchmarked app in its process on the first request.

    For servers that import an app object by name (uWSGI with ``--lazy-apps``):
    the app is built after the fork, in each worker, as zaqar-lite's workers build theirs.
    """

    def __init__(self) -> None:
        self._app: Any = None
        self._lock = threading.Lock()

    def __call__(self, environ: Any, start_response: Any) -> Any:
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = build_app(os.environ["BENCH_APP"], os.environ["BENCH_STORAGE"],
                                          os.environ.get("BENCH_WORKER_CLASS", "gthread"))
        return self._app(environ, start_response)


#: uWSGI's app (``--module servers:application``)
application = LazyApp()


def settings_for(storage: str, bind: str = "127.0.0.1:0", workers: int = 2,
                 worker_class: str = "gthread") -> Any:
    """zaqar-lite's settings for a benchmarked server (gthread: the store used directly, no gevent pool)."""
    from zaqar_lite.config import load_settings

    return load_settings(None, storage_uri=storage, bind=bind, workers=workers,
                         worker_class=worker_class)


def build_app(app: str, storage: str, worker_class: str = "gthread") -> Any:
    """Build one worker's app: the storage-free one, or zaqar-lite's as its workers build it.

    ``worker_class`` gevent: SQLite is used on gevent's thread pool, as under the gevent worker.
    """
    if app == "minimal":
        from minimal_app import create_app

        return create_app()
    from zaqar_lite.server.gunicorn import worker_app

    return worker_app(settings_for(storage, worker_class=worker_class))


def granian_factory() -> Any:
    """granian's target (``--factory``): the app of ``BENCH_APP`` on ``BENCH_STORAGE``."""
    return build_app(os.environ["BENCH_APP"], os.environ["BENCH_STORAGE"])


def serve_gunicorn(kind: str, app: str, storage: str, bind: str, workers: int) -> None:
    """Serve under zaqar-lite's gunicorn application, with the gevent, gthread or meinheld worker."""
    from zaqar_lite.server.gunicorn import Server

    gevent = kind in ("gunicorn-gevent", "gunicorn-pywsgi")
    settings = settings_for(storage, bind, workers, "gevent" if gevent else "gthread")

    class Bench(Server):  # type: ignore[misc]
        def load_config(self) -> None:
            super().load_config()
            if kind == "gunicorn-meinheld":
                self.cfg.set("worker_class", "meinheld.gmeinheld.MeinheldWorker")
            elif kind == "gunicorn-pywsgi":  # gunicorn's other gevent worker: gevent.pywsgi parses
                self.cfg.set("worker_class", "gunicorn.workers.ggevent.GeventPyWSGIWorker")

        def load(self) -> Any:
            if app == "minimal":
                return build_app(app, storage)
            from zaqar_lite.server.gunicorn import worker_app

            return worker_app(self.settings)

    Bench(settings).run()


def serve_prefork(kind: str, app: str, storage: str, bind: str, workers: int) -> None:
    """A small pre-fork master: bind once (cheroot: each worker binds with SO_REUSEPORT), fork, wait.

    SIGTERM is passed on to the workers; a worker's server stops as it does on
    SIGTERM by itself (waitress and bjoern: at once; cheroot: ``stop()``,
    which waits for its threads).
    """
    host, _, port = bind.rpartition(":")
    listener = None
    if kind != "cheroot":
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, int(port)))
        listener.listen(2048)
        listener.setblocking(False)
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            code = 0
            try:
                serve_one(kind, build_app(app, storage), listener, host, int(port))
            except BaseException:  # noqa: BLE001 - a worker's end, whatever it is, is its exit
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        children.append(pid)

    def stop(signum: int, frame: Any) -> None:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for child in children:
        os.waitpid(child, 0)


def serve_one(kind: str, wsgi: Any, listener: socket.socket | None, host: str, port: int) -> None:
    """Serve ``wsgi`` in this worker process until stopped."""
    if kind == "waitress":
        import waitress

        waitress.serve(wsgi, sockets=[listener], threads=THREADS, connection_limit=CONNECTIONS,
                       _quiet=True)
    elif kind == "bjoern":
        import bjoern

        bjoern.server_run(listener, wsgi)  # the socket bound before the fork
    elif kind == "cheroot":
        from cheroot import wsgi as cheroot_wsgi

        server = cheroot_wsgi.Server((host, port), wsgi, numthreads=THREADS, reuse_port=True)
        signal.signal(signal.SIGTERM, lambda signum, frame: threading.Thread(target=server.stop).start())
        server.start()


def serve_granian(app: str, storage: str, bind: str, workers: int) -> None:
    """Serve under granian's WSGI interface, its app built by each worker (``--factory``)."""
    from granian import Granian
    from granian.http import HTTP1Settings

    host, _, port = bind.rpartition(":")
    Granian("servers:granian_factory", address=host, port=int(port), interface="wsgi", factory=True,
            workers=workers, blocking_threads=THREADS, log_access=True, working_dir=HERE,
            # the head of a request within 10 s, as the gevent worker's default header_timeout
            http1_settings=HTTP1Settings(header_read_timeout=10_000)).serve()


def serve_uwsgi(app: str, storage: str, bind: str, workers: int, gevent: bool) -> None:
    """Serve under uWSGI (``pyuwsgi``): ``workers`` processes of 8 threads, apps built per worker."""
    argv = [sys.executable, "-c", "import pyuwsgi, sys; pyuwsgi.run(sys.argv[1:])",
            "--http11-socket", bind, "--master", "--processes", str(workers), "--threads", str(THREADS),
            "--lazy-apps", "--enable-threads", "--need-app", "--chdir", str(HERE),
            "--module", "servers:application", "--listen", "1024",
            # SIGTERM: stop taking requests, finish those under way, exit (uWSGI's own default reloads)
            "--hook-master-start", "unix_signal:15 gracefully_kill_them_all"]
    if gevent:  # a greenlet per request (up to 10,000 a worker) instead of 8 threads
        argv[argv.index("--threads"):argv.index("--threads") + 2] = [
            "--gevent", str(CONNECTIONS), "--gevent-early-monkey-patch"]
        # uWSGI keeps no HTTP/1.1 connection alive in its async modes: each answer waited 1.7 s
        argv[argv.index("--http11-socket")] = "--http-socket"
        os.environ["BENCH_WORKER_CLASS"] = "gevent"
    os.execv(sys.executable, argv)


@contextlib.contextmanager
def metrics_dir() -> Iterator[None]:
    """prometheus-client's multiprocess directory, made before any worker starts (as ``zaqar-lite serve``)."""
    path = tempfile.mkdtemp(prefix="zaqar-lite-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


def serve(argv: list[str]) -> None:
    """``serve CANDIDATE APP STORAGE --workers N --bind HOST:PORT``: serve until SIGTERM."""
    parser = argparse.ArgumentParser(prog="servers.py serve")
    parser.add_argument("candidate", choices=CANDIDATES)
    parser.add_argument("app", choices=("minimal", "zaqar"))
    parser.add_argument("storage")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--bind", required=True)
    args = parser.parse_args(argv)
    os.environ.update(BENCH_APP=args.app, BENCH_STORAGE=args.storage,
                      PYTHONPATH=os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")]))
    if args.candidate.startswith("uwsgi"):
        # the metrics directory must outlive exec: made here, removed with the run's temporary directory
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="metrics-",
                                                                  dir=os.environ["XDG_RUNTIME_DIR"])
        serve_uwsgi(args.app, args.storage, args.bind, args.workers, args.candidate == "uwsgi-gevent")
    with metrics_dir():
        if args.candidate.startswith("gunicorn-"):
            serve_gunicorn(args.candidate, args.app, args.storage, args.bind, args.workers)
        elif args.candidate == "granian":
            serve_granian(args.app, args.storage, args.bind, args.workers)
        else:
            serve_prefork(args.candidate, args.app, args.storage, args.bind, args.workers)


# ---------------------------------------------------------------- measuring

def available() -> list[str]:
    """The candidates whose server imports here."""
    return [name for name, module in CANDIDATES.items() if importlib.util.find_spec(module)]


def process_cpu(session: int) -> dict[int, float]:
    """CPU seconds so far of each process of a session."""
    found: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError):
            stat = Path(entry.path, "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == session:
                found[int(entry.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def busiest_share(before: dict[int, float], after: dict[int, float], workers: int) -> float | None:
    """The busiest worker's share of what the ``workers`` busiest processes used between two looks."""
    used = sorted((after[pid] - before.get(pid, 0.0) for pid in after), reverse=True)[:workers]
    total = sum(used)
    return used[0] / total if total > 0 and len(used) == workers else None


def one_turn(url: str, mode: str, args: argparse.Namespace, queue: str, seconds: int) -> dict[str, Any]:
    """One wrk turn on one server, with its CPU per request and worker split."""
    session = SESSIONS[url]
    options = argparse.Namespace(**{**vars(args), "queue": queue})
    before, cpu_before = process_cpu(session), cpu_seconds({session})
    figures = run_wrk(args.wrk, url, mode, options, seconds)
    after, cpu_after = process_cpu(session), cpu_seconds({session})
    figures["cpu_s"] = cpu_after - cpu_before
    figures["busiest_share"] = busiest_share(before, after, args.workers)
    return figures


def run_app(urls: dict[str, str], app: str, args: argparse.Namespace) -> dict[str, Any]:
    """Warm every server up, then run each load in rounds, every candidate a turn per round."""
    names = list(urls)
    queues = {name: f"bench-{name}-{app}" for name in names}
    seconds = args.duration // args.rounds
    for name in names:
        run_wrk(args.wrk, urls[name], "post", argparse.Namespace(**{**vars(args), "queue": queues[name]}),
                args.warmup)
    results: dict[str, Any] = {}
    for mode in LOADS:
        if mode == "claim" and app != "minimal":
            for name in names:
                post_rate = results["post"][name]["messages_per_s"]
                # a server can delete faster than it posts (uWSGI on Redis ran dry at 1.2 times)
                stock_queue(urls[name], queues[name], args.client_id,
                            max(1000, int(post_rate * args.duration * 3)))
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for turn in range(args.rounds):
            shift = turn % len(names)
            for name in names[shift:] + names[:shift]:
                rounds[name].append(one_turn(urls[name], mode, args, queues[name], seconds))
        row = {}
        for name in names:
            figures = combine(rounds[name])
            shares = [r["busiest_share"] for r in rounds[name] if r["busiest_share"] is not None]
            figures["busiest_share"] = statistics.median(shares) if shares else None
            row[name] = figures
        base = row.get(BASELINE, {}).get("messages_per_s")
        for name in names:
            row[name]["vs_baseline"] = row[name]["messages_per_s"] / base if base else None
        results[mode] = row
    return results


def command(candidate: str, app: str, storage: str, workers: int) -> list[str]:
    """The command serving one candidate (``serving`` appends ``--bind``)."""
    return [sys.executable, str(Path(__file__).resolve()), "serve", candidate, app, storage,
            "--workers", str(workers)]


def server_env() -> dict[str, str]:
    """The servers' environment: this checkout first on the path."""
    return {"PYTHONPATH": os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")])}


# ---------------------------------------------------------------- the guarantees

def ping_latency(url: str, timeout: float = 5.0) -> float | None:
    """Seconds a ping on a new connection takes; None when unanswered within ``timeout``."""
    host, port = url.removeprefix("http://").split(":")
    started = time.monotonic()
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.sendall(b"GET /v2/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            if not sock.recv(64).startswith(b"HTTP/1."):
                return None
    except OSError:
        return None
    return time.monotonic() - started


def connect(url: str) -> socket.socket:
    """A new connection to the server."""
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def claim_request(queue: str, wait: int) -> bytes:
    """A long-polling claim, as bytes to send."""
    body = b'{"ttl": 60, "grace": 60}'
    return (f"POST /v2/queues/{queue}/claims?limit=1&wait={wait} HTTP/1.1\r\nHost: x\r\n"
            f"Client-ID: {uuid.uuid4()}\r\nX-Project-ID: bench\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def check_slowloris(url: str, count: int, hold: float) -> dict[str, Any]:
    """Trickle header lines on ``count`` connections; ping meanwhile; count those the server closed."""
    socks = []
    for _ in range(count):
        with contextlib.suppress(OSError):
            sock = connect(url)
            sock.sendall(b"POST /v2/queues/slow/messages HTTP/1.1\r\nHost: x\r\n")
            socks.append(sock)
    time.sleep(1)
    ping = ping_latency(url)
    closed: set[int] = set()
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline and len(closed) < len(socks):
        for n, sock in enumerate(socks):
            if n in closed:
                continue
            try:
                sock.sendall(b"X-Slow: 1\r\n")
            except OSError:
                closed.add(n)
        time.sleep(0.5)
    for sock in socks:
        sock.close()
    return {"ping_s": ping, "closed": len(closed), "held": len(socks)}


def check_long_polls(url: str, count: int) -> dict[str, Any]:
    """Open ``count`` waiting claims, then ping on a new connection."""
    socks = []
    for _ in range(count):
        with contextlib.suppress(OSError):
            sock = connect(url)
            sock.sendall(claim_request("idle", 20))
            socks.append(sock)
    time.sleep(2)
    ping = ping_latency(url)
    for sock in socks:
        sock.close()
    return {"ping_s": ping, "waiting": len(socks)}


def check_graceful_stop(url: str, count: int = 6) -> dict[str, Any]:
    """Start ``count`` claims that wait 3 s, stop the server after 1 s, count the answered ones."""
    socks = []
    for _ in range(count):
        sock = connect(url)
        sock.sendall(claim_request("stopping", 3))
        socks.append(sock)
    time.sleep(1)
    os.kill(SESSIONS[url], signal.SIGTERM)  # the master, as a service manager stops it
    answered = 0
    for sock in socks:
        sock.settimeout(15)
        with contextlib.suppress(OSError):
            if sock.recv(64).startswith(b"HTTP/1."):
                answered += 1
        sock.close()
    return {"answered": answered, "under_way": count}


def check_metrics(url: str, posts: int = 10) -> dict[str, Any]:
    """Post ``posts`` messages on new connections, then count the scrapes that see them all."""
    client = str(uuid.uuid4())
    for n in range(posts):
        call(url, "POST", "/v2/queues/metrics/messages", client, {"messages": [{"body": n}]})
    whole = 0
    for _ in range(4):
        _, text = call(url, "GET", "/metrics", client)
        for line in text.decode(errors="replace").splitlines():
            if line.startswith("zaqar_lite_messages_posted_total"):
                whole += float(line.split()[-1]) == posts
    return {"whole_scrapes": whole, "scrapes": 4}


def check_guarantees(candidate: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Serve zaqar-lite on SQLite under ``candidate`` and check each guarantee once."""
    storage = f"sqlite:///{tmp}/check-{candidate}.db"
    result: dict[str, Any] = {}
    workdir = tmp / f"check-{candidate}"
    # a fresh server for each check, so that what one check leaves (threads still held) spoils no other
    with serving(command(candidate, "zaqar", storage, args.workers), workdir, env=server_env()) as url:
        result["slowloris"] = check_slowloris(url, args.slow, args.slow_for)
    with serving(command(candidate, "zaqar", storage, args.workers), tmp / f"waiters-{candidate}",
                 env=server_env()) as url:
        result["long_polls"] = check_long_polls(url, args.waiters)
    with serving(command(candidate, "zaqar", storage, args.workers), tmp / f"stop-{candidate}",
                 env=server_env()) as url:
        result["metrics"] = check_metrics(url)
        result["graceful_stop"] = check_graceful_stop(url)
    log = (workdir / "server.log").read_text(errors="replace")
    result["access_log"] = "/v2/ping" in log
    return result


# ---------------------------------------------------------------- printing

def number(value: float | None, digits: int) -> str:
    """A figure, or '-'."""
    return "-" if value is None else f"{value:.{digits}f}"


def table(results: dict[str, Any], checks: dict[str, Any], settings: dict[str, Any]) -> str:
    """The figures as plain text."""
    lines = ["{workers} workers, {concurrency} connections, {duration} s per load and server "
             "in {rounds} rounds; {cpus} CPUs".format(**settings)]
    for app, loads in results.items():
        lines.append("")
        lines.append(f"{app}")
        lines.append(f"{'load':<14}{'server':<19}{'msgs/s':>9}{'x gevent':>9}{'p50 ms':>8}{'p99 ms':>9}"
                     f"{'cpu us/req':>11}{'busiest':>8}{'non-2xx':>8}{'sock err':>9}")
        for mode, title in LOADS.items():
            for n, (name, f) in enumerate(loads[mode].items()):
                lines.append(f"{title if n == 0 else '':<14}{name:<19}{f['messages_per_s']:>9.1f}"
                             f"{number(f['vs_baseline'], 2):>9}{f['p50_ms']:>8.2f}{f['p99_ms']:>9.2f}"
                             f"{number(f.get('cpu_us_per_request'), 0):>11}"
                             f"{number(f['busiest_share'], 2):>8}{f['failures']:>8}{f['socket_errors']:>9}")
                if f["empty_claims"]:
                    lines.append(f"{'':<14}({name}: {f['empty_claims']} claims found the queue empty)")
    if checks:
        lines.append("")
        lines.append(f"{'guarantees':<19}{'slow: ping s':>13}{'closed':>8}{'waiters: ping s':>16}"
                     f"{'stop: answered':>15}{'metrics':>8}{'access log':>11}")
        for name, c in checks.items():
            if "error" in c:
                lines.append(f"{name:<19}failed: {c['error']}")
                continue
            s, w, g, m = c["slowloris"], c["long_polls"], c["graceful_stop"], c["metrics"]
            lines.append(f"{name:<19}{number(s['ping_s'], 3):>13}{s['closed']:>4}/{s['held']:<3}"
                         f"{number(w['ping_s'], 3):>16}{g['answered']:>11}/{g['under_way']:<3}"
                         f"{m['whole_scrapes']:>6}/{m['scrapes']}{'yes' if c['access_log'] else 'no':>11}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="worker processes of every server (2)")
    parser.add_argument("-c", "--concurrency", type=int, default=8, help="wrk connections (8)")
    parser.add_argument("--duration", type=int, default=9, help="seconds per load and server (9)")
    parser.add_argument("--rounds", type=int, default=3, help="turns per load and server (3)")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of posting first (2)")
    parser.add_argument("--only", nargs="*", help="these candidates only")
    parser.add_argument("--apps", nargs="*", default=["minimal", "sqlite", "redis"],
                        choices=["minimal", "sqlite", "redis"], help="apps to load (all three)")
    parser.add_argument("--no-checks", action="store_true", help="skip the guarantee checks")
    parser.add_argument("--slow", type=int, default=64, help="trickling connections of the check (64)")
    parser.add_argument("--slow-for", type=float, default=15, help="seconds they trickle (15)")
    parser.add_argument("--waiters", type=int, default=1000, help="waiting claims of the check (1000)")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "wrk", help="wrk executable")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.duration % args.rounds:
        parser.error("--duration must be a multiple of --rounds")
    args.client_id = str(uuid.uuid4())
    args.post_ratio = 0.5
    return args


def load_app(app: str, names: list[str], args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Serve one app (minimal, sqlite or redis) under every candidate at once and load them in rounds."""
    with contextlib.ExitStack() as stack:
        storage = "-"
        if app == "redis":
            storage = stack.enter_context(store_server("redis", tmp / "redis"))
        urls = {}
        for name in names:
            if app == "sqlite":
                storage = f"sqlite:///{tmp}/{name}.db"
            kind = "minimal" if app == "minimal" else "zaqar"
            urls[name] = stack.enter_context(
                serving(command(name, kind, storage, args.workers), tmp / f"{app}-{name}", env=server_env()))
        return run_app(urls, app, args)


def main(argv: list[str] | None = None) -> None:
    """Serve each app under every candidate, load them in rounds, check the guarantees, print."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        serve(argv[1:])
        return
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    names = [name for name in available() if not args.only or name in args.only]
    results: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="zaqar-lite-servers-") as tmp_name:
        tmp = Path(tmp_name)
        for app in args.apps:
            results[app] = load_app(app, names, args, tmp)
            print(table({app: results[app]}, {}, vars(args) | {"cpus": os.cpu_count()}), file=sys.stderr,
                  flush=True)
        if not args.no_checks:
            for name in names:
                try:
                    checks[name] = check_guarantees(name, args, tmp)
                except (OSError, SystemExit) as exc:
                    checks[name] = {"error": str(exc).splitlines()[0]}
    settings = {"workers": args.workers, "concurrency": args.concurrency, "duration": args.duration,
                "rounds": args.rounds, "cpus": os.cpu_count(),
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if args.json:
        print(json.dumps({"settings": settings, "apps": results, "checks": checks}, indent=2, default=str))
    else:
        print(table(results, checks, settings))


if __name__ == "__main__":
    main()
