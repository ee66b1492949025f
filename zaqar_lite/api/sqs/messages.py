"""SQS's message actions over the messaging service: send, receive (a claim), delete, change visibility.

A ``ReceiveMessage`` is one claim of the queue (``VisibilityTimeout`` its ttl,
no grace), waiting as a long-polling claim does for ``WaitTimeSeconds``; each
message's receipt handle names that claim. A delete deletes under the claim; a
visibility change renews a claim of one message, and releases a message of a
larger claim with the new timeout as its delay.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.api.sqs.base import Caller, SqsBase, required, strings
from zaqar_lite.models import Message
from zaqar_lite.rules.sqs import attributes as sqs_attributes
from zaqar_lite.rules.sqs import invalid_parameter, whole_number
from zaqar_lite.rules.sqs import messages as sqs_messages
from zaqar_lite.rules.sqs import names as sqs_names

MAX_BATCH = 10
_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
MAX_VISIBILITY = 43200
#: the most bytes of messages one batch sends (SQS's limit, whatever the queue's MaximumMessageSize)
MAX_BATCH_BYTES = 1048576


#: what a FIFO message's marker is offset by in its SequenceNumber: 2**64, so that it is a 20-digit
#: number without leading zeros, as SQS's are
_SEQUENCE_BASE = 2 ** 64


def _sequence_number(marker: int) -> str:
    return str(_SEQUENCE_BASE + marker)


@contextlib.contextmanager
def _handle_is_invalid() -> Iterator[None]:
    """Word a malformed receipt handle of a ChangeMessageVisibility as SQS does: without the handle."""
    try:
        yield
    except errors.SqsRefused as exc:
        if exc.code != "ReceiptHandleIsInvalid":
            raise
        raise errors.SqsRefused(exc.code, "The input receipt handle is invalid.") from None


def check_batch(entries: Any, action: str) -> list[Mapping[str, Any]]:
    """Return a batch's entries: 1 to 10, each with a distinct, well-formed ``Id``.

    Raises:
        SqsRefused: ``EmptyBatchRequest``, ``TooManyEntriesInBatchRequest``,
            ``InvalidBatchEntryId`` or ``BatchEntryIdsNotDistinct``.
    """
    if not isinstance(entries, list) or not entries:
        raise errors.SqsRefused("EmptyBatchRequest", "There should be at least one "
                                f"{action}RequestEntry in the request.")
    if len(entries) > MAX_BATCH:
        raise errors.SqsRefused("TooManyEntriesInBatchRequest", f"Maximum number of entries per request are "
                                f"{MAX_BATCH}. You have sent {len(entries)}.")
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry.get("Id") if isinstance(entry, Mapping) else None
        if not isinstance(entry_id, str) or not _ENTRY_ID.fullmatch(entry_id):
            raise errors.SqsRefused("InvalidBatchEntryId", "A batch entry id can only contain alphanumeric "
                                    "characters, hyphens and underscores. It can be at most 80 letters long.")
        if entry_id in seen:
            raise errors.SqsRefused("BatchEntryIdsNotDistinct", f"Id {entry_id} repeated.")
        seen.add(entry_id)
    return entries


def failed(entry_id: str, exc: errors.SqsRefused) -> dict[str, Any]:
    """Return the ``Failed`` entry of a batch entry refused with ``exc``."""
    return {"Id": entry_id, "SenderFault": True, "Code": exc.code, "Message": str(exc)}


def batch_result(successful: list[dict[str, Any]], failures: list[dict[str, Any]]) -> dict[str, Any]:
    """Return a batch's answer: ``Failed`` only when an entry failed, as SQS answers."""
    return {"Successful": successful, "Failed": failures} if failures else {"Successful": successful}


