"""The topic service: Zaqar's topics, as queues of the project's topic namespace.

A topic is a queue nobody claims from: its messages are posted, kept until
their ttl runs out (the sweep discards them), and delivered to every
subscription of the topic by the notifier, which serves topic subscriptions
exactly as queue subscriptions (durable cursor, order, at least once). Each
operation maps the project to its topic namespace
(:func:`zaqar_lite.rules.topics.namespace`) and calls the messaging service,
so posting, listing, stats and purge follow the queue rules; what differs is
here: no queue template applies, the claim-only metadata keys are refused
(by the API's schema), and a missing topic is a 404.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import metadata as meta
from zaqar_lite.models import Message, QueueStats
from zaqar_lite.rules import topics as rules
from zaqar_lite.service import Messaging


class Topics:
    """Topic operations over the messaging service of the same store."""

    def __init__(self, messaging: Messaging) -> None:
        self.messaging = messaging
        self.storage = messaging.storage
        self.limits = messaging.limits

    def create(self, project: str, topic: str, metadata: Mapping[str, Any]) -> bool:
        """Create a topic; an existing topic keeps its metadata. Returns whether it was created.

        Raises:
            ValidationFailed: a reserved key's value breaks its rule.
        """
        stored = meta.validate(dict(metadata), self.limits)
        return self.storage.create_queue(rules.namespace(project), topic, stored, self.messaging.clock())

    def metadata(self, project: str, topic: str) -> dict[str, Any]:
        """Return a topic's metadata with Zaqar's reserved defaults.

        Raises:
            TopicDoesNotExist: no such topic.
        """
        return rules.with_defaults(self._stored(project, topic), self.limits)

    def _stored(self, project: str, topic: str) -> dict[str, Any]:
        stored = self.storage.get_queue_metadata(rules.namespace(project), topic)
        if stored is None:
            raise rules.TopicDoesNotExist(topic)
        return stored

    def update(self, project: str, topic: str, operations: Sequence[tuple[str, str, Any]]) -> dict[str, Any]:
        """Apply JSON-patch operations to a topic's metadata and return the result with defaults.

        Raises:
            TopicDoesNotExist, Conflict (replace/remove of an absent plain key),
            ValidationFailed.
        """
        self._stored(project, topic)
        try:
            self.messaging.update_queue(rules.namespace(project), topic, operations)
        except errors.QueueDoesNotExist:  # deleted meanwhile
            raise rules.TopicDoesNotExist(topic) from None
        return self.metadata(project, topic)

    def delete(self, project: str, topic: str) -> None:
        """Delete a topic with its messages and subscriptions (idempotent)."""
        self.messaging.delete_queue(rules.namespace(project), topic)

    def page(self, project: str, *, marker: str | None, limit: int, name: str | None,
             filters: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
        """Return a page of topics with their stored metadata, filtered as queues are."""
        return self.messaging.list_queues(rules.namespace(project), marker=marker, limit=limit, name=name,
                                          filters=filters)

    def stats(self, project: str, topic: str) -> tuple[QueueStats, float]:
        """Return a topic's message counts and the time they were taken at (zeros for a missing topic)."""
        return self.messaging.queue_stats(rules.namespace(project), topic)

    def purge(self, project: str, topic: str, resource_types: Sequence[str]) -> None:
        """Remove a topic's messages and/or subscriptions."""
        self.messaging.purge(rules.namespace(project), topic, resource_types)

    def post(self, project: str, topic: str, client_id: str, messages: Sequence[Mapping[str, Any]],
             body_size: int, trace: Mapping[str, str] | None = None) -> list[str]:
        """Store messages on a topic (created if missing, as a queue is) and return their ids.

        Every subscription of the topic then gets them from the notifier.
        """
        return self.messaging.post(rules.namespace(project), topic, client_id, messages, body_size, trace)

    def messages(self, project: str, topic: str, ids: Sequence[str]) -> tuple[list[Message], float]:
        """Return the unexpired messages of a topic among ids, and the time they were read at."""
        return self.messaging.get_messages(rules.namespace(project), topic, ids)
