"""Errors of the SQS face: each domain error as SQS names it, in one place.

An :class:`~zaqar_lite.errors.SqsRefused` carries SQS's code already; the
other domain errors are mapped here (a missing queue is SQS's
``QueueDoesNotExist``, a refused value its ``InvalidParameterValue``, ...).
Each code has its HTTP status and, for the query protocol and the
``x-amzn-query-error`` header botocore reads, SQS's older code.
"""

from __future__ import annotations

import dataclasses
import logging

from zaqar_lite import errors

LOG = logging.getLogger(__name__)


#: SQS code -> the ``__type`` AWS JSON 1.0 gives it, where it differs (the query code stays the code)
JSON_TYPES = {"InvalidParameterValue": "InvalidParameterValueException",
              "MissingParameter": "MissingRequiredParameterException"}
#: the message of a missing queue in the query protocol's answers, as SQS words it there
NO_QUEUE_QUERY_MESSAGE = "The specified queue does not exist for this wsdl version."


@dataclasses.dataclass(frozen=True)
class SqsError:
    """An error as SQS answers it."""

    code: str
    message: str
    status: int = 400
    #: the query protocol's code (and ``x-amzn-query-error``'s)
    query_code: str = ""
    sender: bool = True

    @property
    def json_type(self) -> str:
        """Return the code of the AWS JSON 1.0 answer's ``__type``."""
        return JSON_TYPES.get(self.code, self.code)

    @property
    def query_message(self) -> str:
        """Return the message of the query protocol's answer."""
        return NO_QUEUE_QUERY_MESSAGE if self.code == "QueueDoesNotExist" else self.message

    @property
    def query_header(self) -> str:
        """Return the ``x-amzn-query-error`` header's value: ``<query code>;Sender`` (or ``Receiver``)."""
        return f"{self.query_code or self.code};{'Sender' if self.sender else 'Receiver'}"


_OLD = "AWS.SimpleQueueService."
#: SQS code -> (HTTP status, query code)
CODES: dict[str, tuple[int, str]] = {
    "QueueDoesNotExist": (400, _OLD + "NonExistentQueue"),
    "QueueNameExists": (400, "QueueAlreadyExists"),
    "MessageNotInflight": (400, _OLD + "MessageNotInflight"),
    "TooManyEntriesInBatchRequest": (400, _OLD + "TooManyEntriesInBatchRequest"),
    "EmptyBatchRequest": (400, _OLD + "EmptyBatchRequest"),
    "BatchEntryIdsNotDistinct": (400, _OLD + "BatchEntryIdsNotDistinct"),
    "InvalidBatchEntryId": (400, _OLD + "InvalidBatchEntryId"),
    "BatchRequestTooLong": (400, _OLD + "BatchRequestTooLong"),
    "PurgeQueueInProgress": (403, _OLD + "PurgeQueueInProgress"),
    "QueueDeletedRecently": (400, _OLD + "QueueDeletedRecently"),
    "UnsupportedOperation": (400, _OLD + "UnsupportedOperation"),
    "InvalidClientTokenId": (403, "InvalidClientTokenId"),
    "SignatureDoesNotMatch": (403, "SignatureDoesNotMatch"),
    "IncompleteSignature": (400, "IncompleteSignature"),
    "MissingAuthenticationToken": (403, "MissingAuthenticationToken"),
    "AccessDenied": (403, "AccessDenied"),
    "RequestExpired": (400, "RequestExpired"),
    "OverLimit": (403, "OverLimit"),
    "InvalidAction": (400, "InvalidAction"),
    "ResourceNotFoundException": (404, "ResourceNotFoundException"),
}


def from_domain(exc: errors.ZaqarLiteError) -> SqsError:
    """Return the SQS error a domain error stands for."""
    if isinstance(exc, errors.SqsRefused):
        code = exc.code
    elif isinstance(exc, errors.QueueDoesNotExist):
        return refused("QueueDoesNotExist", "The specified queue does not exist.")
    elif isinstance(exc, errors.QueueLimitReached):
        code = "OverLimit"
    elif isinstance(exc, errors.RedriveTaskDoesNotExist):
        code = "ResourceNotFoundException"
    elif isinstance(exc, (errors.ValidationFailed, errors.Conflict, errors.NotFound,
                          errors.ClaimRuleViolation)):
        code = "InvalidParameterValue"
    elif isinstance(exc, errors.Unauthorized):
        code = "InvalidClientTokenId"
    elif isinstance(exc, errors.Forbidden):
        code = "AccessDenied"
    elif isinstance(exc, (errors.StorageUnavailable, errors.MessageUnreadable, errors.EncryptionUnavailable)):
        if isinstance(exc, errors.StorageUnavailable):
            LOG.warning("storage unavailable: %s", exc)
        return SqsError("ServiceUnavailable", str(exc), 503, "ServiceUnavailable", sender=False)
    else:
        return unexpected()
    return refused(code, str(exc))


def refused(code: str, message: str) -> SqsError:
    """Return the SQS error of a code, with its status and query code."""
    status, query_code = CODES.get(code, (400, code))
    return SqsError(code, message, status, query_code)


def unexpected() -> SqsError:
    """Return the error of a fault of the server's own (logged where it is caught)."""
    return SqsError("InternalFailure", "An unexpected error occurred; it has been logged.", 500,
                    "InternalFailure", sender=False)
