"""The topic rules: where a project's topics live, which metadata a topic takes, what it shows.

A topic is stored as a queue of its project's *topic namespace*, a project
name no client can send: ``X-Project-ID`` (and a token's project) never holds
a comma (:func:`zaqar_lite.api.inputs.project_id`), and the namespace ends in
``,topics``. So a topic and a queue of the same name never meet, every driver
stores topics with the queue primitives it already has, and the notifier
serves a topic's subscriptions as it serves a queue's (their records live in
the namespace too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import pause
from zaqar_lite.claims.retry_backoff import RETRY_BACKOFF
from zaqar_lite.config import Limits

#: what ends every topic namespace (a comma: no project id holds one)
NAMESPACE_SUFFIX = ",topics"

#: reserved queue keys that only claims read: a topic's messages are never claimed,
#: so a topic refuses them rather than keep a setting that would do nothing
CLAIM_ONLY_KEYS = (meta.MAX_CLAIM_COUNT, meta.DEAD_LETTER_QUEUE, meta.DEAD_LETTER_TTL,
                   meta.DEAD_LETTER_ON_EXPIRY, RETRY_BACKOFF, pause.PAUSED, pause.PAUSED_BY, pause.BREAKER)


def namespace(project: str) -> str:
    """Return the project under which a project's topics (and their subscriptions) are stored."""
    return project + NAMESPACE_SUFFIX


def source_kind(project: str) -> str:
    """Return what clients call a queue stored under ``project``: ``topic`` in a topic namespace.

    Anywhere else it is a ``queue``. Error texts name a source by this word,
    so a topic route never speaks of a queue.
    """
    return "topic" if project.endswith(NAMESPACE_SUFFIX) else "queue"


def defaults(limits: Limits) -> dict[str, Any]:
    """Return the reserved keys Zaqar shows on a topic, with the values that apply when unset."""
    return {
        meta.MAX_POST_SIZE: limits.max_messages_post_size,
        meta.DEFAULT_TTL: limits.default_message_ttl,
        meta.DEFAULT_DELAY: 0,
    }


def with_defaults(stored: Mapping[str, Any] | None, limits: Limits) -> dict[str, Any]:
    """Return the metadata a client sees: Zaqar's three reserved defaults, then the stored keys."""
    shown = defaults(limits)
    shown.update(stored or {})
    return shown


class TopicDoesNotExist(errors.NotFound):
    """The topic does not exist in this project."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Topic {name} does not exist.")
