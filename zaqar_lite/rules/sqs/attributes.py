"""SQS queue attributes: their rules, their defaults, and where each lies in a queue's metadata.

Where zaqar-lite has the concept, the attribute is its reserved metadata:
``DelaySeconds`` is ``_default_message_delay``, ``MessageRetentionPeriod``
``_default_message_ttl``, ``RedrivePolicy`` the pair ``_dead_letter_queue`` +
``_max_claim_count``. The others (``VisibilityTimeout``, ``FifoQueue``, ...),
the tags and the queue's timestamps are kept as given under the metadata key
:data:`SQS_KEY`, so a queue made through either face reads the same through both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from zaqar_lite.claims import metadata as meta
from zaqar_lite.errors import SqsRefused
from zaqar_lite.rules.sqs import invalid_parameter, names

#: the queue metadata key holding what SQS alone knows of a queue
SQS_KEY = "sqs"
REDRIVE_POLICY = "RedrivePolicy"
#: the ``sqs`` metadata flag of a queue created with ``DeduplicationScope`` ``messageGroup``
GROUP_DEDUP = "group_dedup"
#: the attributes SQS derives from the queue's state, never set
COUNTS = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
          "ApproximateNumberOfMessagesDelayed")
READ_ONLY = (*COUNTS, "CreatedTimestamp", "LastModifiedTimestamp", "QueueArn")
#: a settable attribute -> its default (None: shown only when set)
DEFAULTS: dict[str, str | None] = {
    "DelaySeconds": "0",
    "MaximumMessageSize": "1048576",
    "MessageRetentionPeriod": "345600",
    "ReceiveMessageWaitTimeSeconds": "0",
    "VisibilityTimeout": "30",
    "SqsManagedSseEnabled": "true",
    "Policy": None,
    REDRIVE_POLICY: None,
    "RedriveAllowPolicy": None,
    "KmsMasterKeyId": None,
    "KmsDataKeyReusePeriodSeconds": None,
}
#: a FIFO queue's own attributes -> their defaults
FIFO_DEFAULTS: dict[str, str] = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}
#: the FIFO attributes a standard queue refuses in words of their own
_FIFO_ONLY = ("DeduplicationScope", "FifoThroughputLimit")
_RANGES = {
    "DelaySeconds": (0, 900),
    "MaximumMessageSize": (1024, 1048576),
    "MessageRetentionPeriod": (60, 1209600),
    "ReceiveMessageWaitTimeSeconds": (0, 20),
    "VisibilityTimeout": (0, 43200),
    "KmsDataKeyReusePeriodSeconds": (60, 86400),
}
_CHOICES = {
    "SqsManagedSseEnabled": ("true", "false"),
    "FifoQueue": ("true", "false"),
    "ContentBasedDeduplication": ("true", "false"),
    "DeduplicationScope": ("messageGroup", "queue"),
    "FifoThroughputLimit": ("perQueue", "perMessageGroupId"),
}
#: the attributes kept in reserved metadata, by their metadata key
_RESERVED = {"DelaySeconds": meta.DEFAULT_DELAY, "MessageRetentionPeriod": meta.DEFAULT_TTL}
MAX_RECEIVE_COUNT = 1000
MAX_TAGS = 50


def invalid_value(name: str, why: str = "") -> SqsRefused:
    """Return SQS's ``InvalidAttributeValue`` error for an attribute."""
    reason = f" Reason: {why}" if why else ""
    return SqsRefused("InvalidAttributeValue", f"Invalid value for the parameter {name}.{reason}")


def unknown(name: str) -> SqsRefused:
    """Return SQS's ``InvalidAttributeName`` error for an attribute it does not know."""
    return SqsRefused("InvalidAttributeName", f"Unknown Attribute {name}.")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def check(attributes: Any, fifo: bool, creating: bool) -> dict[str, str]:
    """Return the attributes a CreateQueue or SetQueueAttributes sets, as text, each checked.

    Raises:
        SqsRefused: ``InvalidAttributeName`` (unknown, read-only, a FIFO
            attribute of a standard queue, ``FifoQueue`` changed) or
            ``InvalidAttributeValue`` (out of range or malformed).
    """
    if attributes is None:
        return {}
    if not isinstance(attributes, Mapping):
        raise invalid_parameter("Attributes must be a map of attribute names to values.")
    checked = {str(name).strip(): _checked(str(name).strip(), _text(raw), fifo, creating)
               for name, raw in attributes.items()}
    if fifo and creating and checked.get("FifoQueue", "true") != "true":
        raise invalid_value("FifoQueue")
    return checked


