"""How zaqar-lite lays out its data in MongoDB: collections, indexes, documents, client options.

Any MongoDB URI (``mongodb://`` or ``mongodb+srv://``; replica sets, auth, TLS) goes
to :class:`pymongo.MongoClient` unchanged; the database is the URI's path (default
:data:`DEFAULT_DATABASE`). Unless the URI sets them, :data:`CLIENT_DEFAULTS` make
an unreachable server fail within seconds and every write majority-acknowledged
and retryable.

Collections: ``queues`` ``{project, name, metadata, created, counter, due,
due_version}`` (``counter`` is the last marker handed out, reserved N at a time
by one ``$inc`` upsert that also creates a missing queue; ``due`` when the sweep
next has something to do in the queue, see :mod:`~zaqar_lite.storage.mongodb.queues`;
a queue stored before due times has none and is given 0 when a process opens the database);
``messages``, every queue's messages, ``_id`` =
message id, scoped by ``project`` and ``queue`` fields, the other fields those of
:class:`~zaqar_lite.models.Message` (``claim_expires`` 0 when never claimed, so
"not claimed" is the range ``<= now``) plus ``purge_at``; ``claims`` ``{_id: claim
id, project, queue, ttl, grace, created, expires, purge_at}``; ``records`` ``{kind,
project, key, value, version}``; ``dedup`` ``{project, queue, dedup_id, message_id,
expires, purge_at}``, the ``dedup_id`` each queue remembers (unique per queue:
``by_dedup_id``). Client JSON (bodies, metadata, record values) is
stored as JSON text: BSON cannot hold every JSON object (keys with NUL; ``$ref``
and ``$id`` read back as a DBRef; MongoDB 4.4 refuses ``.`` and ``$`` keys in updates).

Expiry: the TTL index is on ``purge_at`` = ``expires`` + :data:`PURGE_MARGIN` (a
date, rewritten with every expiry): the sweeper handles expired messages first,
the TTL monitor removes only what no sweeper handled for an hour.

The driver (:mod:`~zaqar_lite.storage.mongodb.driver`) and the Spark reader
(``spark_jobs/sources/mongodb.py``) both read this module.
"""

from __future__ import annotations

import json
import urllib.parse
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING, IndexModel

from zaqar_lite.models import Message, Record

Document = dict[str, Any]

DEFAULT_DATABASE = "zaqar_lite"
#: fail fast when the server is unreachable; on a replica set, acknowledge a write only once a
#: majority of its members hold it (so a failover never takes back an acknowledged post), and
#: retry a write once over a new primary (pymongo's retryable writes are idempotent)
CLIENT_DEFAULTS: dict[str, Any] = {"serverSelectionTimeoutMS": 3000, "connectTimeoutMS": 3000,
                                   "socketTimeoutMS": 5000, "appname": "zaqar-lite",
                                   "w": "majority", "retryWrites": True}
#: seconds a whole driver operation may take, unless the URI's ``timeoutMS`` says otherwise
OPERATION_TIMEOUT = 8.0
#: seconds from a message's expiry to its removal by the TTL monitor: the sweeper's head start
PURGE_MARGIN = 3600
BY_ID, CANDIDATES, BY_MARKER, BY_EXPIRY, BY_CLAIM_EXPIRY, BY_CLAIM, BY_GROUP = (
    "_id_", "claim_candidates", "by_marker", "by_expiry", "by_claim_expiry", "by_claim_id", "by_group")
#: a message without what a move never rewrites (the sweep reads this much)
WITHOUT_PAYLOAD = {"body": 0, "failures": 0}
#: what the dead-letter report reads of a message
REPORT_FIELDS = {"body": 1, "created": 1, "client_id": 1, "claim_count": 1, "failures": 1,
                 "dead_letter": 1, "expires": 1}


def _index(name: str, *fields: str, **options: Any) -> IndexModel:
    return IndexModel([(field, ASCENDING) for field in fields], name=name, **options)


