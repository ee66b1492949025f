"""The ``_retry_policy`` of a queue or a subscription: validation, precedence and schedule.

The keys, their defaults and the four phases are Zaqar's: immediate retries,
retries after ``minimum_delay``, a backoff from ``minimum_delay`` towards
``maximum_delay`` in steps of about ``LINEAR_INTERVAL`` seconds, then retries
after ``maximum_delay``. Unlike Zaqar, every failure is retried (connection
errors, timeouts and any non-2xx answer), and a delivery whose schedule is used
up suspends its subscription instead of dropping the message.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Mapping
from typing import Any

from zaqar_lite.errors import ValidationFailed

LOG = logging.getLogger(__name__)

#: seconds between two backoff steps (Zaqar's ``LINEAR_INTERVAL``)
LINEAR_INTERVAL = 5
BACKOFF_FUNCTIONS = ("linear", "arithmetic", "geometric", "exponential")
#: our own upper bounds, so that a schedule stays finite and small
MAX_RETRIES = 10_000
MAX_DELAY = 86_400
RETRY_POLICY = "_retry_policy"

_COUNTS = ("retries_with_no_delay", "minimum_delay_retries", "maximum_delay_retries")
_DELAYS = ("minimum_delay", "maximum_delay")


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How often, and after which waits, a failed delivery (webhook or mail) is tried again."""

    retries_with_no_delay: int = 3
    minimum_delay_retries: int = 3
    minimum_delay: int = 5
    maximum_delay: int = 30
    maximum_delay_retries: int = 3
    retry_backoff_function: str = "linear"
    ignore_subscription_override: bool = False

    def delays(self) -> list[float]:
        """Return the wait before each retry, in order; the first attempt is not in the list."""
        low, high = self.minimum_delay, self.maximum_delay
        return ([0.0] * self.retries_with_no_delay
                + [float(low)] * self.minimum_delay_retries
                + [float(d) for d in backoff(self.retry_backoff_function, low, high)]
                + [float(high)] * self.maximum_delay_retries)


DEFAULT_POLICY = RetryPolicy()


def backoff(function: str, low: int, high: int) -> list[int]:
    """Return the waits of the backoff phase: from ``low`` towards ``high``.

    ``linear`` adds ``LINEAR_INTERVAL`` each step (Zaqar's ``range(low, high, 5)``);
    the others take ``(high - low) // LINEAR_INTERVAL`` steps from ``low`` to ``high``:
    ``arithmetic`` with growing increments, ``geometric`` with a constant ratio,
    ``exponential`` doubling from ``low`` (at least 1 s) and capped at ``high``.
    """
    if function == "linear":
        return list(range(low, high, LINEAR_INTERVAL))
    steps = (high - low) // LINEAR_INTERVAL
    if steps <= 0:
        return []
    base = max(low, 1)
    if steps == 1:
        return [low if function == "arithmetic" else base]
    if function == "arithmetic":
        increment = 2.0 * (high - low) / (steps * (steps - 1))
        return [int(low + (a - 1) * a * increment / 2) for a in range(1, steps + 1)]
    if function == "geometric":
        ratio = math.pow(high / base, 1.0 / (steps - 1))
        return [min(high, int(round(base * ratio ** i))) for i in range(steps)]
    return [min(high, base * 2 ** min(i, 32)) for i in range(steps)]


def check_policy(value: Any, field: str) -> dict[str, Any]:
    """Check a ``_retry_policy`` object and return it.

    Args:
        value: the client's value.
        field: where it sits in the request, for error messages
            (``options._retry_policy`` or ``metadata._retry_policy``).

    Raises:
        ValidationFailed: a key is unknown, has the wrong type or is out of range;
            the message names it.
    """
    if not isinstance(value, dict):
        raise ValidationFailed(f"{field} must be a JSON object, got {json.dumps(value)}.")
    for key, item in value.items():
        _check_key(key, item, f"{field}.{key}")
    low = value.get("minimum_delay", DEFAULT_POLICY.minimum_delay)
    high = value.get("maximum_delay", DEFAULT_POLICY.maximum_delay)
    if low > high:
        raise ValidationFailed(f"{field}.minimum_delay ({low}) may not be greater than "
                               f"{field}.maximum_delay ({high}).")
    return dict(value)


def _check_key(key: str, item: Any, where: str) -> None:
    """Check one key of a retry policy and its value's type and range."""
    known = {f.name for f in dataclasses.fields(RetryPolicy)}
    if key not in known:
        raise ValidationFailed(f"{where} is not a retry policy key; known keys: "
                               f"{', '.join(sorted(known))}.")
    if key in _COUNTS or key in _DELAYS:
        high = MAX_RETRIES if key in _COUNTS else MAX_DELAY
        if isinstance(item, bool) or not isinstance(item, int):
            raise ValidationFailed(f"{where} must be an integer, got {json.dumps(item)}.")
        if not 0 <= item <= high:
            raise ValidationFailed(f"{where} must be between 0 and {high}, got {item}.")
    elif key == "retry_backoff_function":
        if item not in BACKOFF_FUNCTIONS:
            raise ValidationFailed(f"{where} must be one of {', '.join(BACKOFF_FUNCTIONS)}, "
                                   f"got {json.dumps(item)}.")
    elif not isinstance(item, bool):
        raise ValidationFailed(f"{where} must be true or false, got {json.dumps(item)}.")


def _parsed(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        return check_policy(value, where)
    except ValidationFailed as exc:
        LOG.warning("ignoring an invalid retry policy: %s", exc)
        return {}


def effective_policy(subscription_options: Mapping[str, Any] | None,
                     queue_metadata: Mapping[str, Any] | None) -> RetryPolicy:
    """Return the policy that applies to one subscription, by Zaqar's precedence rules.

    The subscription's policy wins over the queue's, unless either of them sets
    ``ignore_subscription_override``: then only the queue's applies. Keys left
    out take their defaults. A stored policy that is not valid (one stored before
    queue metadata was checked on write, or written to the store directly)
    counts as absent.
    """
    mine = _parsed((subscription_options or {}).get(RETRY_POLICY), "options._retry_policy")
    queue = _parsed((queue_metadata or {}).get(RETRY_POLICY), "metadata._retry_policy")
    if mine.get("ignore_subscription_override") or queue.get("ignore_subscription_override"):
        chosen = queue
    else:
        chosen = mine or queue
    return RetryPolicy(**chosen)
