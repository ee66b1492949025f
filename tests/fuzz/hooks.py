"""Schemathesis extensions for docs/openapi.yaml, loaded by ``schemathesis.toml`` beside this file.

Two kinds:

* media types the tool does not know: the queue PATCH body
  (``application/openstack-messaging-v2.0-json-patch``) is JSON, and so are the
  JSON-Home document (``application/json-home``) of ``GET /v2`` and SQS's AWS
  JSON 1.0 (``application/x-amz-json-1.0``);
* the few refusals that OpenAPI 3.0 has no words for. Each is a 400 whose title
  and description are matched exactly here and documented in docs/api.rst: rules
  that depend on stored state (another queue, a claim) or compare two fields, or
  constrain property names (``propertyNames`` is not in OpenAPI 3.0). A
  "schema-valid request rejected" failure with any other answer still fails;
* the subscriber pattern is a form the server always takes, not its whole
  grammar: a subscriber outside it that the server takes is no failure;
* the SQS endpoint's actions check their parameters by SQS's rules (docs/api.rst,
  "SQS-compatible endpoint"), which one schema of its one route cannot state: an
  SQS error in SQS's shape (``__type`` in JSON, ``<ErrorResponse>`` in XML) to a
  schema-valid call is no failure;
* queues are implicit (Zaqar's GET of an unknown queue answers 200 with the
  defaults): a queue still answering after its DELETE is no failure.
"""

from __future__ import annotations

import json
import re
from typing import Any

import schemathesis

JSON_PATCH = "application/openstack-messaging-v2.0-json-patch"

#: (title, description pattern) of the 400s OpenAPI 3.0 cannot state
INEXPRESSIBLE_REFUSALS = [
    # docs/api.rst, "Reserved metadata": the dead-letter queue must exist, not be the queue, not form a chain
    ("Invalid API request", re.compile(r"_dead_letter_queue names queue .*, which does not exist")),
    ("Invalid API request", re.compile(r"_dead_letter_queue cannot be the queue itself")),
    ("Invalid API request", re.compile(r"_dead_letter_queue: queue .* chains are not supported")),
    # a queue template (stored state) applies to a new queue: its metadata under the body's
    ("Invalid API request", re.compile(r"^Queue template \S+ \(pattern \S+\) applies to queue \S+: ")),
    # a redrive destination must exist unless the request asks to create it
    ("Invalid API request", re.compile(r"^destination queue .* does not exist in this project; create it")),
    # a field compared with another field, or with the path
    ("Invalid API request", re.compile(r"_retry_policy\.minimum_delay \(\d+\) may not be greater than")),
    ("Invalid API request", re.compile(r"^_retry_backoff\.max must be between ")),
    # W3C Trace Context rules beyond the documented patterns, and tracestate's need of traceparent
    ("Invalid API request", re.compile(r"^traceparent(: an all-zero| must be W3C .*; version)")),
    ("Invalid API request", re.compile(r"^tracestate (list-member|may hold at most|needs a traceparent)")),
    ("Invalid API request", re.compile(r"^destination cannot be the queue redriven from")),
    # a redrive's limit and rate depend on its async field (docs/api.rst, "Redrive tasks")
    ("Invalid request body", re.compile(r"^limit must be at most \d+, got \d+\.$")),
    ("Invalid API request", re.compile(r"^dry_run and async exclude each other")),
    ("Invalid API request", re.compile(r"^max_per_second may be at most \d+ \(max_redrive_rate\)")),
    # a release's delay depends on its outcome (docs/api.rst, "Release one message"), in a body or a
    # claim's query alike
    ("Invalid API request", re.compile(r"^outcome postpone needs a delay: ")),
    ("Invalid API request", re.compile(r"^outcome reject takes no delay: ")),
    # a queue's (or a topic's) own stored _max_messages_post_size caps its posts; every body has a
    # size in bytes (docs/api.rst, "Request bodies"), which a schema of its JSON value cannot state
    ("Invalid request body", re.compile(r"^Request body may not exceed \d+ bytes on (queue|topic) ")),
    ("Invalid request body", re.compile(r"^Request body may not exceed \d+ bytes\.$")),
    # options read for a mailto: subscriber only
    ("Invalid API request", re.compile(r"^options\.(from|subject) (is not valid|must be a string)")),
    # names of post_headers (an RFC 9110 token)
    ("Invalid API request", re.compile(r"options\.post_headers: .* is not a valid header name")),
    # a share's expiry must exist and lie in the future (docs/api.rst, "Pre-signed URLs")
    ("Invalid API request", re.compile(r"^expires names no existing date and time")),
    ("Invalid API request", re.compile(r"^expires must be later than now")),
    # ... and lie within the operator's [signed_urls] max_lifetime from now
    ("Invalid API request", re.compile(r"^expires may be at most \d+ seconds from now")),
    # a webhook's host must be an address the operator lets webhooks reach (docs/api.rst, "What a
    # subscription may make the server send"); post_headers framing headers and control characters,
    # and a from the operator does not allow, are stated in words only
    ("Invalid API request", re.compile(r"^subscriber is refused: the subscriber's address is not one")),
    ("Invalid API request", re.compile(r"^options\.post_headers: (\S+ is set by the server|the value of )")),
    ("Invalid API request", re.compile(r"^options\.from is refused: ")),
    # a deliver_at lies at most 30 s in the past and max_message_delay ahead of the server's clock
    # (docs/api.rst, "Long schedules"), and a leap second names no time the server keeps
    ("Invalid API request", re.compile(r"^messages\[\d+\]\.deliver_at is \d+ s (in the past|ahead); ")),
    ("Invalid API request", re.compile(r"^messages\[\d+\]\.deliver_at must be .*, got a string that is not")),
    # docs/api.rst, "Claim rules": those of a message DELETE or release depend on the message's state
    ("Invalid claim", re.compile(r".")),
    ("Message is not claimed", re.compile(r".")),
]


