"""Reading request bodies and rendering messages: shared by every resource."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import falcon
from falcon.typing import ReadableIO

from zaqar_lite.api import inputs
from zaqar_lite.api.schemas import message_edit, message_edit_patch, message_post, parse_json
from zaqar_lite.claims import policy
from zaqar_lite.clock import iso_utc
from zaqar_lite.config import Limits
from zaqar_lite.errors import InvalidBody, ValidationFailed
from zaqar_lite.models import Message, QueueStats

#: how much of a refused body is still read and thrown away before the 400, so that a
#: client still sending it is not reset before it reads the answer; past this the
#: connection is simply dropped
DRAIN_LIMIT = 4 * 1024 * 1024
DRAIN_CHUNK = 65536


def read_json(req: falcon.Request, max_size: int) -> tuple[Any, int]:
    """Read and parse a JSON body no larger than ``max_size`` bytes.

    The size is judged on the bytes actually read, not only on Content-Length.
    A body sent without Content-Length (chunked) is read to its end when the
    server says the input is terminated there (``wsgi.input_terminated``, as
    gunicorn does); falcon's bounded stream would read it as empty.

    Returns:
        The parsed document (None for an empty body) and its size in bytes. A
        body of whitespace only is not JSON and is refused, as Zaqar does, and
        so is a body of JSON ``null`` (no request takes it).
    """
    length = req.content_length  # parsed on every read of the property: once here
    if length is not None and length <= max_size:
        # the declared length, as falcon's bounded stream reads it (min(size, what remains): all of
        # it), without its two Python layers around the server's input: the path of every post and claim
        raw = req.env["wsgi.input"].read(length) if length else b""
    else:
        stream: ReadableIO = req.bounded_stream
        if length is None and req.env.get("wsgi.input_terminated"):
            stream = req.stream
        if length is not None:  # larger than allowed
            refuse_oversized(stream, max_size)
        raw = stream.read(max_size + 1)
        if len(raw) > max_size:
            refuse_oversized(stream, max_size)
    if not raw:
        return None, 0
    document = parse_json(raw)
    if document is None:
        # No request takes null: a body, when sent, is an object or an array (as Zaqar).
        raise InvalidBody("Request body may not be null; send a JSON object or no body.")
    return document, len(raw)


def read_message_post(req: falcon.Request,
                      limits: Limits) -> tuple[list[dict[str, Any]], int, dict[str, str] | None]:
    """Read a message post (to a queue or a topic): its checked messages, its size, its trace context."""
    document, size = read_json(req, limits.max_messages_post_size)
    if document is None:
        raise InvalidBody("The request body must list messages: {\"messages\": [...]}.")
    env = req.env  # the headers' WSGI names, not falcon's get_header, which derives them per call
    traceparent, tracestate = env.get("HTTP_TRACEPARENT"), env.get("HTTP_TRACESTATE")
    trace = (None if traceparent is None and tracestate is None  # most posts carry no trace context
             else inputs.trace_context(traceparent, tracestate))
    return message_post(document, limits), size, trace


#: the media type of a JSON-patch of metadata (queues, topics)
PATCH_TYPE = "application/openstack-messaging-v2.0-json-patch"


def read_json_patch(req: falcon.Request, max_size: int, what: str) -> tuple[Any, int]:
    """Read a metadata PATCH's JSON body, refusing another media type (415 naming ``what``)."""
    if (req.content_type or "").split(";")[0].strip() != PATCH_TYPE:
        raise falcon.HTTPUnsupportedMediaType(
            description=f"PATCH of a {what} needs Content-Type {PATCH_TYPE}.")
    return read_json(req, max_size)


def read_message_edit(req: falcon.Request, limits: Limits) -> tuple[dict[str, Any], int]:
    """Read a message PATCH: a merge body (``application/json``, or no Content-Type) or Zaqar's JSON-patch.

    Returns:
        The checked changes (any of ``body``, ``ttl``, ``delay``) and the body's size in bytes.

    Raises:
        falcon.HTTPUnsupportedMediaType: another media type.
    """
    media_type = (req.content_type or "").split(";")[0].strip().lower()
    if media_type not in ("", "application/json", PATCH_TYPE):
        raise falcon.HTTPUnsupportedMediaType(
            description=f"PATCH of a message takes Content-Type application/json (a body with any of body, "
                        f"ttl and delay) or {PATCH_TYPE} (replace operations on /body, /ttl and /delay).")
    document, size = read_json(req, limits.max_messages_post_size)
    if media_type == PATCH_TYPE:
        return message_edit_patch(document, limits), size
    return message_edit(document, limits), size


def stats_body(stats: QueueStats, now: float, href: Callable[[str], str]) -> dict[str, Any]:
    """Return Zaqar's stats document: the counts, and the oldest and newest message by ``href(id)``."""
    counts: dict[str, object] = {"claimed": stats.claimed, "free": stats.free,
                                 "delayed": stats.delayed, "total": stats.total}
    for key, message in (("oldest", stats.oldest), ("newest", stats.newest)):
        if message is not None:
            counts[key] = {"href": href(message.id), "age": message.age(now),
                           "created": iso_utc(message.created)}
    return {"messages": counts}


