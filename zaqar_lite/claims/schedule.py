"""Long schedules: a post's ``deliver_at`` as the message's delay end, and a delayed message's default ttl.

A message is delayed until its ``delay_until`` (the delay end every driver
stores, and indexes, as for ``delay``): a post sets it from ``delay``
(seconds from the post) or from ``deliver_at`` (an absolute time), never
both. ``deliver_at`` is an ISO 8601 time with a UTC offset
(``2026-11-29T08:00:00Z``) or POSIX seconds (a JSON number). A time up to
:data:`PAST_MARGIN` seconds in the past (a producer's clock running a little
ahead of the server's) means now; further in the past, or more than
``max_message_delay`` seconds ahead, it is refused.

A given ttl counts from the post, as Zaqar's: one that ends before the
message is due expires it unseen (or dead-letters it on expiry, when the
queue says so). A post without ttl takes the queue's default ttl; when that
would end before the message is due, it counts from when the message is due
instead (:func:`default_ttl`), so a message scheduled days ahead is not lost
to a default meant for messages handed out at once.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from zaqar_lite.errors import ValidationFailed

#: seconds a ``deliver_at`` may lie in the past (it then means now)
PAST_MARGIN = 30
#: what a ``deliver_at`` must be, as error descriptions say it
FORMS = "an ISO 8601 time with a UTC offset (2026-11-29T08:00:00Z) or POSIX seconds"


def instant(value: Any, where: str) -> float:
    """Return the POSIX time a ``deliver_at`` value names.

    Args:
        value: the value posted: an ISO 8601 string with a UTC offset, or a number.
        where: how error descriptions name the value (``messages[0].deliver_at``).

    Raises:
        ValidationFailed: the value is of neither form.
    """
    if isinstance(value, str):
        try:  # RFC 3339 allows a lower-case t and z too
            parsed = datetime.fromisoformat(value.upper())
        except ValueError:
            raise ValidationFailed(f"{where} must be {FORMS}, got a string that is not a time.") from None
        if parsed.tzinfo is None:
            raise ValidationFailed(f"{where} must be {FORMS}: the time has no UTC offset (add Z).")
        return parsed.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        shown = "an object" if isinstance(value, dict) else "an array" if isinstance(value, list) \
            else json.dumps(value)
        raise ValidationFailed(f"{where} must be {FORMS}, got {shown}.")
    return float(value)


def delay_until(deliver_at: float, now: float, max_delay: int, where: str) -> float:
    """Return the delay end of a message posted at ``now`` to be delivered at ``deliver_at`` (0.0: at once).

    Raises:
        ValidationFailed: ``deliver_at`` is more than :data:`PAST_MARGIN` seconds
            before ``now``, or more than ``max_delay`` seconds after it.
    """
    if deliver_at < now - PAST_MARGIN:
        raise ValidationFailed(f"{where} is {math.floor(now - deliver_at)} s in the past; it may be at most "
                               f"{PAST_MARGIN} s in the past (it then means now).")
    if deliver_at - now > max_delay:
        raise ValidationFailed(f"{where} is {math.ceil(deliver_at - now)} s ahead; this server delivers at "
                               f"most {max_delay} s ahead (max_message_delay).")
    return deliver_at if deliver_at > now else 0.0


def default_ttl(default: int, delay: float) -> int:
    """Return the ttl of a message posted without one, ``delay`` seconds before it is due.

    The queue's default ttl, counted from the post; when it would end before
    the message is due, counted from when it is due.
    """
    return default if default > delay else math.ceil(delay) + default