#: a JSON patch applies to the stored metadata: whether a dead-letter setting finds its
#: _dead_letter_queue depends on what is stored (a PUT body says it all, and its schema states it)
PATCH_REFUSALS = [
    ("Invalid API request",
     re.compile(r"^_dead_letter_on_expiry needs _dead_letter_queue\.")),
]


@schemathesis.serializer(JSON_PATCH)
def json_patch(ctx: Any, value: Any) -> bytes:
    """A JSON patch body is sent as JSON text."""
    return json.dumps(value).encode()


@schemathesis.serializer("application/x-amz-json-1.0")
def amz_json(ctx: Any, value: Any) -> bytes:
    """An SQS call of AWS JSON 1.0 is sent as JSON text."""
    return json.dumps(value).encode()


@schemathesis.deserializer("application/x-amz-json-1.0")
def amz_json_answer(ctx: Any, response: Any) -> Any:
    """An SQS answer of AWS JSON 1.0 is JSON."""
    return json.loads(response.content) if response.content else {}


@schemathesis.deserializer("application/json-home")
def json_home(ctx: Any, response: Any) -> Any:
    """The JSON-Home document is JSON."""
    return json.loads(response.content)


def is_inexpressible_refusal(status: int, body: Any, operation: str = "") -> bool:
    """Whether an answer is one of the 400s listed in ``INEXPRESSIBLE_REFUSALS`` (or ``PATCH_REFUSALS``)."""
    if status != 400 or not isinstance(body, dict):
        return False
    title, description = body.get("title"), body.get("description")
    rules = INEXPRESSIBLE_REFUSALS + (PATCH_REFUSALS if operation == "PATCH /v2/queues/{queue}" else [])
    return any(title == t and isinstance(description, str) and pattern.search(description)
               for t, pattern in rules)


def is_inexpressible_answer(response: Any, operation: str) -> bool:
    """Whether a JSON answer is one of the refusals :func:`is_inexpressible_refusal` lists."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return False
    return is_inexpressible_refusal(response.status_code, body, operation)


#: a DELETE of a queue or a bulk DELETE of its messages, or of a topic (whose stats and
#: subscription list answer, empty, after it as before it, as Zaqar's), as a use-after-free
#: failure names it
QUEUE_DELETE = re.compile(r"^DELETE /v2/(queues/[^/]+(/messages)?|topics/[^/]+)$")

#: the schema of a subscriber: a form the server always takes, not the whole grammar it
#: takes (URIs with user info, IP literals, quoted mail addresses, subjects...)
SUBSCRIBER_FORM = re.compile(r"violates `pattern` at \S*/subscriber\b")
#: the documented pattern of the traceparent header (docs/openapi.yaml, parameters/Traceparent)
TRACEPARENT_FORM = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?")
#: the query parameter a negative case made invalid
QUERY_PARAMETER = re.compile(r"parameter `([^`]+)` in query")


#: the operations of the SQS endpoint (docs/openapi.yaml, tag sqs)
SQS_OPERATIONS = ("POST /",)


def is_sqs_refusal(response: Any, operation: str) -> bool:
    """Whether an answer of the SQS endpoint is an SQS error: its actions' own rules refused the call."""
    if operation not in SQS_OPERATIONS or response.status_code not in (400, 403, 404):
        return False
    return b'"__type":"com.amazonaws.sqs#' in response.content or b"<ErrorResponse" in response.content


