"""MongoDB driver: every change of a message is one single-document write guarded by its state.

URIs, collections, documents and indexes: :mod:`~zaqar_lite.storage.mongodb.layout`;
the client, index creation and the one ``StorageUnavailable`` translation (a
decorator on every method that talks to the server):
:mod:`~zaqar_lite.storage.mongodb.client`; queue records and the marker counter:
:mod:`~zaqar_lite.storage.mongodb.queues`; versioned records:
:mod:`~zaqar_lite.storage.mongodb.records`; remembered ``dedup_id``:
:mod:`~zaqar_lite.storage.mongodb.dedup`. An unreachable server fails within
seconds (``StorageUnavailable``, a 503); pymongo reconnects by itself. Indexes
are created at startup, or, if the server is down then, by the first operation
that reaches it.

Atomicity: the claim, sweep, delete and release loops are those of
:class:`~zaqar_lite.storage.base.PlannedClaimStorage`; the policy plans on messages as
read, and each planned change is one single-document write filtered on that read
state (:func:`~zaqar_lite.storage.mongodb.layout.unchanged`), so a plan made on a
stale read matches nothing: a message goes to at most one claim, the claim count
is written by the update that claims, and a move to another queue
(dead-lettering, or a redrive: one update rewriting ``queue`` and ``marker``,
resetting the claim and setting the count, expiry and provenance) happens once.
A post of several messages is one transaction on replica sets and sharded
clusters; on a standalone server it is one unordered ``insert_many``, which a
crash can cut short, and whose retry may meet its own first try
(``_insert_once``). A message's ``dedup_id`` is remembered first, by one guarded
upsert into ``dedup`` (unique per queue), so of two concurrent posts of one id one
stores; a failed insert forgets the ids it remembered, but a crash between the
two leaves the id answering with a message never stored until its window ends.

Order: claims and pops are FIFO by marker; markers are reserved in post order, so
two concurrent posts may become visible in the other order for a moment.

Expiry: reads filter on ``expires``; the sweeper moves the expired messages of
``_dead_letter_on_expiry`` queues, and discards the others, within a second; the
TTL monitor removes only what no sweeper handled for an hour.

Queries name their index (``hint``): the plan is then fixed, as SQLite's
``INDEXED BY``, and servers whose planner gives up between candidate indexes
(SecantusDB) still use one. A hint naming a dropped index re-creates the indexes.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence

from pymongo import ASCENDING, DESCENDING, DeleteOne, UpdateOne
from pymongo.errors import BulkWriteError

from zaqar_lite import errors
from zaqar_lite.claims import policy
from zaqar_lite.models import Claim, ClaimRequest, DeadLetterPolicy, Message, Move, QueueStats
from zaqar_lite.storage.base import Applied, PlannedClaimStorage
from zaqar_lite.storage.mongodb.client import bounded, translated
from zaqar_lite.storage.mongodb.dedup import MongoDedup
from zaqar_lite.storage.mongodb.layout import (
    BY_CLAIM,
    BY_CLAIM_EXPIRY,
    BY_EXPIRY,
    BY_GROUP,
    BY_ID,
    BY_MARKER,
    CANDIDATES,
    WITHOUT_PAYLOAD,
    Document,
    message_document,
    message_from,
    purge_at,
    unchanged,
)
from zaqar_lite.storage.mongodb.queues import MongoQueues
from zaqar_lite.storage.mongodb.records import MongoRecords

SWEEP_BATCH = 500
#: MongoDB's error code of a unique index refusing a write
DUPLICATE_KEY = 11000


@bounded
class MongoStorage(MongoQueues, MongoRecords, MongoDedup, PlannedClaimStorage):
    """MongoDB driver; one client per process (a forked worker opens its own)."""

    name = "mongodb"
    #: markers are reserved (or taken from the clock) before the write lands
    visibility_lag = 2.0

    # -- queues (the rest: queues.py) ------------------------------------------

    @translated
    def delete_queue(self, project: str, queue: str) -> None:
        # The record first: a post racing this delete then re-creates the queue
        # rather than leaving messages behind a deleted record.
        self._database().queues.delete_one({"project": project, "name": queue})
        self._forget_queue(project, queue)
        self._purge(project, queue)

    # -- messages -------------------------------------------------------------

    @translated
    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float) -> list[str]:
        answered = [self._remembered(project, queue, m, now) for m in messages]
        fresh = [m for m, first in zip(messages, answered, strict=True) if first is None]
        try:
            self._insert(project, queue, fresh, now)
        except BaseException:
            # so that a retry of this post stores its messages rather than answering with ids never stored
            self._forget(project, queue, fresh)
            raise
        return [first or m.id for m, first in zip(messages, answered, strict=True)]

    def _insert(self, project: str, queue: str, messages: Sequence[Message], now: float) -> None:
        if not messages:
            return
        first = self._reserve_markers(project, queue, len(messages), now)
        docs = [message_document(project, queue, m, first + i) for i, m in enumerate(messages)]
        if len(docs) > 1 and self._transactions():
            with self._client.start_session() as session, session.start_transaction():
                self._messages.insert_many(docs, session=session)
        else:
            self._insert_once(docs)
        self._due_by(project, queue, min(m.expires for m in messages))

    def _insert_once(self, docs: Sequence[Document]) -> None:
        """Insert ``docs`` (unordered); a duplicate key on a document's own id counts as stored when
        the stored document is this insert's (same queue and marker, reserved for it alone).

        pymongo retries an insert whose answer it lost; a server that does not recognise the retry
        (its record of the first try lost to a restart, or the two racing after a pause) answers the
        documents the first try stored with duplicate keys. Message ids are chosen by the driver, so
        only that first try can have stored them; any other clash is still an error.
        """
        try:
            self._messages.insert_many(docs, ordered=False)
        except BulkWriteError as exc:
            clashes = exc.details.get("writeErrors", [])
            if not clashes or any(e.get("code") != DUPLICATE_KEY for e in clashes):
                raise
            fields = ("project", "queue", "marker")
            mine = {d["_id"]: tuple(d[k] for k in fields) for d in (docs[e["index"]] for e in clashes)}
            stored = self._messages.find({"_id": {"$in": list(mine)}}, dict.fromkeys(fields, 1))
            if {d["_id"] for d in stored if tuple(d[k] for k in fields) == mine[d["_id"]]} != set(mine):
                raise

    @translated
    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        query: Document = {"project": project, "queue": queue, "marker": {"$gt": marker or 0},
                           "expires": {"$gt": now}}
        if not include_claimed:
            query["claim_expires"] = {"$lte": now}
        if not include_delayed and include_claimed:  # a claimed message is claimed, not delayed
            query["$or"] = [{"delay_until": {"$lte": now}}, {"claim_expires": {"$gt": now}}]
        elif not include_delayed:
            query["delay_until"] = {"$lte": now}
        if exclude_client_id is not None:
            query["client_id"] = {"$ne": exclude_client_id}
        return [message_from(doc) for doc in self._find(query, BY_MARKER, limit)]

    @translated
    def get_messages(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        return [message_from(doc) for doc in self._find(
            {"_id": {"$in": list(ids)}, "project": project, "queue": queue, "expires": {"$gt": now}}, BY_ID)]

    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        popped: list[Message] = []
        after = 0
        while len(popped) < limit:
            wanted = limit - len(popped)
            batch = self._visible_candidates(project, queue, now, after, wanted)
            visible = [m for m in batch if policy.is_visible(m, now)]
            popped += self._delete_returning(project, queue,
                                             self._groups_only(project, queue, visible, now, popped)[:wanted])
            if len(batch) < wanted:
                break
            after = batch[-1].marker
        return popped

    @translated
    def _delete_returning(self, project: str, queue: str, messages: Sequence[Message]) -> list[Message]:
        gone: list[Message] = []
        lost: set[str] = set()  # groups of which another popped a message: the rest of each waits
        for m in messages:
            if m.group is not None and m.group in lost:
                continue
            doc = self._messages.find_one_and_delete(unchanged(project, queue, m), hint=BY_ID)
            if doc is not None:
                gone.append(message_from(doc))
            elif m.group is not None:
                lost.add(m.group)
        return gone

    def _purge(self, project: str, queue: str) -> None:
        self._messages.delete_many({"project": project, "queue": queue}, hint=BY_MARKER)
        self._claims.delete_many({"project": project, "queue": queue}, hint=BY_EXPIRY)

    @translated
    def purge_messages(self, project: str, queue: str) -> None:
        self._purge(project, queue)

    @translated
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
                          oldest=message_from(ends[0]) if ends[0] else None,
                          newest=message_from(ends[1]) if ends[1] else None)

    # -- claims ---------------------------------------------------------------

    def _move_ops(self, project: str, target: str, moves: Sequence[tuple[Document, Message]],
                  now: float, new_failures: Collection[str] = ()) -> tuple[int, list[UpdateOne]]:
        """Return the guarded updates that move messages into ``target``, and the first marker they take.

        Each pair is the filter a message must still match and the message as
        it must be stored; consecutive markers of ``target`` (created if
        missing) are reserved for them in order. One update per message
        rewrites its queue and marker, resets its claim and sets its count,
        expiry and provenance; a moved message leaves its group. The messages
        named in ``new_failures`` have their failure history rewritten too (a
        reject appends to it; a sweep reads messages without it).
        """
        if not moves:
            return 0, []
        first = self._reserve_markers(project, target, len(moves), now)
        return first, [UpdateOne(guard, {"$set": {
            "queue": target, "marker": first + offset, "claim_id": None, "claim_expires": 0.0,
            "claim_count": m.claim_count, "delay_until": 0.0, "expires": m.expires,
            "purge_at": purge_at(m.expires), "dead_letter": m.dead_letter,
            **({"failures": m.failures} if m.id in new_failures else {}),
        }, "$unset": {"group": ""}}, hint=BY_ID) for offset, (guard, m) in enumerate(moves)]

    @translated
    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        # The filter pins what still_movable compares; a read state that is itself
        # claimed or expired at now could only match a message that is too.
        wanted = [mv for mv in moves if policy.still_movable(mv.read, mv.read, now)]
        first, ops = self._move_ops(project, target_queue, [
            (unchanged(project, queue, mv.read), mv.moved) for mv in wanted], now)
        if not ops:
            return []
        matched = self._messages.bulk_write(ops, ordered=False).matched_count
        self._due_by(project, target_queue, min(mv.moved.expires for mv in wanted))
        if matched == len(ops):
            return [mv.read.id for mv in wanted]
        arrived = {doc["_id"] for doc in self._messages.find(
            {"_id": {"$in": [mv.read.id for mv in wanted]}, "project": project, "queue": target_queue,
             "marker": {"$gte": first, "$lt": first + len(ops)}}, {"_id": 1}, hint=BY_ID)}
        return [mv.read.id for mv in wanted if mv.read.id in arrived]

    def _held(self, project: str, queue: str, claim_id: str, now: float) -> list[Message]:
        return [message_from(doc) for doc in self._find({
            "claim_id": claim_id, "project": project, "queue": queue,
            "claim_expires": {"$gt": now}, "expires": {"$gt": now}}, BY_CLAIM)]

    @translated
    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        doc = self._claims.find_one({"_id": claim_id, "project": project, "queue": queue,
                                     "expires": {"$gt": now}}, hint=BY_ID)
        if doc is None:
            raise errors.ClaimDoesNotExist(claim_id, queue)
        claim = Claim(doc["_id"], doc["ttl"], doc["grace"], doc["created"], doc["expires"])
        return claim, self._held(project, queue, claim_id, now)

    @translated
    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        renewed = policy.renewed_claim(claim_id, now, ttl, grace)
        result = self._claims.update_one(
            {"_id": claim_id, "project": project, "queue": queue, "expires": {"$gt": now}},
            {"$set": {"ttl": renewed.ttl, "grace": renewed.grace, "created": renewed.created,
                      "expires": renewed.expires, "purge_at": purge_at(renewed.expires)}},
            hint=BY_ID)
        if result.matched_count == 0:
            raise errors.ClaimDoesNotExist(claim_id, queue)
        held = self._held(project, queue, claim_id, now)
        self._write_claim_ends(project, queue, held, [policy.claim_renewed(m, now, ttl, grace) for m in held])

    def _write_claim_ends(self, project: str, queue: str, read: Sequence[Message],
                          changed: Sequence[Message]) -> None:
        """Store the claim end, expiry, delay and count of messages, each guarded by the state read."""
        ops = [UpdateOne(unchanged(project, queue, old), {"$set": {
            "claim_expires": m.claim_expires, "expires": m.expires, "purge_at": purge_at(m.expires),
            "delay_until": m.delay_until, "claim_count": m.claim_count}}, hint=BY_ID)
            for m, old in zip(changed, read, strict=True)]
        if ops:
            self._messages.bulk_write(ops, ordered=False)

    @translated
    def release_claim(self, project: str, queue: str, claim_id: str, now: float, *,
                      undo: bool = False) -> None:
        ended = policy.claim_undone if undo else policy.claim_released
        # written one by one: an undone count, or a _retry_backoff wait that starts now
        held = self._held(project, queue, claim_id, now)
        changed = [m for m in held if undo or m.delay_until]
        self._write_claim_ends(project, queue, changed, [ended(m, now) for m in changed])
        self._messages.update_many({"claim_id": claim_id, "project": project, "queue": queue,
                                    "claim_expires": {"$gt": now}}, {"$set": {"claim_expires": now}},
                                   hint=BY_CLAIM)
        self._claims.delete_one({"_id": claim_id, "project": project, "queue": queue}, hint=BY_ID)
        if held:  # a released message whose claims are used up is the sweep's now
            self._due_by(project, queue, now)

    # -- primitives of the loops in storage.base (each write guarded by the state read) --------

    @translated
    def _visible_candidates(self, project: str, queue: str, now: float, after: int,
                            limit: int) -> list[Message]:
        # a prefilter of policy.is_visible through the claim_candidates index: the ready
        # range (delay_until = 0) and the matured one (0 < delay_until <= now)
        scope = {"project": project, "queue": queue, "marker": {"$gt": after},
                 "expires": {"$gt": now}, "claim_expires": {"$lte": now}}
        found = (self._find({**scope, "delay_until": 0}, CANDIDATES, limit)
                 + self._find({**scope, "delay_until": {"$gt": 0, "$lte": now}}, CANDIDATES, limit))
        return [message_from(doc) for doc in sorted(found, key=lambda doc: doc["marker"])[:limit]]

    def _sweep_candidates(self, project: str, queue: str, now: float,
                          dead_letter: DeadLetterPolicy) -> Iterator[list[Message]]:
        # a prefilter of policy.is_swept: the expired, then the exhausted with a lapsed
        # claim (never-claimed ones cannot be exhausted); each query repeated until short
        passes: list[tuple[Document, str]] = [({"expires": {"$lte": now}}, BY_EXPIRY)]
        if dead_letter.counts_claims:
            passes.append(({"claim_expires": {"$gt": 0, "$lte": now}, "expires": {"$gt": now},
                            "claim_count": {"$gte": dead_letter.max_claim_count}}, BY_CLAIM_EXPIRY))
        for condition, index in passes:
            while True:
                batch = self._sweep_page({"project": project, "queue": queue, **condition}, index)
                yield batch
                if len(batch) < SWEEP_BATCH:
                    break

    @translated
    def _sweep_page(self, query: Document, index: str) -> list[Message]:
        return [message_from(doc) for doc in self._find(query, index, SWEEP_BATCH, WITHOUT_PAYLOAD)]

    @translated
    def _apply_plan(self, project: str, queue: str, plan: policy.Plan, read: Sequence[Message],
                    dead_letter: DeadLetterPolicy, now: float) -> Applied:
        """Write a plan, each change guarded by the state it was planned on, in one bulk."""
        state = {m.id: unchanged(project, queue, m) for m in read}
        ops: list[UpdateOne | DeleteOne] = [UpdateOne(state[m.id], {"$set": {
            "claim_id": m.claim_id, "claim_expires": m.claim_expires, "claim_count": m.claim_count,
            "expires": m.expires, "purge_at": purge_at(m.expires), "delay_until": m.delay_until,
        }}, hint=BY_ID) for m in plan.claimed]
        before = {m.id: m.failures for m in read}
        target = dead_letter.queue or queue
        first, move_ops = self._move_ops(project, target, [(state[m.id], m) for m in plan.moved], now,
                                         {m.id for m in plan.moved if m.failures != before[m.id]})
        ops += move_ops
        ops += [DeleteOne(state[message_id], hint=BY_ID) for message_id in plan.deleted]
        if not ops:
            return Applied([], 0, 0)
        result = self._messages.bulk_write(ops, ordered=False)
        if plan.moved:
            self._due_by(project, target, min(m.expires for m in plan.moved))
        won, moved = plan.claimed, len(plan.moved)
        # Fewer matches: another process won some, or a retried write (its first try applied, its
        # answer lost) matched nothing: read back which claims and moves took effect.
        if result.matched_count < len(plan.claimed) + len(plan.moved):
            if won:
                mine = {"_id": {"$in": [m.id for m in won]}, "claim_id": won[0].claim_id}
                ours = {doc["_id"] for doc in self._messages.find(mine, {"_id": 1}, hint=BY_ID)}
                won = [m for m in won if m.id in ours]
            if moved:
                moved = len(list(self._messages.find(
                    {"_id": {"$in": [m.id for m in plan.moved]}, "project": project, "queue": target,
                     "marker": {"$gte": first, "$lt": first + moved}}, {"_id": 1}, hint=BY_ID)))
        return Applied(won, moved, result.deleted_count)

    @translated
    def _group_members(self, project: str, queue: str, names: set[str]) -> dict[str, list[Message]]:
        found = {name: [message_from(doc) for doc in self._messages.find(
            {"project": project, "queue": queue, "group": name}, sort=[("marker", ASCENDING)], hint=BY_GROUP)]
            for name in names}
        return {name: stored for name, stored in found.items() if stored}

    @translated
    def _store_claim(self, project: str, queue: str, request: ClaimRequest) -> None:
        expires = request.now + request.ttl
        self._claims.insert_one({
            "_id": request.claim_id, "project": project, "queue": queue, "ttl": request.ttl,
            "grace": request.grace, "created": request.now, "expires": expires,
            "purge_at": purge_at(expires)})
        self._due_by(project, queue, expires)

    @translated
    def _drop_lapsed_claims(self, project: str, queue: str, now: float) -> None:
        self._claims.delete_many({"project": project, "queue": queue, "expires": {"$lte": now}},
                                 hint=BY_EXPIRY)

    @translated
    def _message_and_claim(self, project: str, queue: str, message_id: str, claim_id: str | None,
                           now: float) -> tuple[Message | None, bool]:
        found = self.get_messages(project, queue, [message_id], now)
        live = claim_id is not None and self._claims.count_documents({
            "_id": claim_id, "project": project, "queue": queue, "expires": {"$gt": now}}, hint=BY_ID) > 0
        return (found[0] if found else None), live

    @translated
    def _delete_unchanged(self, project: str, queue: str, messages: Sequence[Message]) -> set[str]:
        ids = {m.id for m in messages}
        if not messages or self._messages.bulk_write(
                [DeleteOne(unchanged(project, queue, m), hint=BY_ID) for m in messages],
                ordered=False).deleted_count == len(messages):
            return ids
        # some were changed (or deleted) since read: those still there are not deleted
        left = self._messages.find({"_id": {"$in": list(ids)}, "project": project, "queue": queue},
                                   {"_id": 1}, hint=BY_ID)
        return ids - {doc["_id"] for doc in left}

    @translated
    def _write_released(self, project: str, queue: str, read: Message, released: Message) -> bool:
        written = bool(self._messages.update_one(unchanged(project, queue, read), {"$set": {
            "claim_expires": released.claim_expires, "failures": released.failures,
            "claim_count": released.claim_count, "delay_until": released.delay_until}},
            hint=BY_ID).matched_count)
        if written:
            self._due_by(project, queue, released.claim_expires or 0.0)
        return written

    @translated
    def _write_edited(self, project: str, queue: str, read: Message, edited: Message) -> bool:
        # guarded by the whole state read: claim, expiry, delay and body (another edit changes one)
        guard = {**unchanged(project, queue, read), "delay_until": read.delay_until,
                 "body": json.dumps(read.body)}
        written = bool(self._messages.update_one(guard, {"$set": {
            "body": json.dumps(edited.body), "expires": edited.expires, "purge_at": purge_at(edited.expires),
            "delay_until": edited.delay_until}}, hint=BY_ID).matched_count)
        if written:
            self._due_by(project, queue, edited.expires)
        return written
