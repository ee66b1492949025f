"""Injectable time source: production uses the wall clock, tests a clock they move."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], float]


def wall_clock() -> float:
    """Return the current POSIX time in seconds."""
    return time.time()


class ManualClock:
    """A clock that only moves when told to; for tests of delays and expiry."""

    def __init__(self, start: float = 4_102_444_800.0) -> None:  # 2100: never behind a TTL monitor
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += seconds


def iso_utc(ts: float) -> str:
    """Format POSIX seconds as ISO-8601 UTC with a ``Z`` (``2026-01-31T12:00:00Z``)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
