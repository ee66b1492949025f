"""The rules every history must keep once the faults have healed (docs/faults.rst, "The checker").

The workload posts numbered messages to a queue with ``_max_claim_count`` and a dead-letter
queue, claims them, deletes, releases or abandons each one, and reads both queues at the end
(the ``read`` operation). An operation that ended ``info`` may or may not have happened: each
rule accepts both. A rule that finds a breach returns an :class:`Anomaly`.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from tests.faults.history import FAIL, INFO, OK, Op

#: the posts by body number: the operation and the id it got
Posted = dict[int, tuple[Op, str | None]]


@dataclasses.dataclass(frozen=True)
class Anomaly:
    kind: str
    detail: str


@dataclasses.dataclass(frozen=True)
class Held:
    """One claim's hold on one message."""

    op: Op
    claim_id: str
    claim_count: int

    @property
    def ttl(self) -> float:
        return float(self.op.value["ttl"])


def check(ops: Iterable[Op], *, max_claim_count: int, clock_margin: float = 0.0) -> list[Anomaly]:
    """Return every breach of the rules in a history (empty: the history is valid).

    Args:
        ops: the history, the final ``read`` included.
        max_claim_count: the source queue's ``_max_claim_count``.
        clock_margin: seconds by which the server's clock may have run ahead of the clients'
            (a clock step forward shortens every live claim by its size).
    """
    ops = list(ops)
    anomalies = _answers(ops)
    posted, post_anomalies = _posts(ops)
    anomalies += post_anomalies
    holds = _holds(ops)
    anomalies += _bodies(holds, posted)
    anomalies += _exclusive(holds, ops, clock_margin)
    anomalies += _counts(holds, max_claim_count)
    anomalies += _final(ops, posted, holds, max_claim_count)
    anomalies += _expiry(ops)
    return anomalies


def _answers(ops: list[Op]) -> list[Anomaly]:
    """A store fault is answered 503 within the client's timeout: never another 5xx, never silence."""
    found = []
    for op in ops:
        if op.status is not None and op.status >= 500 and op.status != 503:
            found.append(Anomaly("server-error",
                                 f"{op.process} {op.f} answered {op.status} at {op.invoke:.2f}"))
        elif op.outcome == INFO and op.status is None and "timeout" in str(op.value.get("error", "")).lower():
            found.append(Anomaly("hang", f"{op.process} {op.f} had no answer within the client's timeout "
                                         f"({op.invoke:.2f}-{op.complete:.2f})"))
    return found


def _posts(ops: list[Op]) -> tuple[Posted, list[Anomaly]]:
    """Return the posts by body number with the id they got, and the ids given twice."""
    posted: Posted = {}
    by_id: dict[str, int] = {}
    found = []
    for op in ops:
        if op.f != "post":
            continue
        n, message_id = op.value["n"], op.value.get("id")
        posted[n] = (op, message_id)
        if op.outcome == OK and message_id is not None:
            if message_id in by_id:
                found.append(Anomaly("duplicate-id",
                                     f"posts {by_id[message_id]} and {n} both got {message_id}"))
            by_id[message_id] = n
    return posted, found


def _holds(ops: list[Op]) -> dict[str, list[Held]]:
    """Return, per message id, every claim that handed it out, in the order the claims were sent."""
    holds: dict[str, list[Held]] = defaultdict(list)
    for op in sorted((o for o in ops if o.f == "claim" and o.outcome == OK), key=lambda o: o.invoke):
        for message in op.value["messages"]:
            holds[message["id"]].append(Held(op, op.value["claim_id"], message["claim_count"]))
    return holds


def _message_numbers(ops: list[Op]) -> dict[str, int]:
    numbers: dict[str, int] = {}
    for op in ops:
        if op.f == "claim" and op.outcome == OK:
            for message in op.value["messages"]:
                numbers[message["id"]] = message["n"]
        if op.f == "read" and op.outcome == OK:
            for message in op.value["queue"] + op.value["dlq"]:
                numbers[message["id"]] = message["n"]
    return numbers


