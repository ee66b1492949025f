"""The store seen through encryption at rest: bodies sealed on the way in, opened on the way out.

:class:`EncryptedStorage` wraps any driver (drivers never see a plaintext body
of an encrypted queue, and know nothing of encryption) and is the one place
the codec of :mod:`zaqar_lite.rules.encryption` is applied:

* **metadata**: ``_enable_encrypt_messages: true`` is refused where queue
  metadata is written (create, set) when there is no key
  (:func:`~zaqar_lite.claims.metadata.check_encryption`), whoever writes it
  (a queue, one made from a template, a topic);
* **in**: a post (:meth:`~EncryptedStorage.post_planned`, inside the driver's
  planning, so the queue's metadata it seals by is the metadata the post is
  stored under) and an edit of a delayed message seal each body when the
  queue's ``_enable_encrypt_messages`` is set; a body of the envelope's shape
  is refused on every queue;
* **out**: every message a method returns (list, get, claim, the claim's
  messages, pop, the edited message) is opened, whatever queue it is in, so a
  dead letter moved from an encrypted queue into a DLQ without the flag is
  read in plaintext all the same;
* **failure reasons**: the ``error`` text of a release on a queue that
  encrypts is stored sealed, and opened with the body on the way out;
* **moves** (a redrive) carry the body as stored, never the opened one: a
  moved message stays sealed or plain as it was.

A message that cannot be opened (its key is gone, its ciphertext altered)
fails the whole answer with :class:`~zaqar_lite.errors.MessageUnreadable`,
never a wrong body, and the request changes nothing. A claim that meets one
is undone before the error leaves (``release_claim(..., undo=True)``: its
messages visible at once, their claim counts as before), so no count is used
up by a claim no consumer saw; a pop that meets one puts every message it
took back into the queue first (same ids, at the end of the queue), so
nothing is lost.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims import metadata as meta
from zaqar_lite.config import Settings
from zaqar_lite.models import (
    NO_DEAD_LETTER,
    Claim,
    ClaimRequest,
    ClaimResult,
    DeadLetterPolicy,
    Message,
    Move,
    SweepResult,
)
from zaqar_lite.rules import encryption
from zaqar_lite.storage.base import ClaimPlan, PostPlan, Storage
from zaqar_lite.storage.forwarding import ForwardingStorage

LOG = logging.getLogger(__name__)


class EncryptedStorage(ForwardingStorage):
    """A driver whose message bodies are sealed at rest on queues that ask for it.

    What it does not override it passes on to the driver as is: deletes,
    purges, stats (whose oldest and newest are shown without their bodies,
    left as stored), renewals and releases of claims, sweeps, records, listings
    and health.
    """

    def __init__(self, inner: Storage, keyring: encryption.Keyring) -> None:
        super().__init__(inner)
        self.keyring = keyring
        self.name = inner.name
        self.visibility_lag = inner.visibility_lag
        self.remembers_queues = inner.remembers_queues
        self.all_queues_page = inner.all_queues_page

    # -- the way in -----------------------------------------------------------

    def _sealed(self, project: str, queue: str, metadata: Mapping[str, Any] | None,
                messages: Sequence[Message]) -> list[Message]:
        envelope = encryption.ENVELOPE
        for index, message in enumerate(messages):
            body = message.body
            if isinstance(body, dict) and envelope in body:  # may be of the envelope's shape: check in full
                encryption.check_not_envelope(body, f"messages[{index}].body")
        if not metadata or not meta.encrypts(metadata):  # a new queue's or a default one's: no call
            return list(messages)
        if not self.keyring.can_seal:
            raise errors.EncryptionUnavailable(queue)
        return [dataclasses.replace(m, body=encryption.seal(m.body, self.keyring, project, m.id))
                for m in messages]

    def post_messages(self, project: str, queue: str, messages: Sequence[Message], now: float) -> list[str]:
        return self.post_planned(project, queue, lambda _: messages, now)

    def post_planned(self, project: str, queue: str, plan: PostPlan, now: float) -> list[str]:
        return self.inner.post_planned(
            project, queue, lambda stored: self._sealed(project, queue, stored, plan(stored)), now)

    def edit_delayed_message(self, project: str, queue: str, message_id: str, changes: Mapping[str, Any],
                             now: float) -> Message:
        if "body" in changes:
            encryption.check_not_envelope(changes["body"], "body")
            sealed = self._sealed(project, queue, self.inner.get_queue_metadata(project, queue),
                                  [Message(id=message_id, body=changes["body"], created=now, expires=now)])
            changes = {**changes, "body": sealed[0].body}
        edited = self.inner.edit_delayed_message(project, queue, message_id, changes, now)
        return self._opened(project, queue, [edited])[0]

    # -- the way out ----------------------------------------------------------

    def _opened(self, project: str, queue: str, messages: list[Message]) -> list[Message]:
        """Return messages with bodies and reasons opened, or raise MessageUnreadable naming the first."""
        if not _any_sealed(messages):
            return messages  # nothing sealed (every answer of a queue that does not encrypt): as read
        opened: list[Message] = []
        failures: list[tuple[str, str]] = []
        for message in messages:
            if not _holds_sealed(message):
                opened.append(message)
                continue
            try:
                opened.append(self._opened_message(project, message))
            except encryption.Unopenable as exc:
                failures.append((message.id, str(exc)))
        if failures:
            LOG.error("%s/%s: %d message(s) cannot be decrypted, the first %s: %s",
                      project, queue, len(failures), failures[0][0], failures[0][1])
            raise errors.MessageUnreadable(queue, failures[0][0], failures[0][1], stored=list(messages),
                                           unreadable=[message_id for message_id, _ in failures])
        return opened

    def _opened_message(self, project: str, message: Message) -> Message:
        """Return one message with its body and its failure reasons opened.

        Raises:
            Unopenable: one of them cannot be.
        """
        body = encryption.open_body(message.body, self.keyring, project, message.id)
        history = [
            {**entry, "error": encryption.open_reason(entry["error"], self.keyring, project, message.id)}
            if encryption.is_sealed_text(entry.get("error")) else entry for entry in message.failures]
        return dataclasses.replace(message, body=body, failures=history)

    def list_messages(self, project: str, queue: str, *, now: float, marker: int | None, limit: int,
                      include_claimed: bool, include_delayed: bool,
                      exclude_client_id: str | None) -> list[Message]:
        return self._opened(project, queue, self.inner.list_messages(
            project, queue, now=now, marker=marker, limit=limit, include_claimed=include_claimed,
            include_delayed=include_delayed, exclude_client_id=exclude_client_id))

    def get_messages(self, project: str, queue: str, ids: Sequence[str], now: float) -> list[Message]:
        return self._opened(project, queue, self.inner.get_messages(project, queue, ids, now))

    def pop_messages(self, project: str, queue: str, limit: int, now: float) -> list[Message]:
        popped = self.inner.pop_messages(project, queue, limit, now)
        try:
            return self._opened(project, queue, popped)
        except errors.MessageUnreadable:
            # the pop deleted them: put them back (same ids, new markers) rather than lose them
            kept = [dataclasses.replace(m, claim_id=None, claim_expires=None, dedup_id=None, dedup_until=0.0)
                    for m in popped]
            self.inner.post_messages(project, queue, kept, now)
            raise

    def _opened_claim(self, project: str, queue: str, result: ClaimResult,
                      request: ClaimRequest) -> ClaimResult:
        try:
            opened = self._opened(project, queue, result.claimed)
        except errors.MessageUnreadable:
            # no consumer sees the claim: take it back, counts restored, so that it changes nothing
            # (a store cannot open bodies inside its atomic claim: Redis claims in one Lua script)
            self.inner.release_claim(project, queue, request.claim_id, request.now, undo=True)
            raise
        return result if opened is result.claimed else dataclasses.replace(result, claimed=opened)

    def claim_messages(self, project: str, queue: str, request: ClaimRequest) -> ClaimResult:
        return self._opened_claim(project, queue, self.inner.claim_messages(project, queue, request), request)

    def claim_planned(self, project: str, queue: str, plan: ClaimPlan) -> ClaimResult:
        made: list[ClaimRequest] = []

        def planned(metadata: Mapping[str, Any] | None) -> ClaimRequest:
            made.append(plan(metadata))
            return made[-1]

        result = self.inner.claim_planned(project, queue, planned)
        return self._opened_claim(project, queue, result, made[-1]) if made else result

    def get_claim(self, project: str, queue: str, claim_id: str, now: float) -> tuple[Claim, list[Message]]:
        claim, messages = self.inner.get_claim(project, queue, claim_id, now)
        return claim, self._opened(project, queue, messages)

    # -- moves: the body as stored --------------------------------------------

    def move_messages(self, project: str, queue: str, moves: Sequence[Move], target_queue: str,
                      now: float) -> list[str]:
        if not self.keyring.keys:  # nothing was opened on the way out: every body is as stored
            return self.inner.move_messages(project, queue, moves, target_queue, now)
        ids = [mv.read.id for mv in moves]
        stored = {m.id: m for m in self.inner.get_messages(project, queue, ids, now)}
        as_stored = [Move(dataclasses.replace(mv.read, body=stored[mv.read.id].body,
                                              failures=stored[mv.read.id].failures),
                          dataclasses.replace(mv.moved, body=stored[mv.read.id].body,
                                              failures=stored[mv.read.id].failures))
                     for mv in moves if mv.read.id in stored]
        return self.inner.move_messages(project, queue, as_stored, target_queue, now)

    # -- what a queue's metadata may say -------------------------------------

    def create_queue(self, project: str, queue: str, metadata: Mapping[str, Any], now: float) -> bool:
        meta.check_encryption(metadata, self.keyring.can_seal)
        return self.inner.create_queue(project, queue, metadata, now)

    def set_queue_metadata(self, project: str, queue: str, metadata: Mapping[str, Any]) -> None:
        meta.check_encryption(metadata, self.keyring.can_seal)
        self.inner.set_queue_metadata(project, queue, metadata)

    # -- failure reasons: sealed on a queue that encrypts ----------------------

    def release_message(self, project: str, queue: str, message_id: str, claim_id: str, now: float,
                        failure: Mapping[str, Any] | None, history_limit: int,
                        delay: float | None = None, *, outcome: str = "retry",
                        dead_letter: DeadLetterPolicy = NO_DEAD_LETTER) -> SweepResult:
        """Release as the driver does; a reason given on a queue that encrypts is stored sealed."""
        reason = failure.get("error") if failure is not None else None
        if failure is not None and isinstance(reason, str) and reason:
            encryption.check_not_sealed_text(reason, "error")
            if self.keyring.can_seal and meta.encrypts(self.inner.get_queue_metadata(project, queue)):
                sealed = encryption.seal_reason(reason, self.keyring, project, message_id)
                failure = {**failure, "error": sealed}
        return self.inner.release_message(project, queue, message_id, claim_id, now, failure, history_limit,
                                          delay, outcome=outcome, dead_letter=dead_letter)


def _holds_sealed(message: Message) -> bool:
    """Return whether a stored message holds anything sealed: its body or a failure reason."""
    return encryption.is_envelope(message.body) or bool(message.failures) and any(
        encryption.is_sealed_text(entry.get("error")) for entry in message.failures)


def _any_sealed(messages: Sequence[Message]) -> bool:
    """Return whether any message holds anything sealed (:func:`_holds_sealed`).

    One loop step a message for the usual one, which has no failure reasons and
    a body that cannot be an envelope (not an object with the envelope's key):
    a claim of 10 asks this of each message it answers.
    """
    envelope = encryption.ENVELOPE
    for message in messages:
        body = message.body
        if (message.failures or isinstance(body, dict) and envelope in body) and _holds_sealed(message):
            return True
    return False


def encrypted(storage: Storage, settings: Settings) -> Storage:
    """Return the store seen through encryption at rest with the configured keys (once: idempotent)."""
    if isinstance(storage, EncryptedStorage):
        return storage
    return EncryptedStorage(storage, encryption.Keyring.from_setting(settings.encryption_keys))
