"""The queue-name rule: which names a queue (or a dead-letter queue, or a redrive destination) may have."""

from __future__ import annotations

import re
from typing import Any

from zaqar_lite.config import Limits

QUEUE_NAME = re.compile(r"^[a-zA-Z0-9_.-]+$")
#: names that path-normalising clients (URL libraries, browsers, proxies) turn into another path
DOT_SEGMENTS = (".", "..")


def is_queue_name(name: Any, limits: Limits) -> bool:
    """Return whether a value is a valid queue name: ``^[a-zA-Z0-9_.-]+$``, 1..max chars, not ``.``/``..``."""
    return (isinstance(name, str) and 0 < len(name) <= limits.max_queue_name_length
            and QUEUE_NAME.match(name) is not None and name not in DOT_SEGMENTS)