def _ordering(stored: Mapping[str, Any], body: str, entry: Mapping[str, Any], fifo: bool,
              delay: int | None) -> tuple[str | None, str | None]:
    """Return the ``(group, dedup_id)`` a message is stored with: a FIFO queue's, none on a standard queue.

    Raises:
        SqsRefused: a FIFO message without its group, without a deduplication id
            on a queue without ``ContentBasedDeduplication``, or with a delay of
            its own; a standard queue's message with a deduplication id.
    """
    group, dedup_id = entry.get("MessageGroupId"), entry.get("MessageDeduplicationId")
    if not fifo:
        if group is not None:
            _check_id("MessageGroupId", group)
        if dedup_id:
            raise invalid_parameter(f"Value {dedup_id} for parameter MessageDeduplicationId is invalid. "
                                    "Reason: The request include parameter that is not valid for this "
                                    "queue type.")
        return None, None
    if delay:
        raise invalid_parameter(f"Value {delay} for parameter DelaySeconds is invalid. Reason: The "
                                "request include parameter that is not valid for this queue type.")
    if not group:
        raise errors.SqsRefused("MissingParameter", "The request must contain the parameter MessageGroupId.")
    if dedup_id is None:  # an empty one is refused as malformed below
        if sqs_attributes.setting(stored, "ContentBasedDeduplication") != "true":
            raise invalid_parameter("The queue should either have ContentBasedDeduplication enabled or "
                                    "MessageDeduplicationId provided explicitly")
        dedup_id = sqs_messages.content_dedup_id(body)
    _check_id("MessageGroupId", group)
    _check_id("MessageDeduplicationId", dedup_id)
    return group, dedup_id


def _check_id(label: str, value: Any) -> None:
    """Refuse a group or deduplication id that is not 1 to 128 printable ASCII characters."""
    if not isinstance(value, str) or not re.fullmatch(r"[!-~]{1,128}", value):
        raise invalid_parameter(f"Value {value} for parameter {label} is invalid. Reason: {label} can only "
                                "include alphanumeric and punctuation characters. 1 to 128 in length.")


