"""Versioned records (those :mod:`zaqar_lite.storage.records` lists) in Swift, for :class:`SwiftStorage`.

A record is the JSON object ``r/<kind>/<key>`` in its project's container,
``{"project", "key", "value", "version", "writer"}``. Compare-and-set is the
driver's claim protocol: read the version, write with ``If-Match`` (creation:
``If-None-Match: *``), settle, read back; the writer whose record is left
wins and every other gets Conflict. A writer slower than ``settle`` gets
Conflict although its value may be the one left: a caller that re-reads then
sees its own value under the new version.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from zaqar_lite import errors
from zaqar_lite.models import Record
from zaqar_lite.storage.swift import layout
from zaqar_lite.storage.swift.client import SwiftObjects


class SwiftRecordsMixin:
    """The record primitives of :class:`~zaqar_lite.storage.base.Storage`, on ``self.objects``."""

    objects: SwiftObjects

    def _container(self, project: str) -> str:
        return layout.project_container(self.objects.options.prefix, project)

    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        found = self.objects.read_json(self._container(project), layout.record_object(kind, key))
        return None if found is None else Record(found["key"], found["value"], found["version"])

    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        container, name = self._container(project), layout.record_object(kind, key)
        version = 1 if expected_version is None else expected_version + 1
        record: dict[str, Any] = {"project": project, "key": key, "value": dict(value),
                                  "version": version, "writer": uuid.uuid4().hex}
        body, started = json.dumps(record).encode(), time.monotonic()
        if expected_version is None:
            sent = self.objects.create(container, name, body, layout.QUEUE_TYPE)
            started = sent if sent is not None else started
            written = sent is not None
        else:
            got = self.objects.read(container, name)
            written = got is not None and json.loads(got[0])["version"] == expected_version
            if written and got is not None:
                self.objects.write(container, name, body, layout.QUEUE_TYPE, {"If-Match": got[1]})
        if not written or not self.objects.kept(container, name, record["writer"], started, time.monotonic()):
            raise errors.Conflict(f"{kind} {key} was changed by someone else; read it again.")
        return version

    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        container, name = self._container(project), layout.record_object(kind, key)
        if expected_version is not None:
            found = self.objects.read_json(container, name)
            if found is None or found["version"] != expected_version:
                return False
        return self.objects.delete(container, name)

    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        container, base = self._container(project), layout.record_object(kind, "")
        rows = self.objects.rows(container, base + prefix, None if marker is None else base + marker)
        names = [n for n, _ in itertools.islice(rows, limit)]
        found = self.objects.map(lambda n: self.objects.read_json(container, n), names)
        return [Record(r["key"], r["value"], r["version"]) for r in found if r is not None]

    def record_projects(self, kind: str) -> list[str]:
        projects = []
        for container in self.objects.containers(f"{self.objects.options.prefix}."):
            first = next(self.objects.rows(container, layout.record_object(kind, "")), None)
            record = None if first is None else self.objects.read_json(container, first[0])
            if record is not None:
                projects.append(record["project"])
        return projects
