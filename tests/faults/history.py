"""A history: every request a client made, with when it was sent, when it ended and how.

An operation ends ``ok`` (the server answered 2xx), ``fail`` (4xx: the server refused it,
so it did not happen) or ``info`` (a 5xx, a dropped connection or a timeout: it may or may
not have happened, as Jepsen's histories say). Times are seconds since the run began, on
the client's monotonic clock.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any

OK, FAIL, INFO = "ok", "fail", "info"


@dataclasses.dataclass
class Op:
    """One request and its answer."""

    process: str
    #: post | post-expiring | post-notified | claim | delete | release | redrive | subscribe | read, and
    #: the receiver's deliver (a webhook delivery), the nemesis's start and heal
    f: str
    invoke: float
    complete: float
    outcome: str
    #: the HTTP status, None when no answer came (a timeout or a dropped connection)
    status: int | None
    #: what was asked and what came back, by kind:
    #: post {"n", "id"}; claim {"ttl", "claim_id", "messages": [{"id", "n", "claim_count"}]};
    #: delete / release {"id", "claim_id"}; read {"queue": [...], "dlq": [...]} (final state, messages as
    #: in a claim, and "redrive_tasks" in an extended run); redrive {"task_id"}; subscribe
    #: {"subscriber", "subscription_id"}; deliver {"subscription_id", "path", "id", "n"}; any kind may
    #: carry "error" (the exception of an unanswered request)
    value: dict[str, Any]


class History:
    """Operations recorded by several client threads."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.ops: list[Op] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        """Return the seconds since the run began."""
        return time.monotonic() - self.start

    def add(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def dump(self, path: Path) -> None:
        """Write the history as JSON lines, one operation a line."""
        with self._lock:
            lines = [json.dumps(dataclasses.asdict(op), sort_keys=True) for op in self.ops]
        path.write_text("\n".join(lines) + "\n")


def load(path: Path) -> list[Op]:
    """Read a history written by :meth:`History.dump`."""
    return [Op(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
