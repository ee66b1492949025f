"""Reading request bodies and rendering messages: shared by every resource."""

from __future__ import annotations

from typing import Any

import falcon

from zaqar_lite.claims import policy
from zaqar_lite.errors import InvalidBody
from zaqar_lite.models import Message
from zaqar_lite.validation import parse_json


def read_json(req: falcon.Request, max_size: int) -> tuple[Any, int]:
    """Read and parse a JSON body no larger than ``max_size`` bytes.

    The size is judged on the bytes actually read, not only on Content-Length.

    Returns:
        The parsed document (None for an empty body) and its size in bytes.
    """
    if req.content_length is not None and req.content_length > max_size:
        raise InvalidBody(f"Request body may not exceed {max_size} bytes.")
    raw = req.bounded_stream.read(max_size + 1)
    if len(raw) > max_size:
        raise InvalidBody(f"Request body may not exceed {max_size} bytes.")
    if not raw.strip():
        return None, 0
    return parse_json(raw), len(raw)


def message_href(queue: str, message_id: str) -> str:
    """Return the path of one message."""
    return f"/v2/queues/{queue}/messages/{message_id}"


def message_view(message: Message, queue: str, now: float) -> dict[str, Any]:
    """Render a message as Zaqar does, plus ``claim_count`` and DLQ provenance."""
    href = message_href(queue, message.id)
    view: dict[str, Any] = {
        "id": message.id,
        "href": href,
        "ttl": message.ttl(),
        "age": message.age(now),
        "body": message.body,
        "claim_count": message.claim_count,
    }
    if message.is_claimed(now):
        view["href"] = f"{href}?claim_id={message.claim_id}"
        view["claim_id"] = message.claim_id
    if message.delay_until > now:
        view["delay"] = int(round(message.delay_until - now))
    if message.dead_letter is not None:
        view["dead_letter"] = policy.provenance(message)
    return view