def _bodies(holds: dict[str, list[Held]], posted: Posted) -> list[Anomaly]:
    """A claimed message is one that was posted (or may have been), with the body it was posted with."""
    found = []
    for message_id, held in holds.items():
        for hold in held:
            n = next(m["n"] for m in hold.op.value["messages"] if m["id"] == message_id)
            found += _body_matches(message_id, n, posted, f"claim {hold.claim_id}")
    return found


def _body_matches(message_id: str, n: Any, posted: Posted, where: str) -> list[Anomaly]:
    if n not in posted:
        return [Anomaly("phantom", f"{where} shows {message_id} with body {n}, which nobody posted")]
    op, posted_id = posted[n]
    if op.outcome == FAIL:
        return [Anomaly("refused-write-applied",
                        f"{where} shows {message_id}: its post was refused {op.status}")]
    if posted_id is not None and posted_id != message_id:
        return [Anomaly("wrong-body", f"{where} shows {message_id} with the body of {posted_id}")]
    return []


def _ended_by(ops: list[Op], message_id: str, claim_id: str, before: float) -> bool:
    """Return whether a release or delete of the message under the claim was sent before ``before``
    (and not refused)."""
    return any(op.f in ("release", "delete") and op.value["id"] == message_id
               and op.value["claim_id"] == claim_id and op.outcome != FAIL and op.invoke < before
               for op in ops)


def _exclusive(holds: dict[str, list[Held]], ops: list[Op], margin: float) -> list[Anomaly]:
    """No two live claims hold a message at once, and a deleted message is never handed out again.

    A claim is granted at some instant between its request and its answer and lasts its ttl. Two
    holds certainly overlapped when each was granted before the other's earliest possible end.
    """
    found = []
    deleted = {(op.value["id"]): op for op in ops if op.f == "delete" and op.outcome == OK}
    ends = [op for op in ops if op.f in ("release", "delete")]
    for message_id, held in holds.items():
        for i, first in enumerate(held):
            for second in held[i + 1:]:
                overlap = (second.op.complete < first.op.invoke + first.ttl - margin
                           and first.op.complete < second.op.invoke + second.ttl - margin)
                if overlap and not _ended_by(ends, message_id, first.claim_id, second.op.complete) \
                        and not _ended_by(ends, message_id, second.claim_id, first.op.complete):
                    found.append(Anomaly("double-hold", f"{message_id} held by {first.claim_id} "
                                                        f"({first.op.invoke:.2f}) and {second.claim_id} "
                                                        f"({second.op.invoke:.2f}) at once"))
        delete = deleted.get(message_id)
        if delete is not None and any(h.op.invoke > delete.complete for h in held):
            found.append(Anomaly("resurrected", f"{message_id} was handed out again after its delete "
                                                f"answered at {delete.complete:.2f}"))
    return found


def _counts(holds: dict[str, list[Held]], max_claim_count: int) -> list[Anomaly]:
    """A message's claim count rises with every claim, never goes back and never passes the maximum."""
    found = []
    for message_id, held in holds.items():
        for i, first in enumerate(held):
            if first.claim_count > max_claim_count:
                found.append(Anomaly("over-claimed", f"{message_id} handed out with claim_count "
                                                     f"{first.claim_count} > {max_claim_count}"))
            for second in held[i + 1:]:
                if first.op.complete < second.op.invoke and second.claim_count <= first.claim_count:
                    found.append(Anomaly("count-backwards", f"{message_id}: claim_count {first.claim_count} "
                                                            f"then {second.claim_count}"))
    return found


