"""How zaqar-lite lays out its data in Redis: key names, and values as the scripts read them.

``P`` is the project and ``Q`` the queue name, both percent-encoded
(no ``{``, ``}`` or ``:`` left). ``{P}`` is a Redis Cluster hash tag: a project's
queues, their dead-letter queues (always in the same project), messages, claims
and records share one hash slot, so every script touches a single slot::

    zl:{P}:queues          ZSET   queue names, score 0 (ZRANGEBYLEX pages by name)
    zl:{P}:q:Q:meta        STRING queue metadata JSON; the queue exists while this does
    zl:{P}:due             ZSET   queue names, score when the sweep next has something to do
                                  in the queue (due_queues); a queue with nothing due is absent
    zl:{P}:q:Q:marker      STRING last marker given in Q (INCR: FIFO order of posts)
    zl:{P}:q:Q:ready       ZSET   messages neither claimed nor delayed, score marker
    zl:{P}:q:Q:delayed     ZSET   delayed messages, score delay_until
    zl:{P}:q:Q:claimed     ZSET   claimed messages, score claim_expires
    zl:{P}:q:Q:all         ZSET   every message of Q, score marker (listing, purge)
    zl:{P}:q:Q:expires     ZSET   every message of Q, score expires (sweep, stats)
    zl:{P}:q:Q:counted     ZSET   messages claimed at least once, score claim_count
    zl:{P}:q:Q:claims      ZSET   claim ids, score claim expiry
    zl:{P}:q:Q:c:<claim>   HASH   ttl, grace, created, expires of one claim
    zl:{P}:q:Q:cm:<claim>  SET    ids of the messages the claim took
    zl:{P}:q:Q:dedup       HASH   dedup_id -> id of the message first posted with it
    zl:{P}:q:Q:dedup_expires  ZSET  dedup ids, score when the queue may forget them
    zl:{P}:q:Q:waiting     ZSET   long-polling claims waiting on Q, score the server's time (ms)
                                  each stops counting; written by the wake-up channel, not the
                                  driver (service/waiting/channels.py), and expires by itself
    zl:{P}:m:<id>          HASH   a message: q (its queue), marker, body (JSON), created, expires,
                                  delay_until, client_id, claim_id, claim_expires, claim_count,
                                  dlq_eligible, failures (JSON objects, one a line), dead_letter,
                                  dedup_id, group, trace (JSON) (each only when set)
    zl:{P}:q:Q:groups      SET    message groups that have messages in Q
    zl:{P}:q:Q:g:<group>   ZSET   the group's messages in Q, score marker; only the first
                                  (the head) is ever in ready (see lua/_lib.lua)
    zl:{P}:r:<kind>        HASH   versioned records: key -> "<version> <value JSON>"
    zl:{P}:rk:<kind>       ZSET   record keys, score 0
    zl:projects            SET    projects that ever had a queue (all_queues)
    zl:record-projects:<kind>  SET  projects that ever had a record of that kind

The two global sets are the only keys outside the project slots. No script
touches them: each write that may create a queue or a record sends an SADD just
before its script in the same pipeline.

The driver and the Spark reader (``spark_jobs/sources/redis.py``) both build
keys and decode hashes with this module.

Times are stored and sent as ``repr(float)`` strings, so no digit is lost
(Lua's own number formatting keeps 14).
"""

from __future__ import annotations

import dataclasses
import json
import json.scanner
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from zaqar_lite.claims import policy
from zaqar_lite.jsontext import ascii_text, stored_json
from zaqar_lite.models import DeadLetterPolicy, Message, RetryBackoff, stored_message
from zaqar_lite.rules.pools import masked_uri

PROJECTS = "zl:projects"
RECORD_PROJECTS = "zl:record-projects:"
QUEUE_KEYS = ("meta", "marker", "ready", "delayed", "claimed", "all", "expires", "counted", "claims")


