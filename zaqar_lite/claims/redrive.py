"""The redrive policy (SPEC 1.8), written once: which dead letters a redrive takes, and how they return.

A dead letter is a message that carries a ``dead_letter`` provenance record
(SPEC 2.3), in whatever queue it is. A redrive selects the unclaimed,
unexpired dead letters of one queue that match its filter, in post order, up
to its limit, and moves each to its ``destination`` or else back to its
``source_queue``. Drivers only store the result
(:meth:`~zaqar_lite.storage.base.Storage.move_messages`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite.claims.signatures import signature, signature_id
from zaqar_lite.models import Message, RedriveFilter, RedriveRequest

#: messages shown by a dry run
SAMPLE_SIZE = 10
#: messages moved by one storage call (one transaction, script or bulk write)
BATCH_SIZE = 100


def last_failure(message: Message) -> Mapping[str, Any] | None:
    """Return the latest entry of a message's failure history, or None when it has none."""
    return message.failures[-1] if message.failures else None


def last_signature(message: Message) -> str:
    """Return the signature text of a message's last failure, as the DLQ report computes it.

    A message without failures has the signature of a failure without a reason
    (``(no reason given)``), as in the report.
    """
    failure = last_failure(message) or {}
    return signature(failure.get("error_type"), failure.get("error"))


def last_signature_id(message: Message) -> str:
    """Return the signature id of a message's last failure (what a ``signature`` filter compares)."""
    return signature_id(last_signature(message))


@dataclasses.dataclass(frozen=True)
class SignatureGroup:
    """The dead letters whose last failure has one signature: what a ``signature`` filter selects."""

    signature_id: str
    signature: str
    messages: tuple[Message, ...]


def by_last_signature(messages: Iterable[Message]) -> list[SignatureGroup]:
    """Group dead letters by the signature of their last failure, largest group first.

    Messages keep their order within a group; groups of the same size are
    ordered by signature id, so a page lists them the same way every time.
    """
    groups: dict[str, list[Message]] = {}
    texts: dict[str, str] = {}
    for message in messages:
        text = last_signature(message)
        key = signature_id(text)
        texts[key] = text
        groups.setdefault(key, []).append(message)
    ordered = sorted(groups, key=lambda key: (-len(groups[key]), key))
    return [SignatureGroup(key, texts[key], tuple(groups[key])) for key in ordered]


def matches(message: Message, wanted: RedriveFilter) -> bool:
    """Return whether a message is a dead letter that every criterion of the filter accepts.

    ``source_queue`` is compared with the provenance record; ``error_type``
    (exactly) and ``signature`` with the message's LAST failure, so a message
    whose last failure has no ``error_type`` never matches an ``error_type``;
    ``ids`` lists the message ids accepted.
    """
    record = message.dead_letter
    if record is None:
        return False
    if wanted.source_queue is not None and record.get("source_queue") != wanted.source_queue:
        return False
    if wanted.ids is not None and message.id not in wanted.ids:
        return False
    if wanted.error_type is not None and (last_failure(message) or {}).get("error_type") != wanted.error_type:
        return False
    return wanted.signature is None or last_signature_id(message) == wanted.signature


def target_queue(message: Message, queue: str, destination: str | None) -> str | None:
    """Return where a dead letter of ``queue`` goes: ``destination``, else its source queue.

    None when it has nowhere to go: no source recorded, or the source is the
    queue it is in.
    """
    target = destination or (message.dead_letter or {}).get("source_queue")
    if not isinstance(target, str) or not target or target == queue:
        return None
    return target


def selected_target(message: Message, queue: str, request: RedriveRequest, now: float) -> str | None:
    """Return the queue a redrive sends a message of ``queue`` to, or None if it does not select it.

    Selected: an unclaimed dead letter with somewhere to go (:func:`target_queue`)
    that the request's filter accepts (:func:`matches`).
    """
    target = target_queue(message, queue, request.destination)
    if target is None or message.is_claimed(now) or not matches(message, request.filter):
        return None
    return target


def redriven(message: Message, now: float, min_ttl: int) -> Message:
    """Return a dead letter as it must be stored in its target queue: an ordinary message again.

    It keeps its id, body, creation time, client id and failure history; its
    claim count is 0, it is unclaimed and not delayed, and it has no
    provenance record. It keeps its expiry, but lives at least ``min_ttl``
    seconds from now, so that it can still be claimed after the move.
    """
    return dataclasses.replace(
        message,
        claim_id=None,
        claim_expires=None,
        claim_count=0,
        delay_until=0.0,
        expires=max(message.expires, now + min_ttl),
        dead_letter=None,
    )


def batches(selected: Sequence[tuple[Message, str]],
            max_per_second: float | None) -> Iterator[list[tuple[Message, str]]]:
    """Cut the selected messages into storage calls: at most one second's worth each when throttled."""
    size = BATCH_SIZE if max_per_second is None else max(1, min(BATCH_SIZE, math.floor(max_per_second)))
    for start in range(0, len(selected), size):
        yield list(selected[start:start + size])


def throttle_wait(started: float, done: int, now: float, max_per_second: float | None) -> float:
    """Return the seconds to wait before moving more, so that ``done`` moves took at least done / rate."""
    if max_per_second is None:
        return 0.0
    return max(0.0, started + done / max_per_second - now)


def by_target(batch: Sequence[tuple[Message, str]]) -> dict[str, list[Message]]:
    """Group a batch by target queue, keeping post order within each group."""
    groups: dict[str, list[Message]] = {}
    for message, target in batch:
        groups.setdefault(target, []).append(message)
    return groups
