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


def check(ops: Iterable[Op], *, max_claim_count: int, clock_margin: float = 0.0,
          visibility_lag: float = 0.0, clock_markers: bool = False) -> list[Anomaly]:
    """Return every breach of the rules in a history (empty: the history is valid).

    Args:
        ops: the history, the final ``read`` included.
        max_claim_count: the source queue's ``_max_claim_count``.
        clock_margin: seconds by which the server's clock may have run ahead of the clients'
            (a clock step forward shortens every live claim by its size).
        visibility_lag: the store's visibility lag (docs/api.rst, "At least once"): a post whose
            write may have landed later than that after its marker may be passed by the notifier.
        clock_markers: the store takes markers from the server's clock (Swift): a post made while
            the clock was stepped, or within the step's size after, may be passed by or reordered.
    """
    ops = list(ops)
    anomalies = _answers(ops)
    posted, post_anomalies = _posts(ops)
    anomalies += post_anomalies
    holds = _holds(ops)
    redrives = Redrives(ops, max_claim_count)
    anomalies += _bodies(holds, posted)
    anomalies += _exclusive(holds, ops, clock_margin, redrives)
    anomalies += _counts(holds, redrives)
    anomalies += _final(ops, posted, holds, redrives)
    anomalies += _expiry(ops)
    anomalies += _redrive_tasks(ops)
    anomalies += _deliveries(ops, visibility_lag, clock_markers)
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


def _exclusive(holds: dict[str, list[Held]], ops: list[Op], margin: float,
               redrives: Redrives) -> list[Anomaly]:
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
        if delete is not None and any(h.op.invoke > delete.complete for h in held) \
                and not redrives.absent_then_redriven(message_id, held, delete, float("inf")):
            found.append(Anomaly("resurrected", f"{message_id} was handed out again after its delete "
                                                f"answered at {delete.complete:.2f}"))
    return found


class Redrives:
    """When a redrive task may have moved a dead letter back to its queue, its claim count reset to 0
    (docs/api.rst, "Redrive")."""

    def __init__(self, ops: list[Op], max_claim_count: int) -> None:
        self.max_claim_count = max_claim_count
        self.starts = [op for op in ops if op.f == "redrive" and op.outcome != FAIL]
        self.unseen_claims = [op for op in ops if op.f == "claim" and op.outcome == INFO]

    def unseen(self, after: float, before: float) -> int:
        """Return how many claims that got no answer were sent between two times."""
        return sum(after < op.invoke < before for op in self.unseen_claims)

    def may_reset(self, last: list[Held], before: float) -> bool:
        """Return whether a message handed out by the holds ``last`` may have been dead-lettered and
        redriven before ``before``: it was exhausted (or a claim that got no answer may have exhausted
        it), and a task started after its last hold (a task moves only what the DLQ held when it
        started) and before ``before``."""
        latest = max(h.op.invoke for h in last)
        exhausted = (max(h.claim_count for h in last) >= self.max_claim_count
                     or self.unseen(latest, before) > 0)
        return exhausted and any(op.invoke < before and (op.outcome == INFO or op.complete > latest)
                                 for op in self.starts)

    def absent_then_redriven(self, message_id: str, held: list[Held], delete: Op, before: float) -> bool:
        """Return whether a message whose delete was answered may have been in the DLQ then (a delete
        of a message absent from its queue is a 204, docs/api.rst "Claim rules") and redriven back
        before ``before``: the holds before the delete exhausted it, and a task started after them."""
        generations = _generations(message_id, [h for h in held if h.op.invoke < delete.complete], self)[0]
        return bool(generations) and self.may_reset(generations[-1], before)


def _generations(message_id: str, held: list[Held],
                 redrives: Redrives) -> tuple[list[list[Held]], list[Anomaly]]:
    """Split a message's holds into generations, each begun by a redrive, and return the breaches of
    its counts: a count that goes back without a redrive that may explain it, or that a redrive
    explains but comes back higher than the claims since can make it (from 0)."""
    found = []
    generations: list[list[Held]] = []
    for hold in held:
        before = [h for g in generations[-1:] for h in g if h.op.complete < hold.op.invoke]
        backwards = [h for h in before if hold.claim_count <= h.claim_count]
        if backwards and redrives.may_reset(before, hold.op.complete):
            latest = max(h.op.invoke for h in before)
            if hold.claim_count > 1 + redrives.unseen(latest, hold.op.invoke):
                found.append(Anomaly("redrive-count", f"{message_id}: claim_count {hold.claim_count} in the "
                                                      "first claim after a redrive (reset to 0)"))
            generations.append([hold])
            continue
        if backwards:
            found.append(Anomaly("count-backwards", f"{message_id}: claim_count {backwards[-1].claim_count} "
                                                    f"then {hold.claim_count}"))
        if generations:
            generations[-1].append(hold)
        else:
            generations.append([hold])
    return generations, found


