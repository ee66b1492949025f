"""Queues: creation from templates, metadata, listing, stats and purge."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import pause
from zaqar_lite.models import (
    QueueStats,
)
from zaqar_lite.notify.records import remove_queue_subscriptions
from zaqar_lite.rules import templates as template_rules
from zaqar_lite.service.pauses import Pauses


def _matches(metadata: Mapping[str, Any], key: str, wanted: str) -> bool:
    """Return whether a metadata value equals a query-string value (JSON text for non-strings)."""
    if key not in metadata:
        return False
    value = metadata[key]
    return value == wanted if isinstance(value, str) else json.dumps(value) == wanted



class Queues(Pauses):
    """Queue operations with the metadata rules applied."""

    # -- queues ---------------------------------------------------------------

    def _validated_metadata(self, project: str, queue: str, metadata: Any) -> dict[str, Any]:
        stored = meta.validate(metadata, self.limits, self.settings.default_dead_letter_queue)
        meta.check_dead_letter_links(
            queue, stored,
            lambda name: self.storage.get_queue_metadata(project, name),
            lambda: self._every_queue(project))
        return stored

    def create_queue(self, project: str, queue: str, metadata: Any) -> bool:
        """Create a queue; an existing queue keeps its metadata. Returns whether it was created.

        A new queue whose name a queue template matches starts with the
        template's metadata under the request's (:mod:`zaqar_lite.rules.templates`).
        """
        requested = metadata if metadata is not None else {}
        if isinstance(requested, dict):
            template_rules.refuse_template_key(requested)
        self.check_room_for_queue(project, queue)
        template = self.templates.for_queue(queue)
        if template is None or not isinstance(requested, dict) \
                or self.storage.get_queue_metadata(project, queue) is not None:
            stored = self._validated_metadata(project, queue, requested)
        else:
            try:
                stored = self._validated_metadata(project, queue, template_rules.merged(template, requested))
            except errors.ValidationFailed as exc:
                raise errors.ValidationFailed(
                    f"Queue template {template.name} (pattern {template.pattern}) applies to queue "
                    f"{queue}: {exc}") from None
        return self.storage.create_queue(project, queue, stored, self.clock())

    def queue_metadata(self, project: str, queue: str) -> dict[str, Any]:
        """Return a queue's metadata with reserved defaults (also for a missing queue, as Zaqar)."""
        return self.shown_metadata(self.storage.get_queue_metadata(project, queue))

    def shown_metadata(self, stored: Mapping[str, Any] | None) -> dict[str, Any]:
        """Return stored metadata as clients see it, in a GET and a detailed listing alike."""
        return meta.with_defaults(stored, self.limits)

    def update_queue(self, project: str, queue: str,
                     operations: Sequence[tuple[str, str, Any]]) -> dict[str, Any]:
        """Apply JSON-patch operations to a queue's metadata and return the result with defaults.

        Raises:
            QueueDoesNotExist, Conflict (replace/remove of an absent plain key),
            ValidationFailed.
        """
        current = self.storage.get_queue_metadata(project, queue)
        if current is None:
            raise errors.QueueDoesNotExist(queue, project)
        template_rules.refuse_template_key(key for _, key, _ in operations)
        reserved = meta.reserved_keys(self.limits)
        updated = dict(current)
        for op, key, value in operations:
            if op in ("replace", "remove") and key not in updated and key not in reserved:
                raise errors.Conflict(f"Cannot {op} metadata key {key!r}: it is not set.")
            if op == "remove":
                updated.pop(key, None)
            else:
                updated[key] = value
        stored = self._validated_metadata(project, queue, updated)
        self.storage.set_queue_metadata(project, queue, stored)
        self.resume_wakes(project, queue, current, stored)
        return meta.with_defaults(stored, self.limits)

    def delete_queue(self, project: str, queue: str) -> None:
        """Delete a queue and everything in it, its subscriptions included."""
        self.storage.delete_queue(project, queue)
        remove_queue_subscriptions(self.storage, project, queue)
        self.breaker_windows.forget(project, queue)

    def note(self, project: str, kind: str, key: str, value: Mapping[str, Any] | None) -> None:
        """Keep (or, with None, forget) a small note of a project, e.g. when a queue was deleted."""
        if value is None:
            self.storage.delete_record(project, kind, key)
        else:
            self.storage.put_record(project, kind, key, value, None)

    def noted(self, project: str, kind: str, key: str) -> dict[str, Any] | None:
        """Return a note :meth:`note` kept, or None."""
        found = self.storage.get_record(project, kind, key)
        return found.value if found is not None else None

    def list_queues(self, project: str, *, marker: str | None, limit: int, name: str | None,
                    filters: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
        """Return a page of queues, filtered by name substring and metadata equality."""
        page: list[tuple[str, dict[str, Any]]] = []
        while len(page) < limit:
            batch = self.storage.list_queues(project, marker=marker, limit=limit, name_contains=name)
            page.extend(q for q in batch if all(_matches(q[1], k, v) for k, v in filters.items()))
            if len(batch) < limit:
                break
            marker = batch[-1][0]
        return page[:limit]

    def count_queues(self, project: str) -> int:
        """Return how many queues the project has."""
        return self.storage.count_queues(project)

    def queue_stats(self, project: str, queue: str) -> tuple[QueueStats, float]:
        """Return a queue's message counts and the time they were taken at."""
        now = self.clock()
        return self.storage.queue_stats(project, queue, now), now

    def pause_state(self, project: str, queue: str) -> dict[str, Any] | None:
        """Return why a queue is paused (``_paused_by``, or an operator's pause), or None when it is not."""
        stored = self.storage.get_queue_metadata(project, queue)
        if stored is None or not pause.is_paused(stored):
            return None
        return dict(stored.get(pause.PAUSED_BY) or {"by": "operator"})

    def purge(self, project: str, queue: str, resource_types: Sequence[str]) -> None:
        """Remove a queue's messages (claimed ones too) and/or subscriptions.

        A missing queue has nothing to purge (204, as Zaqar).
        """
        if "messages" in resource_types:
            self.storage.purge_messages(project, queue)
        if "subscriptions" in resource_types:
            remove_queue_subscriptions(self.storage, project, queue)
