"""Every SQS action, by its name, on one object over the services it uses."""

from __future__ import annotations

from zaqar_lite.api.sqs.base import Action
from zaqar_lite.api.sqs.messages import MessageActions
from zaqar_lite.api.sqs.queues import QueueActions
from zaqar_lite.api.sqs.redrive import RedriveActions

#: SQS's actions (AddPermission and RemovePermission keep a Policy that is not enforced: docs/api.rst)
NAMES = (
    "AddPermission", "RemovePermission",
    "CreateQueue", "GetQueueUrl", "ListQueues", "GetQueueAttributes", "SetQueueAttributes", "TagQueue",
    "UntagQueue", "ListQueueTags", "DeleteQueue", "PurgeQueue", "SendMessage", "SendMessageBatch",
    "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch", "ListDeadLetterSourceQueues", "StartMessageMoveTask",
    "ListMessageMoveTasks", "CancelMessageMoveTask",
)
#: the actions answered as not supported, and why (none: every SQS action is served)
UNSUPPORTED: dict[str, str] = {}


def snake(name: str) -> str:
    """Return the method name of an action (``SendMessageBatch`` -> ``send_message_batch``)."""
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


class SqsActions(QueueActions, MessageActions, RedriveActions):
    """The SQS actions over the messaging service and long polling."""

    def table(self) -> dict[str, Action]:
        """Return every action's method by the action's name."""
        return {name: getattr(self, snake(name)) for name in NAMES}
