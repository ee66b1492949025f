"""Posting numbered messages and checking what a subscriber received against the delivery promise."""

from __future__ import annotations

from typing import Any

from tests.e2e.harness import ApiSession
from tests.notify.receiver import Delivery

BATCH = 20


def post_numbered(api: ApiSession, queue: str, count: int, start: int = 0, **fields: Any) -> None:
    """Post messages whose bodies are ``{"n": start}`` .. ``{"n": start + count - 1}``, in order."""
    for first in range(start, start + count, BATCH):
        numbers = range(first, min(first + BATCH, start + count))
        result = api.post(f"/v2/queues/{queue}/messages",
                          json={"messages": [{"body": {"n": n}, **fields} for n in numbers]})
        assert result.status_code == 201, result.text


def number(delivery: Delivery) -> int:
    """Return the number of the message a delivery carried."""
    return int(delivery.body["body"]["n"])


def acknowledged_numbers(deliveries: list[Delivery]) -> set[int]:
    """Return the numbers the subscriber acknowledged at least once."""
    return {number(d) for d in deliveries if d.acknowledged}


def check_stream(deliveries: list[Delivery], count: int, start: int = 0) -> int:
    """Check a subscriber's requests against ordered at-least-once delivery; return the duplicates.

    In arrival order, the first request carries ``start``; after an
    unacknowledged request the next carries the same message (a retry); after
    an acknowledged one the next carries the following message, or the same one
    again (a redelivery when the acknowledgement was lost, e.g. the notifier was
    killed before it recorded it). Every message up to ``start + count - 1`` is
    acknowledged. Anything else (a gap, a reordering, an older message coming
    back) fails.
    """
    assert deliveries, "nothing was delivered"
    sequence = [(number(d), d.acknowledged) for d in deliveries]
    assert sequence[0][0] == start, f"first delivery was {sequence[0][0]}, expected {start}"
    duplicates = 0
    for (previous, acknowledged), (current, _) in zip(sequence, sequence[1:], strict=False):
        if acknowledged and current == previous:
            duplicates += 1
        elif acknowledged:
            assert current == previous + 1, f"after {previous} was acknowledged came {current}"
        else:
            assert current == previous, f"after {previous} failed came {current}"
    assert acknowledged_numbers(deliveries) == set(range(start, start + count))
    assert sequence[-1][0] == start + count - 1
    return duplicates
