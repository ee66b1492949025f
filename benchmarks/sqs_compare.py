"""Send / receive / delete through zaqar-lite's SQS face, its Zaqar API, LocalStack and moto, in one run.

Targets, each a server of its own on a free port of 127.0.0.1:

* ``sqs``: zaqar-lite (``--code``, SQLite, ``noauth``, ``--workers`` gunicorn gevent
  workers) through its SQS face, AWS JSON 1.0 (``POST /`` with
  ``X-Amz-Target: AmazonSQS.<Action>``, what current boto3 sends);
* ``zaqar``: the same server, the same cycle through the Zaqar v2 API (post one
  message, claim ``limit=1``, delete with the claim id);
* ``localstack``: LocalStack's SQS provider (``localstack-core`` from PyPI in a
  virtualenv of its own, started in this machine's process, not in Docker;
  ``SERVICES=sqs``, no DNS server, no events sent out);
* ``moto``: ``moto_server`` (``moto[server]`` from PyPI in a virtualenv of its own).

The cycle: ``SendMessage`` of a 100-byte body, ``ReceiveMessage`` of one message with a 60 s
visibility timeout (a claim of ttl 60 on the Zaqar API, its minimum), ``DeleteMessage`` of
its receipt handle, each on one kept-alive connection per client. ``--clients`` client
processes (4) each loop on a queue of their own for ``--duration`` seconds per turn; in each
of ``--rounds`` rounds every target gets one turn, the order rotating. Requests carry a
SigV4-shaped ``Authorization`` header with access key ``000000000000`` whose signature none
of these servers checks (no client spends CPU signing). Figures are the medians over the
rounds: cycles per second, each operation's p50 latency, and the server's CPU per cycle (all
its processes), with the ratios of ``sqs`` to the others.

Usage: ``python benchmarks/sqs_compare.py [--targets sqs,zaqar,localstack,moto]
[--clients 4] [--duration 10] [--rounds 3] [--workers 2] [--code CHECKOUT] [--json FILE]``
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqs_suites as suites
from http_load import cpu_seconds

TARGETS = ("sqs", "zaqar", "localstack", "moto")
ACCOUNT = "000000000000"
BODY = "m" * 100
PROJECT = "sqs-compare"
MOTO_REQUIREMENTS = ["moto[server]"]
OPERATIONS = ("send", "receive", "delete")


# -- the clients ---------------------------------------------------------------------------------


class Client:
    """One kept-alive connection to a server and the three operations of the cycle on one queue."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)

    def request(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """One exchange; a broken kept-alive connection is opened again once."""
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def create(self, queue: str) -> None:
        raise NotImplementedError

    def send(self) -> None:
        raise NotImplementedError

    def receive(self) -> Any:
        raise NotImplementedError

    def delete(self, handle: Any) -> None:
        raise NotImplementedError


def _expect(status: int, body: bytes, allowed: tuple[int, ...], what: str) -> None:
    if status not in allowed:
        raise RuntimeError(f"{what} -> {status} {body[:300]!r}")


class SqsClient(Client):
    """AWS JSON 1.0, as boto3 sends it (the signature is shaped, not computed)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Date": stamp,
            "Authorization": f"AWS4-HMAC-SHA256 Credential={ACCOUNT}/{stamp[:8]}/us-east-1/sqs/aws4_request, "
            "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + "0" * 64,
        }
        self.queue_url = ""

    def call(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        headers = dict(self.headers, **{"X-Amz-Target": f"AmazonSQS.{action}"})
        status, body = self.request("POST", "/", json.dumps(payload).encode(), headers)
        _expect(status, body, (200,), action)
        answer: dict[str, Any] = json.loads(body) if body else {}
        return answer

    def create(self, queue: str) -> None:
        self.queue_url = self.call("CreateQueue", {"QueueName": queue})["QueueUrl"]

    def send(self) -> None:
        self.call("SendMessage", {"QueueUrl": self.queue_url, "MessageBody": BODY})

    def receive(self) -> Any:
        messages = self.call(
            "ReceiveMessage", {"QueueUrl": self.queue_url, "MaxNumberOfMessages": 1, "VisibilityTimeout": 60}
        ).get("Messages", [])
        return messages[0]["ReceiptHandle"] if messages else None

    def delete(self, handle: Any) -> None:
        self.call("DeleteMessage", {"QueueUrl": self.queue_url, "ReceiptHandle": handle})


class ZaqarClient(Client):
    """The same cycle through the Zaqar v2 API: post, claim one, delete it with its claim id."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.headers = {
            "Client-ID": str(uuid.uuid4()),
            "X-Project-ID": PROJECT,
            "Content-Type": "application/json",
        }
        self.path = ""

    def create(self, queue: str) -> None:
        self.path = f"/v2/queues/{queue}"
        status, body = self.request("PUT", self.path, b"{}", self.headers)
        _expect(status, body, (201, 204), "PUT queue")
        self.post_body = json.dumps({"messages": [{"ttl": 300, "body": BODY}]}).encode()
        self.claim_body = json.dumps({"ttl": 60, "grace": 60}).encode()

    def send(self) -> None:
        status, body = self.request("POST", self.path + "/messages", self.post_body, self.headers)
        _expect(status, body, (201,), "post")

    def receive(self) -> Any:
        status, body = self.request("POST", self.path + "/claims?limit=1", self.claim_body, self.headers)
        _expect(status, body, (201, 204), "claim")
        return json.loads(body)["messages"][0]["href"] if status == 201 else None

    def delete(self, handle: Any) -> None:
        status, body = self.request("DELETE", handle, None, self.headers)
        _expect(status, body, (204,), "delete")


