"""SQS's queue actions over the messaging service: create, URL, list, attributes, tags, delete, purge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zaqar_lite import errors
from zaqar_lite.api.sqs.base import Caller, SqsBase, no_such_queue, required, strings
from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.rules.sqs import attributes as sqs_attributes
from zaqar_lite.rules.sqs import names as sqs_names
from zaqar_lite.rules.sqs import whole_number

#: the most queues one ListQueues answers
MAX_LISTED = 1000
#: seconds after a purge during which another purge of the queue is refused (as SQS)
PURGE_INTERVAL = 60
#: the kind of the project notes that remember when the SQS face deleted a queue (by its name)
DELETED = "sqs-deleted-queue"


def patch(current: Mapping[str, Any], updated: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """Return the metadata operations (``Messaging.update_queue``'s) turning ``current`` into ``updated``."""
    operations: list[tuple[str, str, Any]] = [("add", key, value) for key, value in updated.items()
                                              if current.get(key, None) != value or key not in current]
    operations += [("remove", key, None) for key in current if key not in updated]
    return operations


class QueueActions(SqsBase):
    """CreateQueue, GetQueueUrl, ListQueues, Get/SetQueueAttributes, tags, DeleteQueue, PurgeQueue."""

    def create_queue(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Create a queue (or answer the URL of an existing one with the same attributes)."""
        name = params.get("QueueName")
        requested = params.get("Attributes") or {}
        fifo = isinstance(requested, Mapping) and str(requested.get("FifoQueue", "")).lower() == "true"
        name = sqs_names.check_queue_name(name, fifo)
        if isinstance(requested, Mapping) and "FifoQueue" in requested:
            requested = {**requested, "FifoQueue": str(requested["FifoQueue"]).lower()}
        checked = sqs_attributes.check(requested, fifo, creating=True)
        sqs_attributes.check_redrive_kind(checked, caller.account, fifo)
        tags = sqs_attributes.check_tags(params.get("tags", params.get("Tags")), {}, name)
        project = self.project(caller.account, caller.region)
        try:
            existing = self.messaging.existing_queue_metadata(project, name)
        except errors.QueueDoesNotExist:
            existing = None
        if existing is not None:
            clash = sqs_attributes.differing(existing, checked, fifo,
                                             self.settings.limits.default_message_ttl, caller.region,
                                             caller.account)
            if clash is not None:
                raise errors.SqsRefused("QueueNameExists", f"A queue already exists with the same name and "
                                        f"a different value for attribute {clash}")
            return {"QueueUrl": self.url(caller, project, name)}
        self._check_not_deleted_recently(project, name)
        if fifo:
            checked.setdefault("FifoQueue", "true")
        stored = sqs_attributes.stored({}, checked, caller.account, self.clock(), tags, name)
        self.messaging.create_queue(project, name, stored)
        return {"QueueUrl": self.url(caller, project, name)}

    def _check_not_deleted_recently(self, project: str, name: str) -> None:
        """Refuse a name the SQS face deleted less than ``[sqs] recreate_after`` seconds ago, as SQS."""
        deleted = self.messaging.noted(project, DELETED, name)
        if deleted is None:
            return
        wait = self.settings.sqs.recreate_after
        if self.clock() - float(deleted.get("at", 0)) < wait:
            raise errors.SqsRefused("QueueDeletedRecently", f"You must wait {wait} seconds after deleting a "
                                    "queue before you can create another with the same name.")
        self.messaging.note(project, DELETED, name, None)

    def get_queue_url(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer the URL of an existing queue."""
        name = required(params, "QueueName")
        account = params.get("QueueOwnerAWSAccountId") or caller.account
        if caller.restricted and account != caller.account:
            raise no_such_queue()
        if not isinstance(name, str) or not isinstance(account, str) \
                or not is_queue_name(name, self.settings.limits):
            raise no_such_queue()
        project = self.project(account, caller.region)
        self.metadata(project, name)
        return {"QueueUrl": self.url(caller, project, name)}

    def list_queues(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """List the account's queues whose name starts with ``QueueNamePrefix``, a page at a time."""
        prefix = params.get("QueueNamePrefix") or ""
        if not isinstance(prefix, str):
            raise errors.SqsRefused("InvalidParameterValue", "QueueNamePrefix must be text.")
        paged = params.get("MaxResults") is not None
        limit = whole_number(params["MaxResults"], "MaxResults", 1, MAX_LISTED) if paged else MAX_LISTED
        token = params.get("NextToken")
        if token and not paged:
            raise errors.SqsRefused("InvalidParameterValue", "MaxResults is a mandatory parameter when you "
                                    "provide a value for NextToken.")
        marker = sqs_names.parse_page_token(token) if token else None
        project = self.project(caller.account, caller.region)
        found: list[str] = []
        more = False
        while True:
            page = self.messaging.list_queues(project, marker=marker, limit=MAX_LISTED,
                                              name=prefix or None, filters={})
            for name, _ in page:
                if name.startswith(prefix):
                    if len(found) == limit:
                        more = True
                        break
                    found.append(name)
            if more or len(page) < MAX_LISTED:
                break
            marker = page[-1][0]
        answer: dict[str, Any] = {}
        if found:
            answer["QueueUrls"] = [self.url(caller, project, name) for name in found]
        if more and paged:
            answer["NextToken"] = sqs_names.page_token(found[-1])
        return answer

    def get_queue_attributes(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer the attributes asked for (``All``: every one), counts included."""
        project, name = self.queue_of(caller, params)
        stored = self.metadata(project, name)
        fifo = sqs_names.is_fifo(name)
        account, region = self.place(project)
        shown = sqs_attributes.shown(stored, fifo, self.settings.limits.default_message_ttl, region, account)
        known = [*shown, "QueueArn", *sqs_attributes.COUNTS]
        asked = sqs_attributes.wanted(strings(params.get("AttributeNames")), known)
        found: dict[str, str] = {}
        if any(name in sqs_attributes.COUNTS for name in asked):
            stats, _ = self.messaging.queue_stats(project, name)
            found.update(zip(sqs_attributes.COUNTS, (str(stats.free), str(stats.claimed), str(stats.delayed)),
                             strict=True))
        found["QueueArn"] = self.arn(caller, project, name)
        found.update(shown)
        chosen = {key: found[key] for key in asked if key in found}
        return {"Attributes": chosen} if chosen else {}

    def set_queue_attributes(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Change a queue's attributes."""
        project, name = self.queue_of(caller, params)
        current = self.metadata(project, name)
        checked = sqs_attributes.check(params.get("Attributes") or {}, sqs_names.is_fifo(name),
                                       creating=False)
        account, _ = self.place(project)
        sqs_attributes.check_redrive_kind(checked, account, sqs_names.is_fifo(name))
        updated = sqs_attributes.stored(current, checked, account, self.clock(), queue=name)
        self._update(project, name, current, updated)
        return {}

    def _update(self, project: str, name: str, current: Mapping[str, Any],
                updated: Mapping[str, Any]) -> None:
        operations = patch(current, updated)
        if operations:
            self.messaging.update_queue(project, name, operations)

    def tag_queue(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Add tags to a queue (a key it has takes the new value)."""
        project, name = self.queue_of(caller, params)
        current = self.metadata(project, name)
        tags = sqs_attributes.check_tags(required(params, "Tags"), sqs_attributes.tags_of(current), name)
        if not tags:
            raise errors.SqsRefused("MissingParameter", "The request must contain the parameter Tags.")
        own = dict(current.get(sqs_attributes.SQS_KEY) or {})
        own["tags"] = {**sqs_attributes.tags_of(current), **tags}
        self._update(project, name, current, {**current, sqs_attributes.SQS_KEY: own})
        return {}

    def untag_queue(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Remove tags of a queue by key."""
        project, name = self.queue_of(caller, params)
        current = self.metadata(project, name)
        keys: Sequence[str] = strings(required(params, "TagKeys"))
        if not keys or not all(1 <= len(key) <= 128 for key in keys):
            raise errors.SqsRefused("InvalidParameterValue", "Tag keys must be between 1 and 128 characters "
                                    "in length.")
        self._update(project, name, current, sqs_attributes.without_tags(current, keys))
        return {}

    def list_queue_tags(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a queue's tags."""
        project, name = self.queue_of(caller, params)
        tags = sqs_attributes.tags_of(self.metadata(project, name))
        return {"Tags": tags} if tags else {}

    def add_permission(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Add a statement to the queue's ``Policy`` (kept and shown, not enforced: docs/api.rst)."""
        project, name = self.queue_of(caller, params)
        current = self.metadata(project, name)
        label = required(params, "Label")
        policy = sqs_attributes.with_permission(
            sqs_attributes.setting(current, "Policy"), str(label), strings(params.get("AWSAccountIds")),
            strings(params.get("Actions")), self.arn(caller, project, name))
        self._set_policy(project, name, current, policy)
        return {}

    def remove_permission(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Remove a statement of the queue's ``Policy`` by its label."""
        project, name = self.queue_of(caller, params)
        current = self.metadata(project, name)
        policy = sqs_attributes.without_permission(sqs_attributes.setting(current, "Policy"),
                                                   str(required(params, "Label")),
                                                   self.arn(caller, project, name))
        self._set_policy(project, name, current, policy)
        return {}

    def _set_policy(self, project: str, name: str, current: Mapping[str, Any], policy: str) -> None:
        self._update(project, name, current,
                     sqs_attributes.stored(current, {"Policy": policy}, self.place(project)[0], self.clock()))

    def delete_queue(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Delete a queue and its messages."""
        project, name = self.queue_of(caller, params)
        self.metadata(project, name)
        self.messaging.delete_queue(project, name)
        if self.settings.sqs.recreate_after:
            self.messaging.note(project, DELETED, name, {"at": self.clock()})
        return {}

    def purge_queue(self, caller: Caller, params: Mapping[str, Any]) -> dict[str, Any]:
        """Delete every message of a queue."""
        project, name = self.queue_of(caller, params)
        current = self.metadata(project, name)
        own = dict(current.get(sqs_attributes.SQS_KEY) or {})
        now = self.clock()
        if now - float(own.get("purged", 0)) < PURGE_INTERVAL:
            raise errors.SqsRefused("PurgeQueueInProgress", f"Only one PurgeQueue operation on {name} is "
                                    f"allowed every {PURGE_INTERVAL} seconds.")
        own["purged"] = now
        self._update(project, name, current, {**current, sqs_attributes.SQS_KEY: own})
        self.messaging.purge(project, name, ["messages"])
        return {}
