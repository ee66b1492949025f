"""Ordered message groups: which messages of a group a claim may take (SQS FIFO semantics).

A message may carry a ``group``. A group is *held* while any of its messages
is claimed (its claim has not lapsed): none of its messages may then be
claimed or popped, so a group's messages are out with one claim at a time.
A claim or pop may take several messages of a group none of whose messages is
held: the group's consecutive visible messages from its first one stored
(the lowest marker still in the queue; delayed and not yet swept expired ones
count), in post order, up to the claim's limit. A message that is not
visible (delayed, waiting out a retry backoff, expired and not yet swept)
ends that run: the messages after it wait for it. A claim hands its messages
group by group: a group's messages one after another, the groups (and the
messages without a group) in the order of their first message, so a claim
fills up from one group before the next (as an SQS FIFO receive does); other
groups and messages without a group are not held up. A message that keeps
failing is dead-lettered at ``_max_claim_count`` as any message: it leaves the
queue (and its group: the provenance records the group it left, ``group``),
and the group's next message comes next. Drivers read a group's stored
messages; this module decides.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from zaqar_lite.claims import policy
from zaqar_lite.models import Message

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


def is_held(members: Iterable[Message], now: float) -> bool:
    """Return whether a group whose stored messages are ``members`` is held: one of them is claimed at ``now``."""
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
        Each candidate without a group, and in place of a group's first
        candidate the group's :func:`takeable` messages (read or not), in the
        order of the candidates: a claim taking them in this order up to its
        limit fills up from one group before the next.
    """
    out: list[Message] = []
    seen: set[str] = set(taken)
    for m in candidates:
        if m.group is None:
            out.append(m)
        elif m.group not in seen:
            seen.add(m.group)
            out += takeable(members.get(m.group, ()), now)
    return out


def frees_a_group(read: Iterable[Message], removed_ids: Iterable[str]) -> bool:
    """Return whether removing ``removed_ids`` (moved or deleted) from the queue takes a grouped message.

    The next message of that group may then be claimable: a claim reads its
    candidates again rather than give up on them.
    """
    grouped = {m.id for m in read if m.group is not None}
    return any(message_id in grouped for message_id in removed_ids)
