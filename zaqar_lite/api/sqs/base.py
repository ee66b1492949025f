"""What every SQS action shares: who calls (:class:`Caller`), the queue it names, the services it uses."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from zaqar_lite import errors
from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.clock import Clock
from zaqar_lite.config import Settings
from zaqar_lite.rules.sqs import missing_parameter
from zaqar_lite.rules.sqs import names as sqs_names
from zaqar_lite.service import Messaging
from zaqar_lite.service.waiting.long_poll import LongPoll


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who an SQS call acts for, and where its answers point.

    ``account`` is the zaqar-lite project (the account an access key names);
    ``restricted`` says the credentials were checked (token or keystone auth), so
    a queue URL may only name the caller's own account.
    """

    account: str
    region: str
    base_url: str
    restricted: bool = False
    #: the call's ``X-Amzn-Trace-Id`` header (a sent message's ``AWSTraceHeader``), if any
    trace_header: str | None = None
    #: ``(account, name)`` of the queue URL a query-protocol call was posted to, if any
    queue_path: tuple[str, str] | None = None
    #: the region that queue URL names (``/queue/<region>/...``), if any
    queue_region: str | None = None


def no_such_queue() -> errors.SqsRefused:
    """Return SQS's error for a queue that does not exist."""
    return errors.SqsRefused("QueueDoesNotExist", "The specified queue does not exist.")


class SqsBase:
    """The services an SQS action reaches, handed in once by the composition root."""

    def __init__(self, settings: Settings, messaging: Messaging, long_poll: LongPoll, clock: Clock) -> None:
        self.settings = settings
        self.messaging = messaging
        self.long_poll = long_poll
        self.clock = clock

    def queue_of(self, caller: Caller, params: Mapping[str, Any]) -> tuple[str, str]:
        """Return ``(project, queue)`` a call names by its ``QueueUrl`` (or the URL it was posted to).

        Raises:
            SqsRefused: no queue URL, a malformed one, or (under auth) another account's.
        """
        url = params.get("QueueUrl")
        if url is None and caller.queue_path is not None:
            region, (account, name) = caller.queue_region, caller.queue_path
        else:
            region, account, name = sqs_names.locate_queue(url)
            if not account:  # a queue's name: the caller's own queue, in the caller's region
                account, region = caller.account, caller.region
        if caller.restricted and account != caller.account:
            raise errors.SqsRefused("AccessDenied", "Access to the resource is denied: the queue is in "
                                    "another account than the access key's.")
        if not is_queue_name(name, self.settings.limits):
            raise no_such_queue()
        return self.project(account, region or self.settings.sqs.region), name

    def project(self, account: str, region: str) -> str:
        """Return the project of an account's queues in a region (the account's own in the home region)."""
        return sqs_names.project_of(account, region, self.settings.sqs.region)

    def place(self, project: str) -> tuple[str, str]:
        """Return ``(account, region)`` of a project :meth:`project` names."""
        return sqs_names.place_of(project, self.settings.sqs.region)

    def metadata(self, project: str, queue: str) -> dict[str, Any]:
        """Return a queue's stored metadata.

        Raises:
            SqsRefused: ``QueueDoesNotExist``.
        """
        try:
            return self.messaging.existing_queue_metadata(project, queue)
        except errors.QueueDoesNotExist:
            raise no_such_queue() from None

    def url(self, caller: Caller, project: str, queue: str) -> str:
        """Return the URL of a queue of a project, on the base URL the caller reached."""
        account, region = self.place(project)
        return sqs_names.queue_url(caller.base_url, account, queue,
                                   None if region == self.settings.sqs.region else region)

    def arn(self, caller: Caller, project: str, queue: str) -> str:
        """Return the ARN of a queue of a project, in the queue's region."""
        account, region = self.place(project)
        return sqs_names.queue_arn(region, account, queue)


def required(params: Mapping[str, Any], name: str) -> Any:
    """Return a parameter a call must carry.

    Raises:
        SqsRefused: ``MissingParameter``.
    """
    value = params.get(name)
    if value is None or value == "":
        raise missing_parameter(name)
    return value


def strings(value: Any) -> list[str]:
    """Return a list parameter's text items (a lone text is a list of one)."""
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


Action = Callable[[Caller, Mapping[str, Any]], dict[str, Any]]
