"""SQS's dead-letter actions: ListDeadLetterSourceQueues, and message-move tasks on the redrive tasks.

A message-move task is a redrive task of its source queue (the DLQ): started
without a destination it moves each dead letter back to the queue it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zaqar_lite import errors
from zaqar_lite.api.sqs.base import Caller, SqsBase, required
from zaqar_lite.claims import metadata as meta
from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.models import RedriveRequest, RedriveTask
from zaqar_lite.rules.sqs import invalid_parameter, whole_number
from zaqar_lite.rules.sqs import names as sqs_names

#: a redrive task's status -> a message-move task's
STATUSES = {redrive_policy.RUNNING: "RUNNING", redrive_policy.COMPLETED: "COMPLETED",
            redrive_policy.CANCELLED: "CANCELLED", redrive_policy.FAILED: "FAILED"}
MAX_RATE = 500


class RedriveActions(SqsBase):
    """ListDeadLetterSourceQueues, StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask."""

    def _sources(self, project: str, queue: str) -> list[str]:
        """Return the queues whose dead-letter queue is ``queue``."""
        found, marker = [], None
        while True:
            page = self.messaging.list_queues(project, marker=marker, limit=1000, name=None, filters={})
            found += [name for name, stored in page if stored.get(meta.DEAD_LETTER_QUEUE) == queue]
            if len(page) < 1000:
                return found
            marker = page[-1][0]

    def list_dead_letter_source_queues(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer the URLs of the queues whose RedrivePolicy names this queue."""
        project, name = self.queue_of(caller, params)
        self.metadata(project, name)
        sources = self._sources(project, name)
        limit = params.get("MaxResults")
        if limit is not None:
            sources = sources[:whole_number(limit, "MaxResults", 1, 1000)]
        return {"queueUrls": [self.url(caller, project, source) for source in sources]}

    def _source(self, caller: Caller, arn: Any) -> tuple[str, str]:
        region, account, name = sqs_names.parse_arn(arn, "SourceArn")
        if caller.restricted and account != caller.account:
            raise errors.SqsRefused("AccessDenied", "Access to the resource is denied.")
        project = self.project(account, region or caller.region)
        try:
            self.messaging.existing_queue_metadata(project, name)
        except (errors.QueueDoesNotExist, errors.ValidationFailed):
            raise errors.SqsRefused("ResourceNotFoundException", "The resource that you specified for the "
                                    "SourceArn parameter doesn't exist.") from None
        return project, name

    def start_message_move_task(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Start moving a dead-letter queue's messages back to their sources (or to ``DestinationArn``)."""
        project, name = self._source(caller, required(params, "SourceArn"))
        if not self._sources(project, name):
            raise invalid_parameter("Source queue must be configured as a Dead Letter Queue.")
        destination = None
        if params.get("DestinationArn"):
            region, account, destination = sqs_names.parse_arn(params["DestinationArn"], "DestinationArn")
            if self.project(account, region or caller.region) != project:
                raise invalid_parameter("The destination queue must be in the source queue's account.")
        rate = params.get("MaxNumberOfMessagesPerSecond")
        per_second = float(whole_number(rate, "MaxNumberOfMessagesPerSecond", 1, MAX_RATE)) \
            if rate is not None else None
        try:
            task = self.messaging.start_redrive_task(project, name, RedriveRequest(
                limit=0, destination=destination, max_per_second=per_second, as_task=True))
        except errors.RedriveTaskRunning:
            raise invalid_parameter("There is already a task running. Only one active task is allowed for a "
                                    "source queue arn at a given time.") from None
        return {"TaskHandle": sqs_names.task_handle(project, caller.region, name, task.id)}

    def _shown(self, caller: Caller, project: str, task: RedriveTask) -> dict[str, Any]:
        found: dict[str, Any] = {
            "Status": STATUSES.get(task.status, task.status.upper()),
            "SourceArn": self.arn(caller, project, task.queue),
            "ApproximateNumberOfMessagesMoved": task.moved,
            "StartedTimestamp": int(task.created * 1000),
        }
        if task.status == redrive_policy.RUNNING:
            found["TaskHandle"] = sqs_names.task_handle(project, caller.region, task.queue, task.id)
        if task.destination:
            found["DestinationArn"] = self.arn(caller, project, task.destination)
        if task.max_per_second and task.max_per_second != float(self.settings.limits.max_redrive_rate):
            found["MaxNumberOfMessagesPerSecond"] = int(task.max_per_second)
        if task.to_move is not None:
            found["ApproximateNumberOfMessagesToMove"] = task.to_move
        if task.error:
            found["FailureReason"] = task.error
        return found

    def list_message_move_tasks(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer the newest message-move tasks of a source queue (``MaxResults``, 1 to 10, default 1)."""
        project, name = self._source(caller, required(params, "SourceArn"))
        limit = params.get("MaxResults")
        count = whole_number(limit, "MaxResults", 1, 10) if limit is not None else 1
        tasks = self.messaging.redrive_tasks(project, name)[:count]
        return {"Results": [self._shown(caller, project, task) for task in tasks]}

    def cancel_message_move_task(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Cancel a running message-move task; answer how many messages it moved."""
        project, _, queue, task_id = sqs_names.parse_task_handle(required(params, "TaskHandle"))
        if caller.restricted and self.place(project)[0] != caller.account:
            raise errors.SqsRefused("AccessDenied", "Access to the resource is denied.")
        try:
            task = self.messaging.cancel_redrive_task(project, queue, task_id)
        except errors.RedriveTaskDoesNotExist:
            raise errors.SqsRefused("ResourceNotFoundException", "Task does not exist.") from None
        except errors.RedriveTaskFinished:
            raise errors.SqsRefused("FailedPrecondition", "Only active tasks can be cancelled.") from None
        return {"ApproximateNumberOfMessagesMoved": task.moved}
