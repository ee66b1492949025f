"""What encryption at rest costs: post and claim+delete on an encrypted queue against a plain one.

Both queues live in one SQLite store and are driven through the service layer
the API calls (``Messaging.post`` in batches of 20, then ``Messaging.claim`` of
10 and ``Messaging.delete_message`` of each), in one process, with bodies of
about ``--body-bytes`` of JSON. Each round runs both queues back to back, the
order alternating; the ratios printed are the medians of the per-round ratios
encrypted / plain of messages a second. The codec alone (``seal`` and
``open_body`` of one body) is timed too, in microseconds.

Usage: ``python benchmarks/encryption.py [--rounds 6] [--messages 2000] [--body-bytes 1024] [--json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from zaqar_lite.config import load_settings  # noqa: E402
from zaqar_lite.rules import encryption  # noqa: E402
from zaqar_lite.service import Messaging  # noqa: E402
from zaqar_lite.storage import open_storage  # noqa: E402

KEY = "bench:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
PROJECT, CLIENT = "bench", "5d0b2d58-33b4-4b7c-9d1d-7a5a1b0e2f11"
QUEUES = {"plain": {}, "encrypted": {"_enable_encrypt_messages": True}}


def body_of(size: int, n: int) -> dict[str, Any]:
    return {"order": n, "items": [{"sku": f"SKU-{i:05d}", "qty": i % 7} for i in range(max(1, size // 32))]}


def run_queue(messaging: Messaging, queue: str, count: int, size: int) -> dict[str, float]:
    """Post ``count`` messages, then claim and delete them; return messages a second, wall and CPU.

    SQLite runs in this process, so its CPU time is this process's: the CPU
    figures move much less with the neighbours' load than the wall-clock ones.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    for first in range(0, count, 20):
        items = [{"body": body_of(size, n), "ttl": None, "delay": None, "dlq_eligible": True}
                 for n in range(first, min(first + 20, count))]
        messaging.post(PROJECT, queue, CLIENT, items, 10)
    posted_wall, posted_cpu = time.perf_counter(), time.process_time()
    done = 0
    while done < count:
        claim_id, claimed, _ = messaging.claim(PROJECT, queue, 10, 300, 60)
        if not claimed:
            break
        for message in claimed:
            messaging.delete_message(PROJECT, queue, message.id, claim_id)
        done += len(claimed)
    ended_wall, ended_cpu = time.perf_counter(), time.process_time()
    return {"post": count / (posted_wall - wall), "post_cpu": count / (posted_cpu - cpu),
            "claim_delete": done / (ended_wall - posted_wall),
            "claim_delete_cpu": done / (ended_cpu - posted_cpu)}


def codec_microseconds(size: int, repeat: int = 2000) -> tuple[float, float]:
    keyring = encryption.Keyring.from_setting((KEY,))
    body = body_of(size, 1)
    started = time.perf_counter()
    sealed = [encryption.seal(body, keyring, PROJECT, f"m{i}") for i in range(repeat)]
    middle = time.perf_counter()
    for i, envelope in enumerate(sealed):
        encryption.open_body(envelope, keyring, PROJECT, f"m{i}")
    ended = time.perf_counter()
    return (middle - started) / repeat * 1e6, (ended - middle) / repeat * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = []
    with tempfile.TemporaryDirectory() as directory:
        settings = load_settings(None, storage_uri=f"sqlite:///{directory}/bench.db?synchronous=normal")
        messaging = Messaging(open_storage(settings.storage_uri), settings.replace(encryption_keys=(KEY,)))
        for name, metadata in QUEUES.items():
            messaging.create_queue(PROJECT, f"bench-{name}", metadata)
        for round_number in range(args.rounds):
            order = list(QUEUES) if round_number % 2 == 0 else list(reversed(QUEUES))
            figures.append({name: run_queue(messaging, f"bench-{name}", args.messages, args.body_bytes)
                            for name in order})
    seal_us, open_us = codec_microseconds(args.body_bytes)
    ratios = {kind: statistics.median(r["encrypted"][kind] / r["plain"][kind] for r in figures)
              for kind in ("post", "post_cpu", "claim_delete", "claim_delete_cpu")}
    result = {"body_bytes": len(json.dumps(body_of(args.body_bytes, 1))), "rounds": figures,
              "ratios_encrypted_to_plain": ratios, "seal_us": seal_us, "open_us": open_us}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"body: {result['body_bytes']} bytes of JSON; {args.messages} messages a queue, "
          f"{args.rounds} rounds")
    for index, rates in enumerate(figures):
        print(f"round {index + 1}: " + ", ".join(
            f"{name} post {r['post']:,.0f}/s ({r['post_cpu']:,.0f}/CPU-s) claim+delete "
            f"{r['claim_delete']:,.0f}/s ({r['claim_delete_cpu']:,.0f}/CPU-s)" for name, r in rates.items()))
    print("encrypted / plain, median: " + ", ".join(f"{kind} {ratio:.2f}" for kind, ratio in ratios.items()))
    print(f"codec: seal {seal_us:.1f} us, open {open_us:.1f} us per body")


if __name__ == "__main__":
    main()
