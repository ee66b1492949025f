"""CPU a post and a claim cost in the HTTP layer, above the service, next to the storage-free falcon app.

The real app (``create_app``, default settings, SQLite in a temporary
directory) answers WSGI calls in process, with the service's answers canned:
``Messaging.post`` returns one id, ``LongPoll.claim`` the claim of ``--limit``
messages it made once for real, ``Messaging.delete_message`` nothing. What is
left is the HTTP layer's own work per request (middleware checks, body
parsing and validation, metrics, rendering, JSON encoding, falcon), timed in
CPU microseconds next to ``minimal_app.py``'s app on the same WSGI calls (best
of ``--repeat`` runs of ``--requests`` each). ``--profile post|claim|delete``
prints cProfile's top functions of one of them instead.

Usage: ``python benchmarks/request_path.py [--requests 5000] [--limit 10] [--profile claim]``
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import falcon.testing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import minimal_app  # noqa: E402 - after the checkout is on the path
from zaqar_lite.api.app import create_app  # noqa: E402
from zaqar_lite.config import load_settings  # noqa: E402
from zaqar_lite.service import Messaging  # noqa: E402
from zaqar_lite.service.waiting.long_poll import LongPoll  # noqa: E402

HEADERS = {"Client-ID": str(uuid.uuid4()), "X-Project-ID": "bench", "Content-Type": "application/json"}
POST_BODY = json.dumps({"messages": [{"body": {"event": "bench", "n": 1}, "ttl": 300}]}).encode()
CLAIM_BODY = b'{"ttl": 60, "grace": 60}'
MESSAGE = minimal_app.MESSAGE_ID
CLAIM = minimal_app.CLAIM_ID

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def requests(limit: int) -> dict[str, tuple[str, str, bytes, str]]:
    """Return the benchmarked requests: method, path, body, query string."""
    return {
        "post": ("POST", "/v2/queues/bench/messages", POST_BODY, ""),
        "claim": ("POST", "/v2/queues/bench/claims", CLAIM_BODY, f"limit={limit}"),
        "delete": ("DELETE", f"/v2/queues/bench/messages/{MESSAGE}", b"", f"claim_id={CLAIM}"),
    }


def call(app: WsgiApp, method: str, path: str, body: bytes = b"", query: str = "") -> tuple[str, bytes]:
    """Answer one request through the WSGI interface; return the status line and the body."""
    answer: list[str] = []
    environ = falcon.testing.create_environ(path=path, method=method, headers=HEADERS, body=body,
                                            query_string=query)
    content = b"".join(app(environ, lambda status, headers, exc_info=None: answer.append(status)))
    return answer[0], content


def canned_app(directory: str, limit: int) -> WsgiApp:
    """Return the real app whose service answers posts, claims and deletes from canned results."""
    app: WsgiApp = create_app(load_settings(None, storage_uri=f"sqlite:///{directory}/bench.db"))
    for _ in range(limit):
        status, content = call(app, "POST", "/v2/queues/bench/messages", POST_BODY)
        assert status.startswith("201"), content
    made: list[Any] = []
    real_claim = LongPoll.claim

    def claim_once(self: LongPoll, *args: Any) -> Any:
        made.append(real_claim(self, *args))
        return made[-1]

    LongPoll.claim = claim_once  # type: ignore[method-assign]
    status, content = call(app, "POST", "/v2/queues/bench/claims", CLAIM_BODY, f"limit={limit}")
    assert status.startswith("201") and len(made[0][1]) == limit, content
    LongPoll.claim = lambda self, *args: made[0]  # type: ignore[method-assign]
    Messaging.post = lambda self, *args, **kwargs: [MESSAGE]  # type: ignore[method-assign]
    Messaging.delete_message = lambda self, *args, **kwargs: None  # type: ignore[method-assign]
    return app


def environs(request: tuple[str, str, bytes, str], count: int) -> list[dict[str, Any]]:
    """Return ``count`` fresh WSGI environs of one request (each body stream is read once)."""
    method, path, body, query = request
    return [falcon.testing.create_environ(path=path, method=method, headers=HEADERS, body=body,
                                          query_string=query) for _ in range(count)]


def answer_all(app: WsgiApp, calls: list[dict[str, Any]]) -> None:
    """Answer every environ."""
    for environ in calls:
        b"".join(app(environ, lambda status, headers, exc_info=None: None))


def cpu_us(app: WsgiApp, request: tuple[str, str, bytes, str], count: int, repeat: int) -> float:
    """Return the best CPU microseconds per request over ``repeat`` runs of ``count``."""
    best = float("inf")
    for _ in range(repeat):
        calls = environs(request, count)
        started = time.process_time()
        answer_all(app, calls)
        best = min(best, (time.process_time() - started) / count)
    return best * 1e6


def main(argv: list[str] | None = None) -> None:
    """Time (or profile) the HTTP layer of a post, a claim and a delete."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000, help="requests per run (5000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs, the best counts (3)")
    parser.add_argument("--limit", type=int, default=10, help="messages per claim (10)")
    parser.add_argument("--profile", choices=("post", "claim", "delete"),
                        help="print cProfile's top functions of this request instead")
    parser.add_argument("--top", type=int, default=30, help="functions --profile prints (30)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        app = canned_app(directory, args.limit)
        loads = requests(args.limit)
        if args.profile:
            calls = environs(loads[args.profile], args.requests)
            profile = cProfile.Profile()
            profile.runcall(answer_all, app, calls)
            pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
            return
        minimal: WsgiApp = minimal_app.create_app()
        print(f"{'request':10s} {'zaqar-lite us':>14s} {'minimal us':>11s} {'added us':>9s}")
        for name, request in loads.items():
            ours = cpu_us(app, request, args.requests, args.repeat)
            theirs = cpu_us(minimal, request, args.requests, args.repeat)
            label = f"claim {args.limit}" if name == "claim" else name
            print(f"{label:10s} {ours:14.1f} {theirs:11.1f} {ours - theirs:9.1f}")


if __name__ == "__main__":
    main()
