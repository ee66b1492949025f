"""Deduplicated posts: the window a ``dedup_id`` is remembered for, and duplicates within one post.

A message may carry a ``dedup_id``. For ``_dedup_window`` seconds (queue
metadata, default :data:`DEFAULT_WINDOW`) after a message with that id was
stored in a queue, a post of the same id to the same queue stores nothing and
is answered with the first message's id, as SQS FIFO queues do. The window
counts from the first post and is not extended by the duplicates. The first
message's deletion (or a purge) within the window changes nothing: the id is
still deduplicated, and its href answers 404. Within one post, a message whose
``dedup_id`` an earlier message of the same post carries is a duplicate of that
one (:func:`collapse`). Drivers store the window's end beside the id and check
it atomically with the post; this module decides the window and the collapse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: queue metadata key: seconds a dedup_id is remembered after its first post
WINDOW = "_dedup_window"
#: the window when ``_dedup_window`` is unset (SQS's five minutes)
DEFAULT_WINDOW = 300
#: the longest window a queue may set (one day)
MAX_WINDOW = 86400
#: the longest dedup_id (as SQS's MessageDeduplicationId)
MAX_ID_LENGTH = 128
#: what a dedup_id may hold: printable ASCII without space (as SQS's)
_ID = re.compile(r"[!-~]+")
#: the rule, as an error message says it
ID_RULE = f"1 to {MAX_ID_LENGTH} printable ASCII characters without spaces"


def is_dedup_id(value: Any) -> bool:
    """Return whether ``value`` is a valid ``dedup_id``: 1 to 128 printable ASCII characters, no space."""
    return isinstance(value, str) and len(value) <= MAX_ID_LENGTH and _ID.fullmatch(value) is not None


def window(metadata: Mapping[str, Any] | None) -> int:
    """Return the seconds a queue remembers a ``dedup_id`` (its ``_dedup_window``, or the default)."""
    return int((metadata or {}).get(WINDOW, DEFAULT_WINDOW))


def window_end(metadata: Mapping[str, Any] | None, now: float) -> float:
    """Return when a ``dedup_id`` first posted at ``now`` stops deduplicating."""
    return now + window(metadata)


def collapse(dedup_ids: Sequence[str | None]) -> list[int]:
    """Return, for each message of one post, the index of the message it is stored as.

    A message without a ``dedup_id``, or whose id no earlier message of the
    post carries, is stored as itself; a later message sharing an earlier
    one's id is answered with that earlier message (nothing of its own is
    stored), as a second post of the id would be.
    """
    first: dict[str, int] = {}
    stored_as = []
    for index, dedup_id in enumerate(dedup_ids):
        if dedup_id is None:
            stored_as.append(index)
        else:
            stored_as.append(first.setdefault(dedup_id, index))
    return stored_as
