"""Where the Swift driver keeps things: URI options, object names, JSON bodies, listing hints.

Layout: one container per project, ``<prefix>.<project key>`` (the project id
percent-encoded, or ``%h`` + its SHA-256 when that would pass Swift's
256-byte container-name limit), holding pseudo-folders per queue::

    q/<queue>                      queue record: {"project", "name", "metadata", "created", "writer"}
    m/<queue>/<marker:020d>_<id>   one message; its whole state is the JSON body
    c/<queue>/<claim id>           claim record: {"id", "ttl", "grace", "created", "expires", "names"}
    r/<kind>/<key>                 versioned record: {"project", "key", "value", "version", "writer"}
    d/<queue>/<dedup id>           a remembered dedup_id: {"message_id", "expires", "writer"}

Queue names, ids and keys are percent-encoded in names (:func:`_segment`).
A queue and its dead-letter queue are in one container, so a move never
crosses containers. Markers are time-based (see :class:`MarkerClock`), so
names sort in post order and no shared counter object is needed.

Every message and claim object also carries a *listing hint*: its
Content-Type has parameters with the few numbers a listing needs
(``e`` expiry, ``d`` delay end, ``c`` claim end, ``n`` claim count, ``k`` a
hash of the client id, ``g`` a hash of the message group when it has one).
Listings can then pick candidates without reading bodies; the body read
afterwards always decides (hints can lag on a multi-node cluster, and an
expired object stays listed while no object-expirer runs). The hint is under
140 bytes, far below the ~3.5 KB of xattrs ext4 allows per object.

The driver and the Spark reader (``spark_jobs/sources/swift.py``) both name,
list and decode objects with this module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import re
import threading
import time
import urllib.parse
from typing import Any

from zaqar_lite.claims import policy
from zaqar_lite.models import Message
from zaqar_lite.rules.pools import masked_uri

MESSAGE_TYPE = "application/x-zaqar-message"
CLAIM_TYPE = "application/x-zaqar-claim"
QUEUE_TYPE = "application/json"
#: X-Delete-At is at least this long after a message's expiry: the sweep (which
#: may dead-letter expired messages) comes first, Swift's expirer after.
DELETE_AT_SLACK = 3600
_CONTAINER_LIMIT = 255
_PREFIX = re.compile(r"[A-Za-z0-9-]{1,64}")
_OPTIONS = {"prefix", "settle", "timeout", "retries", "operation_timeout", "auth_version", "https"}


@dataclasses.dataclass(frozen=True)
class SwiftOptions:
    """Everything a ``swift://`` URI says."""

    auth_url: str
    user: str
    key: str
    prefix: str = "zaqar"
    settle: float = 0.5
    timeout: float = 3.0
    retries: int = 1
    #: seconds a whole driver operation (a claim, a post of many...) may spend on Swift
    operation_timeout: float = 10.0
    auth_version: str = "1"
    os_options: dict[str, str] = dataclasses.field(default_factory=dict)


def parse_uri(uri: str) -> SwiftOptions:
    """Read ``swift://ACCOUNT%3AUSER:KEY@HOST:PORT/auth/v1.0?prefix=&settle=&timeout=&retries=``.

    ``operation_timeout`` (default 10) bounds the seconds a whole driver
    operation (a claim, a post of many, a release...) spends on Swift.

    ``https=true`` talks TLS; ``auth_version=3`` with ``os_*`` keys
    (``os_project_name``, ``os_user_domain_name``, ...) passes Keystone
    options through to python-swiftclient.
    """
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "swift" or not parts.hostname or parts.username is None:
        raise ValueError(f"not a swift URI (swift://user:key@host:port/auth/v1.0): {masked_uri(uri)}")
    query = dict(urllib.parse.parse_qsl(parts.query))
    unknown = sorted(k for k in query if k not in _OPTIONS and not k.startswith("os_"))
    if unknown:
        raise ValueError(f"unknown swift URI options {unknown}; known: {sorted(_OPTIONS)} and os_*")
    http = "https" if query.pop("https", "false").lower() in ("1", "true", "yes") else "http"
    options = SwiftOptions(
        auth_url=f"{http}://{parts.netloc.rpartition('@')[2]}{parts.path or '/auth/v1.0'}",
        user=urllib.parse.unquote(parts.username), key=urllib.parse.unquote(parts.password or ""),
        prefix=query.pop("prefix", "zaqar"), settle=float(query.pop("settle", 0.5)),
        timeout=float(query.pop("timeout", 3.0)), retries=int(query.pop("retries", 1)),
        operation_timeout=float(query.pop("operation_timeout", 10.0)),
        auth_version=query.pop("auth_version", "1"),
        os_options={k[3:]: v for k, v in query.items() if k.startswith("os_")})
    if not _PREFIX.fullmatch(options.prefix):
        raise ValueError(f"swift prefix must be 1-64 letters, digits or dashes: {options.prefix!r}")
    if not options.operation_timeout > 0:
        raise ValueError(f"swift operation_timeout must be above 0 seconds: {options.operation_timeout!r}")
    return options


