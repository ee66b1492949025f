"""Pausing a queue and the dead-letter circuit breaker: pure rules.

docs/api.rst, "Pausing a queue" and "Dead-letter circuit breaker".

A queue is paused while its metadata holds ``_paused: true``: it accepts
posts and hands out nothing. ``_dead_letter_breaker`` sets the threshold at
which a queue pauses itself: more than ``max_dead_letters`` dead letters, or
dead letters above ``max_share`` of the messages its claims took, within one
window of ``seconds``. A window starts with the first event counted after the
previous window ended; its counts are a record of the store, and
:func:`counted` is the one rule that advances them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from zaqar_lite.clock import iso_utc
from zaqar_lite.errors import ValidationFailed, sent

PAUSED = "_paused"
#: why the queue is paused, written with ``_paused`` by the breaker (dropped on resume)
PAUSED_BY = "_paused_by"
BREAKER = "_dead_letter_breaker"
#: ``_paused_by.by`` of a pause the breaker made
BY_BREAKER = "dead_letter_breaker"
#: the longest window a breaker may count over (a day)
MAX_SECONDS = 86400
#: the largest count a breaker may allow
MAX_COUNT = 1_000_000
#: messages claimed within a window before ``max_share`` can trip, unless the queue sets ``min_claimed``
DEFAULT_MIN_CLAIMED = 10
BREAKER_FIELDS = ("seconds", "max_dead_letters", "max_share", "min_claimed")


@dataclasses.dataclass(frozen=True)
class Breaker:
    """A queue's ``_dead_letter_breaker``, validated."""

    seconds: int
    max_dead_letters: int | None = None
    max_share: float | None = None
    min_claimed: int = DEFAULT_MIN_CLAIMED

    @property
    def counts_claims(self) -> bool:
        """Return whether the messages claims take must be counted (a ``max_share`` is set)."""
        return self.max_share is not None

    def describe(self) -> str:
        """Return the threshold in words, as the pause record and the console show it."""
        rules = []
        if self.max_dead_letters is not None:
            rules.append(f"more than {self.max_dead_letters} dead letters")
        if self.max_share is not None:
            rules.append(f"dead letters above {self.max_share:g} of the messages claimed "
                         f"(from {self.min_claimed} claimed on)")
        return " or ".join(rules) + f" within {self.seconds} s"


@dataclasses.dataclass(frozen=True)
class Window:
    """The counts of one breaker window, as its record holds them."""

    started: float
    dead_letters: int = 0
    claimed: int = 0
    #: whether this window already tripped the breaker (it trips once per window)
    tripped: bool = False

    def to_record(self) -> dict[str, Any]:
        """Return the record value."""
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> Window:
        """Return the window a record holds."""
        return cls(started=float(value["started"]), dead_letters=int(value.get("dead_letters", 0)),
                   claimed=int(value.get("claimed", 0)), tripped=bool(value.get("tripped", False)))


