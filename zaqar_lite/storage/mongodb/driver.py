"""MongoDB driver: every change of a message is one single-document write guarded by its state.

Any MongoDB URI (``mongodb://`` or ``mongodb+srv://``; replica sets, auth, TLS) goes
to :class:`pymongo.MongoClient` unchanged; the database is the URI's path (default
``zaqar_lite``). Unless the URI sets them, :data:`CLIENT_DEFAULTS` make an
unreachable server fail within seconds (``StorageUnavailable``, a 503); pymongo
reconnects by itself. Indexes are created at startup, or, if the server is down
then, by the first operation that reaches it.

Collections: ``queues`` ``{project, name, metadata, created, counter}`` (``counter``
is the last marker handed out, reserved N at a time by one ``$inc`` upsert that
also creates a missing queue); ``messages``, every queue's messages, ``_id`` =
message id, scoped by ``project`` and ``queue`` fields, the other fields those of
:class:`~zaqar_lite.models.Message` (``claim_expires`` 0 when never claimed, so
"not claimed" is the range ``<= now``) plus ``purge_at``; ``claims`` ``{_id: claim
id, project, queue, ttl, grace, created, expires, purge_at}``; ``records`` ``{kind,
project, key, value, version}``. Client JSON (bodies, metadata, record values) is
stored as JSON text: BSON cannot hold every JSON object (keys with NUL; ``$ref``
and ``$id`` read back as a DBRef; MongoDB 4.4 refuses ``.`` and ``$`` keys in updates).

Atomicity: the policy plans on messages as read, and each planned change is one
single-document write filtered on that read state (:func:`_unchanged`), so a plan
made on a stale read matches nothing: a message goes to at most one claim, the
claim count is written by the update that claims, and a move to another queue
(dead-lettering, or a redrive: one update rewriting ``queue`` and ``marker``,
resetting the claim and setting the count, expiry and provenance) happens once.
A post of several messages is one transaction on replica sets and sharded
clusters; on a standalone server it is one ``insert_many``, which a crash can
cut short.

Order: claims and pops are FIFO by marker; markers are reserved in post order, so
two concurrent posts may become visible in the other order for a moment.

Expiry: reads filter on ``expires``. The TTL index is on ``purge_at`` = ``expires``
+ :data:`PURGE_MARGIN` (a date, rewritten with every expiry): the sweeper moves the
expired messages of ``_dead_letter_on_expiry`` queues, and discards the others,
within a second; the TTL monitor removes only what no sweeper handled for an hour.

Queries name their index (``hint``): the plan is then fixed, as SQLite's
``INDEXED BY``, and servers whose planner gives up between candidate indexes
(SecantusDB) still use one. A hint naming a dropped index re-creates the indexes.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import pymongo
from pymongo import ASCENDING, DESCENDING, DeleteOne, IndexModel, ReturnDocument, UpdateOne
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import ConnectionFailure, DuplicateKeyError, OperationFailure, PyMongoError

from zaqar_lite import errors
from zaqar_lite.claims import policy
from zaqar_lite.models import (
    Claim,
    ClaimRequest,
    DeadLetterPolicy,
    Message,
    Move,
    QueueStats,
    Record,
    SweepResult,
)
from zaqar_lite.storage.base import Storage

LOG = logging.getLogger(__name__)
Document = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DATABASE = "zaqar_lite"
CLIENT_DEFAULTS: dict[str, Any] = {"serverSelectionTimeoutMS": 3000, "connectTimeoutMS": 3000,
                                   "socketTimeoutMS": 10000, "appname": "zaqar-lite"}
#: seconds from a message's expiry to its removal by the TTL monitor: the sweeper's head start
PURGE_MARGIN = 3600
SWEEP_BATCH = 500
#: attempts of a delete or release whose message keeps changing under it
CAS_ATTEMPTS = 10
BY_ID, CANDIDATES, BY_MARKER, BY_EXPIRY, BY_CLAIM_EXPIRY, BY_CLAIM = (
    "_id_", "claim_candidates", "by_marker", "by_expiry", "by_claim_expiry", "by_claim_id")


def _index(name: str, *fields: str, **options: Any) -> IndexModel:
    return IndexModel([(field, ASCENDING) for field in fields], name=name, **options)


INDEXES = {
    "messages": [
        # As in the SQLite driver: ready (never delayed, or claimed once) messages are
        # the ordered range delay_until = 0, matured delayed ones 0 < delay_until <= now.
        _index(CANDIDATES, "project", "queue", "delay_until", "marker"),
        _index(BY_MARKER, "project", "queue", "marker"),
        _index(BY_EXPIRY, "project", "queue", "expires"),
        _index(BY_CLAIM_EXPIRY, "project", "queue", "claim_expires"),
        _index(BY_CLAIM, "claim_id"),
        _index("purge_after_expiry", "purge_at", expireAfterSeconds=0),
    ],
    "queues": [_index("by_name", "project", "name", unique=True)],
    "claims": [_index(BY_EXPIRY, "project", "queue", "expires"),
               _index("purge_after_expiry", "purge_at", expireAfterSeconds=0)],
    "records": [_index("by_key", "kind", "project", "key", unique=True)],
}
_WITHOUT_PAYLOAD = {"body": 0, "failures": 0}  # the sweep's moves never rewrite them


def _translated(method: F) -> F:
    """Make an unreachable MongoDB a ``StorageUnavailable``: the one place that does."""
    @functools.wraps(method)
    def wrapper(self: MongoStorage, *args: Any, **kwargs: Any) -> Any:
        try:
            self._ensure_indexes()
            try:
                return method(self, *args, **kwargs)
            except OperationFailure as exc:
                if exc.code != 2 or "hint" not in str(exc):  # BadValue: the hinted index is gone
                    raise
                self._indexed = False
                self._ensure_indexes()
                return method(self, *args, **kwargs)
        except ConnectionFailure as exc:
            raise errors.StorageUnavailable(f"MongoDB is unreachable: {exc}") from exc
    return wrapper  # type: ignore[return-value]


def _purge_at(expires: float) -> datetime:
    return datetime.fromtimestamp(expires + PURGE_MARGIN, UTC)


def _document(project: str, queue: str, message: Message, marker: int) -> Document:
    return {"_id": message.id, "project": project, "queue": queue, "marker": marker,
            "body": json.dumps(message.body), "created": message.created, "expires": message.expires,
            "purge_at": _purge_at(message.expires), "delay_until": message.delay_until,
            "client_id": message.client_id, "claim_id": message.claim_id,
            "claim_expires": message.claim_expires or 0.0, "claim_count": message.claim_count,
            "dlq_eligible": message.dlq_eligible, "failures": message.failures,
            "dead_letter": message.dead_letter}


def _message(doc: Document) -> Message:
    return Message(
        id=doc["_id"], body=json.loads(doc["body"]) if "body" in doc else None,
        created=doc["created"], expires=doc["expires"], delay_until=doc["delay_until"],
        client_id=doc["client_id"], claim_id=doc["claim_id"],
        claim_expires=doc["claim_expires"] or None, claim_count=doc["claim_count"],
        dlq_eligible=doc["dlq_eligible"], failures=doc.get("failures") or [],
        dead_letter=doc["dead_letter"], marker=doc["marker"])


def _unchanged(doc: Document) -> Document:
    """Return a filter matching a message only while it is in the state it was read in."""
    return {key: doc[key] for key in ("_id", "project", "queue", "claim_id", "claim_expires",
                                      "claim_count", "expires")}


def _record(doc: Document) -> Record:
    return Record(doc["key"], json.loads(doc["value"]), doc["version"])


def _client_options(uri: str) -> dict[str, Any]:
    given = {key.lower() for key in urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)}
    return {key: value for key, value in CLIENT_DEFAULTS.items() if key.lower() not in given}


class MongoStorage(Storage):
    """MongoDB driver; one client per process (a forked worker opens its own).

    Every primitive of the contract is wrapped by :func:`_translated` (see the end
    of the module), the one place where connection errors become ``StorageUnavailable``.
    """

    name = "mongodb"
    #: markers are reserved (or taken from the clock) before the write lands
    visibility_lag = 2.0

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._options = _client_options(uri)
        self._pid = -1
        self._indexed = False
        try:
            self._ensure_indexes()
        except ConnectionFailure as exc:
            LOG.warning("MongoDB is unreachable at startup; indexes will be created later: %s", exc)

    def describe(self) -> str:
        """Return the hosts and the database, without credentials."""
        hosts = urllib.parse.urlsplit(self.uri).netloc.rpartition("@")[2]
        return f"MongoDB database {self._database().name} on {hosts}"

    def close(self) -> None:
        """Close this process's client."""
        if self._pid == os.getpid():
            self._client.close()

    # -- plumbing -------------------------------------------------------------

    def _database(self) -> Database[Document]:
        if self._pid != os.getpid():
            self._client: pymongo.MongoClient[Document] = pymongo.MongoClient(self.uri, **self._options)
            self._db = self._client.get_default_database(DEFAULT_DATABASE)
            self._pid = os.getpid()
        return self._db

    @property
    def _messages(self) -> Collection[Document]:
        return self._database().messages

    @property
    def _claims(self) -> Collection[Document]:
        return self._database().claims

    def _ensure_indexes(self) -> None:
        if not self._indexed:
            for collection, indexes in INDEXES.items():
                self._database()[collection].create_indexes(indexes)
            self._indexed = True

    def _transactions(self) -> bool:
        kind = self._client.topology_description.topology_type_name
        return kind in ("ReplicaSetWithPrimary", "Sharded", "LoadBalanced")

    # -- queues ---------------------------------------------------------------

    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        try:
            result = self._database().queues.update_one(
                {"project": project, "name": queue},
                {"$setOnInsert": {"metadata": json.dumps(metadata), "created": now, "counter": 0}},
                upsert=True)
        except DuplicateKeyError:  # a concurrent create won
            return False
        return result.upserted_id is not None

    def get_queue_metadata(self, project: str, queue: str) -> dict[str, Any] | None:
        doc = self._database().queues.find_one({"project": project, "name": queue}, {"metadata": 1})
        return json.loads(doc["metadata"]) if doc else None

    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        result = self._database().queues.update_one({"project": project, "name": queue},
                                                    {"$set": {"metadata": json.dumps(metadata)}})
        if result.matched_count == 0:
            raise errors.QueueDoesNotExist(queue, project)

    def delete_queue(self, project: str, queue: str) -> None:
        # The record first: a post racing this delete then re-creates the queue
        # rather than leaving messages behind a deleted record.
        self._database().queues.delete_one({"project": project, "name": queue})
        self._purge(project, queue)

    def list_queues(self, project: str, *, marker: str | None, limit: int,
                    name_contains: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        query: Document = {"project": project, "name": {"$gt": marker or ""}}
        if name_contains:
            query["name"]["$regex"] = re.escape(name_contains)
        found = self._database().queues.find(query, {"name": 1, "metadata": 1}).sort("name").limit(limit)
        return [(doc["name"], json.loads(doc["metadata"])) for doc in found]

    def count_queues(self, project: str) -> int:
        return self._database().queues.count_documents({"project": project})

    def all_queues(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        after: tuple[str, str] | None = None
        while True:
            page = self._queue_page(after)
            yield from page
            if len(page) < self.all_queues_page:
                return
            after = page[-1][0], page[-1][1]

    @_translated
    def _queue_page(self, after: tuple[str, str] | None) -> list[tuple[str, str, dict[str, Any]]]:
        """Return up to all_queues_page queues after ``(project, name)``, in that order (index by_name)."""
        query: Document = {} if after is None else {"$or": [
            {"project": {"$gt": after[0]}}, {"project": after[0], "name": {"$gt": after[1]}}]}
        found = self._database().queues.find(query, {"project": 1, "name": 1, "metadata": 1}).sort(
            [("project", ASCENDING), ("name", ASCENDING)]).limit(self.all_queues_page)
        return [(doc["project"], doc["name"], json.loads(doc["metadata"])) for doc in found]

    def _reserve_markers(self, project: str, queue: str, count: int, now: float) -> int:
        """Reserve ``count`` consecutive markers of a queue, creating it if missing; return the first."""
        try:
            doc = self._database().queues.find_one_and_update(
                {"project": project, "name": queue},
                {"$inc": {"counter": count}, "$setOnInsert": {"metadata": "{}", "created": now}},
                projection={"counter": 1}, upsert=True, return_document=ReturnDocument.AFTER)
        except DuplicateKeyError:  # a concurrent upsert created the queue: now it exists
            return self._reserve_markers(project, queue, count, now)
        assert doc is not None  # an upsert returning the document after the update
        return int(doc["counter"]) - count + 1

    # -- messages -------------------------------------------------------------

    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float,
                      metadata_version: str | None = None) -> None:
        if not messages:
            return
        first = self._reserve_markers(project, queue, len(messages), now)
        docs = [_document(project, queue, m, first + i) for i, m in enumerate(messages)]
        if len(docs) > 1 and self._transactions():
            with self._client.start_session() as session, session.start_transaction():
                self._messages.insert_many(docs, session=session)
        else:
            self._messages.insert_many(docs)

    def _find(self, query: Document, index: str, limit: int = 0,
              projection: Document | None = None) -> list[Document]:
        return list(self._messages.find(query, projection).sort("marker").limit(limit).hint(index))

    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        query: Document = {"project": project, "queue": queue, "marker": {"$gt": marker or 0},
                           "expires": {"$gt": now}}
        if not include_claimed:
            query["claim_expires"] = {"$lte": now}
        if not include_delayed:
            query["delay_until"] = {"$lte": now}
        if exclude_client_id is not None:
            query["client_id"] = {"$ne": exclude_client_id}
        return [_message(doc) for doc in self._find(query, BY_MARKER, limit)]

    def _get(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Document]:
        return self._find({"_id": {"$in": list(ids)}, "project": project, "queue": queue,
                           "expires": {"$gt": now}}, BY_ID)

    def get_messages(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        return [_message(doc) for doc in self._get(project, queue, ids, now)]

    def _claim_is_live(self, project: str, queue: str, claim_id: str, now: float) -> bool:
        return self._claims.count_documents({"_id": claim_id, "project": project, "queue": queue,
                                             "expires": {"$gt": now}}, hint=BY_ID) > 0

    def delete_message(self, project: str, queue: str, message_id: str, claim_id: str | None,
                       now: float) -> None:
        for _ in range(CAS_ATTEMPTS):
            found = self._get(project, queue, [message_id], now)
            if not found:
                return
            live = claim_id is not None and self._claim_is_live(project, queue, claim_id, now)
            policy.check_claim_rules(_message(found[0]), claim_id, live, now)
            if self._messages.delete_one(_unchanged(found[0]), hint=BY_ID).deleted_count:
                return
        raise errors.StorageUnavailable(f"message {message_id} kept changing while being deleted")

    def delete_messages(self, project: str, queue: str, ids: Sequence[str],
                        claim_ids: Sequence[str] | None, now: float) -> None:
        scope = {"_id": {"$in": list(ids)}, "project": project, "queue": queue, "expires": {"$gt": now}}
        if claim_ids is None:
            self._messages.delete_many(scope, hint=BY_ID)
            return
        self._messages.delete_many({**scope, "$or": [{"claim_expires": {"$lte": now}},
                                                     {"claim_id": {"$in": list(claim_ids)}}]}, hint=BY_ID)
        kept = self._messages.find_one(scope, {"_id": 1}, hint=BY_ID)  # held by a claim not listed
        if kept is not None:
            raise errors.MessageIsClaimedBy(kept["_id"], ",".join(claim_ids))

    def _candidates(self, project: str, queue: str, now: float, after: int, limit: int) -> list[Document]:
        """Return up to ``limit`` visible messages with marker > ``after``, FIFO."""
        scope = {"project": project, "queue": queue, "marker": {"$gt": after},
                 "expires": {"$gt": now}, "claim_expires": {"$lte": now}}
        found = (self._find({**scope, "delay_until": 0}, CANDIDATES, limit)
                 + self._find({**scope, "delay_until": {"$gt": 0, "$lte": now}}, CANDIDATES, limit))
        return sorted(found, key=lambda doc: doc["marker"])[:limit]

    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        popped: list[Message] = []
        after = 0
        while len(popped) < limit:
            wanted = limit - len(popped)
            batch = self._candidates(project, queue, now, after, wanted)
            for doc in batch:
                gone = self._messages.find_one_and_delete(_unchanged(doc), hint=BY_ID)
                if gone is not None:
                    popped.append(_message(gone))
            if len(batch) < wanted:
                break
            after = batch[-1]["marker"]
        return popped

    def _purge(self, project: str, queue: str) -> None:
        self._messages.delete_many({"project": project, "queue": queue}, hint=BY_MARKER)
        self._claims.delete_many({"project": project, "queue": queue}, hint=BY_EXPIRY)

    def purge_messages(self, project: str, queue: str) -> None:
        self._purge(project, queue)

    def queue_stats(self, project: str, queue: str, now: float) -> QueueStats:
        # Counted one after the other, each through an index; not at one instant.
        scope = {"project": project, "queue": queue, "expires": {"$gt": now}}
        count = self._messages.count_documents
        total = count(scope, hint=BY_EXPIRY)
        if not total:
            return QueueStats(claimed=0, free=0, delayed=0)
        claimed = count({**scope, "claim_expires": {"$gt": now}}, hint=BY_CLAIM_EXPIRY)
        delayed = count({**scope, "claim_expires": {"$lte": now}, "delay_until": {"$gt": now}},
                        hint=CANDIDATES)
        ends = [self._messages.find_one(scope, sort=[("marker", order)], hint=BY_MARKER)
                for order in (ASCENDING, DESCENDING)]
        return QueueStats(claimed=claimed, delayed=delayed, free=max(0, total - claimed - delayed),
                          oldest=_message(ends[0]) if ends[0] else None,
                          newest=_message(ends[1]) if ends[1] else None)

    # -- claims ---------------------------------------------------------------

    def _apply(self, project: str, queue: str, plan: policy.Plan, read: Sequence[Document],
               dead_letter: DeadLetterPolicy, now: float) -> tuple[int, int]:
        """Write a plan, each change guarded by the state it was planned on, in one bulk.

        Returns:
            How many claims and moves (together), and how many deletes, took effect.
        """
        state = {doc["_id"]: doc for doc in read}
        ops: list[UpdateOne | DeleteOne] = [UpdateOne(_unchanged(state[m.id]), {"$set": {
            "claim_id": m.claim_id, "claim_expires": m.claim_expires, "claim_count": m.claim_count,
            "expires": m.expires, "purge_at": _purge_at(m.expires), "delay_until": m.delay_until,
        }}, hint=BY_ID) for m in plan.claimed]
        ops += self._move_ops(project, dead_letter.queue or queue,
                              [(_unchanged(state[m.id]), m) for m in plan.moved], now)[1]
        ops += [DeleteOne(_unchanged(state[message_id]), hint=BY_ID) for message_id in plan.deleted]
        if not ops:
            return 0, 0
        result = self._messages.bulk_write(ops, ordered=False)
        return result.matched_count, result.deleted_count

    def _move_ops(self, project: str, target: str, moves: Sequence[tuple[Document, Message]],
                  now: float) -> tuple[int, list[UpdateOne]]:
        """Return the guarded updates that move messages into ``target``, and the first marker they take.

        Each pair is the filter a message must still match and the message as
        it must be stored; consecutive markers of ``target`` (created if
        missing) are reserved for them in order. One update per message
        rewrites its queue and marker, resets its claim and sets its count,
        expiry and provenance.
        """
        if not moves:
            return 0, []
        first = self._reserve_markers(project, target, len(moves), now)
        return first, [UpdateOne(guard, {"$set": {
            "queue": target, "marker": first + offset, "claim_id": None, "claim_expires": 0.0,
            "claim_count": m.claim_count, "delay_until": 0.0, "expires": m.expires,
            "purge_at": _purge_at(m.expires), "dead_letter": m.dead_letter,
        }}, hint=BY_ID) for offset, (guard, m) in enumerate(moves)]

    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        # The filter pins what still_movable compares; a read state that is itself
        # claimed or expired at now could only match a message that is too.
        wanted = [mv for mv in moves if policy.still_movable(mv.read, mv.read, now)]
        first, ops = self._move_ops(project, target_queue, [
            (_unchanged(_document(project, queue, mv.read, mv.read.marker)), mv.moved) for mv in wanted], now)
        if not ops:
            return []
        if self._messages.bulk_write(ops, ordered=False).matched_count == len(ops):
            return [mv.read.id for mv in wanted]
        arrived = {doc["_id"] for doc in self._messages.find(
            {"_id": {"$in": [mv.read.id for mv in wanted]}, "project": project, "queue": target_queue,
             "marker": {"$gte": first, "$lt": first + len(ops)}}, {"_id": 1}, hint=BY_ID)}
        return [mv.read.id for mv in wanted if mv.read.id in arrived]

    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> list[Message]:
        claimed: list[Message] = []
        after = 0
        while len(claimed) < request.limit:
            wanted = request.limit - len(claimed)
            batch = self._candidates(project, queue, request.now, after, wanted)
            plan = policy.plan_claim([_message(doc) for doc in batch], request, queue, len(claimed))
            written, _ = self._apply(project, queue, plan, batch, request.dead_letter, request.now)
            won = plan.claimed
            if written < len(plan.claimed) + len(plan.moved):  # some lost a race: which are ours?
                mine = {"_id": {"$in": [m.id for m in won]}, "claim_id": request.claim_id}
                ours = {doc["_id"] for doc in self._messages.find(mine, {"_id": 1}, hint=BY_ID)}
                won = [m for m in won if m.id in ours]
            claimed.extend(won)
            if len(batch) < wanted:
                break
            after = batch[-1]["marker"]
        if claimed:  # written last: should this fail, the messages come back when the claim lapses
            expires = request.now + request.ttl
            self._claims.insert_one({
                "_id": request.claim_id, "project": project, "queue": queue, "ttl": request.ttl,
                "grace": request.grace, "created": request.now, "expires": expires,
                "purge_at": _purge_at(expires)})
        return claimed

    def _held(self, project: str, queue: str, claim_id: str, now: float) -> list[Document]:
        return self._find({"claim_id": claim_id, "project": project, "queue": queue,
                           "claim_expires": {"$gt": now}, "expires": {"$gt": now}}, BY_CLAIM)

    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        doc = self._claims.find_one({"_id": claim_id, "project": project, "queue": queue,
                                     "expires": {"$gt": now}}, hint=BY_ID)
        if doc is None:
            raise errors.ClaimDoesNotExist(claim_id, queue)
        claim = Claim(doc["_id"], doc["ttl"], doc["grace"], doc["created"], doc["expires"])
        return claim, [_message(held) for held in self._held(project, queue, claim_id, now)]

    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        result = self._claims.update_one(
            {"_id": claim_id, "project": project, "queue": queue, "expires": {"$gt": now}},
            {"$set": {"ttl": ttl, "grace": grace, "expires": now + ttl, "purge_at": _purge_at(now + ttl)}},
            hint=BY_ID)
        if result.matched_count == 0:
            raise errors.ClaimDoesNotExist(claim_id, queue)
        ops = []
        for doc in self._held(project, queue, claim_id, now):
            expires = policy.claimed_expiry(doc["expires"], now, ttl, grace)
            ops.append(UpdateOne(_unchanged(doc), {"$set": {
                "claim_expires": now + ttl, "expires": expires, "purge_at": _purge_at(expires)}}, hint=BY_ID))
        if ops:
            self._messages.bulk_write(ops, ordered=False)

    def release_claim(self, project: str, queue: str, claim_id: str, now: float) -> None:
        self._messages.update_many({"claim_id": claim_id, "project": project, "queue": queue,
                                    "claim_expires": {"$gt": now}}, {"$set": {"claim_expires": now}},
                                   hint=BY_CLAIM)
        self._claims.delete_one({"_id": claim_id, "project": project, "queue": queue}, hint=BY_ID)

    def release_message(self, project: str, queue: str, message_id: str, claim_id: str, now: float,
                        failure: Mapping[str, Any] | None, history_limit: int) -> None:
        for _ in range(CAS_ATTEMPTS):
            found = self._get(project, queue, [message_id], now)
            if not found:
                raise errors.MessageDoesNotExist(message_id, queue)
            live = self._claim_is_live(project, queue, claim_id, now)
            policy.check_claim_rules(_message(found[0]), claim_id, live, now)
            message = policy.released(_message(found[0]), failure, now, history_limit)
            if self._messages.update_one(_unchanged(found[0]), {"$set": {
                    "claim_expires": message.claim_expires, "failures": message.failures}},
                    hint=BY_ID).matched_count:
                return
        raise errors.StorageUnavailable(f"message {message_id} kept changing while being released")

    # -- background work ------------------------------------------------------

    def sweep_queue(self, project: str, queue: str, now: float, dead_letter: DeadLetterPolicy) -> SweepResult:
        scope = {"project": project, "queue": queue}
        passes: list[tuple[Document, str]] = [({"expires": {"$lte": now}}, BY_EXPIRY)]
        if dead_letter.counts_claims:  # exhausted with a lapsed claim; never-claimed ones cannot be
            passes.append(({"claim_expires": {"$gt": 0, "$lte": now}, "expires": {"$gt": now},
                            "claim_count": {"$gte": dead_letter.max_claim_count}}, BY_CLAIM_EXPIRY))
        moved = discarded = 0
        for condition, index in passes:
            while True:
                batch = self._find({**scope, **condition}, index, SWEEP_BATCH, _WITHOUT_PAYLOAD)
                plan = policy.plan_sweep([_message(doc) for doc in batch], queue, now, dead_letter)
                written, deleted = self._apply(project, queue, plan, batch, dead_letter, now)
                moved, discarded = moved + written, discarded + deleted
                if len(batch) < SWEEP_BATCH:
                    break
        self._claims.delete_many({**scope, "expires": {"$lte": now}}, hint=BY_EXPIRY)
        return SweepResult(dead_lettered=moved, discarded=discarded)

    # -- versioned records ----------------------------------------------------

    def get_record(self, project: str, kind: str, key: str) -> Record | None:
        doc = self._database().records.find_one({"kind": kind, "project": project, "key": key})
        return _record(doc) if doc else None

    def put_record(self, project: str, kind: str, key: str, value: Mapping[str, Any],
                   expected_version: int | None) -> int:
        records, scope = self._database().records, {"kind": kind, "project": project, "key": key}
        conflict = errors.Conflict(f"{kind} {key} was changed by someone else; read it again.")
        if expected_version is None:
            try:
                records.insert_one({**scope, "value": json.dumps(value), "version": 1})
            except DuplicateKeyError:
                raise conflict from None
            return 1
        if records.update_one({**scope, "version": expected_version},
                              {"$set": {"value": json.dumps(value)}, "$inc": {"version": 1}}).matched_count:
            return expected_version + 1
        raise conflict

    def delete_record(self, project: str, kind: str, key: str, expected_version: int | None = None) -> bool:
        query: Document = {"kind": kind, "project": project, "key": key}
        if expected_version is not None:
            query["version"] = expected_version
        return self._database().records.delete_one(query).deleted_count == 1

    def list_records(self, project: str, kind: str, *, prefix: str = "", marker: str | None = None,
                     limit: int = 1000) -> list[Record]:
        keys = {"$gt": marker or "", "$regex": "^" + re.escape(prefix)}
        found = self._database().records.find({"kind": kind, "project": project, "key": keys})
        return [_record(doc) for doc in found.sort("key").limit(limit)]

    def record_projects(self, kind: str) -> list[str]:
        return sorted(self._database().records.distinct("project", {"kind": kind}))

    # -- health ---------------------------------------------------------------

    def ping(self) -> bool:
        try:
            self._database().client.admin.command("ping")
            return True
        except PyMongoError:
            return False


for _name in sorted(Storage.__abstractmethods__ - {"ping"}) + [
        "get_record", "put_record", "delete_record", "list_records", "record_projects"]:
    setattr(MongoStorage, _name, _translated(getattr(MongoStorage, _name)))