def _counts(holds: dict[str, list[Held]], redrives: Redrives) -> list[Anomaly]:
    """A message's claim count rises with every claim, never goes back (but to 0 by a redrive) and
    never passes the maximum."""
    found = []
    for message_id, held in holds.items():
        for hold in held:
            if hold.claim_count > redrives.max_claim_count:
                found.append(Anomaly("over-claimed", f"{message_id} handed out with claim_count "
                                                     f"{hold.claim_count} > {redrives.max_claim_count}"))
        found += _generations(message_id, held, redrives)[1]
    return found


def _final(ops: list[Op], posted: Posted, holds: dict[str, list[Held]],
           redrives: Redrives) -> list[Anomaly]:
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
            found += _final_count(message, where, holds.get(message["id"], []), redrives, reads[-1].invoke)
    return found + _lost(ops, posted, seen, holds, redrives, reads[-1].invoke) \
        + _not_moved(holds, seen, redrives, reads[-1].invoke)


def _lost(ops: list[Op], posted: Posted, seen: dict[str, str], holds: dict[str, list[Held]],
          redrives: Redrives, read_at: float) -> list[Anomaly]:
    found = []
    deletes = {op.value["id"]: op for op in ops if op.f == "delete" and op.outcome != FAIL}
    for n, (op, message_id) in sorted(posted.items()):
        if op.outcome != OK or message_id is None:
            continue
        if message_id not in seen and message_id not in deletes:
            found.append(Anomaly("lost", f"post {n} ({message_id}) acknowledged at {op.complete:.2f}, "
                                         "never deleted, is in neither queue"))
        delete = deletes.get(message_id)
        if seen.get(message_id) == "queue" and delete is not None and delete.outcome == OK \
                and not redrives.absent_then_redriven(message_id, holds.get(message_id, []), delete, read_at):
            found.append(Anomaly("delete-lost",
                                 f"{message_id} is still in the queue after its delete answered"))
    return found


def _last_generation(message_id: str, held: list[Held], redrives: Redrives, read_at: float) -> list[Held]:
    """Return the holds of a message's last generation, or none when a redrive may have reset its
    count after them (before the final read)."""
    last = _generations(message_id, held, redrives)[0][-1]
    return [] if redrives.may_reset(last, read_at) else last


def _not_moved(holds: dict[str, list[Held]], seen: dict[str, str], redrives: Redrives,
               read_at: float) -> list[Anomaly]:
    found = []
    for message_id, held in holds.items():
        last = _last_generation(message_id, held, redrives, read_at)
        exhausted = bool(last) and max(h.claim_count for h in last) >= redrives.max_claim_count
        if exhausted and seen.get(message_id) == "queue":
            found.append(Anomaly("exhausted-not-moved", f"{message_id} was handed out "
                                 f"{redrives.max_claim_count} times and is still queued"))
    return found


def _final_count(message: dict[str, Any], where: str, held: list[Held], redrives: Redrives,
                 read_at: float) -> list[Anomaly]:
    found = []
    last = _last_generation(message["id"], held, redrives, read_at) if held else []
    if last and message["claim_count"] < max(h.claim_count for h in last):
        found.append(Anomaly("count-backwards",
                             f"{message['id']} ends with claim_count {message['claim_count']} "
                             f"after a claim gave {max(h.claim_count for h in last)}"))
    if where == "dlq" and message["claim_count"] < redrives.max_claim_count:
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


def _redrive_tasks(ops: list[Op]) -> list[Anomaly]:
    """A store outage makes a redrive task wait, never fail (docs/api.rst, "Redrive tasks")."""
    reads = [op for op in ops if op.f == "read" and op.outcome == OK]
    tasks = reads[-1].value.get("redrive_tasks", []) if reads else []
    return [Anomaly("redrive-failed", f"redrive task {task['id']} failed: {task['error']}")
            for task in tasks if task["status"] == "failed"]


