"""Redis driver: every state change is one Lua script, run atomically by the server.

URIs: ``redis://[[user]:password@]host:port/db`` or ``rediss://...`` (TLS); redis-py
``from_url`` query options (``?socket_timeout=2``) override
:data:`~zaqar_lite.storage.redis.client.DEFAULTS`. A Redis Cluster:
``redis+cluster://host:port,host:port/`` (``rediss+cluster://``), where each script
runs on the primary of its keys' slot; ``wait_replicas``/``wait_timeout`` make a write
wait for its replicas (:func:`~zaqar_lite.storage.redis.layout.parse_uri`).

Keys and values are laid out as :mod:`zaqar_lite.storage.redis.layout` says.

A claim costs O(log n + k): its script first moves matured delayed messages and
lapsed claimed ones back to ``ready``, or to ``delayed`` when a lapsed claim left
a ``_retry_backoff`` wait (each once per delay or claim: amortised), then takes
the head of ``ready``, where a claimed or delayed message never is.
Claim order is strict FIFO by post order within a queue.

Queues, their metadata (posts and claims are planned from the metadata a
worker remembers, which the script checks is still stored) and what a worker
remembers per queue: :mod:`~zaqar_lite.storage.redis.queues`. Scripts,
connections and the one StorageUnavailable translation:
:mod:`~zaqar_lite.storage.redis.client`; versioned records:
:mod:`~zaqar_lite.storage.redis.records`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import policy
from zaqar_lite.clock import iso_utc
from zaqar_lite.jsontext import ascii_text
from zaqar_lite.models import (
    NO_DEAD_LETTER,
    Claim,
    ClaimRequest,
    ClaimResult,
    DeadLetterPolicy,
    Message,
    Move,
    QueueStats,
    SweepResult,
)
from zaqar_lite.storage.base import ClaimPlan, PostPlan, Storage
from zaqar_lite.storage.redis.layout import (
    QUEUE_KEYS,
    backoff_args,
    from_reply,
    guard,
    message_key,
    opt,
    optional_pairs,
    record_head,
    stamp,
    to_message,
)
from zaqar_lite.storage.redis.queues import STALE, RedisQueues, Stale
from zaqar_lite.storage.redis.records import RedisRecords

LOG = logging.getLogger(__name__)
SWEEP_BATCH = 1000
#: claim.lua's max claim count, DLQ name and moved expiry when claims are not counted (nothing moves)
_NOT_COUNTED = ("", "", "")
#: what delete.lua and release_message.lua answer for each claim rule broken, as (message id, claim id)
_RULES: dict[str, Callable[[str, str], errors.ZaqarLiteError]] = {
    "claimed": lambda mid, cid: errors.MessageIsClaimed(mid),
    "invalid_claim": lambda mid, cid: errors.InvalidClaim(cid),
    "not_claimed": lambda mid, cid: errors.MessageNotClaimed(mid),
    "claimed_by": lambda mid, cid: errors.MessageIsClaimedBy(mid, cid),
}


class RedisStorage(RedisQueues, RedisRecords, Storage):
    """Redis driver; the connection (:mod:`~zaqar_lite.storage.redis.client`) is one pool per instance."""

    name = "redis"
    remembers_queues = True

    # -- planned posts and claims (queues and their metadata: queues.py) -------

    def post_planned(self, project: str, queue: str, plan: PostPlan, now: float) -> list[str]:
        """Plan from remembered metadata; post.lua checks it is still what is stored (see the module)."""
        return self._planned(project, queue, plan, self._post, now)

    def claim_planned(self, project: str, queue: str, plan: ClaimPlan) -> ClaimResult:
        """Plan from remembered metadata; claim.lua checks it is still what is stored (see the module)."""
        return self._planned(project, queue, plan, self._claim)

    # -- messages -------------------------------------------------------------

    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float) -> list[str]:
        return self._post(project, queue, messages, None, now)

    def _post(self, project: str, queue: str, messages: Sequence[Message], metadata_version: str | None,
              now: float) -> list[str]:
        """Run post.lua; with ``metadata_version``, only while the stored metadata text is that.

        post.lua also wakes the claims waiting on the queue (the wake-up payload, "project\\nqueue",
        made by the script from the project sent and the queue's name): no round trip of its own.
        Each value is sent once: a message created ``now`` sends '' for its creation time.
        """
        args: list[Any] = [queue, stamp(now), *guard(metadata_version), project]
        for m in messages:  # what every message stores, what post.lua reads, then the other fields set
            others = optional_pairs(m)
            args += [m.id, ascii_text(m.body), "" if m.created == now else stamp(m.created),
                     stamp(m.expires), stamp(m.delay_until), str(m.claim_count),
                     "1" if m.dlq_eligible else "0", opt(m.claim_expires, stamp), m.dedup_id or "",
                     stamp(m.dedup_until) if m.dedup_id else "", m.group or "", str(len(others)), *others]
        # a queue that existed when planned was registered before it was created
        answered = self._run("post", project, queue, args, register=not metadata_version)
        if answered == STALE:
            raise Stale(queue)
        return list(answered)

    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        reply = self._run("list", project, queue, [
            str(marker or 0), str(limit), stamp(now), "1" if include_claimed else "0",
            "1" if include_delayed else "0", "0" if exclude_client_id is None else "1",
            exclude_client_id or ""])
        return [from_reply(r) for r in reply]

    def _read(self, project: str, ids: Sequence[str]) -> list[tuple[str, dict[str, str]]]:
        with self._translate_errors(), self.client.pipeline(transaction=False) as pipe:
            for message_id in ids:
                pipe.hgetall(message_key(project, message_id))
            return list(zip(ids, pipe.execute(), strict=True))

    def get_messages(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        found = {i: to_message(i, f) for i, f in self._read(project, list(dict.fromkeys(ids)))
                 if f.get("q") == queue and float(f["expires"]) > now}
        return sorted(found.values(), key=lambda m: m.marker)

    def delete_message(self, project: str, queue: str, message_id: str, claim_id: str | None,
                       now: float) -> None:
        outcome = self._run("delete", project, queue, [
            stamp(now), queue, message_id, "0" if claim_id is None else "1", claim_id or ""])
        if outcome != "ok":
            raise _RULES[outcome](message_id, claim_id or "")

    def delete_messages(self, project: str, queue: str, ids: Sequence[str],
                        claim_ids: Sequence[str] | None, now: float) -> None:
        guard = ["-1"] if claim_ids is None else [str(len(claim_ids)), *claim_ids]
        kept = self._run("bulk_delete", project, queue, [stamp(now), queue, *guard, *ids])
        if kept:
            raise errors.MessageIsClaimedBy(kept, ",".join(claim_ids or ()))

    def edit_delayed_message(self, project: str, queue: str, message_id: str, changes: Mapping[str, Any],
                             now: float) -> Message:
        expires, delay_until = policy.edit_times(0.0, 0.0, changes, now)
        reply = self._run("edit", project, queue, [
            stamp(now), queue, message_id, "1" if "body" in changes else "0", json.dumps(changes.get("body")),
            stamp(expires) if "ttl" in changes else "", stamp(delay_until) if "delay" in changes else ""])
        if reply[0] == "no_message":
            raise errors.MessageDoesNotExist(message_id, queue)
        message = from_reply(reply[1:])
        if reply[0] == "refused":
            policy.check_editable(message, now)  # names the reason edit.lua refused for
            raise errors.MessageNotEditable(message_id, "it changed while being edited")
        return message

    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        return [from_reply(r) for r in self._run("pop", project, queue, [stamp(now), str(limit)])]

    def purge_messages(self, project: str, queue: str) -> None:
        self._run("purge", project, queue, [queue, "0"])

    def queue_stats(self, project: str, queue: str, now: float) -> QueueStats:
        claimed, delayed, total, oldest, newest = self._run("stats", project, queue, [stamp(now)])
        return QueueStats(claimed=claimed, delayed=delayed, free=total - claimed - delayed,
                          oldest=from_reply(oldest) if oldest else None,
                          newest=from_reply(newest) if newest else None)

    def next_visible_at(self, project: str, queue: str, now: float) -> float | None:
        # the lowest scores of the delayed set (delay ends) and the claimed set (claim ends)
        keys = self._queue_names(project, queue)[2]
        with self._translate_errors(), self.client.pipeline(transaction=False) as pipe:
            for kind in ("delayed", "claimed"):
                pipe.zrangebyscore(keys[QUEUE_KEYS.index(kind)], f"({stamp(now)}", "+inf",
                                   start=0, num=1, withscores=True)
            ends = [found[0][1] for found in pipe.execute() if found]
        return min(ends, default=None)

    # -- claims ---------------------------------------------------------------

    @staticmethod
    def _dead_letter_args(now: float, dead_letter: DeadLetterPolicy) -> list[str]:
        """Return the ARGV both claim.lua and sweep.lua take: max count, DLQ name, moved expiry."""
        return [str(dead_letter.max_claim_count) if dead_letter.counts_claims else "",
                dead_letter.queue or "",
                stamp(now + dead_letter.messages_ttl) if dead_letter.messages_ttl else ""]

    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> ClaimResult:
        return self._claim(project, queue, request, None)

    def _claim(self, project: str, queue: str, request: ClaimRequest,
               metadata_version: str | None) -> ClaimResult:
        """Run claim.lua; with ``metadata_version``, only while the stored metadata text is that."""
        now, dead_letter = request.now, request.dead_letter
        # the provenance's head, the DLQ's name and a moved message's expiry are read only by a move,
        # and a claim that counts nothing moves nothing: it sends none of them
        head = (record_head(queue, policy.REASON_MAX_CLAIMS, now, dead_letter)
                if dead_letter.counts_claims else "")
        reply = self._run("claim", project, queue, [
            stamp(now), request.claim_id, str(request.limit), stamp(now + request.ttl),
            stamp(now + request.ttl + request.grace), str(request.ttl), str(request.grace),
            *(self._dead_letter_args(now, dead_letter) if head else _NOT_COUNTED), head,
            *guard(metadata_version),
            *backoff_args(request.backoff), *map(stamp, request.draws)],
            dead_letter_queue=dead_letter.queue if head else None)  # its keys only for a move
        if reply == STALE:
            raise Stale(queue)
        moved, deleted, claimed = reply
        return ClaimResult([from_reply(r) for r in claimed], dead_lettered=moved, discarded=deleted)

    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        prefix = self._queue_names(project, queue)[1]
        with self._translate_errors(), self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(prefix + "c:" + claim_id).smembers(prefix + "cm:" + claim_id)
            record, members = pipe.execute()
        if not record or float(record["expires"]) <= now:
            raise errors.ClaimDoesNotExist(claim_id, queue)
        claim = Claim(claim_id, int(record["ttl"]), int(record["grace"]), float(record["created"]),
                      float(record["expires"]))
        held = [to_message(i, f) for i, f in self._read(project, sorted(members))
                if f.get("q") == queue and f.get("claim_id") == claim_id
                and float(f.get("claim_expires", 0)) > now and float(f["expires"]) > now]
        return claim, sorted(held, key=lambda m: m.marker)

    def renew_claim(self, project: str, queue: str, claim_id: str, now: float, ttl: int, grace: int) -> None:
        renewed = policy.renewed_claim(claim_id, now, ttl, grace)
        done = self._run("renew", project, queue, [
            stamp(now), claim_id, stamp(renewed.expires), stamp(now + ttl + grace), str(renewed.ttl),
            str(renewed.grace), queue, stamp(renewed.created)])
        if not done:
            raise errors.ClaimDoesNotExist(claim_id, queue)

    def release_claim(self, project: str, queue: str, claim_id: str, now: float, *,
                      undo: bool = False) -> None:
        self._run("release_claim", project, queue, [stamp(now), claim_id, queue, "1" if undo else "",
                                                    project])

    def release_message(self, project: str, queue: str, message_id: str, claim_id: str, now: float,
                        failure: Mapping[str, Any] | None, history_limit: int,
                        delay: float | None = None, *, outcome: str = policy.RETRY,
                        dead_letter: DeadLetterPolicy = NO_DEAD_LETTER) -> SweepResult:
        entry = failure or {}
        reason = [json.dumps(iso_utc(now)), json.dumps(entry.get("error_type")),
                  json.dumps(entry.get("error")), str(history_limit)]
        if outcome == policy.REJECT:
            answer = self._run("reject", project, queue, [
                stamp(now), queue, message_id, claim_id, *reason,
                *self._dead_letter_args(now, dead_letter)[1:],
                record_head(queue, policy.REASON_REJECTED, now, dead_letter), project],
                dead_letter_queue=dead_letter.queue or queue)
        else:
            if outcome == policy.POSTPONE and delay is None:
                delay = 0  # a postpone never takes the queue's backoff (policy.released)
            answer = self._run("release_message", project, queue, [
                stamp(now), queue, message_id, claim_id, "0" if failure is None else "1", *reason,
                opt(delay, stamp), project, outcome])
        if answer == "no_message":
            raise errors.MessageDoesNotExist(message_id, queue)
        if answer in _RULES:
            raise _RULES[answer](message_id, claim_id or "")
        return SweepResult(dead_lettered=int(answer == "moved"), discarded=int(answer == "deleted"))

    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        if not moves:
            return []
        args = [stamp(now), queue, target_queue]
        for move in moves:
            read, moved = move.read, move.moved
            args += [read.id, read.claim_id or "", opt(read.claim_expires, stamp), str(read.claim_count),
                     stamp(read.expires), str(moved.claim_count), stamp(moved.expires),
                     json.dumps(moved.dead_letter) if moved.dead_letter else ""]
        return list(self._run("redrive", project, queue, args, dead_letter_queue=target_queue))

    # -- background work ------------------------------------------------------

    def sweep_queue(self, project: str, queue: str, now: float, dead_letter: DeadLetterPolicy) -> SweepResult:
        args = [stamp(now), *self._dead_letter_args(now, dead_letter),
                "1" if dead_letter.on_expiry else "0",
                record_head(queue, policy.REASON_EXPIRED, now, dead_letter),
                record_head(queue, policy.REASON_MAX_CLAIMS, now, dead_letter), str(SWEEP_BATCH)]
        moved = discarded = 0
        more = True
        while more:
            step_moved, step_discarded, more = self._run(
                "sweep", project, queue, args, dead_letter_queue=dead_letter.queue or queue, remember=False)
            moved, discarded = moved + step_moved, discarded + step_discarded
        return SweepResult(dead_lettered=moved, discarded=discarded)