def project_container(prefix: str, project: str) -> str:
    """Return the container of one project."""
    key = urllib.parse.quote(project, safe="", errors="backslashreplace")
    if len(prefix) + 1 + len(key) > _CONTAINER_LIMIT:
        key = "%h" + hashlib.sha256(project.encode(errors="backslashreplace")).hexdigest()
    return f"{prefix}.{key}"


def _segment(text: str, keep_slash: bool = False) -> str:
    """Percent-encode text for an object name, never leaving a ``.`` or ``..`` path segment.

    Client-given ids may hold NUL or non-UTF-8 (Swift refuses those names),
    and HTTP clients drop dot segments from URLs, so a queue named ``..``
    would otherwise address the container itself.
    """
    quoted = urllib.parse.quote(text, safe="/" if keep_slash else "", errors="backslashreplace")
    return "/".join(p.replace(".", "%2E") if p in (".", "..") else p for p in quoted.split("/"))


def queue_object(queue: str) -> str:
    """Return the name of a queue's record."""
    return f"q/{_segment(queue)}"


def queue_name_of(name: str) -> str:
    """Return the queue name in a queue record's name."""
    return urllib.parse.unquote(name[2:])


def message_prefix(queue: str) -> str:
    """Return the pseudo-folder of a queue's messages."""
    return f"m/{_segment(queue)}/"


def message_object(queue: str, marker: int, message_id: str) -> str:
    """Return a message's name: FIFO order is name order."""
    return f"{message_prefix(queue)}{marker:020d}_{_segment(message_id)}"


def after_marker(queue: str, marker: int | None) -> str | None:
    """Return the listing marker that skips every message with a marker up to ``marker``."""
    return None if marker is None else f"{message_prefix(queue)}{marker:020d}~"


def marker_of(name: str) -> int:
    """Return the marker in a message object's name."""
    return int(name.rsplit("/", 1)[-1].partition("_")[0])


def message_id_of(name: str) -> str:
    """Return the message id in a message object's name."""
    return urllib.parse.unquote(name.rsplit("/", 1)[-1].partition("_")[2])


def claim_prefix(queue: str) -> str:
    """Return the pseudo-folder of a queue's claim records."""
    return f"c/{_segment(queue)}/"


def claim_object(queue: str, claim_id: str) -> str:
    """Return the name of a claim record."""
    return claim_prefix(queue) + _segment(claim_id)


def dedup_prefix(queue: str) -> str:
    """Return the pseudo-folder of the dedup ids a queue remembers."""
    return f"d/{_segment(queue)}/"


def dedup_object(queue: str, dedup_id: str) -> str:
    """Return the name of a remembered dedup id."""
    return dedup_prefix(queue) + _segment(dedup_id)


def record_object(kind: str, key: str) -> str:
    """Return the name (or, with a partial key, the listing prefix) of a versioned record."""
    return f"r/{_segment(kind)}/{_segment(key, keep_slash=True)}"


def client_key(client_id: str) -> str:
    """Return the short hash of a client id kept in listing hints."""
    return hashlib.sha1(client_id.encode()).hexdigest()[:8]


def group_key(group: str) -> str:
    """Return the short hash of a message group kept in listing hints.

    Two groups of one queue sharing a hash (about 1 in 2^48 pairs) are ordered
    as one group: never two of their messages out at once, never out of order.
    """
    return hashlib.sha1(group.encode()).hexdigest()[:12]


@dataclasses.dataclass(frozen=True)
class Hint:
    """The state numbers of a listing row (see the module docstring)."""

    expires: float = math.inf
    delay_until: float = 0.0
    claim_expires: float = 0.0
    claim_count: int = 0
    client: str = ""
    #: the short hash of the message's group ('' for none)
    group: str = ""

    def visible(self, now: float) -> bool:
        """Return whether the row may be claimed or popped at ``now``: a prefilter, the body decides."""
        return policy.visible_at(self.expires, self.claim_expires, self.delay_until, now)