def exempt_from_delivery(ops: list[Op], visibility_lag: float, clock_markers: bool) -> set[str]:
    """Return the ids of the acknowledged posts to the subscribed queue that the notifier may pass by
    (docs/api.rst, "At least once"): a post whose write may have landed later than the store's
    visibility lag after its marker (its request took longer), and on a store whose markers come
    from the clock, a post made while the server's clock was stepped or within the step's size
    after the heal."""
    windows = []
    for i, op in enumerate(ops):
        if op.process == "nemesis" and op.f == "start" and op.value.get("fault") == "clock-step":
            heal = next((o.invoke for o in ops[i + 1:] if o.process == "nemesis" and o.f == "heal"),
                        float("inf"))
            windows.append((op.invoke, heal + abs(op.value["size"]) + visibility_lag))
    exempt = set()
    for op in ops:
        if op.f != "post-notified" or op.outcome != OK:
            continue
        late = visibility_lag > 0 and op.complete - op.invoke > visibility_lag
        stepped = clock_markers and any(op.complete > start and op.invoke < end for start, end in windows)
        if late or stepped:
            exempt.add(op.value["id"])
    return exempt


def undelivered(ops: list[Op], visibility_lag: float = 0.0,
                clock_markers: bool = False) -> list[tuple[str, Op]]:
    """Return each subscription and acknowledged post to its queue that it has not been delivered
    (the posts the notifier may pass by aside)."""
    subscriptions = [op.value["subscription_id"] for op in ops if op.f == "subscribe" and op.outcome == OK]
    delivered = {(op.value["subscription_id"], op.value["id"]) for op in ops if op.f == "deliver"}
    exempt = exempt_from_delivery(ops, visibility_lag, clock_markers)
    return [(subscription, op) for subscription in subscriptions
            for op in ops if op.f == "post-notified" and op.outcome == OK and op.value["id"] not in exempt
            and (subscription, op.value["id"]) not in delivered]


def _deliveries(ops: list[Op], visibility_lag: float, clock_markers: bool) -> list[Anomaly]:
    """Per subscription, every acknowledged post is delivered at least once, in post order, and a
    redelivery is of the newest message delivered so far; nothing delivered was not posted."""
    found = [Anomaly("undelivered", f"post {op.value['n']} ({op.value['id']}) acknowledged at "
                                    f"{op.complete:.2f} never reached subscription {subscription}")
             for subscription, op in undelivered(ops, visibility_lag, clock_markers)]
    posts = [op for op in ops if op.f == "post-notified" and op.outcome != FAIL]
    maybe = {op.value["n"] for op in posts}
    acknowledged = {op.value["id"]: op for op in posts if op.outcome == OK}
    exempt = exempt_from_delivery(ops, visibility_lag, clock_markers)
    by_subscription: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f == "deliver":
            by_subscription[op.value["subscription_id"]].append(op)
    for subscription, deliveries in by_subscription.items():
        first: dict[str, int] = {}
        for i, delivery in enumerate(deliveries):
            message_id, n = delivery.value["id"], delivery.value["n"]
            post = acknowledged.get(message_id)
            if (post is None and n not in maybe) or (post is not None and post.value["n"] != n):
                found.append(Anomaly("phantom", f"subscription {subscription} got {message_id} (n={n}), "
                                                "which was not posted to its queue"))
            if message_id in first and not _newest(deliveries[:i], message_id):
                found.append(Anomaly("redelivered-older", f"subscription {subscription} got {message_id} "
                                     f"again at {delivery.invoke:.2f} after newer messages"))
            first.setdefault(message_id, i)
        ordered = sorted((op for op in acknowledged.values() if op.value["id"] in first
                          and op.value["id"] not in exempt), key=lambda op: op.invoke)
        for i, earlier in enumerate(ordered):
            for later in ordered[i + 1:]:
                if earlier.complete < later.invoke and first[later.value["id"]] < first[earlier.value["id"]]:
                    found.append(Anomaly("out-of-order", f"subscription {subscription} got post "
                                         f"{later.value['n']} before post {earlier.value['n']}, "
                                         "acknowledged before it was sent"))
    return found


def _newest(deliveries: list[Op], message_id: str) -> bool:
    """Return whether ``message_id`` is the newest message (the last first delivered) of ``deliveries``."""
    seen: list[str] = []
    for delivery in deliveries:
        if delivery.value["id"] not in seen:
            seen.append(delivery.value["id"])
    return bool(seen) and seen[-1] == message_id