def _final(ops: list[Op], posted: Posted, holds: dict[str, list[Held]],
           max_claim_count: int) -> list[Anomaly]:
    """Once healed, every acknowledged post is in the queue, in the DLQ or deleted; exhausted messages,
    and only they, are in the DLQ; nothing is there twice."""
    reads = [op for op in ops if op.f == "read" and op.outcome == OK]
    if not reads:
        return [Anomaly("no-recovery", "the final read never succeeded: the server did not recover")]
    final = reads[-1].value
    found = []
    seen: dict[str, str] = {}
    for where in ("queue", "dlq"):
        for message in final[where]:
            if message["id"] in seen:
                found.append(Anomaly("duplicate-id",
                                     f"{message['id']} read in {seen[message['id']]} and {where}"))
            seen[message["id"]] = where
            found += _body_matches(message["id"], message["n"], posted, f"the final {where}")
            found += _final_count(message, where, holds.get(message["id"], []), max_claim_count)
    return found + _lost(ops, posted, seen) + _not_moved(holds, seen, max_claim_count)


def _lost(ops: list[Op], posted: Posted, seen: dict[str, str]) -> list[Anomaly]:
    found = []
    deletes = {op.value["id"]: op for op in ops if op.f == "delete" and op.outcome != FAIL}
    for n, (op, message_id) in sorted(posted.items()):
        if op.outcome != OK or message_id is None:
            continue
        if message_id not in seen and message_id not in deletes:
            found.append(Anomaly("lost", f"post {n} ({message_id}) acknowledged at {op.complete:.2f}, "
                                         "never deleted, is in neither queue"))
        if seen.get(message_id) == "queue" and message_id in deletes and deletes[message_id].outcome == OK:
            found.append(Anomaly("delete-lost",
                                 f"{message_id} is still in the queue after its delete answered"))
    return found


def _not_moved(holds: dict[str, list[Held]], seen: dict[str, str], max_claim_count: int) -> list[Anomaly]:
    found = []
    for message_id, held in holds.items():
        exhausted = max(h.claim_count for h in held) >= max_claim_count
        if exhausted and seen.get(message_id) == "queue":
            found.append(Anomaly("exhausted-not-moved",
                                 f"{message_id} was handed out {max_claim_count} times and is still queued"))
    return found


def _final_count(message: dict[str, Any], where: str, held: list[Held],
                 max_claim_count: int) -> list[Anomaly]:
    found = []
    if held and message["claim_count"] < max(h.claim_count for h in held):
        found.append(Anomaly("count-backwards",
                             f"{message['id']} ends with claim_count {message['claim_count']} "
                             f"after a claim gave {max(h.claim_count for h in held)}"))
    if where == "dlq" and message["claim_count"] < max_claim_count:
        found.append(Anomaly("dlq-early",
                             f"{message['id']} is in the DLQ with claim_count {message['claim_count']}"))
    return found


def _expiry(ops: list[Op]) -> list[Anomaly]:
    """Every acknowledged post to the expiry queue ends, once expired, in its DLQ, once; nothing is
    in either but what was posted there (or may have been: its post timed out)."""
    reads = [op for op in ops if op.f == "read" and op.outcome == OK]
    if not reads or "expired" not in reads[-1].value:
        return []
    final = reads[-1].value
    posts = [op for op in ops if op.f == "post-expiring" and op.outcome != FAIL]
    acknowledged = {op.value["id"]: op for op in posts if op.outcome == OK and op.value["id"]}
    maybe = {op.value["n"] for op in posts}
    found = []
    seen: dict[str, str] = {}
    for where in ("expiring", "expired"):
        for message in final[where]:
            if message["id"] in seen:
                found.append(Anomaly("duplicate-id",
                                     f"{message['id']} read in {seen[message['id']]} and {where}"))
            seen[message["id"]] = where
            op = acknowledged.get(message["id"])
            posted_here = message["n"] in maybe if op is None else op.value["n"] == message["n"]
            if not posted_here:
                found.append(Anomaly("phantom", f"{message['id']} (n={message['n']}) in {where} was not "
                                                "posted there"))
    for message_id, op in acknowledged.items():
        if seen.get(message_id) == "expiring":
            found.append(Anomaly("expired-not-moved", f"{message_id} expired and is still in its queue"))
        elif message_id not in seen:
            found.append(Anomaly("lost", f"expiring post {op.value['n']} ({message_id}) acknowledged at "
                                         f"{op.complete:.2f} is in neither its queue nor its DLQ"))
    return found