INDEXES = {
    "messages": [
        # As in the SQLite layout: ready (never delayed, or claimed once) messages are
        # the ordered range delay_until = 0, matured delayed ones 0 < delay_until <= now.
        _index(CANDIDATES, "project", "queue", "delay_until", "marker"),
        _index(BY_MARKER, "project", "queue", "marker"),
        _index(BY_EXPIRY, "project", "queue", "expires"),
        _index(BY_CLAIM_EXPIRY, "project", "queue", "claim_expires"),
        _index(BY_CLAIM, "claim_id"),
        # the heads of message groups; messages without a group are not in it
        _index(BY_GROUP, "project", "queue", "group", "marker",
               partialFilterExpression={"group": {"$exists": True}}),
        _index("purge_after_expiry", "purge_at", expireAfterSeconds=0),
    ],
    "queues": [_index("by_name", "project", "name", unique=True), _index("by_due", "due")],
    "claims": [_index(BY_EXPIRY, "project", "queue", "expires"),
               _index("purge_after_expiry", "purge_at", expireAfterSeconds=0)],
    "records": [_index("by_key", "kind", "project", "key", unique=True)],
    "dedup": [_index("by_dedup_id", "project", "queue", "dedup_id", unique=True),
              _index("purge_after_expiry", "purge_at", expireAfterSeconds=0)],
}


def client_options(uri: str) -> dict[str, Any]:
    """Return :data:`CLIENT_DEFAULTS` less the options the URI sets itself."""
    given = {key.lower() for key in urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)}
    return {key: value for key, value in CLIENT_DEFAULTS.items() if key.lower() not in given}


def operation_timeout(uri: str) -> float | None:
    """Return the seconds a whole driver operation may take: the URI's ``timeoutMS``, or 8.

    A URI's ``timeoutMS=0`` leaves operations unbounded (None), as pymongo reads it.
    """
    given = {key.lower(): values[-1] for key, values in
             urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query).items()}
    if "timeoutms" not in given:
        return OPERATION_TIMEOUT
    milliseconds = float(given["timeoutms"])
    return milliseconds / 1000 if milliseconds > 0 else None


def purge_at(expires: float) -> datetime:
    """Return when the TTL monitor may remove a document that expires at ``expires``."""
    return datetime.fromtimestamp(expires + PURGE_MARGIN, UTC)


def message_document(project: str, queue: str, message: Message, marker: int) -> Document:
    """Return the document a message is stored as (``dedup_id``, ``group``, ``trace`` only when set)."""
    document: Document = {"_id": message.id, "project": project, "queue": queue, "marker": marker,
            "body": json.dumps(message.body), "created": message.created, "expires": message.expires,
            "purge_at": purge_at(message.expires), "delay_until": message.delay_until,
            "client_id": message.client_id, "claim_id": message.claim_id,
            "claim_expires": message.claim_expires or 0.0, "claim_count": message.claim_count,
            "dlq_eligible": message.dlq_eligible, "failures": message.failures,
            "dead_letter": message.dead_letter}
    if message.dedup_id is not None:
        document["dedup_id"] = message.dedup_id
    if message.group is not None:
        document["group"] = message.group
    if message.trace is not None:
        document["trace"] = message.trace
    return document


def message_from(doc: Document) -> Message:
    """Rebuild a message from its document (``body`` None when it was not read)."""
    return Message(
        id=doc["_id"], body=json.loads(doc["body"]) if "body" in doc else None,
        created=doc["created"], expires=doc["expires"], delay_until=doc["delay_until"],
        client_id=doc["client_id"], claim_id=doc["claim_id"],
        claim_expires=doc["claim_expires"] or None, claim_count=doc["claim_count"],
        dlq_eligible=doc["dlq_eligible"], failures=doc.get("failures") or [],
        dead_letter=doc["dead_letter"], marker=doc["marker"], dedup_id=doc.get("dedup_id"),
        group=doc.get("group"), trace=doc.get("trace"))


def unchanged(project: str, queue: str, message: Message) -> Document:
    """Return a filter matching a message only while it is in the state it was read in."""
    return {"_id": message.id, "project": project, "queue": queue, "claim_id": message.claim_id,
            "claim_expires": message.claim_expires or 0.0, "claim_count": message.claim_count,
            "expires": message.expires}


def record_from(doc: Document) -> Record:
    """Rebuild a versioned record from its document."""
    return Record(doc["key"], json.loads(doc["value"]), doc["version"])
