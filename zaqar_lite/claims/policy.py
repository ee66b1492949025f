"""The message policy, written once: visibility, claims, dead letters, expiry.

Everything here is a pure function of messages, times and the queue's
:class:`~zaqar_lite.models.DeadLetterPolicy`. Drivers call these (or, where
their atomic step cannot call Python, follow the same rules as documented
here) and only store the results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import retry_backoff
from zaqar_lite.clock import iso_utc
from zaqar_lite.models import Claim, ClaimRequest, DeadLetterPolicy, Message

REASON_MAX_CLAIMS = "max_claims"
REASON_EXPIRED = "expired"
#: provenance reason of a message its consumer rejected (a release with outcome ``reject``)
REASON_REJECTED = "rejected"
#: the outcomes of a release (docs/api.rst, "Release one message (zaqar-lite extension)"):
#: retry counts toward ``_max_claim_count``, postpone does not, reject dead-letters at once
RETRY, POSTPONE, REJECT = "retry", "postpone", "reject"
OUTCOMES = (RETRY, POSTPONE, REJECT)
#: key of a failure entry: the running number of postpones of the message, carried from
#: entry to entry (so the bounded history keeps it); absent while it is 0
POSTPONED = "postponed"
#: provenance key: how often each outcome happened, shown when a postpone or a reject did
OUTCOME_COUNTS = "outcomes"
#: key of a provenance record: the move went to the server's default dead-letter queue
DEFAULT_DLQ = "default_dead_letter_queue"
#: provenance key: the ordered message group the dead letter left
GROUP = "group"


def visible_at(expires: float, claim_expires: float | None, delay_until: float, now: float) -> bool:
    """Return whether a message with these stored times may be claimed or popped at ``now``.

    The visibility rule itself: unexpired, its claim (if any) ended, its delay
    over. Each store's candidate query is a prefilter of it (it may let more
    through, never fewer), and every candidate is checked again here.
    """
    return expires > now and (claim_expires or 0.0) <= now and delay_until <= now


def is_visible(message: Message, now: float) -> bool:
    """Return whether a message may be claimed or popped at ``now`` (:func:`visible_at`)."""
    return visible_at(message.expires, message.claim_expires, message.delay_until, now)


def visible_only(messages: Iterable[Message], now: float) -> list[Message]:
    """Return those of ``messages`` claimable or poppable at ``now`` (:func:`visible_at`), kept in order."""
    return [m for m in messages if visible_at(m.expires, m.claim_expires, m.delay_until, now)]


def claimed_expiry(expires: float, now: float, ttl: int, grace: int) -> float:
    """Return a claimed message's expiry: never before the claim's end plus grace."""
    return max(expires, now + ttl + grace)


def is_exhausted(message: Message, policy: DeadLetterPolicy) -> bool:
    """Return whether a message has been handed out as often as the queue allows."""
    return count_exhausted(message.claim_count, policy)


def count_exhausted(claim_count: int, policy: DeadLetterPolicy) -> bool:
    """Return whether a claim count is as high as the queue allows (:func:`is_exhausted`)."""
    return policy.counts_claims and claim_count >= (policy.max_claim_count or 0)


def swept_at(expires: float, claim_expires: float | None, claim_count: int, now: float,
             policy: DeadLetterPolicy) -> bool:
    """Return whether the sweep removes a message with these stored numbers at ``now``.

    The sweep rule itself: expired, or unclaimed with its claim count
    exhausted. Each store's sweep query is a prefilter of it, and every
    candidate is checked again here (:func:`is_swept`).
    """
    return expires <= now or ((claim_expires or 0.0) <= now and count_exhausted(claim_count, policy))


def is_swept(message: Message, now: float, policy: DeadLetterPolicy) -> bool:
    """Return whether :func:`plan_sweep` moves or discards a message at ``now`` (:func:`swept_at`)."""
    return swept_at(message.expires, message.claim_expires, message.claim_count, now, policy)


def provenance_record(source_queue: str, reason: str, now: float, policy: DeadLetterPolicy) -> dict[str, Any]:
    """Return the start of a stored provenance record; the move adds ``claim_count`` and ``last_claim_id``.

    ``default_dead_letter_queue`` (true) is recorded when the DLQ is the
    server's default. (Records written before ttls counted from the post
    alone may hold a ``ttl_since``, which nothing reads.)
    """
    record: dict[str, Any] = {"source_queue": source_queue, "reason": reason, "dead_lettered_at": now}
    if policy.default_queue:
        record[DEFAULT_DLQ] = True
    return record


def dead_lettered(message: Message, source_queue: str, reason: str, now: float,
                  policy: DeadLetterPolicy) -> Message:
    """Return the message as it must be stored in the DLQ.

    It keeps its id, body, claim count and failures, is unclaimed and not
    delayed, its expiry is reset by ``messages_ttl`` when set, and it records
    where it came from and why. A message moved because it expired would be
    dead on arrival with its old expiry, so without ``messages_ttl`` it gets
    its own ttl again, counted from the move. Its ``ttl`` still counts from
    its post (:meth:`~zaqar_lite.models.Message.ttl`), as its ``age`` does, so
    it reads the time before the move plus the time the move gave it. It
    leaves its message group; the record keeps the group's name.
    """
    if policy.messages_ttl:
        expires = now + policy.messages_ttl
    elif reason == REASON_EXPIRED:
        expires = now + (message.expires - message.created)
    else:
        expires = message.expires
    record = provenance_record(source_queue, reason, now, policy)
    record.update({"claim_count": message.claim_count, "last_claim_id": message.claim_id})
    if message.group is not None:  # it leaves its group, so as not to hold a group of the DLQ
        record[GROUP] = message.group
    return dataclasses.replace(
        message,
        group=None,
        claim_id=None,
        claim_expires=None,
        delay_until=0.0,
        expires=expires,
        dead_letter=record,
    )


@dataclasses.dataclass
class Plan:
    """What a claim or a sweep decided for the messages it looked at.

    ``claimed`` holds the messages with their new claim state, ``moved`` the
    messages as they must be written into the DLQ (``policy.queue``), and
    ``deleted`` the ids to remove.
    """

    claimed: list[Message] = dataclasses.field(default_factory=list)
    moved: list[Message] = dataclasses.field(default_factory=list)
    deleted: list[str] = dataclasses.field(default_factory=list)


def _claimed_wait(request: ClaimRequest, claim_expires: float, count: int, slot: int) -> float:
    """Return the ``delay_until`` of the ``slot``-th message a claim takes (its ``count``-th claim)."""
    if request.backoff is None:  # the common case pays no draw and no count check
        return 0.0
    draw = request.draws[slot] if slot < len(request.draws) else 0.0
    return retry_backoff.claimed_delay_until(request.backoff, claim_expires, count, draw,
                                             count_exhausted(count, request.dead_letter))


def plan_claim(candidates: Iterable[Message], request: ClaimRequest, source_queue: str,
               already_claimed: int = 0) -> Plan:
    """Decide what a claim does with visible candidates, taken in FIFO order.

    A candidate whose count is exhausted is dead-lettered (or deleted when it is
    not DLQ-eligible) and the claim keeps going; every other candidate is
    claimed, its count incremented, until the limit is reached. With the
    queue's ``_retry_backoff`` a claimed message's ``delay_until`` is the
    claim's end plus the wait its next retry takes
    (:func:`~zaqar_lite.claims.retry_backoff.claimed_delay_until`; the i-th message
    claimed by the request uses its i-th draw), else 0.
    """
    plan = Plan()
    room = request.limit - already_claimed
    # asked once a claim, not once a message: most queues exhaust nothing and have no backoff
    exhausts = request.dead_letter.counts_claims
    waits = request.backoff is not None
    for message in candidates:
        if room <= 0:
            break
        if exhausts and is_exhausted(message, request.dead_letter):
            if message.dlq_eligible:
                plan.moved.append(dead_lettered(message, source_queue, REASON_MAX_CLAIMS,
                                                request.now, request.dead_letter))
            else:
                plan.deleted.append(message.id)
            continue
        count, claim_expires = message.claim_count + 1, request.now + request.ttl
        plan.claimed.append(message.claimed(
            claim_id=request.claim_id,
            claim_expires=claim_expires,
            claim_count=count,
            expires=claimed_expiry(message.expires, request.now, request.ttl, request.grace),
            delay_until=_claimed_wait(request, claim_expires, count, request.limit - room) if waits else 0.0,
        ))
        room -= 1
    return plan


def plan_sweep(messages: Iterable[Message], source_queue: str, now: float,
               policy: DeadLetterPolicy) -> Plan:
    """Decide what the sweeper does with a queue's messages.

    Expired messages are moved (reason ``expired``) when the queue dead-letters
    on expiry and they are eligible, else discarded; unexpired, unclaimed
    messages whose count is exhausted are moved (reason ``max_claims``) so the
    DLQ shows them without waiting for another claim.
    """
    plan = Plan()
    for message in messages:
        if not is_swept(message, now, policy):
            continue
        if message.expires <= now:
            if policy.on_expiry and policy.queue and message.dlq_eligible:
                plan.moved.append(dead_lettered(message, source_queue, REASON_EXPIRED, now, policy))
            else:
                plan.deleted.append(message.id)
        elif message.dlq_eligible:
            plan.moved.append(dead_lettered(message, source_queue, REASON_MAX_CLAIMS, now, policy))
        else:
            plan.deleted.append(message.id)
    return plan


def still_movable(current: Message, read: Message, now: float) -> bool:
    """Return whether a message read earlier may still be moved to another queue (``move_messages``).

    It must be unexpired and unclaimed at ``now``, and its claim (id and
    end), claim count and expiry must be those it was read with: a claim,
    release or renewal in between changes one of them, and the move is skipped.
    """
    return (current.expires > now and not current.is_claimed(now)
            and (current.claim_id, current.claim_expires, current.claim_count, current.expires)
            == (read.claim_id, read.claim_expires, read.claim_count, read.expires))


#: the fields an edit of a delayed message may change (``edit_delayed_message``)
EDITABLE_FIELDS = ("body", "ttl", "delay")


def editable_at(expires: float, claim_expires: float | None, delay_until: float, now: float) -> bool:
    """Return whether a message with these stored times may be edited at ``now``.

    The edit rule itself: still delayed (``delay_until > now``), not held by a
    live claim, unexpired. Once its delay matures (or a claim takes it) the
    message belongs to consumers and is no longer edited.
    """
    return expires > now and (claim_expires or 0.0) <= now and delay_until > now


def is_editable(message: Message, now: float) -> bool:
    """Return whether a message may be edited at ``now`` (:func:`editable_at`)."""
    return editable_at(message.expires, message.claim_expires, message.delay_until, now)


def check_editable(message: Message, now: float) -> None:
    """Raise :class:`~zaqar_lite.errors.MessageNotEditable` unless :func:`is_editable` holds.

    An expired message is not found at all; the caller reports that as absent.
    """
    if is_editable(message, now):
        return
    if message.is_claimed(now):
        raise errors.MessageNotEditable(message.id, "it is claimed")
    raise errors.MessageNotEditable(message.id, f"its delay ended at {iso_utc(message.delay_until)}"
                                    if message.delay_until else "it was never delayed")


def edit_times(expires: float, delay_until: float, changes: Mapping[str, Any],
               now: float) -> tuple[float, float]:
    """Return the ``expires`` and ``delay_until`` an edit gives a message stored with these.

    A new ``ttl`` counts from ``now`` (the message then lives ``ttl`` more
    seconds), as does a new ``delay``; a ``delay`` of 0 makes it visible at once.
    """
    if "ttl" in changes:
        expires = now + int(changes["ttl"])
    if "delay" in changes:
        delay = int(changes["delay"])
        delay_until = now + delay if delay else 0.0
    return expires, delay_until


def edited(message: Message, changes: Mapping[str, Any], now: float) -> Message:
    """Return a delayed message as an edit (``body``, ``ttl``, ``delay``, any of them) leaves it.

    Everything else (id, marker, creation, claim state, failures) is kept.
    """
    expires, delay_until = edit_times(message.expires, message.delay_until, changes, now)
    return dataclasses.replace(message, body=changes.get("body", message.body), expires=expires,
                               delay_until=delay_until)


def check_claim_rules(message: Message, claim_id: str | None, claim_is_live: bool, now: float) -> None:
    """Enforce the claim rules for changing a message, given an optional claim id.

    docs/api.rst, "Claim rules".

    Args:
        message: the message as stored.
        claim_id: the claim id the client sent, or None.
        claim_is_live: whether ``claim_id`` names a live claim of this queue.
        now: the current time.

    Raises:
        MessageIsClaimed: claimed, and no claim id given (403).
        InvalidClaim: the claim id is unknown or expired (400).
        MessageNotClaimed: a claim id given but the message is not claimed (400).
        MessageIsClaimedBy: held by another live claim (403).
    """
    if claim_id is None:
        if message.is_claimed(now):
            raise errors.MessageIsClaimed(message.id)
        return
    if not claim_is_live:
        raise errors.InvalidClaim(claim_id)
    if not message.is_claimed(now):
        raise errors.MessageNotClaimed(message.id)
    if message.claim_id != claim_id:
        raise errors.MessageIsClaimedBy(message.id, claim_id)


def split_bulk_delete(messages: Iterable[Message], claim_ids: Sequence[str] | None,
                      now: float) -> tuple[list[Message], list[Message]]:
    """Return which messages a delete by ids removes, and which it keeps (the call then fails).

    Without ``claim_ids`` every message goes, claimed or not (as Zaqar). With
    them a message held by a live claim that is not listed is kept.
    """
    doomed: list[Message] = []
    kept: list[Message] = []
    for message in messages:
        held = claim_ids is not None and message.is_claimed(now) and message.claim_id not in claim_ids
        (kept if held else doomed).append(message)
    return doomed, kept


def postponed_count(failures: Sequence[Mapping[str, Any]]) -> int:
    """Return how often a message with this failure history was postponed (its newest entry says)."""
    return int(failures[-1].get(POSTPONED, 0)) if failures else 0


def failure_entry(failures: Sequence[Mapping[str, Any]], failure: Mapping[str, Any] | None, outcome: str,
                  claim_count: int, now: float) -> dict[str, Any]:
    """Return the failure entry a release with ``outcome`` appends to a history ``failures``.

    ``{"at", "claim_count", "error_type", "error"}`` as ever; a postpone or a
    reject adds ``"outcome"`` (a retry leaves it out: absent means retry), and
    once the message was postponed every entry carries ``"postponed"``, the
    running number of postpones, so the newest entry keeps it however many
    older entries the bounded history dropped.
    """
    reason = failure or {}
    entry: dict[str, Any] = {"at": iso_utc(now), "claim_count": claim_count,
                             "error_type": reason.get("error_type"), "error": reason.get("error")}
    if outcome != RETRY:
        entry["outcome"] = outcome
    postponed = postponed_count(failures) + (outcome == POSTPONE)
    if postponed:
        entry[POSTPONED] = postponed
    return entry


def released(message: Message, failure: Mapping[str, Any] | None, now: float, history_limit: int,
             delay: float | None = None, outcome: str = RETRY) -> Message:
    """Return a message released from its claim with ``outcome`` retry or postpone.

    Retry (a release as ever): ``failure``, when given, is appended to its
    history; it is claimable again after ``delay`` seconds when given (0: at
    once), else after the wait its claim fixed (the queue's ``_retry_backoff``,
    :func:`~zaqar_lite.claims.retry_backoff.released_delay_until`).

    Postpone: the claim does not count (``claim_count`` one less, so it never
    brings the message nearer its dead-letter queue), an entry with
    ``"outcome": "postpone"`` is always appended, and the message waits
    ``delay`` seconds (0 without one), never the queue's backoff.
    """
    failures = list(message.failures)
    count = message.claim_count
    if outcome == POSTPONE:
        count = max(0, count - 1)
        delay = delay or 0
    if failure is not None or outcome != RETRY:
        failures.append(failure_entry(failures, failure, outcome, count, now))
        failures = failures[-history_limit:]
    delay_until = retry_backoff.released_delay_until(message.delay_until, message.claim_expires, now, delay)
    return dataclasses.replace(message, claim_expires=now, failures=failures, delay_until=delay_until,
                               claim_count=count)


def rejected(message: Message, failure: Mapping[str, Any] | None, now: float, history_limit: int,
             source_queue: str, dead_letter: DeadLetterPolicy) -> Plan:
    """Decide what a release with outcome reject does: dead-letter the message at once, whatever its count.

    An entry with ``"outcome": "reject"`` and ``failure`` is appended to its
    history, and it is moved (reason ``rejected``, :func:`dead_lettered`) into
    the queue's dead-letter queue; it is deleted when the queue has none, or
    it was posted ``dlq_eligible: false``. Its claim count stays (the
    rejecting claim was an attempt).
    """
    failures = [*message.failures, failure_entry(message.failures, failure, REJECT, message.claim_count, now)]
    kept = dataclasses.replace(message, failures=failures[-history_limit:])
    if dead_letter.queue is not None and message.dlq_eligible:
        return Plan(moved=[dead_lettered(kept, source_queue, REASON_REJECTED, now, dead_letter)])
    return Plan(deleted=[message.id])


def claim_released(message: Message, now: float) -> Message:
    """Return a message its claim lets go of at ``now`` (a released claim): its wait starts now."""
    return dataclasses.replace(message, claim_expires=now, delay_until=retry_backoff.released_delay_until(
        message.delay_until, message.claim_expires, now))


def renewed_claim(claim_id: str, now: float, ttl: int, grace: int) -> Claim:
    """Return the record of a claim renewed at ``now``: a new lease of ``ttl`` whose age counts from now.

    As Zaqar 23 (its ``test_claims.test_lifecycle``): a renewal is a new lease, so
    ``age`` in ``GET .../claims/{id}`` starts again from 0.
    """
    return Claim(claim_id, ttl, grace, created=now, expires=now + ttl)


def claim_undone(message: Message, now: float) -> Message:
    """Return a message taken by a claim that could not be handed out: visible at once, its count as before.

    The claim never reached a consumer (its bodies could not be opened), so it
    is no attempt: the count it added is taken back and no retry wait starts.
    """
    return dataclasses.replace(message, claim_expires=now, delay_until=0.0,
                               claim_count=max(0, message.claim_count - 1))


def claim_renewed(message: Message, now: float, ttl: int, grace: int) -> Message:
    """Return a message whose claim is renewed at ``now``: new claim end and expiry; its wait moves along."""
    return dataclasses.replace(
        message, claim_expires=now + ttl, expires=claimed_expiry(message.expires, now, ttl, grace),
        delay_until=retry_backoff.renewed_delay_until(message.delay_until, message.claim_expires, now + ttl))


def provenance(message: Message) -> dict[str, Any]:
    """Return the ``dead_letter`` block (docs/api.rst, "Provenance") shown for a message inside a DLQ."""
    record = message.dead_letter or {}
    block: dict[str, Any] = {
        "source_queue": record.get("source_queue"),
        "reason": record.get("reason"),
        "dead_lettered_at": iso_utc(record.get("dead_lettered_at", 0.0)),
        "claim_count": record.get("claim_count", message.claim_count),
        "first_posted_at": iso_utc(message.created),
        "last_claim_id": record.get("last_claim_id"),
        "failures": list(message.failures),
    }
    if record.get(DEFAULT_DLQ):
        block[DEFAULT_DLQ] = True
    postponed, rejects = postponed_count(message.failures), int(record.get("reason") == REASON_REJECTED)
    if postponed or rejects:  # retries alone: claim_count says it all, as ever
        block[OUTCOME_COUNTS] = {RETRY: max(0, block["claim_count"] - rejects), POSTPONE: postponed,
                                 REJECT: rejects}
    if GROUP in record:
        block[GROUP] = record[GROUP]
    if message.trace is not None:  # the W3C trace context the message was posted with
        block["trace"] = dict(message.trace)
    return block
