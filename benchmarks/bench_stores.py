"""The store each side of a benchmark runs on: a SQLite file of its own, or a Redis database of its own.

Redis sides share one throwaway redis-server (started by the suites' harness,
``tests/servers/redis.py``), each in a database of its own. Its CPU time is
part of what a side costs, so :meth:`Stores.cpu_seconds` reads the server's
own account (``INFO cpu``, getrusage, to the microsecond): sides take turns,
so what the server used during a turn is that turn's.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: the stores a side may run on
KINDS = ("sqlite", "redis")


class Stores:
    """Hands out one empty store per side, all of one kind."""

    def __init__(self, kind: str, directory: Path, synchronous: str) -> None:
        self.kind = kind
        self.directory = directory
        self.synchronous = synchronous
        self.server: Any = None
        self._databases: dict[str, int] = {}

    def uri(self, side: str) -> str:
        """Return the URI of the store of ``side`` (the same one each time it is asked)."""
        if self.kind == "sqlite":
            return f"sqlite:///{self.directory / side}.db?synchronous={self.synchronous}"
        database = self._databases.setdefault(side, len(self._databases) + 1)
        return str(self.server.uri(database))

    def cpu_seconds(self) -> float:
        """Return the CPU time the store's server has used so far (0 for SQLite: it runs in the caller)."""
        if self.server is None:
            return 0.0
        info = self.server.client().info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


@contextlib.contextmanager
def stores(kind: str, directory: Path, synchronous: str) -> Iterator[Stores]:
    """Run the stores of a comparison (a redis-server for Redis) for the duration of a block."""
    handed = Stores(kind, directory, synchronous)
    if kind == "sqlite":
        yield handed
        return
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # tests.servers lives in the repository, not in the package
    from tests.servers.redis import RedisServer

    directory.mkdir(parents=True, exist_ok=True)
    handed.server = RedisServer(directory)
    handed.server.start()
    try:
        yield handed
    finally:
        handed.server.stop()