def traceparent_off_its_pattern(case: Any) -> bool:
    """Whether a case sends a traceparent header outside its documented pattern.

    The tool's coverage phase may count such a header (``traceparent: 0``)
    as schema-valid; the server's refusal of it is then the documented one.
    """
    headers = getattr(case, "headers", None) or {}
    value = headers.get("traceparent")
    return isinstance(value, str) and TRACEPARENT_FORM.fullmatch(value) is None


def null_sent_as_text(message: str, case: Any) -> bool:
    """Whether the invalid part of a negative case is a query parameter set to null.

    A query string has no null: the tool sends the text ``null``, which is a
    valid value of a string parameter (``ids=null`` names the message ``null``).
    """
    named = QUERY_PARAMETER.search(message)
    query = getattr(case, "query", None) or {}
    return named is not None and query.get(named.group(1), "") in (None, [None])


@schemathesis.hook
def filter_failure(ctx: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure but a refusal listed above, or a subscriber outside the promised form taken."""
    kind = type(failure).__name__
    if kind == "UseAfterFree":
        # Queues are implicit, as in Zaqar (docs/api.rst, "Queues"): a deleted queue, like one never
        # created, answers as an empty queue (GET 200 with the defaults, zero stats,
        # empty listings); a bulk DELETE of messages (ids or pop) leaves the message
        # collection, which still lists. A deleted message, claim or subscription must
        # be gone.
        return QUEUE_DELETE.match(str(getattr(failure, "free", ""))) is None
    if kind == "AcceptedNegativeData":
        message = str(getattr(failure, "message", ""))
        if null_sent_as_text(message, case):
            return False
        return SUBSCRIBER_FORM.search(message) is None or "\n  - " in message
    if kind != "RejectedPositiveData" or traceparent_off_its_pattern(case):
        return kind != "RejectedPositiveData"
    return not (is_sqs_refusal(response, case.operation.label)
                or is_inexpressible_answer(response, case.operation.label))


def leave_out_a_valid_wait(case: Any) -> None:
    """Send a claim's valid ``wait`` (1..20 s) as no wait: on an empty queue the claim would last it.

    Even 1 s a case doubled the run. The invalid values (0, 21, not a whole
    number) are sent as generated, to be refused with 400; waiting itself is
    tested by tests/api/test_long_poll.py and tests/e2e/test_long_poll.py.
    """
    query = case.query if isinstance(case.query, dict) else None
    if not query or "wait" not in query:
        return
    value = query["wait"]
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 20:
        del query["wait"]
    elif isinstance(value, str) and value.isascii() and value.isdigit() and 1 <= int(value) <= 20:
        del query["wait"]


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """In the stateful phase, post messages visible at once, so that the linked claims find them.

    Only valid cases are shaped, and only by leaving out optional fields: a
    delay (of the message, or the queue's default) would hide the messages
    from the claim, the renewal, the release and the deletes that follow.
    """
    label = case.operation.label
    if label == "POST /v2/queues/{queue}/claims":
        leave_out_a_valid_wait(case)
    meta = getattr(case, "meta", None)
    if meta is None or str(meta.phase.name) != "stateful" or not meta.generation.mode.is_positive:
        return
    if label == "POST /v2/queues/{queue}/messages" and isinstance(case.body, dict):
        for message in case.body.get("messages", []):
            if isinstance(message, dict):
                message.pop("delay", None)
                message.pop("deliver_at", None)
    elif label == "PUT /v2/queues/{queue}" and isinstance(case.body, dict):
        case.body.pop("_default_message_delay", None)
