"""Ordered message groups: which messages of a group a claim may take (SQS FIFO semantics).

A message may carry a ``group``. A group's *head* is its message with the
lowest marker still stored in the queue (claimed, delayed and not yet swept
expired ones included). Only a head may be claimed or popped (and a pop takes
at most one message of a group), so at most one message of a group is out at
a time, and a group's messages go in post order;
other groups and messages without a group are not held up. A head that is
delayed or claimed therefore holds its group back until it is visible again
(SQS FIFO queues delay a whole queue instead). A head that keeps failing is
dead-lettered at ``_max_claim_count`` as any message: it leaves the queue (and
its group: the provenance records the group it left, ``group``), and the next
message becomes the head. Drivers find the heads; this module decides.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

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


def claimable(candidates: Iterable[Message], heads: Mapping[str, str],
              taken: Collection[str] = ()) -> list[Message]:
    """Return the candidates a claim or pop may take, in their order.

    Args:
        candidates: visible messages of one queue.
        heads: for each group of the candidates, the id of its head (its
            message with the lowest marker stored in the queue).
        taken: groups that already gave a message to this pop: a pop takes at
            most one message of a group, as a claim does.
    """
    return [m for m in candidates
            if m.group is None or (heads.get(m.group) == m.id and m.group not in taken)]


def frees_a_group(read: Iterable[Message], removed_ids: Iterable[str]) -> bool:
    """Return whether removing ``removed_ids`` (moved or deleted) from the queue takes a grouped message.

    The next message of that group may then be claimable: a claim reads its
    candidates again rather than give up on them.
    """
    grouped = {m.id for m in read if m.group is not None}
    return any(message_id in grouped for message_id in removed_ids)
