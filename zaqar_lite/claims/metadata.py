"""Reserved queue metadata: defaults, validation, and the policy it yields.

docs/api.rst, "Reserved metadata".
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from zaqar_lite.claims import dedup, pause
from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.claims.retry_backoff import RETRY_BACKOFF, check_backoff
from zaqar_lite.config import Limits
from zaqar_lite.errors import QueueLimitReached, ValidationFailed, sent
from zaqar_lite.models import NO_DEAD_LETTER, DeadLetterPolicy, RetryBackoff
from zaqar_lite.rules.delivery_retry import check_policy

MAX_CLAIM_COUNT = "_max_claim_count"
DEAD_LETTER_QUEUE = "_dead_letter_queue"
DEAD_LETTER_TTL = "_dead_letter_queue_messages_ttl"
DEFAULT_DELAY = "_default_message_delay"
DEFAULT_TTL = "_default_message_ttl"
MAX_POST_SIZE = "_max_messages_post_size"
ENCRYPT_MESSAGES = "_enable_encrypt_messages"
DEAD_LETTER_ON_EXPIRY = "_dead_letter_on_expiry"
RETRY_POLICY = "_retry_policy"
MAX_MESSAGE_TTL = "_max_message_ttl"
DEDUP_WINDOW = dedup.WINDOW
#: reserved keys of zaqar-lite's own: shown only when set
OWN_RESERVED = (DEAD_LETTER_ON_EXPIRY, MAX_MESSAGE_TTL, DEDUP_WINDOW, RETRY_BACKOFF,
                pause.PAUSED, pause.PAUSED_BY, pause.BREAKER)
#: the other ``_`` keys a queue's metadata may hold: its retry policy, its flavor (Zaqar's), its template
OTHER_KNOWN = (RETRY_POLICY, "_flavor", "_queue_template")
#: edits (insertions, deletions, substitutions, swaps of neighbours) within which a ``_`` key is a typo
TYPO_EDITS = 2


def defaults(limits: Limits) -> dict[str, Any]:
    """Return Zaqar 23's reserved keys with the values that apply when they are unset."""
    return {
        MAX_POST_SIZE: limits.max_messages_post_size,
        DEFAULT_TTL: limits.default_message_ttl,
        DEFAULT_DELAY: 0,
        DEAD_LETTER_QUEUE: None,
        DEAD_LETTER_TTL: None,
        MAX_CLAIM_COUNT: None,
        ENCRYPT_MESSAGES: False,
    }


def reserved_keys(limits: Limits) -> set[str]:
    """Return every reserved key: a PATCH may replace or remove one that is not set."""
    return set(defaults(limits)) | set(OWN_RESERVED)


def with_defaults(metadata: Mapping[str, Any] | None, limits: Limits) -> dict[str, Any]:
    """Return the metadata a client sees: Zaqar's reserved defaults, then the stored keys."""
    shown = defaults(limits)
    shown.update(metadata or {})
    return shown


