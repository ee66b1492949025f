"""Domain errors, raised by storage and policy and mapped to HTTP in one place.

The mapping lives in :mod:`zaqar_lite.api.errors`; nothing below knows about HTTP.
"""

from __future__ import annotations

import json
from typing import Any

#: the longest number an error message repeats back (a longer one is only called a number)
SHOWN_NUMBER_LENGTH = 24


def sent(value: Any) -> str:
    """Say what a client sent, for an error message, without repeating its text.

    A number or a boolean is short and is what was wrong, so it is shown; a
    string, an array or an object is named by its JSON type only, so that no
    message echoes a payload back (or a secret, or markup).
    """
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        text = json.dumps(value)
        return text if len(text) <= SHOWN_NUMBER_LENGTH else "a number"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a value of another type"


class ZaqarLiteError(Exception):
    """Base of every domain error; ``str(err)`` is a sentence a client can read."""


class ValidationFailed(ZaqarLiteError):
    """A request value is malformed or out of range."""


class InvalidBody(ValidationFailed):
    """The request body is not valid JSON or does not have the documented shape."""


class NotFound(ZaqarLiteError):
    """A named resource does not exist (or has expired)."""


class QueueDoesNotExist(NotFound):
    """The queue does not exist in this project."""

    def __init__(self, name: str, project: str) -> None:
        super().__init__(f"Queue {name} does not exist in project {project}.")


class MessageDoesNotExist(NotFound):
    """No such message, or it has expired."""

    def __init__(self, message_id: str, queue: str) -> None:
        super().__init__(f"Message {message_id} does not exist in queue {queue}.")


class ClaimDoesNotExist(NotFound):
    """No such claim, or it has expired."""

    def __init__(self, claim_id: str, queue: str) -> None:
        super().__init__(f"Claim {claim_id} does not exist in queue {queue}.")


class SubscriptionDoesNotExist(NotFound):
    """No such subscription."""


class TemplateDoesNotExist(NotFound):
    """No queue template of this name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Queue template {name} does not exist.")


class PoolDoesNotExist(NotFound):
    """No pool of this name in the catalog."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Pool {name} does not exist.")


class FlavorDoesNotExist(NotFound):
    """No flavor of this name in the catalog."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Flavor {name} does not exist.")


class Conflict(ZaqarLiteError):
    """The request conflicts with the resource's current state."""


class MessageNotEditable(Conflict):
    """An edit of a message that is no longer delayed, or is claimed (409)."""

    def __init__(self, message_id: str, why: str) -> None:
        super().__init__(f"Message {message_id} cannot be edited: {why}. Only a message that is "
                         "still delayed, unclaimed and unexpired can be edited.")


class DefaultDeadLetterQueueMissing(Conflict):
    """A reject on a queue that dead-letters into the server's default DLQ, which the project lacks (409)."""

    def __init__(self, default: str, queue: str) -> None:
        super().__init__(f"Queue {queue} dead-letters into the server's default dead-letter queue {default}, "
                         f"which this project has not created: create it, then reject again (nothing "
                         f"is discarded for lack of it). The message is still claimed.")


class ClaimRuleViolation(ZaqarLiteError):
    """A message operation broke the claim rules (docs/api.rst, "Claim rules")."""


class MessageIsClaimed(ClaimRuleViolation):
    """The message is held by a live claim and no claim id was given (403)."""

    def __init__(self, message_id: str) -> None:
        super().__init__(
            f"Message {message_id} is claimed; it cannot be changed without its claim ID."
        )


class MessageIsClaimedBy(ClaimRuleViolation):
    """The message is held by another live claim than the one given (403)."""

    def __init__(self, message_id: str, claim_id: str) -> None:
        super().__init__(f"Message {message_id} is not held by claim {claim_id}.")


class InvalidClaim(ClaimRuleViolation):
    """The claim id given is unknown or expired (400)."""

    def __init__(self, claim_id: str) -> None:
        super().__init__(f"Claim {claim_id} does not exist or has expired.")


class MessageNotClaimed(ClaimRuleViolation):
    """A claim id was given but the message is not claimed (400)."""

    def __init__(self, message_id: str) -> None:
        super().__init__(f"Message {message_id} is not claimed; do not pass a claim ID.")


class StorageUnavailable(ZaqarLiteError):
    """The storage backend cannot be reached; the request may be retried."""


class Unauthorized(ZaqarLiteError):
    """Missing or unknown credentials (401)."""


class Forbidden(ZaqarLiteError):
    """The credentials do not allow this request (403)."""


class QueueLimitReached(Forbidden):
    """The project has as many queues as ``[limits] max_queues_per_project`` allows (403)."""

    def __init__(self, project: str, limit: int) -> None:
        super().__init__(
            f"Project {project} already has {limit} queues, the most the server's "
            f"max_queues_per_project limit allows. Delete a queue before creating another.")


class RedriveTaskDoesNotExist(NotFound):
    """No such redrive task on this queue (404)."""

    def __init__(self, task_id: str, queue: str) -> None:
        super().__init__(f"Redrive task {task_id} does not exist on queue {queue}.")


class RedriveTaskRunning(Conflict):
    """A redrive task already runs on the queue; one at a time (409)."""

    def __init__(self, queue: str, task_id: str) -> None:
        super().__init__(f"Redrive task {task_id} is still running on queue {queue}; only one task "
                         "runs per queue at a time: wait for it to finish, or cancel it.")


class RedriveTaskFinished(Conflict):
    """A cancel of a redrive task that is no longer running (409)."""

    def __init__(self, task_id: str, status: str) -> None:
        super().__init__(f"Redrive task {task_id} is {status}; only a running task can be cancelled.")


class MessageUnreadable(ZaqarLiteError):
    """A message body stored encrypted cannot be decrypted (its key is gone, or it was altered) (503).

    Attributes:
        stored: the messages of the answer as stored (bodies still encrypted),
            so that a caller can put back what it took (a pop) or note the failure.
        unreadable: the ids of those that cannot be decrypted.
    """

    def __init__(self, queue: str, message_id: str, why: str, stored: list[Any] | None = None,
                 unreadable: list[str] | None = None) -> None:
        others = len(unreadable or []) - 1
        plural = "s" if others > 1 else ""
        more = f" ({others} more message{plural} of this answer likewise)" if others > 0 else ""
        super().__init__(
            f"Message {message_id} of queue {queue} cannot be decrypted: {why}.{more} An operator can "
            "add its key back to [encryption] keys; the message can also be deleted by its id.")
        self.stored = stored or []
        self.unreadable = unreadable or [message_id]


class EncryptionUnavailable(ZaqarLiteError):
    """A queue keeps its bodies encrypted but the server has no key to encrypt with (503)."""

    def __init__(self, queue: str) -> None:
        super().__init__(
            f"Queue {queue} keeps its message bodies encrypted (_enable_encrypt_messages) but this "
            "server has no [encryption] keys; messages are refused rather than stored in plaintext.")


class QueuePaused(Conflict):
    """The queue is paused (``_paused``): it hands out nothing; a claim on it takes no message."""

    def __init__(self, queue: str) -> None:
        super().__init__(f"Queue {queue} is paused: it accepts posts and hands out nothing until resumed.")


class SqsRefused(ValidationFailed):
    """A request of the SQS-compatible face breaks one of SQS's rules, named by SQS's error code.

    ``code`` is SQS's short code (``InvalidAttributeValue``, ``QueueDoesNotExist``,
    ...); the SQS face renders it in SQS's shapes (``api/sqs/errors.py``).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
