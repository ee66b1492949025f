"""The queue-name rule: which names a queue (or a dead-letter queue, or a redrive destination) may have."""

from __future__ import annotations

from typing import Any

from zaqar_lite.config import Limits, valid_queue_name


def is_queue_name(name: Any, limits: Limits) -> bool:
    """Return whether a value is a valid queue name: ``^[a-zA-Z0-9_.-]+$``, 1..max chars, not ``.``/``..``.

    The rule is written in ``config`` (which checks the default dead-letter
    queue's name at start-up, below this layer).
    """
    return valid_queue_name(name, limits.max_queue_name_length)
