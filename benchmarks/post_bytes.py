"""Bytes a post of one message sends to Redis, and the Redis CPU of its script, through the real app.

The app of ``tests/budget`` (``create_app`` on a throwaway ``redis-server`` of its
own, called through its WSGI interface, default settings) answers ``--posts``
posts of one message to a queue, for a plain message, one with a ``dedup_id``,
one with a ``group`` and one delayed; the server's ``total_net_input_bytes``
(``INFO stats``) before and after, less what the two ``INFO`` calls themselves
send, divided by the posts, is what one post sends to Redis (its ``EVALSHA``
with its keys and arguments, and any command beside it). The script's CPU is
``INFO commandstats``' ``usec_per_call`` of ``evalsha`` over the same posts.

Usage: ``python benchmarks/post_bytes.py [--posts 1000]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import budget  # noqa: E402 - after the checkout is on the path

#: the kinds of message posted: what each post's message holds besides its body
KINDS: dict[str, dict[str, Any]] = {
    "plain": {},
    "dedup_id": {"dedup_id": "order-{n}"},
    "group": {"group": "customer-{g}"},
    "delayed": {"delay": 60},
}


def _input_bytes(admin: redis.Redis) -> int:
    return int(admin.info("stats")["total_net_input_bytes"])


def measure(posts: int) -> dict[str, tuple[float, float]]:
    """Return, per kind, the bytes one post sends to Redis and its script's microseconds."""
    figures = {}
    with budget.redis_uri() as uri:
        session = budget.Session(uri)
        admin = redis.Redis.from_url(uri)
        try:
            for kind, extra in KINDS.items():
                path = f"/v2/queues/bytes-{kind}/messages"
                session.call("PUT", f"/v2/queues/bytes-{kind}", document={})
                session.call("POST", path, document={"messages": [{"ttl": 300, "body": {"warm": 1}}]})
                before = _input_bytes(admin)
                idle = _input_bytes(admin) - before  # what one INFO call sends
                admin.config_resetstat()
                before = _input_bytes(admin)
                for n in range(posts):
                    fields = {k: v.format(n=n, g=n % 10) if isinstance(v, str) else v
                              for k, v in extra.items()}
                    answer = session.call("POST", path, document={
                        "messages": [{"ttl": 300, "body": {"event": "order", "n": n}, **fields}]})
                    assert answer.status_code == 201, answer.body
                sent = _input_bytes(admin) - before - idle
                script = admin.info("commandstats")["cmdstat_evalsha"]
                figures[kind] = (sent / posts, float(script["usec_per_call"]))
        finally:
            admin.close()
            session.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posts", type=int, default=1000, help="posts of one message per kind")
    args = parser.parse_args(argv)
    print(f"{'message':10} {'bytes a post':>13} {'script us':>10}")
    for kind, (sent, usec) in measure(args.posts).items():
        print(f"{kind:10} {sent:13.1f} {usec:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