def _checked(name: str, value: str, fifo: bool, creating: bool) -> str:
    """Return one attribute's value as kept (a number without leading zeros), checked."""
    if name in _FIFO_ONLY and not fifo:
        raise SqsRefused("InvalidAttributeName",
                         f"You can specify the {name} only when FifoQueue is set to true.")
    if name in FIFO_DEFAULTS and not fifo:
        raise unknown(name)
    if name == "FifoQueue" and not creating and value.lower() != ("true" if fifo else "false"):
        raise invalid_value(name, "Modifying queue type is not supported.")
    if name not in DEFAULTS and name not in FIFO_DEFAULTS:
        raise unknown(name)
    if name in _RANGES:
        low, high = _RANGES[name]
        if not _is_count(value) or not low <= int(value) <= high:
            raise invalid_value(name, f"Must be between {low} and {high}.")
        return str(int(value))
    if _CHOICES.get(name) == ("true", "false"):
        value = value.lower()
    if name in _CHOICES and value not in _CHOICES[name]:
        raise invalid_value(name)
    if name in ("Policy", "RedriveAllowPolicy") and value:
        _json_object(name, value)
    return value


def _is_count(value: str) -> bool:
    """Whether a text is a whole number SQS could take (ASCII digits, at most 12)."""
    return value.isascii() and value.isdigit() and len(value) <= 12


