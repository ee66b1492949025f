"""The ``_retry_backoff`` of a queue: how long a message waits before its next claim.

A queue that sets ``_retry_backoff`` (``{"base": 1, "factor": 2, "max": 300,
"jitter": 0.1}``) makes a message whose claim ends without a delete (the claim
is released, or it lapses) invisible for a while: the wait after its ``n``-th
claim (``n`` its claim count) is ``min(max, base * factor ** (n - 1))``
seconds, shortened by up to ``jitter`` of itself at random
(:func:`retry_wait`). A message whose count reached ``_max_claim_count`` gets
no wait: it goes to the dead-letter queue.

The wait is fixed when the message is claimed: the claim stores ``d`` (its
delay-expiry) as the claim's end plus the wait (:func:`claimed_delay_until`),
so the wait starts exactly when the claim lapses, with no write then; a
renewal moves ``d`` with the claim's end, and a release starts the wait at the
release (:func:`released_delay_until`). A message of a queue without the
policy keeps ``d = 0`` and pays nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from zaqar_lite.errors import ValidationFailed
from zaqar_lite.models import RetryBackoff

RETRY_BACKOFF = "_retry_backoff"
#: the policy's keys, and each one's default when left out (``base`` is required)
DEFAULTS: Mapping[str, float] = {"factor": 2.0, "jitter": 0.0}
KEYS = ("base", "factor", "max", "jitter")
#: largest ``factor``: beyond it a backoff is a fixed wait of ``max`` after two retries anyway
MAX_FACTOR = 10.0
#: the exponent above which ``factor ** (n - 1)`` is past every ``max`` (and would overflow a float)
_LOG_CEILING = 700.0


def _number(key: str, value: Any, low: float, high: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationFailed(f"{name}.{key} must be a number, got {json.dumps(value)}.")
    if not low <= value <= high:
        raise ValidationFailed(f"{name}.{key} must be between {low:g} and {high:g}, got {value}.")
    return float(value)


def check_backoff(value: Any, max_delay: int, name: str = RETRY_BACKOFF) -> RetryBackoff:
    """Check a ``_retry_backoff`` value and return the policy it sets.

    It is an object of ``base`` (required; seconds, above 0 up to
    ``max_delay``, the server's ``max_message_delay``), ``factor`` (1 to 10,
    default 2), ``max`` (seconds, ``base`` to ``max_delay``, default
    ``max_delay``) and ``jitter`` (0 to 1, default 0); no other key.

    Raises:
        ValidationFailed: naming ``name`` and the key and rule broken.
    """
    if not isinstance(value, dict):
        raise ValidationFailed(f"{name} must be an object with keys {', '.join(KEYS)}, "
                               f"got {json.dumps(value)}.")
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise ValidationFailed(f"{name} has unknown key {unknown[0]!r}; its keys are {', '.join(KEYS)}.")
    if "base" not in value:
        raise ValidationFailed(f"{name}.base is required (seconds before the first retry).")
    base = _number("base", value["base"], 0.0, float(max_delay), name)
    if base <= 0:
        raise ValidationFailed(f"{name}.base must be above 0, got {value['base']}.")
    factor = _number("factor", value.get("factor", DEFAULTS["factor"]), 1.0, MAX_FACTOR, name)
    ceiling = _number("max", value.get("max", max_delay), base, float(max_delay), name)
    jitter = _number("jitter", value.get("jitter", DEFAULTS["jitter"]), 0.0, 1.0, name)
    return RetryBackoff(base=base, factor=factor, max=ceiling, jitter=jitter)


def retry_wait(backoff: RetryBackoff, claim_count: int, draw: float) -> float:
    """Return the seconds a message waits after its ``claim_count``-th claim ends without a delete.

    ``min(max, base * factor ** (claim_count - 1))``, then shortened by
    ``jitter * draw`` of itself, ``draw`` in [0, 1) from the random source
    (so ``max`` is never passed).
    """
    exponent = max(claim_count - 1, 0)
    if backoff.factor > 1.0 and exponent * math.log(backoff.factor) > _LOG_CEILING:
        wait = backoff.max
    else:
        wait = min(backoff.max, backoff.base * backoff.factor ** float(exponent))
    return wait * (1.0 - backoff.jitter * draw)


def draws(backoff: RetryBackoff | None, count: int, random: Callable[[], float]) -> tuple[float, ...]:
    """Return the random draws a claim of up to ``count`` messages uses, one per message it claims.

    None are needed (and none are drawn) without a policy or without jitter.
    """
    if backoff is None or not backoff.jitter:
        return ()
    return tuple(random() for _ in range(count))


def claimed_delay_until(backoff: RetryBackoff | None, claim_expires: float, claim_count: int,
                        draw: float, exhausted: bool) -> float:
    """Return the ``d`` a claim stores on a message it takes (its ``claim_count``-th claim).

    The claim's end plus :func:`retry_wait`; 0 (no wait) without a policy, or
    when the count is exhausted (the message goes to the DLQ instead).
    """
    if backoff is None or exhausted:
        return 0.0
    return claim_expires + retry_wait(backoff, claim_count, draw)


def pending_wait(delay_until: float, claim_expires: float | None) -> float:
    """Return the wait a claimed message stored with these times has before its next claim."""
    if claim_expires is None or delay_until <= claim_expires:
        return 0.0
    return delay_until - claim_expires


def renewed_delay_until(delay_until: float, claim_expires: float | None, renewed_until: float) -> float:
    """Return the ``d`` of a claimed message renewed to end at ``renewed_until``: the wait moves along."""
    wait = pending_wait(delay_until, claim_expires)
    return renewed_until + wait if wait else delay_until


def released_delay_until(delay_until: float, claim_expires: float | None, now: float,
                         delay: float | None = None) -> float:
    """Return the ``d`` of a claimed message released at ``now``.

    An explicit ``delay`` (seconds; 0 for none) replaces the queue's wait;
    otherwise the wait the claim fixed starts now.
    """
    wait = pending_wait(delay_until, claim_expires) if delay is None else float(delay)
    return now + wait if wait else 0.0
