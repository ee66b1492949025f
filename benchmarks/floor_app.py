"""The storage-free app of ``minimal_app.py`` whose post stores each message in one store round trip.

It measures the floor that any server storing a message before answering
stands on, under zaqar-lite's HTTP stack: ``http_load.py --floor`` runs it
beside zaqar-lite and the minimal app. It is the minimal app (same routes,
same gunicorn application class and settings) except for
``POST /v2/queues/{queue}/messages``, which does the least a durable post
needs: it reads and decodes the JSON body, makes each message an id
(``uuid4``), writes the messages in ONE round trip to the store through
zaqar-lite's own connection code, acknowledged as zaqar-lite's writes are,
and answers 201 with their hrefs:

* ``redis://``: one ``EVALSHA`` of a script of two commands a message (``HSET``
  of its hash, ``ZADD`` to the queue's index), through
  :class:`~zaqar_lite.storage.redis.client.RedisConnected`'s own path (its
  bounded pool and, under gevent, the round trips the worker's greenlets share:
  ``storage/redis/batch.py``); the script is loaded once per worker.
* ``sqlite://``: one ``INSERT`` a message in a table of its own, in
  :meth:`~zaqar_lite.storage.sqlite.client.SqliteConnected.transaction` (group
  commit, write turns between processes, the URI's ``synchronous``, ``full`` by
  default), called through :class:`~zaqar_lite.server.gunicorn.OffTheHub` on
  gevent's thread pool as zaqar-lite's worker calls its SQLite store. The file
  also holds zaqar-lite's tables, empty (``SqliteConnected`` lays them out when
  it opens a file); no write touches them.

Claims and deletes keep the minimal app's fixed answers: they store nothing.

Usage: ``python benchmarks/floor_app.py --bind 127.0.0.1:8890 --workers 2 --storage URI``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

import falcon
from minimal_app import MinimalServer, create_app

from zaqar_lite.config import load_settings
from zaqar_lite.storage.redis.client import RedisConnected
from zaqar_lite.storage.sqlite.client import SqliteConnected

#: the messages' default ttl, zaqar-lite's
DEFAULT_TTL = 3600

#: KEYS[1] the queue's index (a sorted set of ids by creation time), KEYS[2..] each message's hash;
#: ARGV: the creation time, then id, body (JSON), ttl, expiry per message. Returns the count stored.
POST_SCRIPT = """\
local n = 0
for i = 2, #KEYS do
  local a = 2 + (i - 2) * 4
  redis.call('HSET', KEYS[i], 'body', ARGV[a + 1], 'ttl', ARGV[a + 2], 'created', ARGV[1],
             'expires', ARGV[a + 3])
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[a])
  n = n + 1
end
return n
"""

#: the one table of the SQLite floor
TABLE = ("CREATE TABLE IF NOT EXISTS floor_messages (id TEXT PRIMARY KEY, queue TEXT NOT NULL, "
         "body TEXT NOT NULL, ttl INTEGER NOT NULL, created REAL NOT NULL, expires REAL NOT NULL)")
INSERT = "INSERT INTO floor_messages VALUES (?, ?, ?, ?, ?, ?)"

#: one message to store: id, body (JSON text), ttl, expiry
Row = tuple[str, str, int, float]


class RedisFloor(RedisConnected):
    """zaqar-lite's Redis connection, with one more script: the floor's post."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self._scripts["floor_post"] = hashlib.sha1(POST_SCRIPT.encode()).hexdigest(), POST_SCRIPT
        self.client.script_load(POST_SCRIPT)  # once per worker: no post meets NOSCRIPT

    def store(self, queue: str, rows: Sequence[Row], now: float) -> None:
        """Store the messages in one ``EVALSHA``."""
        keys = [f"floor:q:{queue}", *(f"floor:m:{row[0]}" for row in rows)]
        args: list[Any] = [now]
        for row in rows:
            args.extend(row)
        self._eval("floor_post", keys, args)


class SqliteFloor(SqliteConnected):
    """zaqar-lite's SQLite connection, with one more table: the floor's."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        with self.transaction() as db:
            db.execute(TABLE)

    def store(self, queue: str, rows: Sequence[Row], now: float) -> None:
        """Store the messages in one transaction, durable once this returns."""
        with self.transaction() as db:
            if len(rows) == 1:
                message_id, body, ttl, expires = rows[0]
                db.execute(INSERT, (message_id, queue, body, ttl, now, expires))
            else:
                db.executemany(INSERT, [(i, queue, b, t, now, e) for i, b, t, e in rows])


def open_floor(uri: str, worker_class: str) -> Any:
    """Open the floor's store in a worker, on the side zaqar-lite's worker uses it from."""
    if uri.startswith("redis://"):
        return RedisFloor(uri)
    if not uri.startswith("sqlite://"):
        raise SystemExit(f"the floor stores on redis:// or sqlite://, not {uri}")
    if worker_class != "gevent":
        return SqliteFloor(uri)
    import gevent

    from zaqar_lite.server.gunicorn import OffTheHub

    # opened and used on gevent's thread pool, as open_store_off_the_hub opens a SQLite store
    return OffTheHub(gevent.get_hub().threadpool.apply(SqliteFloor, (uri,)))


class FloorMessages:
    """``/v2/queues/{queue}/messages``: POST stores its messages with one round trip, then answers 201."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def on_post(self, req: falcon.Request, resp: falcon.Response, queue: str) -> None:
        """Decode the body, give each message an id, store them, answer their hrefs."""
        try:
            messages = json.loads(req.bounded_stream.read())["messages"]
            now = time.time()
            rows: list[Row] = []
            for message in messages:
                ttl = int(message.get("ttl", DEFAULT_TTL))
                rows.append((str(uuid.uuid4()), json.dumps(message["body"]), ttl, now + ttl))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            description = f'expected {{"messages": [{{"body": ...}}]}}: {exc}'
            raise falcon.HTTPBadRequest(title="Invalid body", description=description) from exc
        if not rows:
            raise falcon.HTTPBadRequest(title="Invalid body", description="no message to post")
        self.store.store(queue, rows, now)
        ids = [row[0] for row in rows]
        resp.status = falcon.HTTP_201
        resp.location = f"/v2/queues/{queue}/messages?ids={','.join(ids)}"
        resp.media = {"resources": [f"/v2/queues/{queue}/messages/{i}" for i in ids]}


class FloorServer(MinimalServer):
    """zaqar-lite's gunicorn application serving the floor app."""

    def __init__(self, settings: Any, storage: str) -> None:
        self.storage = storage
        super().__init__(settings)

    def load(self) -> falcon.App:
        """Open the store and build the floor app inside a worker."""
        return create_app(messages=FloorMessages(open_floor(self.storage, self.settings.worker_class)))


def main(argv: list[str] | None = None) -> None:
    """Serve the floor app until stopped."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True, help="HOST:PORT to listen on")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--storage", required=True, help="a redis:// or sqlite:// URI to store the posts in")
    args = parser.parse_args(argv)
    FloorServer(load_settings(None, bind=args.bind, workers=args.workers), args.storage).run()


if __name__ == "__main__":
    main()