#: URI schemes of a Redis Cluster (seed nodes, comma-separated) and of one server
CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
SERVER_SCHEMES = ("redis", "rediss")


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a Redis store lives and how acknowledged its writes are (:func:`parse_uri`).

    ``wait_replicas`` > 0: a write is answered only once that many replicas
    hold it (Redis ``WAIT``, at most ``wait_timeout`` seconds), so it survives
    the failover of its primary.
    """

    uri: str
    cluster: bool
    ssl: bool = False
    nodes: tuple[tuple[str, int], ...] = ()
    username: str | None = None
    password: str | None = None
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    wait_replicas: int = 0
    wait_timeout: float = 1.0


def _wait_options(query: dict[str, str], cluster: bool) -> tuple[int, float]:
    try:
        replicas = int(query.pop("wait_replicas", "1" if cluster else "0"))
        timeout = float(query.pop("wait_timeout", "1.0"))
    except ValueError:
        raise ValueError("redis URI: wait_replicas must be an integer and wait_timeout a number "
                         "of seconds") from None
    if replicas < 0 or not 0 < timeout <= 60:
        raise ValueError("redis URI: wait_replicas must be >= 0 and wait_timeout in (0, 60] seconds")
    return replicas, timeout


def parse_uri(uri: str) -> Target:
    """Read a Redis URI: ``redis[s]://[[user]:password@]host:port/db`` or a cluster's
    ``redis[s]+cluster://[[user]:password@]host:port,host:port/``, each with query options.

    ``wait_replicas`` (0 on one server, 1 on a cluster) and ``wait_timeout`` (1 s)
    are zaqar-lite's; the other options go to redis-py.

    Raises:
        ValueError: not a Redis URI, a cluster URI without a node, or a bad option.
    """
    parts = urllib.parse.urlsplit(uri)
    query = dict(urllib.parse.parse_qsl(parts.query))
    if parts.scheme in SERVER_SCHEMES:
        replicas, timeout = _wait_options(query, cluster=False)
        plain = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
        return Target(plain, cluster=False, wait_replicas=replicas, wait_timeout=timeout)
    if parts.scheme not in CLUSTER_SCHEMES:
        raise ValueError(f"not a redis URI: {masked_uri(uri)}")
    credentials, _, hosts = parts.netloc.rpartition("@")
    user, _, password = credentials.partition(":")
    nodes = []
    for node in filter(None, hosts.split(",")):
        host, _, port = node.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"redis cluster URI: a node is host:port, got {node!r}")
        nodes.append((host.strip("[]"), int(port)))
    if not nodes:
        raise ValueError(f"redis cluster URI names no node: {masked_uri(uri)}")
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError("redis cluster URI: a cluster has only database 0")
    replicas, timeout = _wait_options(query, cluster=True)
    return Target(uri, cluster=True, ssl=CLUSTER_SCHEMES[parts.scheme], nodes=tuple(nodes),
                  username=urllib.parse.unquote(user) or None,
                  password=urllib.parse.unquote(password) or None, options=query,
                  wait_replicas=replicas, wait_timeout=timeout)


def stamp(value: float) -> str:
    """Format a time exactly (Lua would keep only 14 digits)."""
    return repr(float(value))


def guard(metadata_version: str | None) -> list[str]:
    """Return the ARGV pair of a metadata check (``metadata_is`` in _lib.lua)."""
    return ["0", ""] if metadata_version is None else ["1", metadata_version]


def opt(value: Any, fmt: Any = str) -> str:
    """Return ``fmt(value)``, or '' (unset) for None."""
    return "" if value is None else fmt(value)


def optional_pairs(m: Message) -> list[str]:
    """Return the (field, value) pairs of a message's optional fields that are set, flat, as post.lua
    stores them: client_id, claim_id, failures, dead_letter, trace. (Its claim_expires, dedup_id and
    group travel in places of their own, which post.lua reads and stores when set.)"""
    pairs: list[str] = []
    if m.client_id:
        pairs += ("client_id", m.client_id)
    if m.claim_id:
        pairs += ("claim_id", m.claim_id)
    if m.failures:
        pairs += ("failures", "\n".join(map(ascii_text, m.failures)))
    if m.dead_letter:
        pairs += ("dead_letter", ascii_text(m.dead_letter))
    if m.trace:
        pairs += ("trace", ascii_text(m.trace))
    return pairs


def failures_from(text: str | None) -> list[dict[str, Any]]:
    """Decode a message hash's ``failures`` field: JSON objects, one a line."""
    return [stored_json(line) for line in text.split("\n")] if text else []