def _whole(key: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationFailed(f"{BREAKER}.{key} must be an integer between {low} and {high}, "
                               f"got {sent(value)}.")
    return value


def check_breaker(value: Any) -> Breaker:
    """Return a ``_dead_letter_breaker`` value as a :class:`Breaker`, or refuse it naming the rule.

    Raises:
        ValidationFailed: not an object, an unknown field, a value out of range,
            or neither ``max_dead_letters`` nor ``max_share``.
    """
    if not isinstance(value, dict):
        raise ValidationFailed(f"{BREAKER} must be an object with seconds and max_dead_letters and/or "
                               f"max_share, got {sent(value)}.")
    unknown = sorted(set(value) - set(BREAKER_FIELDS))
    if unknown:
        raise ValidationFailed(f"{BREAKER} has no field {unknown[0]}; its fields are "
                               f"{', '.join(BREAKER_FIELDS)}.")
    if "seconds" not in value:
        raise ValidationFailed(f"{BREAKER} needs seconds, the window it counts dead letters over.")
    seconds = _whole("seconds", value["seconds"], 1, MAX_SECONDS)
    count = value.get("max_dead_letters")
    share = value.get("max_share")
    if count is None and share is None:
        raise ValidationFailed(f"{BREAKER} needs max_dead_letters, max_share or both.")
    if count is not None:
        count = _whole("max_dead_letters", count, 0, MAX_COUNT)
    if share is not None and (isinstance(share, bool) or not isinstance(share, int | float)
                              or not 0 <= share < 1):
        raise ValidationFailed(f"{BREAKER}.max_share must be a number from 0 to below 1, got {sent(share)}.")
    min_claimed = _whole("min_claimed", value.get("min_claimed", DEFAULT_MIN_CLAIMED), 1, MAX_COUNT)
    return Breaker(seconds=seconds, max_dead_letters=count,
                   max_share=float(share) if share is not None else None, min_claimed=min_claimed)


def check_paused(metadata: Mapping[str, Any]) -> None:
    """Refuse a ``_paused`` that is not true or false, and a ``_paused_by`` that is not an object.

    Raises:
        ValidationFailed: naming the key and the value sent.
    """
    if PAUSED in metadata and not isinstance(metadata[PAUSED], bool):
        raise ValidationFailed(f"{PAUSED} must be true or false, got {sent(metadata[PAUSED])}.")
    if PAUSED_BY in metadata and not isinstance(metadata[PAUSED_BY], dict):
        raise ValidationFailed(f"{PAUSED_BY} must be an object, got {sent(metadata[PAUSED_BY])}.")


def without_stale_reason(metadata: dict[str, Any]) -> dict[str, Any]:
    """Return metadata without a ``_paused_by`` once the queue is no longer paused (resumed)."""
    if PAUSED_BY in metadata and not metadata.get(PAUSED):
        return {k: v for k, v in metadata.items() if k != PAUSED_BY}
    return metadata


def is_paused(metadata: Mapping[str, Any] | None) -> bool:
    """Return whether a queue with this stored metadata hands out nothing."""
    return bool(metadata and metadata.get(PAUSED))


def breaker_of(metadata: Mapping[str, Any] | None) -> Breaker | None:
    """Return the queue's breaker (validated when stored), or None when it sets none."""
    value = (metadata or {}).get(BREAKER)
    return check_breaker(value) if value is not None else None


def counted(window: Window | None, breaker: Breaker, now: float, dead_letters: int,
            claimed: int) -> tuple[Window, bool]:
    """Count dead letters and messages claimed at ``now`` into the breaker's window.

    A window that ended (``seconds`` after it started) or none gives way to a
    new one starting at ``now``. The breaker trips when the counts pass its
    threshold and this window has not tripped yet: of the writers counting
    into one window, exactly the one whose count passes the threshold is told
    to pause the queue.

    Returns:
        The window to store, and whether this count trips the breaker.
    """
    if window is None or now >= window.started + breaker.seconds:
        window = Window(started=now)
    after = dataclasses.replace(window, dead_letters=window.dead_letters + dead_letters,
                                claimed=window.claimed + claimed)
    trips = not after.tripped and passes(after, breaker)
    return (dataclasses.replace(after, tripped=True) if trips else after), trips


def passes(window: Window, breaker: Breaker) -> bool:
    """Return whether a window's counts are past the breaker's threshold."""
    if breaker.max_dead_letters is not None and window.dead_letters > breaker.max_dead_letters:
        return True
    return (breaker.max_share is not None and window.claimed >= breaker.min_claimed
            and window.dead_letters > breaker.max_share * window.claimed)


def pause_record(breaker: Breaker, window: Window, now: float) -> dict[str, Any]:
    """Return the ``_paused_by`` the breaker writes when it trips: what it counted, and its rule."""
    return {
        "by": BY_BREAKER,
        "at": iso_utc(now),
        "rule": breaker.describe(),
        "window_started": iso_utc(window.started),
        "dead_letters": window.dead_letters,
        "claimed": window.claimed,
    }


def paused_metadata(metadata: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any] | None:
    """Return the metadata of a queue the breaker pauses, or None when it is paused already."""
    if is_paused(metadata):
        return None
    return {**metadata, PAUSED: True, PAUSED_BY: dict(record)}


def notice_body(queue: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """Return the body of the message that tells a paused queue's subscribers why it paused."""
    return {"event": "queue_paused", "queue": queue, **record}