class MessageActions(SqsBase):
    """SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch), ChangeMessageVisibility(Batch)."""

    # -- send -------------------------------------------------------------------

    def _prepared(self, name: str, stored: Mapping[str, Any], entry: Mapping[str, Any], trace: str | None
                  ) -> tuple[dict[str, Any], dict[str, Any], int]:
        """Return the service's message item of one send, the answer's fields, and its size.

        ``trace`` is the send's ``X-Amzn-Trace-Id`` header: the message's ``AWSTraceHeader``
        unless it is sent as a system attribute.
        """
        attributes, size = sqs_messages.check_attributes(entry.get("MessageAttributes"))
        system, _ = sqs_messages.check_attributes(entry.get("MessageSystemAttributes"), system=True)
        sent_system = dict(system)
        if trace and "AWSTraceHeader" not in system:
            system["AWSTraceHeader"] = {"DataType": "String", "StringValue": trace}
        size_limit = int(sqs_attributes.setting(stored, "MaximumMessageSize"))
        body = sqs_messages.check_body(entry.get("MessageBody"), size_limit, size)
        fifo = sqs_names.is_fifo(name)
        delay = entry.get("DelaySeconds")
        delay_seconds = whole_number(delay, "DelaySeconds", 0, 900) if delay is not None else None
        group, dedup_id = _ordering(stored, body, entry, fifo, delay_seconds)
        shown_group = entry.get("MessageGroupId")
        if not fifo and isinstance(shown_group, str):  # a standard queue's group orders nothing: kept, shown
            system["MessageGroupId"] = {"DataType": "String", "StringValue": shown_group}
        if fifo:  # a FIFO message has no delay of its own: DelaySeconds=0 keeps the queue's, as SQS
            delay_seconds = None
        if dedup_id is not None:
            own = stored.get(sqs_attributes.SQS_KEY) or {}
            scoped, purged = bool(own.get(sqs_attributes.GROUP_DEDUP)), own.get("purged")
            sent_id, dedup_id = dedup_id, sqs_messages.dedup_key(dedup_id, group if scoped else None, purged)
            if dedup_id != sent_id:
                system["MessageDeduplicationId"] = {"DataType": "String", "StringValue": sent_id}
        item = {"body": sqs_messages.stored_body(body, attributes, system), "ttl": None,
                "delay": delay_seconds, "dlq_eligible": True, "dedup_id": dedup_id, "group": group}
        answer: dict[str, Any] = {"MD5OfMessageBody": sqs_messages.body_md5(body)}
        if attributes:
            answer["MD5OfMessageAttributes"] = sqs_messages.attributes_md5(attributes)
        if sent_system:
            answer["MD5OfMessageSystemAttributes"] = sqs_messages.attributes_md5(sent_system)
        return item, answer, len(body.encode()) + size

    def _post(self, caller: Caller, project: str, name: str, items: Sequence[Mapping[str, Any]],
              answers: Sequence[dict[str, Any]]) -> None:
        # the queue's MaximumMessageSize (up to 1 MiB) is the size rule here, not _max_messages_post_size
        ids = self.messaging.post(project, name, caller.account, items, 0)
        for answer, message_id in zip(answers, ids, strict=True):
            answer["MessageId"] = message_id
        if sqs_names.is_fifo(name):
            found, _ = self.messaging.get_messages(project, name, ids)
            markers = {message.id: message.marker for message in found}
            for answer in answers:
                answer["SequenceNumber"] = _sequence_number(markers.get(answer["MessageId"], 0))

    def send_message(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send one message."""
        project, name = self.queue_of(caller, params)
        stored = self.metadata(project, name)
        item, answer, size = self._prepared(name, stored, params, caller.trace_header)
        self._post(caller, project, name, [item], [answer])
        return answer

    def send_message_batch(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send up to ten messages; each entry succeeds or fails on its own."""
        project, name = self.queue_of(caller, params)
        stored = self.metadata(project, name)
        entries = check_batch(params.get("Entries"), "SendMessageBatch")
        for entry in entries if sqs_names.is_fifo(name) else ():
            # as SQS: a FIFO entry without its group or deduplication id fails the whole batch
            body = entry.get("MessageBody")
            try:
                _ordering(stored, body if isinstance(body, str) else "", entry, True, None)
            except errors.SqsRefused as exc:
                raise invalid_parameter(str(exc)) from None
        size_limit = MAX_BATCH_BYTES
        items, answers, failures, total = [], [], [], 0
        for entry in entries:
            try:
                item, answer, size = self._prepared(name, stored, entry, caller.trace_header)
            except errors.SqsRefused as exc:
                failures.append(failed(entry["Id"], exc))
                continue
            items.append(item)
            answers.append({"Id": entry["Id"], **answer})
            total += size
        if total > size_limit:
            raise errors.SqsRefused("BatchRequestTooLong", f"Batch requests cannot be longer than "
                                    f"{size_limit} "
                                    f"bytes. You have sent {total} bytes.")
        if items:
            self._post(caller, project, name, items, answers)
        return batch_result(answers, failures)

    # -- receive ----------------------------------------------------------------

    def receive_message(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Claim up to ``MaxNumberOfMessages`` messages, waiting up to ``WaitTimeSeconds`` for one."""
        project, name = self.queue_of(caller, params)
        stored = self.metadata(project, name)
        limit = params.get("MaxNumberOfMessages")
        limit = whole_number(limit, "MaxNumberOfMessages", 1, MAX_BATCH) if limit is not None else 1
        visibility = params.get("VisibilityTimeout")
        ttl = whole_number(visibility, "VisibilityTimeout", 0, MAX_VISIBILITY) if visibility is not None \
            else int(sqs_attributes.setting(stored, "VisibilityTimeout"))
        wait = params.get("WaitTimeSeconds")
        seconds = whole_number(wait, "WaitTimeSeconds", 0, 20) if wait is not None \
            else int(sqs_attributes.setting(stored, "ReceiveMessageWaitTimeSeconds"))
        system = sqs_messages.wanted_system_attributes(
            [*strings(params.get("AttributeNames")), *strings(params.get("MessageSystemAttributeNames"))])
        wanted = strings(params.get("MessageAttributeNames"))
        claim_id, claimed, now = self.long_poll.claim(project, name, limit, ttl, 0,
                                                      min(seconds, self.settings.claim_max_wait))
        if not claimed:
            return {}
        return {"Messages": [self._received(caller, project, name, claim_id, message, now, system, wanted)
                             for message in claimed]}

    def _received(self, caller: Caller, project: str, name: str, claim_id: str, message: Message,
                  now: float, system: set[str], wanted: Sequence[str]) -> dict[str, Any]:
        body, attributes, system_sent = sqs_messages.sent_parts(message.body)
        found: dict[str, Any] = {
            "MessageId": message.id, "ReceiptHandle": sqs_names.receipt_handle(name, message.id, claim_id),
            "MD5OfBody": sqs_messages.body_md5(body), "Body": body}
        if system:
            found["Attributes"] = self._system_attributes(caller, project, message, now, system, system_sent,
                                                          sqs_names.is_fifo(name))
        chosen = sqs_messages.selected_attributes(attributes, wanted)
        if chosen:
            found["MD5OfMessageAttributes"] = sqs_messages.attributes_md5(chosen)
            found["MessageAttributes"] = chosen
        return found

    def _system_attributes(self, caller: Caller, project: str, message: Message, now: float,
                           wanted: set[str], sent: Mapping[str, Mapping[str, str]],
                           fifo: bool) -> dict[str, str]:
        sent_at = str(int(message.created * 1000))
        values: dict[str, Callable[[], str | None]] = {
            "SenderId": lambda: message.client_id or caller.account,
            "SentTimestamp": lambda: sent_at,
            "ApproximateReceiveCount": lambda: str(message.claim_count),
            "ApproximateFirstReceiveTimestamp": lambda: str(int(now * 1000)) if message.claim_count <= 1
            else sent_at,
            "SequenceNumber": lambda: _sequence_number(message.marker) if fifo and message.group else None,
            "MessageDeduplicationId": lambda: (sent.get("MessageDeduplicationId") or {}).get("StringValue")
            or message.dedup_id,
            "MessageGroupId": lambda: message.group or (sent.get("MessageGroupId") or {}).get("StringValue"),
            "AWSTraceHeader": lambda: (sent.get("AWSTraceHeader") or {}).get("StringValue"),
            "DeadLetterQueueSourceArn": lambda: self.arn(caller, project, message.dead_letter["source_queue"])
            if message.dead_letter and message.dead_letter.get("source_queue") else None,
        }
        found = {key: values[key]() for key in sqs_messages.RECEIVABLE if key in wanted}
        return {key: value for key, value in found.items() if value is not None}

    # -- delete -----------------------------------------------------------------

    def _delete(self, project: str, name: str, handle: Any) -> None:
        message_id, claim_id = sqs_names.parse_receipt_handle(handle, name)
        try:
            self.messaging.delete_message(project, name, message_id, claim_id)
            if sqs_names.is_fifo(name):  # the rest of its group may be free now: waiting receives look
                self.messaging.wake_up(project, name)
            return
        except (errors.InvalidClaim, errors.MessageNotClaimed, errors.MessageIsClaimedBy) as exc:
            if sqs_names.is_fifo(name):  # a FIFO queue takes a handle only while its receive lasts
                raise invalid_parameter(f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The "
                                        "receipt handle has expired.") from None
            if isinstance(exc, errors.MessageIsClaimedBy):
                return  # received again since: the newer handle decides
        # the visibility timeout passed: SQS deletes by an old handle while nobody else holds the message
        try:
            self.messaging.delete_message(project, name, message_id, None)
        except errors.ClaimRuleViolation:
            pass

    def delete_message(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Delete a received message by its receipt handle."""
        project, name = self.queue_of(caller, params)
        self.metadata(project, name)
        self._delete(project, name, required(params, "ReceiptHandle"))
        return {}

    def delete_message_batch(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Delete up to ten received messages; each entry succeeds or fails on its own."""
        project, name = self.queue_of(caller, params)
        self.metadata(project, name)
        return self._batch(check_batch(params.get("Entries"), "DeleteMessageBatch"),
                           lambda entry: self._delete(project, name, required(entry, "ReceiptHandle")))

    @staticmethod
    def _batch(entries: Sequence[Mapping[str, Any]],
               each: Callable[[Mapping[str, Any]], None]) -> dict[str, Any]:
        successful, failures = [], []
        for entry in entries:
            try:
                each(entry)
            except errors.SqsRefused as exc:
                failures.append(failed(entry["Id"], exc))
                continue
            successful.append({"Id": entry["Id"]})
        return batch_result(successful, failures)

    # -- visibility -------------------------------------------------------------

    def _change_visibility(self, project: str, name: str, handle: Any, timeout: Any) -> None:
        """Change a message's visibility: any of its receipt handles reaches it while it is in flight."""
        message_id, claim_id = sqs_names.parse_receipt_handle(handle, name)
        seconds = whole_number(required({"VisibilityTimeout": timeout}, "VisibilityTimeout"),
                               "VisibilityTimeout", 0, MAX_VISIBILITY)
        found, now = self.messaging.get_messages(project, name, [message_id])
        message = found[0] if found else None
        if message is not None and message.is_claimed(now) and message.claim_id is not None:
            self._change_claimed(project, name, message.id, message.claim_id, seconds)
        elif message is not None and message.is_delayed(now):
            # released by an earlier change (or sent delayed): its delay is the timeout, from now
            self.messaging.edit_delayed_message(project, name, message_id, {"delay": seconds}, 0)
        elif message is None:
            raise invalid_parameter(f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message "
                                    "does not exist or is not available for visibility timeout change.")
        elif seconds and message.claim_id != claim_id:
            # received by another since (SQS allows a change whose receive ended when nobody took the
            # message again: it is visible already, and stays so: docs/api.rst)
            raise errors.SqsRefused("MessageNotInflight", "Message does not exist or is not available for "
                                    "visibility timeout change.")

    def _change_claimed(self, project: str, name: str, message_id: str, claim_id: str, seconds: int) -> None:
        """Renew (or release) a claim of this one message; release it from a larger claim with a delay."""
        try:
            _, held, _ = self.messaging.get_claim(project, name, claim_id)
        except errors.ClaimDoesNotExist:
            held = []
        if [message.id for message in held] == [message_id]:
            if seconds:
                self.messaging.renew_claim(project, name, claim_id, seconds, 0)
            else:
                self.messaging.release_claim(project, name, claim_id)
            return
        try:
            self.messaging.release_message(project, name, message_id, claim_id, None, seconds)
        except errors.ClaimRuleViolation:
            raise errors.SqsRefused("MessageNotInflight", "Message does not exist or is not available for "
                                    "visibility timeout change.") from None

    def change_message_visibility(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Change how long a received message stays invisible, from now."""
        project, name = self.queue_of(caller, params)
        self.metadata(project, name)
        with _handle_is_invalid():
            self._change_visibility(project, name, required(params, "ReceiptHandle"),
                                    params.get("VisibilityTimeout"))
        return {}

    def change_message_visibility_batch(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Change the visibility of up to ten received messages; each entry succeeds or fails on its own."""
        project, name = self.queue_of(caller, params)
        self.metadata(project, name)
        return self._batch(
            check_batch(params.get("Entries"), "ChangeMessageVisibilityBatch"),
            lambda entry: self._change_visibility(project, name, required(entry, "ReceiptHandle"),
                                                  entry.get("VisibilityTimeout")))
