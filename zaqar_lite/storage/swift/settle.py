"""Swift claims by the settle protocol, and the dead-letter move, of the Swift driver.

Claims. Swift has no atomic compare-and-swap: Swift 2.30 ignores ``If-Match``
on PUT, and checks ``If-None-Match: *`` before writing the body, so two
concurrent creates both succeed (84 times in 100 on the test Swift). A claim
(1) reads a candidate and its ETag, (2) plans with ``policy.plan_claim``, (3)
PUTs the claimed state, claim count included, with ``If-Match: <etag>`` (a 412
from a store that honours it means another claimer won), (4) waits ``settle``
seconds (URI option, default 0.5) after its last PUT returned, and (5) reads
back: it holds the messages that still carry its claim id, except those whose
read-to-PUT took longer than ``settle``. Two claimers never both win: a
competitor's write landing after my read-back must have read before my write
landed, so its read-to-PUT took longer than ``settle`` and it gave up. So a
claim takes at least ``settle`` seconds, and a given-up write (logged as a
warning) keeps its message hidden until that claim's ttl lapses, its claim
count up by one: it may be protecting a claim it overwrote. A write the
client gave up on (timeout) that lands later acts the same. Pop claims, then
deletes. Creating a queue and compare-and-set of records write, settle and
read back the same way.

Dead-letter move: PUT the DLQ copy under the same marker and id with
``If-None-Match: *`` (a repeat, or a concurrent mover, writes the same object),
then DELETE the source (Swift has no ETag-conditional DELETE). A crash between
the two leaves the message in both queues, never in neither; the copy left
behind is exhausted or expired, so it is never handed out, and the next claim or
sweep plans its move again, finds the DLQ object (412) and deletes the source.
DLQ order is thus original post order. A redrive (``move_messages``) moves the
same way, after reading the message and checking it is unchanged and
unclaimed; it too keeps the marker, so a redriven message takes its original
place in post order in its target queue (the other drivers append it). A
crash between copy and delete leaves the dead letter in the DLQ too (it can
be claimed there); the next redrive of it finds the copy (412) and deletes
it from the DLQ. A claim of the dead letter landing between that check and
the delete loses its message to the redrive, as a delete racing a claim.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections.abc import Sequence

from swiftclient.exceptions import ClientException

from zaqar_lite.claims import groups, policy
from zaqar_lite.clock import iso_utc
from zaqar_lite.models import ClaimRequest, DeadLetterPolicy, Message
from zaqar_lite.storage.swift import layout
from zaqar_lite.storage.swift.container import SwiftContainer

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class _Attempt:
    """One message a claim wrote, waiting to be read back."""

    name: str
    original: Message
    claimed: Message
    started: float
    written: float


def _answered(attempts: list[tuple[_Attempt, str]], kept: set[str],
              stopped: set[str]) -> tuple[list[_Attempt], list[_Attempt]]:
    """Split the attempts the read-back kept into those a claim answers and those it gives back.

    A message of a group after one the read-back lost is not answered: handed
    out now it would go before the lost one (``claims.groups.kept_in_order``).
    The groups lost are added to ``stopped``.
    """
    lost: set[str] = set()
    answered: list[_Attempt] = []
    unanswered: list[_Attempt] = []
    for attempt, group in attempts:
        if attempt.name not in kept:
            lost |= {group} - {""}
        elif group not in lost:
            answered.append(attempt)
        else:
            unanswered.append(attempt)
    stopped |= lost
    return answered, unanswered


@dataclasses.dataclass
class Removed:
    """How many exhausted messages a claim moved to the DLQ and deleted on its way."""

    moved: int = 0
    deleted: int = 0


class SettledClaims(SwiftContainer):
    """Claims that write, settle and read back; moves that copy, then delete the source."""

    def _move(self, container: str, project: str, source: str, dead_letter_queue: str,
              moved: Message, now: float) -> bool:
        """Copy a message into its DLQ under the same marker and id, then delete the source.

        Returns:
            Whether this call deleted the source (of concurrent movers, the one whose DELETE found it).
        """
        self._ensure_queue(container, project, dead_letter_queue, now)
        target = layout.message_object(dead_letter_queue, moved.marker, moved.id)
        self.objects.create(container, target, layout.message_body(moved), layout.message_type(moved),
                            layout.delete_at(moved.expires))
        self._await_listed(container, dead_letter_queue, [target])
        return self.objects.delete(container, source)

    def _read_visible(self, container: str, name: str, now: float) -> tuple[Message, str, float] | None:
        """Read a visible candidate: message, ETag and when the read began (step 1)."""
        for retry in (True, False):  # a slow read is cheaper to repeat than the write it would spoil
            self.objects.connection()  # authenticating is not part of the timed read-to-PUT
            started = time.monotonic()
            got = self._load(container, name)
            if got is None or not policy.is_visible(got[0], now):
                return None
            if not retry or time.monotonic() - started <= self.options.settle / 2:
                return got[0], got[1], started
        return None

    def _attempt(self, container: str, project: str, queue: str, name: str, request: ClaimRequest,
                 already: int, freed: list[str], removed: Removed) -> _Attempt | None:
        """Read one candidate, apply the claim plan to it and write the result (steps 1-3).

        A grouped message the plan moves or deletes is added to ``freed``, and
        counted in ``removed``.
        """
        found = self._read_visible(container, name, request.now)
        if found is None:
            return None
        message, etag, started = found
        plan = policy.plan_claim([message], request, queue, already)
        moved, deleted = self._remove(container, project, queue, plan, [message], request.dead_letter,
                                      request.now)
        removed.moved, removed.deleted = removed.moved + moved, removed.deleted + deleted
        if groups.frees_a_group([message], [*(m.id for m in plan.moved), *plan.deleted]):
            freed.append(name)
        if not plan.claimed:
            return None
        try:
            self._store(container, name, plan.claimed[0], {"If-Match": etag})
        except ClientException as exc:
            if exc.http_status == 412:
                return None
            raise
        return _Attempt(name, message, plan.claimed[0], started, time.monotonic())

    def _claim(self, container: str, project: str, queue: str, request: ClaimRequest,
               removed: Removed) -> list[_Attempt]:
        """Claim up to ``request.limit`` messages, FIFO (steps 1-5 of the module docstring).

        The candidates come group by group (``_candidate_rows``); once a
        message of a group is not taken (another claimer has it) the claim
        takes no more of that group. When a grouped message is dead-lettered
        (or deleted), the listing is read again from its start: the group's
        next message may be claimable now. The exhausted messages moved or
        deleted on the way are counted in ``removed``.
        """
        won: list[_Attempt] = []
        stopped: set[str] = set()  # groups of which a message was not taken: the rest of each waits
        while len(won) < request.limit:
            freed: list[str] = []
            rows = self._candidate_rows(container, queue, request.now)
            while not freed and len(won) < request.limit and (
                    batch := list(itertools.islice(rows, request.limit - len(won)))):
                attempts = self._attempt_batch(container, project, queue, batch, request, len(won), freed,
                                               removed, stopped)
                if attempts:
                    kept = self._read_back(container, request, [a for a, _ in attempts])
                    answered, unanswered = _answered(attempts, {a.name for a in kept}, stopped)
                    won += answered
                    self._give_back(container, unanswered, request.now)
            if not freed:
                break
        return won

    def _attempt_batch(self, container: str, project: str, queue: str, batch: list[tuple[str, str]],
                       request: ClaimRequest, already: int, freed: list[str], removed: Removed,
                       stopped: set[str]) -> list[tuple[_Attempt, str]]:
        """Attempt each candidate of a batch, with its group (steps 1-3), passing the stopped groups.

        One at a time: parallel writes slow each other down, and a slow
        attempt is given up. A grouped message not taken (and not removed)
        adds its group to ``stopped``.
        """
        attempts: list[tuple[_Attempt, str]] = []
        for name, group in batch:
            if group in stopped:
                continue
            attempt = self._attempt(container, project, queue, name, request, already + len(attempts), freed,
                                    removed)
            if attempt:
                attempts.append((attempt, group))
            elif group and name not in freed:
                stopped.add(group)
        return attempts

    def _give_back(self, container: str, attempts: list[_Attempt], now: float) -> None:
        """Write the messages a claim holds and does not answer claimable again at once, uncounted.

        Only this claim holds them (the read-back found its claim id), as a
        release finds a claim's messages; a competitor's write that lands
        later was given up and hides the message until that write's claim
        lapses, as any given-up write does.
        """
        self.objects.map(lambda a: self._store(container, a.name, policy.claim_undone(a.claimed, now)),
                         attempts)

    def _read_back(self, container: str, request: ClaimRequest, attempts: list[_Attempt]) -> list[_Attempt]:
        """Settle, then return the attempts the claim holds (steps 4-5)."""
        self.objects.settle(max(a.written for a in attempts))

        def held(attempt: _Attempt) -> bool:
            got = self._load(container, attempt.name)
            mine = got is not None and got[0].claim_id == request.claim_id
            if mine and attempt.written - attempt.started > self.options.settle:
                LOG.warning("claim %s gave up %s: its read and write took %.2f s, more than settle "
                            "(%.2f s); it stays claimed until %s", request.claim_id, attempt.name,
                            attempt.written - attempt.started, self.options.settle,
                            iso_utc(request.now + request.ttl))
                return False
            return mine

        return [a for a, ok in zip(attempts, self.objects.map(held, attempts), strict=True) if ok]

    def _remove(self, container: str, project: str, queue: str, plan: policy.Plan, read: Sequence[Message],
                dead_letter: DeadLetterPolicy, now: float) -> tuple[int, int]:
        """Write a plan's moves and deletes (its claims take the settle protocol instead).

        Returns:
            How many messages this call moved and deleted: those whose source it found and deleted.
        """
        markers = {m.id: m.marker for m in read}
        moved = sum(self._move(container, project, layout.message_object(queue, m.marker, m.id),
                               dead_letter.queue or "", m, now) for m in plan.moved)
        deleted = sum(self.objects.delete(container, layout.message_object(queue, markers[i], i))
                      for i in plan.deleted)
        return moved, deleted