def refuse_oversized(stream: ReadableIO, max_size: int) -> NoReturn:
    """Discard the rest of a body that is too large (up to ``DRAIN_LIMIT``), then refuse it."""
    drained = 0
    while drained < DRAIN_LIMIT:
        chunk = stream.read(DRAIN_CHUNK)
        if not chunk:
            break
        drained += len(chunk)
    raise InvalidBody(f"Request body may not exceed {max_size} bytes.")


def message_href(queue: str, message_id: str) -> str:
    """Return the path of one message."""
    return f"/v2/queues/{queue}/messages/{message_id}"


#: the query parameters that ask a renderer for fields beyond Zaqar's
INCLUDE_PARAMS = frozenset({"include_dead_letter", "include_fifo", "include_trace", "include_schedule"})


class MessageRenderer:
    """Renders messages for one request with Zaqar's fields only, by default.

    A dead letter also carries its ``dead_letter`` provenance block when the
    request says ``include_dead_letter=true``, or when the deployment makes
    that the default (``[transport] include_dead_letter``), and a message
    posted with a W3C trace context its ``trace`` when the request says
    ``include_trace=true``: python-zaqarclient
    builds messages with ``Message(**fields)`` and fails on any field it does
    not know, so nothing beyond Zaqar's fields is sent unasked. Likewise a
    message's ``dedup_id`` and ``group``, when it has them, only with
    ``include_fifo=true``, and a still-delayed message's ``deliver_at`` (when
    it is due) only with ``include_schedule=true``.

    Build it before the request changes anything: a bad parameter is then
    refused before a claim or a pop takes messages it could never show.
    """

    def __init__(self, req: falcon.Request, queue: str, default_dead_letter: bool) -> None:
        self.queue = queue
        if INCLUDE_PARAMS.isdisjoint(req.params):  # most requests name none: the defaults, nothing to read
            self.dead_letter, self.fifo, self.trace, self.schedule = default_dead_letter, False, False, False
        else:
            self.dead_letter = inputs.boolean(
                req.get_param("include_dead_letter"), "include_dead_letter", default_dead_letter)
            self.fifo = inputs.boolean(req.get_param("include_fifo"), "include_fifo", False)
            self.trace = inputs.boolean(req.get_param("include_trace"), "include_trace")
            self.schedule = inputs.boolean(req.get_param("include_schedule"), "include_schedule")
        #: whether any field beyond Zaqar's may be shown (most requests ask for none)
        self.extras = self.dead_letter or self.fifo or self.trace or self.schedule
        #: the path of a message of the queue, but its id (:func:`message_href`)
        self.href_prefix = message_href(queue, "")

    def __call__(self, message: Message, now: float) -> dict[str, Any]:
        """Return the representation of one message as of ``now``."""
        href = self.href_prefix + message.id
        view: dict[str, Any] = {
            "id": message.id,
            "href": href,
            "ttl": message.ttl(),
            "age": message.age(now),
            "body": message.body,
            "claim_count": message.claim_count,
        }
        if message.is_claimed(now):
            view["href"] = f"{href}?claim_id={message.claim_id}"
            view["claim_id"] = message.claim_id
        if not self.extras:
            return view
        if self.dead_letter and message.dead_letter is not None:
            view["dead_letter"] = policy.provenance(message)
        if self.fifo and message.dedup_id is not None:
            view["dedup_id"] = message.dedup_id
        if self.fifo and message.group is not None:
            view["group"] = message.group
        if self.trace and message.trace is not None:
            view["trace"] = dict(message.trace)
        if self.schedule and message.is_delayed(now):
            view["deliver_at"] = iso_utc(message.delay_until)
        return view

    def many(self, messages: list[Message], now: float) -> list[dict[str, Any]]:
        """Return the representations of several messages as of ``now``."""
        return [self(m, now) for m in messages]


def next_links(path: str, query: Mapping[str, Any]) -> list[dict[str, str]]:
    """Return the ``links`` of a page that has items: a ``next`` link to ``path`` with ``query``."""
    return [{"rel": "next", "href": f"{path}?{urllib.parse.urlencode(query)}"}]


def joined_param(req: falcon.Request, name: str) -> str | None:
    """Return a list parameter given as ``a,b`` or repeated (``name=a&name=b``) as ``a,b``.

    Each repetition is a list of its own (docs/openapi.yaml): one without an
    id (``name=a&name=``) is refused, not skipped.
    """
    values = req.get_param_as_list(name)
    # the app drops blank query values (an empty parameter counts as absent), so the
    # repetitions are read again from the query string with them
    given = falcon.uri.parse_query_string(req.query_string, keep_blank=True).get(name)
    if isinstance(given, list) and not all(value.strip(",") for value in given):
        raise ValidationFailed(f"Each {name} parameter must list at least one id.")
    return None if values is None else ",".join(values)