def _int_rule(key: str, value: Any, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed(f"{key} must be an integer, got {sent(value)}.")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValidationFailed(f"{key} must be {bound}, got {sent(value)}.")


def validate(metadata: Any, limits: Limits, default_dead_letter_queue: str | None = None) -> dict[str, Any]:
    """Check a queue's whole metadata on its own (types, ranges, keys that need another).

    ``_max_claim_count``, ``_dead_letter_queue`` and
    ``_dead_letter_queue_messages_ttl`` may each be set alone, as Zaqar
    accepts them: claims are counted either way, messages move only once the
    first two are set, and the ttl applies to the moves once there are any.
    Null reserved values mean "unset" and are dropped. Cross-queue rules (the
    DLQ exists, no chains) are :func:`check_dead_letter_links`.

    Returns:
        The metadata to store.
    """
    if not isinstance(metadata, dict):
        raise ValidationFailed("Queue metadata must be a JSON object.")
    if len(json.dumps(metadata, ensure_ascii=False).encode("utf-8")) > limits.max_queue_metadata:
        raise ValidationFailed(f"Queue metadata may not exceed {limits.max_queue_metadata} bytes.")
    reserved = reserved_keys(limits)
    check_misspelt_keys(metadata, reserved)
    stored = {k: v for k, v in metadata.items() if not (k in reserved and v is None)}
    _check_values(stored, limits)
    if RETRY_POLICY in stored:
        check_policy(stored[RETRY_POLICY], f"metadata.{RETRY_POLICY}")
    if RETRY_BACKOFF in stored:
        check_backoff(stored[RETRY_BACKOFF], limits.max_message_delay)
    pause.check_paused(stored)
    if pause.BREAKER in stored:
        pause.check_breaker(stored[pause.BREAKER])
    stored = pause.without_stale_reason(stored)
    if stored.get(DEAD_LETTER_ON_EXPIRY) and stored.get(DEAD_LETTER_QUEUE) is None \
            and not default_dead_letter_queue:
        raise ValidationFailed(f"{DEAD_LETTER_ON_EXPIRY} needs {DEAD_LETTER_QUEUE}.")
    return stored


def edit_distance(a: str, b: str) -> int:
    """Return the insertions, deletions, substitutions and swaps of neighbours that turn ``a`` into ``b``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            if i > 1 and j > 1 and char_a == b[j - 2] and a[i - 2] == char_b:
                best = min(best, previous2[j - 2] + 1)
            current.append(best)
        previous2, previous = previous, current
    return previous[-1]


def resembled_key(key: str, known: Iterable[str]) -> str | None:
    """Return the known key that ``key`` (starting with ``_``) is a typo of, or None.

    A key that is one of ``known`` is no typo; a ``_`` key within
    :data:`TYPO_EDITS` edits of a known key is (the nearest wins, then the
    first in name order). Other keys are the client's own, as in Zaqar.
    """
    if not key.startswith("_"):
        return None
    names = sorted(known)
    if key in names:
        return None
    distance, nearest = min(((edit_distance(key, name), name) for name in names),
                            default=(TYPO_EDITS + 1, ""))
    return nearest if distance <= TYPO_EDITS else None


def check_misspelt_keys(metadata: Mapping[str, Any], reserved: Iterable[str]) -> None:
    """Refuse a ``_`` key one or two edits away from a reserved key, naming the key it resembles.

    Stored as it was, such a key would be a silent no-op: ``_max_claims_count``
    would never dead-letter a message.
    """
    known = {*reserved, *OTHER_KNOWN}
    for key in metadata:
        nearest = resembled_key(key, known)
        if nearest is not None:
            raise ValidationFailed(
                f"{key} is not a reserved metadata key; did you mean {nearest}? Keys that start with _ "
                "and nearly spell a reserved key are refused, since they would change nothing.")


def check_encryption(metadata: Mapping[str, Any], keys_configured: bool) -> None:
    """Refuse ``_enable_encrypt_messages: true`` on a server without ``[encryption] keys``.

    Checked where queue metadata is written (``storage/encrypted.py``), so a
    queue, one created from a template and a topic are held to it alike, and
    no body is ever stored in plaintext on a queue that asks for encryption.
    """
    if metadata.get(ENCRYPT_MESSAGES) and not keys_configured:
        raise ValidationFailed(
            f"{ENCRYPT_MESSAGES}: true needs the setting [encryption] keys "
            "(ZAQAR_LITE_ENCRYPTION_KEYS), which this server does not have; message bodies would be "
            "stored in plaintext, so true is refused. Leave it out or set it to false.")


def encrypts(metadata: Mapping[str, Any] | None) -> bool:
    """Return whether a queue's stored metadata asks for bodies encrypted at rest."""
    return bool((metadata or {}).get(ENCRYPT_MESSAGES))


def _check_values(stored: Mapping[str, Any], limits: Limits) -> None:
    """Check the type and range of each reserved value given, on its own."""
    ranges: dict[str, tuple[int, int | None]] = {
        MAX_CLAIM_COUNT: (1, None),
        DEAD_LETTER_TTL: (limits.min_message_ttl, limits.max_message_ttl),
        DEFAULT_DELAY: (0, limits.max_message_delay),
        DEFAULT_TTL: (limits.min_message_ttl, limits.max_message_ttl),
        MAX_POST_SIZE: (1, limits.max_messages_post_size),
        MAX_MESSAGE_TTL: (limits.min_message_ttl, limits.max_message_ttl),
        DEDUP_WINDOW: (1, dedup.MAX_WINDOW),
    }
    for key, (low, high) in ranges.items():
        if key in stored:
            _int_rule(key, stored[key], low, high)
    dlq = stored.get(DEAD_LETTER_QUEUE)
    if dlq is not None and not is_queue_name(dlq, limits):
        raise ValidationFailed(
            f"{DEAD_LETTER_QUEUE} must be a queue name: ASCII letters, digits, _ - and ., 1 to "
            f"{limits.max_queue_name_length} characters, not . or .. (got {sent(dlq)}).")
    for key in (ENCRYPT_MESSAGES, DEAD_LETTER_ON_EXPIRY):
        if key in stored and not isinstance(stored[key], bool):
            raise ValidationFailed(f"{key} must be true or false, got {sent(stored[key])}.")


def check_dead_letter_links(
    queue: str,
    metadata: Mapping[str, Any],
    lookup: Callable[[str], Mapping[str, Any] | None],
    project_queues: Callable[[], Iterable[tuple[str, Mapping[str, Any]]]],
) -> None:
    """Check the cross-queue rules of 2.1 for a queue's new metadata.

    Args:
        queue: the queue being configured.
        metadata: its new (validated) metadata.
        lookup: returns another queue's stored metadata in the same project
            (and pool), or None if it does not exist.
        project_queues: yields ``(name, metadata)`` of every queue of the project.
    """
    dlq = metadata.get(DEAD_LETTER_QUEUE)
    if dlq is None:
        return
    if dlq == queue:
        raise ValidationFailed(f"{DEAD_LETTER_QUEUE} cannot be the queue itself ({queue}).")
    target = lookup(dlq)
    if target is None:
        raise ValidationFailed(
            f"{DEAD_LETTER_QUEUE} names queue {dlq}, which does not exist in this project; create it first.")
    if target.get(DEAD_LETTER_QUEUE) is not None:
        raise ValidationFailed(
            f"{DEAD_LETTER_QUEUE}: queue {dlq} has a dead-letter queue of its own; chains are not supported.")
    for name, other in project_queues():
        if name != queue and other.get(DEAD_LETTER_QUEUE) == queue:
            raise ValidationFailed(
                f"{DEAD_LETTER_QUEUE}: queue {queue} is the dead-letter queue of {name}; "
                "chains are not supported.")


def capped_ttl(ttl: int, metadata: Mapping[str, Any]) -> int:
    """Return the ttl a message posted with ``ttl`` gets: at most the queue's ``_max_message_ttl``."""
    cap = metadata.get(MAX_MESSAGE_TTL)
    return ttl if cap is None else min(ttl, cap)


def wanted_default_dead_letter_queue(queue: str, metadata: Mapping[str, Any] | None,
                                     default: str | None) -> str | None:
    """Return the server's default DLQ when this queue would dead-letter into it, else None.

    A queue uses it when it has ``_max_claim_count`` or ``_dead_letter_on_expiry``
    and no ``_dead_letter_queue`` of its own; the default DLQ itself never
    dead-letters into itself. The caller uses it only while that queue exists
    in the project (:func:`dead_letter_policy`).
    """
    if not default or metadata is None or queue == default:
        return None
    if metadata.get(DEAD_LETTER_QUEUE) is not None:
        return None
    if metadata.get(MAX_CLAIM_COUNT) is None and not metadata.get(DEAD_LETTER_ON_EXPIRY):
        return None
    return default


def holds_expired(metadata: Mapping[str, Any] | None, policy: DeadLetterPolicy) -> bool:
    """Return whether the sweep must leave a queue's expired messages where they are.

    That is a queue that dead-letters on expiry into the default DLQ while that
    queue does not exist: its expired messages are kept (not discarded) until
    the default DLQ is created, and the next sweep then moves them.
    """
    return bool((metadata or {}).get(DEAD_LETTER_ON_EXPIRY)) and policy.queue is None


def dead_letter_policy(metadata: Mapping[str, Any] | None,
                       default_queue: str | None = None) -> DeadLetterPolicy:
    """Return the dead-letter inputs a claim or a sweep of this queue needs.

    Args:
        metadata: the queue's stored metadata.
        default_queue: the server's default DLQ, given only when the queue uses
            it (:func:`wanted_default_dead_letter_queue`) and it exists; it
            applies when the queue names no ``_dead_letter_queue``.
    """
    if not metadata and default_queue is None:  # a queue of default settings: made once, not per claim
        return NO_DEAD_LETTER
    metadata = metadata or {}
    own = metadata.get(DEAD_LETTER_QUEUE)
    return DeadLetterPolicy(
        max_claim_count=metadata.get(MAX_CLAIM_COUNT),
        queue=own if own is not None else default_queue,
        messages_ttl=metadata.get(DEAD_LETTER_TTL),
        on_expiry=bool(metadata.get(DEAD_LETTER_ON_EXPIRY, False)),
        default_queue=own is None and default_queue is not None,
    )


def retry_backoff(metadata: Mapping[str, Any] | None, limits: Limits) -> RetryBackoff | None:
    """Return the queue's ``_retry_backoff`` policy (validated when stored), or None when unset.

    A policy stored under a larger ``max_message_delay`` than the server has
    now keeps working: its waits are capped at today's limit.
    """
    value = (metadata or {}).get(RETRY_BACKOFF)
    if value is None:
        return None
    try:
        return check_backoff(value, limits.max_message_delay)
    except ValidationFailed:
        stored = check_backoff(value, sys.maxsize)
        cap = float(limits.max_message_delay)
        return dataclasses.replace(stored, base=min(stored.base, cap), max=min(stored.max, cap))


def check_room_for_queue(project: str, queues: int, limit: int) -> None:
    """Refuse a new queue in a project that has ``queues`` queues when that is ``limit`` or more.

    Raises:
        QueueLimitReached: the project has no room for another queue.
    """
    if queues >= limit:
        raise QueueLimitReached(project, limit)