CLIENTS: dict[str, Callable[[str], Client]] = {
    "sqs": SqsClient,
    "zaqar": ZaqarClient,
    "localstack": SqsClient,
    "moto": SqsClient,
}


def client_loop(target: str, url: str, queue: str, seconds: float, start_at: float) -> dict[str, Any]:
    """One client process's turn: cycles until ``seconds`` have passed; latencies of each operation."""
    client = CLIENTS[target](url)
    client.create(queue)
    latencies: dict[str, list[float]] = {name: [] for name in OPERATIONS}
    empty = 0
    while time.time() < start_at:
        time.sleep(0.005)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        client.send()
        t1 = time.perf_counter()
        handle = client.receive()
        t2 = time.perf_counter()
        latencies["send"].append(t1 - t0)
        latencies["receive"].append(t2 - t1)
        if handle is None:
            empty += 1
            continue
        client.delete(handle)
        latencies["delete"].append(time.perf_counter() - t2)
    return {"latencies": latencies, "cycles": len(latencies["delete"]), "empty": empty}


def _p50_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def turn(target: str, url: str, session: int, args: argparse.Namespace, round_no: int) -> dict[str, Any]:
    """Every client process runs the cycle at once for ``--duration``; the turn's figures."""
    start_at = time.time() + 1.0
    queues = [f"cmp-{target}-{round_no}-{i}-{uuid.uuid4().hex[:6]}" for i in range(args.clients)]
    with multiprocessing.get_context("spawn").Pool(args.clients) as pool:
        pending = [
            pool.apply_async(client_loop, (target, url, queue, args.duration, start_at)) for queue in queues
        ]
        time.sleep(max(0.0, start_at - time.time()))
        cpu_before, wall_before = cpu_seconds({session}), time.monotonic()
        results = [p.get(timeout=args.duration + 120) for p in pending]
        cpu = cpu_seconds({session}) - cpu_before
        wall = time.monotonic() - wall_before
    cycles = sum(r["cycles"] for r in results)
    figures: dict[str, Any] = {
        "cycles_per_s": cycles / args.duration,
        "server_cpu_ms_per_cycle": cpu * 1000 / cycles if cycles else float("nan"),
        "empty_receives": sum(r["empty"] for r in results),
        "wall_s": wall,
    }
    for name in OPERATIONS:
        figures[f"{name}_p50_ms"] = _p50_ms([v for r in results for v in r["latencies"][name]])
    return figures


# -- the servers ---------------------------------------------------------------------------------


@contextlib.contextmanager
def start(target: str, args: argparse.Namespace, work: Path, venvs: dict[str, Path]) -> Iterator[str]:
    """The server a target runs against."""
    if target in ("sqs", "zaqar"):
        with suites.zaqar_lite_server(args.code.resolve(), args.python, work / target, args.workers) as url:
            yield url
    elif target == "localstack":
        with suites.localstack_server(venvs["localstack"], work) as url:
            yield url
    else:
        with suites.moto_server(venvs["moto"], work) as url:
            yield url