def parse_hint(content_type: str) -> Hint:
    """Read a listing row's hint; a row without one reads as "always a candidate"."""
    params = dict(p.strip().partition("=")[::2] for p in content_type.split(";")[1:])
    try:
        return Hint(float(params.get("e", math.inf)), float(params.get("d", 0)),
                    float(params.get("c", 0)), int(params.get("n", 0)), params.get("k", ""),
                    params.get("g", ""))
    except ValueError:
        return Hint()


def message_type(message: Message) -> str:
    """Return the Content-Type (with hint) a message is stored under."""
    grouped = "" if message.group is None else f";g={group_key(message.group)}"
    return (f"{MESSAGE_TYPE};e={message.expires!r};d={message.delay_until!r};"
            f"c={(message.claim_expires or 0.0)!r};n={message.claim_count};k={client_key(message.client_id)}"
            + grouped)


def claim_type(expires: float) -> str:
    """Return the Content-Type (with hint) a claim record is stored under."""
    return f"{CLAIM_TYPE};e={expires!r}"


def delete_at(expires: float) -> dict[str, str]:
    """Return the X-Delete-At header for an object living until ``expires`` (with slack).

    Swift refuses an X-Delete-At in its own past, so none is sent when the
    given time (which tests may move) is not comfortably in Swift's future.
    """
    # Rounded up to the hour: a claim that extends the expiry a little rewrites the same
    # X-Delete-At, which spares Swift two expirer-queue updates on that PUT.
    when = math.ceil((expires + DELETE_AT_SLACK) / 3600) * 3600
    return {"X-Delete-At": str(when)} if when > time.time() + 60 else {}


def message_body(message: Message) -> bytes:
    """Serialise a message's whole state (its marker is in its name; unset optional fields left out)."""
    record = dataclasses.asdict(message)
    record.pop("marker")
    record.pop("dedup_until")  # a post's instruction, kept by the dedup object
    for optional in ("dedup_id", "group", "trace"):
        if record[optional] is None:
            record.pop(optional)
    return json.dumps(record, separators=(",", ":")).encode()


def message_from(name: str, raw: bytes) -> Message:
    """Rebuild a message from its object name and body."""
    record: dict[str, Any] = json.loads(raw)
    return Message(**record, marker=marker_of(name))


class MarkerClock:
    """Hands out message markers: the post's time in microseconds x 1000 + this process's slot.

    A queue's markers follow its own posts and the time, nothing else: they are
    strictly increasing within a queue in a process (a clock step back never
    reorders them), and posts to other queues never move them, so a marker
    tells a tenant nothing of other tenants' traffic. Only queues whose last
    marker ran ahead of the time (a batch posted within its own microseconds)
    are remembered, until the time passes it; should the clock stand still or
    step back while more than ``AHEAD_LIMIT`` queues post, all of them go on
    after the highest marker given (order kept, memory bounded). Two processes
    collide only if they drew the same slot (1 in 1000) and post to a queue in
    the same microsecond, and even then names stay unique (they end in the
    message id) and only a listing page boundary could tie. Order across hosts
    is post time as far as their clocks agree.
    """

    AHEAD_LIMIT = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1
        self._slot = 0
        self._time = 0  # the latest time-based marker, never moving back
        self._ahead: dict[tuple[str, str], int] = {}  # last markers of queues at or past _time

    def take(self, project: str, queue: str, count: int, now: float) -> list[int]:
        """Return ``count`` fresh markers of a queue, posted at ``now``, in increasing order."""
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._slot = os.getpid(), random.SystemRandom().randrange(1000)
                self._time, self._ahead = 0, {}
            if len(self._ahead) > self.AHEAD_LIMIT:
                self._time = max(self._ahead.values()) + 1000
                self._ahead.clear()
            moment = max(round(now * 1_000_000) * 1000 + self._slot, self._time)
            if moment > self._time:
                self._time = moment
                self._ahead = {key: last for key, last in self._ahead.items() if last >= moment}
            first = max(moment, self._ahead.get((project, queue), 0) + 1000)
            self._ahead[project, queue] = first + 1000 * (count - 1)
            return [first + 1000 * i for i in range(count)]
