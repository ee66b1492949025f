"""The DLQ report's progress lines: one per stage on stderr, with its rows and seconds."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

Progress = Callable[[str], None]


def since(started: float) -> str:
    """Return the seconds since a ``time.monotonic()`` reading, as a progress line says them."""
    return f"{time.monotonic() - started:.1f} s"


def stderr_progress(line: str) -> None:
    """Print one progress line on stderr."""
    print(f"dlq-report: {line}", file=sys.stderr, flush=True)