# -- the run -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--targets", default=",".join(TARGETS), help="comma-separated, of " + ", ".join(TARGETS)
    )
    parser.add_argument("--clients", type=int, default=4, help="client processes, one connection each")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each turn")
    parser.add_argument("--rounds", type=int, default=3, help="turns of each target, the order rotating")
    parser.add_argument("--workers", type=int, default=2, help="zaqar-lite's gunicorn workers")
    parser.add_argument("--code", type=Path, default=suites.REPO, help="the zaqar-lite checkout (this one)")
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter with zaqar-lite's dependencies"
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=suites.DEFAULT_CACHE, help="where the venvs are kept"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    args.targets = [t for t in args.targets.split(",") if t]
    unknown = set(args.targets) - set(TARGETS)
    if unknown:
        parser.error(f"unknown targets: {', '.join(sorted(unknown))}")
    return args


def median_figures(turns: list[dict[str, Any]]) -> dict[str, float]:
    return {key: statistics.median(t[key] for t in turns) for key in turns[0]}


def table(figures: dict[str, dict[str, float]], settings: dict[str, Any]) -> str:
    """The printed table: one row per target, then the ratios of ``sqs`` to each other target."""
    columns = [
        ("cycles/s", "cycles_per_s", "{:.0f}"),
        ("send p50 ms", "send_p50_ms", "{:.2f}"),
        ("receive p50 ms", "receive_p50_ms", "{:.2f}"),
        ("delete p50 ms", "delete_p50_ms", "{:.2f}"),
        ("server CPU ms/cycle", "server_cpu_ms_per_cycle", "{:.2f}"),
    ]
    lines = [
        f"send/receive/delete, {settings['clients']} clients, {settings['duration']:.0f} s turns,"
        f" median of {settings['rounds']} rounds, zaqar-lite {settings['code_commit'][:12]}"
        f" ({settings['workers']} workers, SQLite)",
        "",
    ]
    lines.append(f"{'target':<12}" + "".join(f"{title:>21}" for title, _, _ in columns))
    for target, row in figures.items():
        lines.append(f"{target:<12}" + "".join(f"{fmt.format(row[key]):>21}" for _, key, fmt in columns))
    empty = {t: row["empty_receives"] for t, row in figures.items() if row["empty_receives"]}
    if empty:
        lines.append(
            "receives that found no message (median per turn): "
            + ", ".join(f"{t} {n:.0f}" for t, n in empty.items())
        )
    if "sqs" in figures:
        lines.append("")
        for other in (t for t in figures if t != "sqs"):
            ratio = figures["sqs"]["cycles_per_s"] / figures[other]["cycles_per_s"]
            cpu = figures["sqs"]["server_cpu_ms_per_cycle"] / figures[other]["server_cpu_ms_per_cycle"]
            lines.append(
                f"sqs / {other}: {ratio:.2f}x the cycles per second, {cpu:.2f}x the server CPU per cycle"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    venvs: dict[str, Path] = {}
    if "localstack" in args.targets:
        venvs["localstack"] = suites.ensure_venv(
            args.cache_dir,
            "bench-localstack",
            suites.find_python(["3.13", "3.12", "3.11"]),
            suites.LOCALSTACK_RUNTIME,
            "bench",
        )
    if "moto" in args.targets:
        venvs["moto"] = suites.ensure_venv(
            args.cache_dir, "bench-moto", sys.executable, MOTO_REQUIREMENTS, "bench"
        )
    turns: dict[str, list[dict[str, Any]]] = {t: [] for t in args.targets}
    with tempfile.TemporaryDirectory(prefix="sqs-compare-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        urls: dict[str, str] = {}
        for target in args.targets:
            if target == "zaqar" and "sqs" in urls:
                urls[target] = urls["sqs"]  # the same server: one store, two faces
            else:
                suites.log(f"starting {target}")
                urls[target] = stack.enter_context(start(target, args, work, venvs))
        for round_no in range(args.rounds):
            order = (
                args.targets[round_no % len(args.targets) :] + args.targets[: round_no % len(args.targets)]
            )
            for target in order:
                figures = turn(target, urls[target], suites.SESSIONS[urls[target]], args, round_no)
                suites.log(f"round {round_no + 1} {target}: {figures['cycles_per_s']:.0f} cycles/s")
                turns[target].append(figures)
    settings = {
        "clients": args.clients,
        "duration": args.duration,
        "rounds": args.rounds,
        "workers": args.workers,
        "code_commit": suites.code_commit(args.code.resolve()),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
    }
    figures = {target: median_figures(t) for target, t in turns.items()}
    print(table(figures, settings))
    if args.json:
        args.json.write_text(json.dumps({"settings": settings, "figures": figures, "turns": turns}, indent=1))


if __name__ == "__main__":
    main()
