"""Ordered message groups: which messages of a group a claim may take (SQS FIFO semantics).

A message may carry a ``group``. A group is *held* while any of its messages
is claimed (its claim has not lapsed), so a group's messages are out with one
claim at a time, unless its first message (the lowest marker still in the
queue) is visible again after a claim, its claim lapsed or released: then the
group is available again from that message on (as SQS's, where a message back
from its visibility timeout makes its group visible). A claim or pop may take
several messages of a group that is not held: its consecutive visible
messages from its first one stored (delayed and not yet swept expired ones
count), in post order, up to the claim's limit. A message that is not visible
(claimed, delayed, waiting out a retry backoff, expired and not yet swept)
ends that run: the messages after it wait for it. A claim hands its messages
group by group, each group's one after another, so it fills up from one group
before the next (as an SQS FIFO receive does); the groups go in the order
since when their first message is available (posted, due, or back from a
claim: a group handed out last comes back last), then post order; messages
without a group keep their place. A message that keeps failing is
dead-lettered at ``_max_claim_count`` as any message: it leaves the queue
(and its group: the provenance records the group it left, ``group``), and the
group's next message comes next. Drivers read a group's stored messages (or
list them with their state); this module decides.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from zaqar_lite.claims import policy
from zaqar_lite.models import Message

#: what a listing row stands for (listing_order)
T = TypeVar("T")

#: the longest group name (as SQS's MessageGroupId)
MAX_LENGTH = 128
#: what a group name may hold: printable ASCII without space (as SQS's)
_GROUP = re.compile(r"[!-~]+")
#: the rule, as an error message says it
RULE = f"1 to {MAX_LENGTH} printable ASCII characters without spaces"


def is_group(value: Any) -> bool:
    """Return whether ``value`` is a valid ``group``: 1 to 128 printable ASCII characters, no space."""
    return isinstance(value, str) and len(value) <= MAX_LENGTH and _GROUP.fullmatch(value) is not None


def groups_of(candidates: Iterable[Message]) -> set[str]:
    """Return the groups some of ``candidates`` belong to (empty when none has one)."""
    return {m.group for m in candidates if m.group is not None}


def is_held(members: Sequence[Message], now: float) -> bool:
    """Return whether a group whose stored messages are ``members`` (marker order) is held at ``now``.

    It is while one of its messages is claimed, unless its first message is
    visible again after a claim (its claim lapsed or was released): then the
    group is available again from that message on, as SQS's.
    """
    first = members[0] if members else None
    if first is not None and first.claim_count > 0 and policy.is_visible(first, now):
        return False
    return any(m.claim_expires is not None and m.claim_expires > now for m in members)


def takeable(members: Sequence[Message], now: float) -> list[Message]:
    """Return a group's messages a claim may take at ``now``, in order.

    ``members`` are all the group's messages stored in the queue, in marker
    order: none when the group is held, else its consecutive visible messages
    from the first one.
    """
    if is_held(members, now):
        return []
    return list(itertools.takewhile(lambda m: policy.is_visible(m, now), members))


def available_since(message: Message) -> float:
    """Return since when a visible message is: posted, due after a delay or wait, or back from a claim."""
    return max(message.created, message.delay_until, message.claim_expires or 0.0)


def in_group_order(runs: list[list[T]], keys: Sequence[tuple[float, int] | None]) -> list[T]:
    """Flatten ``runs`` with the grouped ones (key not None) in the order of their keys.

    A message without a group keeps its place; the groups take the places
    of the grouped runs by the key of their first message: since when it is
    available, then its marker (SQS hands the group back last that was
    taken last).
    """
    slots = [i for i, key in enumerate(keys) if key is not None]
    ordered = sorted(slots, key=lambda i: keys[i] or (0.0, 0))
    placed = list(runs)
    for slot, source in zip(slots, ordered, strict=True):
        placed[slot] = runs[source]
    return [item for run in placed for item in run]


def claimable(candidates: Iterable[Message], members: Mapping[str, Sequence[Message]], now: float,
              taken: Collection[str] = ()) -> list[Message]:
    """Return the messages a claim or pop may take, group by group, given its candidates.

    Args:
        candidates: visible messages of one queue, in marker order (a claim's read).
        members: for each group of the candidates, all its messages stored in
            the queue (claimed, delayed and expired ones included), in marker order.
        now: the time of the claim or pop.
        taken: groups that already gave messages to this claim or pop (from an
            earlier read): it takes no more of them.

    Returns:
        Each candidate without a group in its place, and each group's
        :func:`takeable` messages (read or not) together, the groups in the
        order of :func:`in_group_order`: a claim taking them in this order up
        to its limit fills up from one group before the next.
    """
    runs: list[list[Message]] = []
    keys: list[tuple[float, int] | None] = []
    seen: set[str] = set(taken)
    for m in candidates:
        if m.group is None:
            runs.append([m])
            keys.append(None)
        elif m.group not in seen:
            seen.add(m.group)
            run = takeable(members.get(m.group, ()), now)
            if run:
                runs.append(run)
                keys.append((available_since(run[0]), run[0].marker))
    return in_group_order(runs, keys)


def listing_order(rows: Iterable[tuple[T, str | None, bool, bool, bool, float]]) -> list[T]:
    """Return the rows of a queue's listing a claim or pop may take, group by group (as :func:`claimable`).

    Args:
        rows: every stored message of the queue from the first grouped one on,
            in marker order, each as ``(item, group or None, visible, claimed,
            returned, since)``: whether it was claimed before, and since when
            a visible row is back from a claim or due after a wait (0 for a
            message as posted): what a store that lists its messages with
            their state knows of them.
    """
    rows = list(rows)
    held = {group for _, group, _, claimed, _, _ in rows if group is not None and claimed}
    runs: dict[str, list[T]] = {}
    order: list[list[T]] = []
    keys: list[tuple[float, int] | None] = []
    stopped: set[str] = set()
    for position, (item, group, visible, _, returned, since) in enumerate(rows):
        if group is None:
            if visible:
                order.append([item])
                keys.append(None)
        elif group in stopped:
            continue
        elif not visible or (group in held and group not in runs and not returned):
            stopped.add(group)  # the rest of the group waits for it, or the group is held
        elif group in runs:
            runs[group].append(item)
        else:
            runs[group] = [item]
            order.append(runs[group])
            keys.append((since, position))
    return in_group_order(order, keys)


def kept_in_order(planned: Iterable[Message], won: Iterable[Message]) -> list[Message]:
    """Return the ``won`` messages a claim answers: none of a group after one of it the claim did not win.

    A store without transactions writes a claim's messages each under its own
    guard, and a concurrent claimer may win some of them: a message of a
    group after one it lost is not answered, since handed out it would go
    before the lost one (the shared claim loop and Swift's settle protocol give
    it back at once, :func:`zaqar_lite.claims.policy.claim_undone`).
    """
    won_by_id = {m.id: m for m in won}
    lost: set[str] = set()
    kept: list[Message] = []
    for m in planned:
        if m.id not in won_by_id:
            if m.group is not None:
                lost.add(m.group)
        elif m.group is None or m.group not in lost:
            kept.append(won_by_id[m.id])
    return kept


def unanswered(won: Iterable[Message], kept: Iterable[Message]) -> list[Message]:
    """Return the messages a claim won but does not answer (:func:`kept_in_order` left them out)."""
    kept_ids = {m.id for m in kept}
    return [m for m in won if m.id not in kept_ids]


def frees_a_group(read: Iterable[Message], removed_ids: Iterable[str]) -> bool:
    """Return whether removing ``removed_ids`` (moved or deleted) from the queue takes a grouped message.

    The next message of that group may then be claimable: a claim reads its
    candidates again rather than give up on them.
    """
    grouped = {m.id for m in read if m.group is not None}
    return any(message_id in grouped for message_id in removed_ids)