#: the fields of a message a script replies with, in this order after its id (``dump`` in lua/_lib.lua)
REPLY_FIELDS = ("body", "created", "expires", "delay_until", "client_id", "claim_id", "claim_expires",
                "claim_count", "dlq_eligible", "failures", "dead_letter", "marker", "dedup_id", "group",
                "trace")


def from_reply(reply: Sequence[str | None]) -> Message:
    """Parse a script's message: its id, then the values of :data:`REPLY_FIELDS` (None when unset).

    Read by position (a claim parses every message it takes); :func:`to_message` reads a
    hash through it.
    """
    (message_id, body, created, expires, delay_until, client_id, claim_id, claim_expires, claim_count,
     dlq_eligible, failures, dead_letter, marker, dedup_id, group, trace) = reply
    return stored_message({
        "id": message_id, "body": stored_json(body), "created": float(created),  # type: ignore[arg-type]
        "expires": float(expires),  # type: ignore[arg-type]
        "delay_until": float(delay_until) if delay_until else 0.0,
        "client_id": client_id or "", "claim_id": claim_id,
        "claim_expires": float(claim_expires) if claim_expires is not None else None,
        "claim_count": int(claim_count) if claim_count else 0,
        "dlq_eligible": dlq_eligible is None or dlq_eligible == "1",
        "failures": failures_from(failures) if failures else [],
        "dead_letter": stored_json(dead_letter) if dead_letter else None,
        "marker": int(marker), "dedup_id": dedup_id, "dedup_until": 0.0,  # type: ignore[arg-type]
        "group": group, "trace": stored_json(trace) if trace else None})


def to_message(message_id: str, f: Mapping[str, str]) -> Message:
    """Return the message a ``zl:{P}:m:<id>`` hash holds (its fields as strings), read as a reply."""
    return from_reply([message_id, *map(f.get, REPLY_FIELDS)])


def backoff_args(backoff: RetryBackoff | None) -> list[str]:
    """Return claim.lua's ARGV of a ``_retry_backoff``: base, factor, max, jitter (none without one)."""
    if backoff is None:  # a claim without a policy sends nothing for it (and has no draws)
        return []
    return [stamp(backoff.base), stamp(backoff.factor), stamp(backoff.max), stamp(backoff.jitter)]


def record_head(queue: str, reason: str, now: float, dead_letter: DeadLetterPolicy) -> str:
    """Return the start of a provenance record (policy.provenance_record); the script ends it."""
    return json.dumps(policy.provenance_record(queue, reason, float(now), dead_letter))[:-1]


def project_prefix(project: str) -> str:
    """Return the key prefix of a project: ``zl:{P}:``."""
    return "zl:{" + urllib.parse.quote(project, safe="") + "}:"


def queue_prefix(project: str, queue: str) -> str:
    """Return the key prefix of a queue: ``zl:{P}:q:Q:``."""
    return f"{project_prefix(project)}q:{urllib.parse.quote(queue, safe='')}:"


def message_key(project: str, message_id: str) -> str:
    """Return the key of a message's hash: ``zl:{P}:m:<id>``."""
    return f"{project_prefix(project)}m:{message_id}"


def queue_key(project: str, queue: str, kind: str) -> str:
    """Return one key of a queue (``kind`` one of :data:`QUEUE_KEYS`): ``zl:{P}:q:Q:<kind>``."""
    return queue_prefix(project, queue) + kind


def queue_keys(project: str, queue: str) -> tuple[str, ...]:
    """Return a queue's keys in ``QUEUE_KEYS`` order, then the project's queue index.

    The standard KEYS of a script are these, then the first ``len(QUEUE_KEYS)`` of
    its dead-letter queue's when it has one.
    """
    return (*(queue_key(project, queue, kind) for kind in QUEUE_KEYS), project_prefix(project) + "queues")


def record_keys(project: str, kind: str) -> list[str]:
    """Return the keys of a kind of versioned records: the values hash, then the key index."""
    encoded = urllib.parse.quote(kind, safe="")
    return [f"{project_prefix(project)}r:{encoded}", f"{project_prefix(project)}rk:{encoded}"]
