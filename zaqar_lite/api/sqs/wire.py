"""SQS's two wire protocols: reading a call (AWS JSON 1.0 or the query protocol) and writing its answer.

AWS JSON 1.0 (what current SDKs and the AWS CLI send): ``POST /`` with
``X-Amz-Target: AmazonSQS.<Action>`` and a JSON body, answered in JSON. The
query protocol (older SDKs): ``Action=<Action>`` and flattened parameters
(``Attribute.1.Name``, ...) in a form body or a query string, posted to ``/``
or to a queue URL, answered in XML in SQS's namespace. Both are read into the
one shape the actions take, the JSON protocol's members.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape

from zaqar_lite.errors import SqsRefused

JSON_TYPE = "application/x-amz-json-1.0"
XML_TYPE = "text/xml"
TARGET_PREFIX = "AmazonSQS."
NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
#: the largest request body read (a batch of ten 1 MiB messages stays under it)
MAX_BODY = 12 * 1024 * 1024

#: a query parameter's singular name -> the JSON member it fills
_RENAMED = {"AttributeName": "AttributeNames", "TagKey": "TagKeys",
            "MessageAttributeName": "MessageAttributeNames",
            "MessageSystemAttributeName": "MessageSystemAttributeNames",
            "AWSAccountId": "AWSAccountIds", "ActionName": "Actions", "Attribute": "Attributes",
            "Tag": "Tags", "MessageAttribute": "MessageAttributes",
            "MessageSystemAttribute": "MessageSystemAttributes",
            "SendMessageBatchRequestEntry": "Entries", "DeleteMessageBatchRequestEntry": "Entries",
            "ChangeMessageVisibilityBatchRequestEntry": "Entries"}
#: the fields of a map entry holding its key, and its value
_KEY_FIELDS = ("Name", "Key", "key")
_VALUE_FIELDS = ("Value", "value")
#: a JSON list member of an answer -> the XML element of each of its items
_MEMBERS = {"QueueUrls": "QueueUrl", "queueUrls": "QueueUrl", "Messages": "Message",
            "Failed": "BatchResultErrorEntry", "Results": "ListMessageMoveTasksResultEntry"}
#: a JSON map member of an answer -> (element of each entry, its key element, its value element)
_XML_MAPS = {"Attributes": ("Attribute", "Name", "Value"), "Tags": ("Tag", "Key", "Value"),
             "MessageAttributes": ("MessageAttribute", "Name", "Value")}


@dataclasses.dataclass(frozen=True)
class Call:
    """One SQS call: its action, its parameters (JSON members) and the protocol to answer in."""

    action: str
    params: dict[str, Any]
    json: bool


def is_json_call(target: str | None) -> bool:
    """Return whether a request's ``X-Amz-Target`` makes it an AWS JSON 1.0 call of SQS."""
    return target is not None and target.startswith(TARGET_PREFIX)


def read_json(target: str, body: bytes) -> Call:
    """Read an AWS JSON 1.0 call.

    Raises:
        SqsRefused: no SQS action in ``X-Amz-Target`` (``InvalidAction``); the
            body is not a JSON object (``SerializationException``).
    """
    if not is_json_call(target) or len(target) == len(TARGET_PREFIX):
        raise SqsRefused("InvalidAction", "An AWS JSON 1.0 call names its action in the X-Amz-Target "
                         "header: AmazonSQS.<Action>.")
    try:
        params = json.loads(body) if body.strip() else {}
    except ValueError:
        raise SqsRefused("SerializationException", "The request body is not valid JSON.") from None
    if not isinstance(params, dict):
        raise SqsRefused("SerializationException", "The request body must be a JSON object.")
    return Call(target[len(TARGET_PREFIX):], params, json=True)


def read_query(form: Mapping[str, str]) -> Call:
    """Read a query-protocol call from its parameters (form body and query string together)."""
    tree: dict[str, Any] = {}
    for key, value in form.items():
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            node.setdefault(parts[-1], value)
    action = tree.pop("Action", "")
    for unused in ("Version", "AWSAccessKeyId", "SignatureMethod", "SignatureVersion", "Signature",
                   "Timestamp", "Expires"):
        tree.pop(unused, None)
    for key in [k for k in tree if k.startswith("X-Amz-")]:
        tree.pop(key)
    return Call(action if isinstance(action, str) else "", _members(tree, action), json=False)


def _converted(node: Any) -> Any:
    """Return a query node as a JSON value: numbered items a list, or a map when they are key-value pairs."""
    if not isinstance(node, dict):
        return node
    if node and all(key.isascii() and key.isdigit() and len(key) <= 6 for key in node):
        items = [_converted(node[key]) for key in sorted(node, key=int)]
        pairs = [_pair(item) for item in items]
        if all(pair is not None for pair in pairs):
            return dict(pair for pair in pairs if pair is not None)
        return items
    return {_RENAMED.get(key, key): _converted(value) for key, value in node.items()}