def _json_object(name: str, value: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except ValueError:
        raise invalid_value(name, "Invalid JSON.") from None
    if not isinstance(parsed, dict):
        raise invalid_value(name, "It must be a JSON object.")
    return parsed


def redrive_target(value: str, account: str) -> tuple[str, int] | None:
    """Return ``(dead-letter queue name, maxReceiveCount)`` of a ``RedrivePolicy``; None for "" (unset).

    Raises:
        SqsRefused: ``InvalidParameterValue``: malformed, a count out of 1..1000,
            or a dead-letter queue of another account.
    """
    if not value:
        return None
    try:
        policy = json.loads(value)
    except ValueError:
        raise invalid_parameter("Value for parameter RedrivePolicy is invalid. Reason: Invalid JSON.") \
            from None
    if not isinstance(policy, dict) or "deadLetterTargetArn" not in policy \
            or "maxReceiveCount" not in policy:
        raise invalid_parameter("Value for parameter RedrivePolicy is invalid. Reason: Redrive policy does "
                                "not contain mandatory attribute: "
                                + ("deadLetterTargetArn." if "deadLetterTargetArn" not in (policy or {})
                                   else "maxReceiveCount."))
    count = _text(policy["maxReceiveCount"])
    if not _is_count(count) or not 1 <= int(count) <= MAX_RECEIVE_COUNT:
        raise invalid_parameter(f"Value {value} for parameter RedrivePolicy is invalid. Reason: Invalid "
                                f"value for maxReceiveCount: {count}, valid values are from 1 to "
                                f"{MAX_RECEIVE_COUNT} both inclusive.")
    _, target_account, name = names.parse_arn(policy["deadLetterTargetArn"], "RedrivePolicy")
    if target_account != account:
        raise invalid_parameter("Value for parameter RedrivePolicy is invalid. Reason: the dead-letter queue "
                                "must be in the queue's own account.")
    return name, int(count)


def check_redrive_kind(changes: Mapping[str, str], account: str, fifo: bool) -> None:
    """Refuse a ``RedrivePolicy`` whose dead-letter queue is not of the queue's kind (FIFO or standard).

    Raises:
        SqsRefused: ``InvalidParameterValue``.
    """
    target = redrive_target(changes.get(REDRIVE_POLICY, ""), account)
    if target is not None and names.is_fifo(target[0]) != fifo:
        raise invalid_parameter("Value for parameter RedrivePolicy is invalid. Reason: Dead-letter queue "
                                "must be same type of queue as the source.")


def stored(current: Mapping[str, Any], changes: Mapping[str, str], account: str, now: float,
           tags: Mapping[str, str] | None = None, queue: str = "") -> dict[str, Any]:
    """Return a queue's new metadata: ``current`` with checked attributes (and tags) applied.

    Args:
        current: the queue's stored metadata ({} for a new queue).
        changes: attributes from :func:`check`.
        account: the queue's account (a ``RedrivePolicy``'s queue must be in it).
        now: the time of the change (``LastModifiedTimestamp``; ``CreatedTimestamp`` of a new queue).
        tags: tags to add (CreateQueue, TagQueue).
        queue: the queue's name: a ``RedrivePolicy`` naming the queue itself is
            kept as given, not as a dead-letter queue (a queue never moves
            messages into itself: docs/api.rst).
    """
    updated = dict(current)
    own = dict(updated.get(SQS_KEY) or {})
    kept = dict(own.get("attributes") or {})
    for name, value in changes.items():
        if name in _RESERVED:
            updated[_RESERVED[name]] = int(value)
        elif name == REDRIVE_POLICY:
            target = redrive_target(value, account)
            kept.pop(REDRIVE_POLICY, None)
            if target is None or target[0] == queue:
                updated.pop(meta.DEAD_LETTER_QUEUE, None)
                updated.pop(meta.MAX_CLAIM_COUNT, None)
            else:
                updated[meta.DEAD_LETTER_QUEUE], updated[meta.MAX_CLAIM_COUNT] = target
            if target is not None and target[0] == queue:
                kept[REDRIVE_POLICY] = json.dumps(
                    {"deadLetterTargetArn": json.loads(value)["deadLetterTargetArn"],
                     "maxReceiveCount": target[1]}, separators=(",", ":"))
        elif value == "" and DEFAULTS.get(name, "") is None:
            kept.pop(name, None)
        else:
            kept[name] = value
    own["attributes"] = kept
    if not current and changes.get("DeduplicationScope") == "messageGroup":
        own[GROUP_DEDUP] = True  # fixed at creation: a later change is shown and changes nothing (as SQS)
    own.setdefault("created", int(now))
    own["modified"] = int(now)
    if tags:
        own["tags"] = {**(own.get("tags") or {}), **tags}
    updated[SQS_KEY] = own
    if not current and meta.DEFAULT_TTL not in updated:  # a new queue keeps messages SQS's 4 days
        updated[meta.DEFAULT_TTL] = int(DEFAULTS["MessageRetentionPeriod"] or 0)
    return updated


def shown(metadata: Mapping[str, Any], fifo: bool, default_ttl: int, region: str,
          account: str) -> dict[str, str]:
    """Return a queue's settable attributes as SQS shows them: stored values over the defaults."""
    own = metadata.get(SQS_KEY) or {}
    kept = own.get("attributes") or {}
    found = {name: value for name, value in DEFAULTS.items() if value is not None}
    if fifo:
        found.update(FIFO_DEFAULTS)
    found.update(kept)
    if "KmsMasterKeyId" not in kept:  # a data key's reuse period means nothing without a key
        found.pop("KmsDataKeyReusePeriodSeconds", None)
    found["DelaySeconds"] = str(metadata.get(meta.DEFAULT_DELAY, 0))
    found["MessageRetentionPeriod"] = str(metadata.get(meta.DEFAULT_TTL, default_ttl))
    dlq, count = metadata.get(meta.DEAD_LETTER_QUEUE), metadata.get(meta.MAX_CLAIM_COUNT)
    if dlq is not None and count is not None:
        found[REDRIVE_POLICY] = json.dumps(
            {"deadLetterTargetArn": names.queue_arn(region, account, dlq), "maxReceiveCount": count},
            separators=(",", ":"))
    found["CreatedTimestamp"] = str(own.get("created", 0))
    found["LastModifiedTimestamp"] = str(own.get("modified", own.get("created", 0)))
    return found


def setting(metadata: Mapping[str, Any] | None, name: str) -> str:
    """Return one settable attribute of a queue that is not reserved metadata (its default when unset)."""
    kept = ((metadata or {}).get(SQS_KEY) or {}).get("attributes") or {}
    value = kept.get(name, DEFAULTS.get(name) or FIFO_DEFAULTS.get(name))
    return value or ""


def differing(metadata: Mapping[str, Any], requested: Mapping[str, str], fifo: bool, default_ttl: int,
              region: str, account: str) -> str | None:
    """Return the first requested attribute an existing queue has another value of, or None."""
    current = shown(metadata, fifo, default_ttl, region, account)
    for name, value in requested.items():
        if name == REDRIVE_POLICY:
            wanted = redrive_target(value, account)
            if wanted != (redrive_target(current[name], account) if current.get(name) else None):
                return name
        elif current.get(name, DEFAULTS.get(name) or "") != value:
            return name
    return None


def wanted(requested: Iterable[str], known: Iterable[str]) -> list[str]:
    """Return the attribute names a GetQueueAttributes asks for (``All`` names every known one).

    Raises:
        SqsRefused: ``InvalidAttributeName`` for a name SQS does not know.
    """
    every = list(known)
    names_asked: list[str] = []
    for name in requested:
        if name == "All":
            return every
        if name not in every and name not in DEFAULTS and name not in FIFO_DEFAULTS \
                and name not in READ_ONLY:
            raise unknown(name)
        names_asked.append(name)
    return names_asked


def tags_of(metadata: Mapping[str, Any]) -> dict[str, str]:
    """Return a queue's tags."""
    return dict((metadata.get(SQS_KEY) or {}).get("tags") or {})


def check_tags(tags: Any, already: Mapping[str, str], queue: str) -> dict[str, str]:
    """Return tags a CreateQueue or TagQueue adds, checked (at most 50 on a queue; key 1-128, value 0-256).

    Raises:
        SqsRefused: ``InvalidParameterValue``.
    """
    if tags is None:
        return {}
    if not isinstance(tags, Mapping) or not all(isinstance(v, str) for v in tags.values()):
        raise invalid_parameter("Tags must be a map of tag keys to text values.")
    for key, value in tags.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 128 or len(value) > 256:
            raise invalid_parameter("Tag keys must be 1 to 128 characters and tag values at most 256.")
    if len({**already, **tags}) > MAX_TAGS:
        raise invalid_parameter(f"Too many tags added for queue {queue}.")
    return dict(tags)


def without_tags(metadata: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """Return a queue's metadata with the tags of ``keys`` removed."""
    updated = dict(metadata)
    own = dict(updated.get(SQS_KEY) or {})
    own["tags"] = {k: v for k, v in (own.get("tags") or {}).items() if k not in set(keys)}
    updated[SQS_KEY] = own
    return updated


#: the actions AddPermission may grant (as SQS)
PERMITTED_ACTIONS = ("*", "ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes", "GetQueueUrl",
                     "ListDeadLetterSourceQueues", "PurgeQueue", "ReceiveMessage", "SendMessage")
MAX_PERMITTED_ACTIONS = 7


def _statements(policy: str) -> list[dict[str, Any]]:
    try:
        found = json.loads(policy) if policy else {}
    except ValueError:
        found = {}
    statements = found.get("Statement") if isinstance(found, dict) else None
    return [s for s in statements if isinstance(s, dict)] if isinstance(statements, list) else []


def with_permission(policy: str, label: str, accounts: list[str], actions: list[str], arn: str) -> str:
    """Return a queue's ``Policy`` with AddPermission's statement added (kept, never enforced).

    Raises:
        SqsRefused: no actions or accounts, more than 7 actions, an action SQS
            does not grant, or a label the policy has.
    """
    if not actions:
        raise SqsRefused("MissingParameter", "The request must contain the parameter Actions.")
    if not accounts:
        raise invalid_parameter("Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.")
    if len(actions) > MAX_PERMITTED_ACTIONS:
        raise SqsRefused("OverLimit", f"{len(actions)} Actions were found, maximum allowed is "
                         f"{MAX_PERMITTED_ACTIONS}.")
    for action in actions:
        if action not in PERMITTED_ACTIONS:
            raise invalid_parameter(f"Value SQS:{action} for parameter ActionName is invalid. Reason: Only "
                                    "the queue owner is allowed to invoke this action.")
    statements = _statements(policy)
    if any(statement.get("Sid") == label for statement in statements):
        raise invalid_parameter(f"Value {label} for parameter Label is invalid. Reason: Already exists.")
    principals = [f"arn:aws:iam::{account}:root" for account in accounts]
    statements.append({"Sid": label, "Effect": "Allow",
                       "Principal": {"AWS": principals[0] if len(principals) == 1 else principals},
                       "Action": [f"SQS:{a}" for a in actions] if len(actions) > 1 else f"SQS:{actions[0]}",
                       "Resource": arn})
    return json.dumps({"Version": "2008-10-17", "Id": f"{arn}/SQSDefaultPolicy", "Statement": statements},
                      separators=(",", ":"))


def without_permission(policy: str, label: str, arn: str) -> str:
    """Return a queue's ``Policy`` without the statement of ``label`` ("" when none is left).

    Raises:
        SqsRefused: the policy has no statement of that label.
    """
    statements = _statements(policy)
    kept = [statement for statement in statements if statement.get("Sid") != label]
    if len(kept) == len(statements):
        raise invalid_parameter(f"Value {label} for parameter Label is invalid. Reason: can't find label.")
    if not kept:
        return ""
    return json.dumps({"Version": "2008-10-17", "Id": f"{arn}/SQSDefaultPolicy", "Statement": kept},
                      separators=(",", ":"))
