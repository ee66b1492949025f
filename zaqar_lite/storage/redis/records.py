"""Versioned records in Redis: a hash of ``"<version> <value JSON>"`` and a key index per kind."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from zaqar_lite import errors
from zaqar_lite.models import Record
from zaqar_lite.storage.redis.client import RedisConnected
from zaqar_lite.storage.redis.layout import RECORD_PROJECTS, opt, record_keys


class RedisRecords(RedisConnected):
    """The record methods of the storage contract (see :class:`~zaqar_lite.storage.base.Storage`)."""

    @staticmethod
    def _to_record(key: str, stored: str) -> Record:
        version, value = stored.split(" ", 1)
        return Record(key, json.loads(value), int(version))

    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        with self._translate_errors():
            stored = self.client.hget(record_keys(project, kind)[0], key)
        return self._to_record(key, stored) if stored is not None else None

    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        version = self._eval("put_record", record_keys(project, kind),
                             [key, json.dumps(value), opt(expected_version)],
                             (RECORD_PROJECTS + kind, project))
        if not version:
            raise errors.Conflict(f"{kind} {key} was changed by someone else; read it again.")
        return int(version)

    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        deleted = self._eval("delete_record", record_keys(project, kind), [key, opt(expected_version)])
        return bool(deleted)

    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        values, names = record_keys(project, kind)
        lower = "(" + marker if marker is not None and marker >= prefix else "[" + prefix
        with self._translate_errors():
            # keys with the prefix are contiguous in key order: the first ones read are the page
            keys = [k for k in self.client.zrangebylex(names, lower, "+", start=0, num=limit)
                    if k.startswith(prefix)]
            stored = self.client.hmget(values, keys) if keys else []
        return [self._to_record(k, s) for k, s in zip(keys, stored, strict=True) if s is not None]

    def record_projects(self, kind: str) -> list[str]:
        with self._translate_errors():
            projects = sorted(self.client.smembers(RECORD_PROJECTS + kind))
            with self.client.pipeline(transaction=False) as pipe:
                for project in projects:
                    pipe.zcard(record_keys(project, kind)[1])
                counts = pipe.execute()
        return [p for p, n in zip(projects, counts, strict=True) if n]