def _pair(item: Any) -> tuple[str, Any] | None:
    """Return ``(key, value)`` of a map entry (``Name`` and ``Value``, ...), None for anything else."""
    if not isinstance(item, dict) or len(item) != 2:
        return None
    key = next((item[k] for k in _KEY_FIELDS if k in item), None)
    value = next((item[k] for k in _VALUE_FIELDS if k in item), None)
    return (key, value) if isinstance(key, str) and value is not None else None


def _members(tree: Mapping[str, Any], action: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, node in tree.items():
        member = _RENAMED.get(key, key)
        if action == "CreateQueue" and member == "Tags":
            member = "tags"
        params[member] = _converted(node)
    return params


def json_answer(result: Mapping[str, Any]) -> bytes:
    """Return an AWS JSON 1.0 answer."""
    return json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode()


def _xml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    # a carriage return is escaped, or the client's XML parser reads it as a line feed
    return escape(str(value), {'"': "&quot;", "\r": "&#xD;"})


def _xml(name: str, value: Any, action: str) -> str:
    if isinstance(value, list):
        element = _MEMBERS.get(name, f"{action}ResultEntry" if name == "Successful" else name)
        return "".join(_xml(element, item, action) for item in value)
    if isinstance(value, dict):
        if name in _XML_MAPS:
            element, key_element, value_element = _XML_MAPS[name]
            return "".join(f"<{element}><{key_element}>{_xml_value(k)}</{key_element}>"
                           f"{_xml(value_element, v, action)}</{element}>" for k, v in value.items())
        return f"<{name}>" + "".join(_xml(k, v, action) for k, v in value.items()) + f"</{name}>"
    return f"<{name}>{_xml_value(value)}</{name}>"


def xml_answer(action: str, result: Mapping[str, Any], request_id: str) -> bytes:
    """Return a query-protocol answer: ``<ActionResponse><ActionResult>...`` in SQS's namespace."""
    inner = "".join(_xml(k, v, action) for k, v in result.items())
    body = f"<{action}Result>{inner}</{action}Result>" if inner else f"<{action}Result/>"
    return (f'<?xml version="1.0"?><{action}Response xmlns="{NAMESPACE}">{body}'
            f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
            f"</{action}Response>").encode()


#: a map member of an answer -> the fields of each entry in a query answer rendered as JSON
_JSON_ENTRIES = {"Attributes": ("Name", "Value"), "Tags": ("Key", "Value"),
                 "MessageAttributes": ("Name", "Value")}


def _query_json(value: Any) -> Any:
    if isinstance(value, list):
        return [_query_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _entries(key, item) if key in _JSON_ENTRIES and isinstance(item, dict)
                else _query_json(item) for key, item in value.items()}
    return value


def _entries(member: str, found: Mapping[str, Any]) -> list[dict[str, Any]]:
    key_field, value_field = _JSON_ENTRIES[member]
    return [{key_field: key, value_field: _query_json(value)} for key, value in found.items()]


def query_json_answer(action: str, result: Mapping[str, Any], request_id: str) -> bytes:
    """Return a query-protocol answer in JSON (``Accept: application/json``), shaped as its XML."""
    return json_answer({f"{action}Response": {f"{action}Result": _query_json(result),
                                              "ResponseMetadata": {"RequestId": request_id}}})


def query_json_error(code: str, message: str, sender: bool, request_id: str) -> bytes:
    """Return a query-protocol error in JSON (``Accept: application/json``), shaped as its XML."""
    return json_answer({"Error": {"Type": "Sender" if sender else "Receiver", "Code": code,
                                  "Message": message}, "RequestId": request_id})


def json_error(code: str, message: str) -> bytes:
    """Return an AWS JSON 1.0 error body: ``__type`` and ``message``, as botocore reads them."""
    return json_answer({"__type": f"com.amazonaws.sqs#{code}", "message": message})


def xml_error(code: str, message: str, sender: bool, request_id: str) -> bytes:
    """Return a query-protocol error body: ``<ErrorResponse>`` in SQS's namespace."""
    kind = "Sender" if sender else "Receiver"
    return (f'<?xml version="1.0"?><ErrorResponse xmlns="{NAMESPACE}"><Error><Type>{kind}</Type>'
            f"<Code>{escape(code)}</Code><Message>{_xml_value(message)}</Message><Detail/></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>").encode()


def form_params(body: bytes, query_string: str) -> dict[str, str]:
    """Return the parameters of a query-protocol request: its form body's, then its query string's."""
    found: dict[str, str] = {}
    for text in (body.decode("utf-8", "replace"), query_string):
        for key, value in urllib.parse.parse_qsl(text, keep_blank_values=True):
            found.setdefault(key, value)
    return found
