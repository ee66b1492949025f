"""SQS messages in zaqar-lite's terms: bodies, message attributes, their MD5s, and what a message stores.

A message sent through SQS without message attributes is stored with its
body as the message's body, a JSON string, so that a Zaqar client reads the
text it was sent. With message (or system) attributes it is stored as the
object ``{"MessageBody": ..., "MessageAttributes": ..., "MessageSystemAttributes": ...}``
(:func:`stored_body`); :func:`sent_parts` reads either back, and a body a Zaqar
client posted that is not text is shown to SQS as its JSON text.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from zaqar_lite.errors import SqsRefused
from zaqar_lite.rules.sqs import invalid_parameter

BODY = "MessageBody"
ATTRIBUTES = "MessageAttributes"
SYSTEM_ATTRIBUTES = "MessageSystemAttributes"
#: the characters an SQS body may hold
_INVALID_CHARACTER = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ATTRIBUTE_NAME = re.compile(r"[\w.-]{1,256}")
_DATA_TYPE = re.compile(r"(String|Number|Binary)(\.[A-Za-z0-9_.-]{1,256})?")
MAX_ATTRIBUTES = 10
#: the system attributes a message may be sent with
SENDABLE_SYSTEM_ATTRIBUTES = ("AWSTraceHeader",)
#: the message system attributes a ReceiveMessage may ask for
RECEIVABLE = ("SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
              "SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
              "DeadLetterQueueSourceArn")


def check_body(body: Any, size_limit: int, attributes_size: int) -> str:
    """Return a message body SQS accepts: text of allowed characters within the queue's size.

    Raises:
        SqsRefused: ``MissingParameter`` (no body), ``InvalidMessageContents``
            (a character SQS refuses), ``InvalidParameterValue`` (too large).
    """
    if not isinstance(body, str) or not body:
        raise SqsRefused("MissingParameter", "The request must contain the parameter MessageBody.")
    if _INVALID_CHARACTER.search(body):
        raise SqsRefused("InvalidMessageContents", "Invalid characters found. Valid unicode characters are "
                         "#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
    if len(body.encode()) + attributes_size > size_limit:
        raise invalid_parameter(f"One or more parameters are invalid. Reason: Message must be shorter "
                                f"than {size_limit} bytes.")
    return body


def _binary(value: Any, name: str) -> bytes:
    if isinstance(value, bytes):
        return value
    try:
        return base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        raise invalid_parameter(f"The binary value of message attribute {name} is not base64.") from None


def _check_name(name: Any, system: bool) -> None:
    if system and name not in SENDABLE_SYSTEM_ATTRIBUTES:
        raise invalid_parameter(f"Message system attribute name '{name}' is invalid.")
    if not system and (not isinstance(name, str) or not _ATTRIBUTE_NAME.fullmatch(name)
                       or ".." in name or name.startswith(".") or name.endswith(".")
                       or name.lower().startswith(("aws.", "amazon."))):
        raise invalid_parameter(f"Message (user) attribute name '{name}' is invalid.")


def _data_type(name: str, value: Any) -> str:
    if not isinstance(value, Mapping):
        raise invalid_parameter(f"The message attribute '{name}' must contain a value.")
    data_type = value.get("DataType")
    if not isinstance(data_type, str) or not data_type:
        raise invalid_parameter(f"The message attribute '{name}' must contain non-empty message "
                                "attribute type.")
    if not _DATA_TYPE.fullmatch(data_type):
        raise invalid_parameter(f"The message attribute '{name}' has an invalid message attribute type, the "
                                "set of supported type prefixes is Binary, Number, and String.")
    if value.get("StringListValues") or value.get("BinaryListValues"):
        raise SqsRefused("UnsupportedOperation", "Message attribute list values in SendMessage "
                         "operation are not supported.")
    return data_type


def _stored_value(name: str, data_type: str, value: Mapping[str, Any]) -> tuple[dict[str, str], int]:
    """Return one attribute's value as stored, and the bytes of its value."""
    if data_type.startswith("Binary"):
        raw = _binary(value.get("BinaryValue"), name)
        if not raw:
            raise invalid_parameter(f"Message (user) attribute '{name}' must contain a non-empty value "
                                    "of type 'Binary'.")
        return {"DataType": data_type, "BinaryValue": base64.b64encode(raw).decode()}, len(raw)
    text = value.get("StringValue")
    kind = "Number" if data_type.startswith("Number") else "String"
    if not isinstance(text, str) or not text:
        raise invalid_parameter(f"Message (user) attribute '{name}' must contain a non-empty value "
                                f"of type '{kind}'.")
    if kind == "Number" and not _is_number(text):
        raise invalid_parameter(f"Can't cast the value of message (user) attribute '{name}' to a number.")
    if _INVALID_CHARACTER.search(text):
        raise invalid_parameter(f"Message (user) attribute '{name}' value contains invalid characters.")
    return {"DataType": data_type, "StringValue": text}, len(text.encode())


