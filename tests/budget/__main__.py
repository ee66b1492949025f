"""Count what each request costs, print it beside the recorded budget, and refresh the budget.

Usage (from the repository root)::

    python -m tests.budget              # counts on SQLite and Redis beside the recorded ones
    python -m tests.budget --update     # write them to tests/budget/request_cost.json (make budget)
    python -m tests.budget --store sqlite --json

Redis needs ``redis-server`` on the PATH (``tests/install_servers.sh``); a
throwaway one is started on a free port and stopped by its PID. A store that
cannot be measured keeps its recorded counts on ``--update``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from collections.abc import Callable
from typing import Any

from tests import budget

OPENERS: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
    "sqlite": budget.sqlite_uri, "redis": budget.redis_uri}


def available(store: str) -> bool:
    """Whether this machine can run ``store`` (Redis: ``redis-server`` on the PATH)."""
    return store != "redis" or shutil.which("redis-server") is not None


def table(costs: dict[str, dict[str, dict[str, int]]], recorded: dict[str, Any]) -> str:
    """Each count beside the recorded one, one line per store, queue and request."""
    lines = [f"{'store':8} {'queue':8} {'request':14} {'count':>8} {'recorded':>9} {'ratio':>6}"]
    for store, by_queue in costs.items():
        for queue, by_name in by_queue.items():
            for name, count in by_name.items():
                old = recorded.get(store, {}).get(queue, {}).get(name)
                ratio = f"{count / old:.2f}" if old else "-"
                lines.append(f"{store:8} {queue:8} {name:14} {count:8} {old or '-':>9} {ratio:>6}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.budget", description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true", help=f"write the counts to {budget.BUDGET_FILE}")
    parser.add_argument("--store", choices=budget.STORES, action="append",
                        help="measure this store only (repeatable; default: every store)")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    costs: dict[str, dict[str, dict[str, int]]] = {}
    for store in args.store or budget.STORES:
        if not available(store):
            print(f"{store}: not measured (redis-server is not on the PATH)", file=sys.stderr)
            continue
        with OPENERS[store]() as uri:
            costs[store] = budget.measure(uri)
    recorded = budget.load_budget()["stores"] if budget.BUDGET_FILE.exists() else {}
    print(json.dumps(costs, indent=2) if args.json else table(costs, recorded))
    if args.update:
        budget.write_budget(costs)
        print(f"written: {budget.BUDGET_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
