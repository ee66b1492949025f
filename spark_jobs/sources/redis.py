"""Read dead letters from a zaqar-lite Redis store, in marker-score ranges of each DLQ's index.

Layout (``zaqar_lite.storage.redis.layout``): ``zl:{P}:q:Q:all`` is a sorted set of
every message id of queue Q scored by marker, and ``zl:{P}:m:<id>`` a hash
holding the message. The planner reads the scores found at equal rank steps
(``ZRANGE key i i WITHSCORES``); a partition pages through its score range
``(after, upto]`` with ``ZRANGEBYSCORE ... LIMIT`` and fetches each page's
hashes in one pipeline, handing their JSON fields over as text. On Redis
Cluster every key of a project shares the hash tag ``{P}``, so a partition
talks to one node.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from spark_jobs.sources.plan import Target, contract_queues, cut_points, range_specs
from spark_jobs.sources.rows import StoredMessage
from zaqar_lite.storage.redis import layout

PAGE = 1000


def _index_key(project: str, queue: str) -> str:
    return layout.queue_key(project, queue, "all")


def failures_json(text: str | None) -> str | None:
    """Return a hash's ``failures`` (JSON objects one a line: ``layout.failures_from``) as one JSON list."""
    # JSON text holds no raw newline: each one separates two objects
    return "[" + text.replace("\n", ",") + "]" if text else None


class RedisReader:
    """The Redis side of the dead-letter data source (see the module docstring)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._client: Any = None

    def client(self) -> Any:
        """Return a client (redis-py, responses decoded), made on first use in this process."""
        if self._client is None:
            target = layout.parse_uri(self.uri)
            if target.cluster:  # the driver's cluster client: it routes each key to its slot's node
                from zaqar_lite.storage.redis.client import RedisConnected

                self._client = RedisConnected(self.uri).client
            else:
                import redis

                self._client = redis.Redis.from_url(target.uri, decode_responses=True, socket_timeout=30)
        return self._client

    def queues(self) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
        """Yield every queue with its metadata, through the storage contract."""
        return contract_queues(self.uri)

    def count(self, target: Target) -> int:
        """Return the number of messages in the queue."""
        return int(self.client().zcard(_index_key(target.project, target.queue)))

    def plan(self, target: Target, pieces: int) -> list[dict[str, Any]]:
        """Cut the queue into score ranges ``(after, upto]`` of about equal sizes."""
        key = _index_key(target.project, target.queue)
        total = self.count(target)

        def score_at(rank: int) -> float | None:
            found = self.client().zrange(key, rank, rank, withscores=True)
            return found[0][1] if found else None

        cuts = cut_points(total, pieces, score_at)
        bounds: list[float | None] = [None, *cuts, None]
        return range_specs({
            "store": "redis",
            "uri": self.uri,
            "project": target.project,
            "queue": target.queue,
        }, bounds)

    def read(self, spec: Mapping[str, Any], now: float) -> Iterator[list[StoredMessage]]:
        """Stream the dead letters of one score range, a page of hashes per round trip."""
        client = self.client()
        project, queue = spec["project"], spec["queue"]
        key = _index_key(project, queue)
        after = "-inf" if spec["after"] is None else f"({spec['after']!r}"
        upto = "+inf" if spec["upto"] is None else repr(spec["upto"])
        while True:
            page = client.zrangebyscore(key, after, upto, start=0, num=PAGE, withscores=True)
            if not page:
                return
            with client.pipeline(transaction=False) as pipe:
                for message_id, _ in page:
                    pipe.hgetall(layout.message_key(project, message_id))
                hashes = pipe.execute()
            yield [
                (
                    message_id,
                    fields["body"],
                    float(fields["created"]),
                    fields.get("client_id"),
                    int(fields.get("claim_count", 0)),
                    failures_json(fields.get("failures")),
                    fields["dead_letter"],
                )
                for (message_id, _), fields in zip(page, hashes, strict=True)
                if fields.get("q") == queue and fields.get("dead_letter") and float(fields["expires"]) > now
            ]
            if len(page) < PAGE:
                return
            after = f"({page[-1][1]!r}"