def check_attributes(attributes: Any, system: bool = False) -> tuple[dict[str, dict[str, str]], int]:
    """Return message (or system) attributes as stored (binary values in base64) and their size in bytes.

    Raises:
        SqsRefused: ``InvalidParameterValue`` (a name, type or value SQS
            refuses, more than 10, an unknown system attribute) or
            ``UnsupportedOperation`` (list values).
    """
    if attributes is None:
        return {}, 0
    if not isinstance(attributes, Mapping):
        raise invalid_parameter("MessageAttributes must be a map of names to values.")
    if len(attributes) > MAX_ATTRIBUTES:
        raise invalid_parameter(f"Number of message attributes [{len(attributes)}] exceeds the allowed "
                                f"maximum [{MAX_ATTRIBUTES}].")
    found: dict[str, dict[str, str]] = {}
    size = 0
    for name, value in attributes.items():
        _check_name(name, system)
        data_type = _data_type(name, value)
        found[name], value_size = _stored_value(name, data_type, value)
        size += value_size + len(name.encode()) + len(data_type.encode())
    return found, size


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _field(value: bytes) -> bytes:
    return len(value).to_bytes(4, "big") + value


def attributes_md5(attributes: Mapping[str, Mapping[str, str]]) -> str:
    """Return the MD5 of message attributes as SQS computes it (``MD5OfMessageAttributes``).

    For each attribute in name order: the name, the data type, a transport
    byte (1 for text, 2 for binary) and the value, each length-prefixed
    (4 bytes, big-endian) but the transport byte.
    """
    digest = hashlib.md5(usedforsecurity=False)
    for name in sorted(attributes):
        value = attributes[name]
        digest.update(_field(name.encode()) + _field(value["DataType"].encode()))
        if "BinaryValue" in value:
            digest.update(b"\x02" + _field(base64.b64decode(value["BinaryValue"])))
        else:
            digest.update(b"\x01" + _field(value["StringValue"].encode()))
    return digest.hexdigest()


def body_md5(body: str) -> str:
    """Return the MD5 of a body (``MD5OfMessageBody``)."""
    return hashlib.md5(body.encode(), usedforsecurity=False).hexdigest()


def content_dedup_id(body: str) -> str:
    """Return the deduplication id ``ContentBasedDeduplication`` gives a body: its SHA-256."""
    return hashlib.sha256(body.encode()).hexdigest()


def dedup_key(dedup_id: str, group: str | None, purged: float | None) -> str:
    """Return the ``dedup_id`` a FIFO message is stored with, for SQS's deduplication scope.

    A queue deduplicates by ``MessageDeduplicationId`` alone; with
    ``DeduplicationScope`` ``messageGroup`` (``group`` given) an id counts
    within its group only, and a purge (``purged``: when the last one was)
    forgets every id sent before it. Those two cases store a digest of the id
    with its group and the purge's time, so that the store's one window per
    queue applies SQS's scope; the id as sent is kept beside the message.
    """
    if group is None and not purged:
        return dedup_id
    scope = json.dumps([dedup_id, group, purged], separators=(",", ":"))
    return "sqs-" + hashlib.sha256(scope.encode()).hexdigest()


def stored_body(body: str, attributes: Mapping[str, Any], system: Mapping[str, Any]) -> Any:
    """Return what a message sent through SQS stores as its body: its text, or an object with attributes."""
    if not attributes and not system:
        return body
    found: dict[str, Any] = {BODY: body}
    if attributes:
        found[ATTRIBUTES] = dict(attributes)
    if system:
        found[SYSTEM_ATTRIBUTES] = dict(system)
    return found


def sent_parts(body: Any) -> tuple[str, dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """Return ``(body text, message attributes, system attributes)`` of a stored message body."""
    if isinstance(body, str):
        return body, {}, {}
    if isinstance(body, dict) and isinstance(body.get(BODY), str) and len(body) > 1 \
            and set(body) <= {BODY, ATTRIBUTES, SYSTEM_ATTRIBUTES}:
        return body[BODY], dict(body.get(ATTRIBUTES) or {}), dict(body.get(SYSTEM_ATTRIBUTES) or {})
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False), {}, {}


def selected_attributes(attributes: Mapping[str, Any], wanted: Iterable[str]) -> dict[str, Any]:
    """Return the message attributes a ReceiveMessage's ``MessageAttributeNames`` asks for.

    ``All``, ``*`` or ``.*`` asks for every one; ``prefix.*`` for those whose name starts with
    ``prefix`` (``Hel.*`` selects ``Hello`` and ``Help.Me``, as SQS).
    """
    chosen: dict[str, Any] = {}
    for name in wanted:
        if name in ("All", "*", ".*"):
            return dict(attributes)
        if name.endswith(".*"):
            chosen.update((k, v) for k, v in attributes.items() if k.startswith(name[:-2]))
        elif name in attributes:
            chosen[name] = attributes[name]
    return chosen


def wanted_system_attributes(names: Iterable[str]) -> set[str]:
    """Return the message system attributes a ReceiveMessage asks for (``All`` names every one).

    A name of no message attribute (a queue attribute's, as SQS's own
    ``AttributeNames`` allows) asks for nothing.
    """
    found: set[str] = set()
    for name in names:
        if name == "All":
            return set(RECEIVABLE)
        if name in RECEIVABLE:
            found.add(name)
    return found
