"""The queue templates of a deployment: those of the configuration file and those kept in the store.

Templates are the operator's, not a project's: they apply to queues of every
project and are kept as records of one server-wide project
(:data:`TEMPLATES_PROJECT`). What a template means (matching, merging,
validation) is :mod:`zaqar_lite.rules.templates`.
"""

from __future__ import annotations

from typing import Any

from zaqar_lite import errors
from zaqar_lite.config import Settings
from zaqar_lite.models import QueueTemplate
from zaqar_lite.rules import templates as rules
from zaqar_lite.storage.base import Storage

#: the server-wide project whose records hold the templates defined through the API
TEMPLATES_PROJECT = "zaqar-lite-server"
#: the record kind of a template
TEMPLATE = "queue_template"
PAGE = 1000


class QueueTemplates:
    """List, read, define and remove queue templates; find the one a new queue starts from."""

    def __init__(self, storage: Storage, settings: Settings) -> None:
        self.storage = storage
        self.settings = settings
        self.limits = settings.limits
        self.from_config = {t.name: t for t in rules.configured(settings)}

    def _stored(self) -> list[QueueTemplate]:
        found: list[QueueTemplate] = []
        marker = None
        while True:
            page = self.storage.list_records(TEMPLATES_PROJECT, TEMPLATE, marker=marker, limit=PAGE)
            found.extend(QueueTemplate(r.key, r.value["pattern"], r.value["metadata"]) for r in page)
            if len(page) < PAGE:
                return found
            marker = page[-1].key

    def all(self) -> list[QueueTemplate]:
        """Return every template by name, those of the configuration file included."""
        stored = [t for t in self._stored() if t.name not in self.from_config]
        return sorted([*self.from_config.values(), *stored], key=lambda t: t.name)

    def get(self, name: str) -> QueueTemplate:
        """Return one template.

        Raises:
            TemplateDoesNotExist: no template of this name.
        """
        rules.check_name(name, self.limits)
        if name in self.from_config:
            return self.from_config[name]
        record = self.storage.get_record(TEMPLATES_PROJECT, TEMPLATE, name)
        if record is None:
            raise errors.TemplateDoesNotExist(name)
        return QueueTemplate(name, record.value["pattern"], record.value["metadata"])

    def put(self, name: str, pattern: Any, metadata: Any) -> bool:
        """Define or replace a template kept in the store; return whether it was new.

        Raises:
            ValidationFailed: a bad name, pattern or metadata.
            Conflict: the configuration file defines this name, or a concurrent
                write changed the template first.
        """
        rules.check_name(name, self.limits)
        self._refuse_configured(name)
        template = rules.check_template(name, pattern, metadata, self.limits,
                                        self.settings.default_dead_letter_queue)
        value = {"pattern": template.pattern, "metadata": template.metadata}
        record = self.storage.get_record(TEMPLATES_PROJECT, TEMPLATE, name)
        self.storage.put_record(TEMPLATES_PROJECT, TEMPLATE, name, value,
                                None if record is None else record.version)
        return record is None

    def delete(self, name: str) -> None:
        """Remove a template kept in the store (queues created from it keep their metadata)."""
        rules.check_name(name, self.limits)
        self._refuse_configured(name)
        self.storage.delete_record(TEMPLATES_PROJECT, TEMPLATE, name)

    def _refuse_configured(self, name: str) -> None:
        if name in self.from_config:
            raise errors.Conflict(f"Queue template {name} is defined in the configuration file; "
                                  "change it there.")

    def for_queue(self, queue: str) -> QueueTemplate | None:
        """Return the template a new queue of this name starts from, or None."""
        return rules.matching(queue, self.all())
