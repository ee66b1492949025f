"""Pools and flavors: names, where a new queue goes, and the rule that linked queues share a pool.

A pool is a store (a storage URI) with a weight; a flavor is a named set of
pools, which a queue requests with its ``_flavor`` metadata. A new queue goes
to a pool of its flavor (without one: to a pool of no flavor, or the
``[storage] uri`` store while none has weight) drawn by weight, unless it
names a dead-letter queue that exists: then it goes where that queue is, so a
queue and its dead-letter queue always share a pool (the move between them is
one atomic operation of that pool's driver). The same holds for a redrive's
``destination`` and a fan-out subscriber (a ``trust+http(s)`` webhook posting
to ``/v2/queues/Q/messages``): :func:`check_same_pool` refuses the other case.
"""

from __future__ import annotations

import posixpath
import re
import urllib.parse
from collections.abc import Iterable, Sequence

from zaqar_lite.errors import ValidationFailed, sent
from zaqar_lite.models import Pool

#: the queue metadata key naming the flavor a new queue is placed by (Zaqar's)
FLAVOR = "_flavor"
#: pool and flavor names (Zaqar's rule): ASCII letters, digits, ``_`` and ``-``
NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
#: keys of ``GET /v2/health`` beside the pools', which no pool may be named
HEALTH_KEYS = ("catalog_reachable", "storage_reachable", "storage", "message_volume")
#: what a flavor's queues may count on, by the scheme of its pools' URIs (Zaqar's capabilities)
CAPABILITIES: dict[str, tuple[str, ...]] = {
    "sqlite": ("FIFO", "CLAIMS", "DURABILITY", "AOD"),
    "redis": ("FIFO", "CLAIMS", "AOD", "HIGH_THROUGHPUT"),
    "mongodb": ("FIFO", "CLAIMS", "DURABILITY", "AOD", "HIGH_THROUGHPUT"),
    "swift": ("CLAIMS", "DURABILITY", "AOD"),
}
#: the path of a fan-out subscriber: the messages of a queue of this API
FAN_OUT_PATH = re.compile(r"/v2/queues/([^/]+)/messages/?")


def check_name(kind: str, name: str) -> None:
    """Refuse a pool or flavor name that breaks Zaqar's rule (``kind``: "pool" or "flavor").

    Raises:
        ValidationFailed: the name is not 1 to 64 ASCII letters, digits, ``_`` or ``-``
            (or, for a pool, is a key of the health document).
    """
    if NAME.fullmatch(name) is None:
        raise ValidationFailed(f"The {kind} name must be 1 to 64 ASCII letters, digits, _ or -.")
    if kind == "pool" and name in HEALTH_KEYS:
        raise ValidationFailed(f"The pool name {name} is reserved: it is a key of GET /v2/health.")


def requested_flavor(metadata: object) -> str | None:
    """Return the flavor a queue's metadata requests, or None.

    Raises:
        ValidationFailed: ``_flavor`` is set but is not a flavor name.
    """
    if not isinstance(metadata, dict) or metadata.get(FLAVOR) is None:
        return None
    flavor = metadata[FLAVOR]
    if not isinstance(flavor, str) or NAME.fullmatch(flavor) is None:
        raise ValidationFailed(f"{FLAVOR} must name a flavor (1 to 64 ASCII letters, digits, _ or -), "
                               f"got {sent(flavor)}.")
    return flavor


def candidates(pools: Iterable[Pool], flavor: str | None) -> list[Pool]:
    """Return the pools a new queue of ``flavor`` may go to: the flavor's, or (None) those of no flavor."""
    return [p for p in pools if p.flavor == (flavor or "")]


def weighted(pools: Sequence[Pool], draw: float) -> Pool | None:
    """Return the pool a draw in [0, 1) lands on, each pool's chance its share of the weights.

    Pools of weight 0 take no new queues; None when no pool has weight.
    """
    total = sum(p.weight for p in pools)
    if total <= 0:
        return None
    point = draw * total
    for pool in pools:
        if point < pool.weight:
            return pool
        point -= pool.weight
    return next(p for p in reversed(pools) if p.weight > 0)


def place(queue: str, flavor: str | None, pools: Sequence[Pool], linked_pool: Pool | None,
          draw: float) -> Pool | None:
    """Return the pool a new queue goes to; None for the ``[storage] uri`` store.

    A queue of no flavor goes to the ``[storage] uri`` store while no pool of
    no flavor has weight (before the first pool is registered, say).

    Args:
        queue: the new queue.
        flavor: the flavor its metadata requests (None: the pools of no flavor).
        pools: every pool of the deployment.
        linked_pool: the pool of an existing queue it must share a pool with
            (its dead-letter queue), if any.
        draw: a number in [0, 1) (the service's random source).

    Raises:
        ValidationFailed: the flavor has no pool with weight, or the linked
            queue's pool is not of the flavor.
    """
    if linked_pool is not None:
        if flavor and flavor != linked_pool.flavor:
            raise ValidationFailed(
                f"Queue {queue} requests flavor {flavor}, but its dead-letter queue is in pool "
                f"{linked_pool.name}, which is not of that flavor; a queue and its dead-letter queue "
                "share a pool.")
        return linked_pool
    chosen = weighted(candidates(pools, flavor), draw)
    if chosen is None and flavor:
        raise ValidationFailed(f"Queue {queue} cannot be placed: flavor {flavor} has no pool with a "
                               "weight above 0.")
    return chosen


def check_same_pool(queue: str, pool: str, other: str, other_pool: str, role: str) -> None:
    """Refuse a link between queues of two pools (``role`` names the link, e.g. "redrive destination").

    Raises:
        ValidationFailed: the pools differ; the message names both.
    """
    if pool != other_pool:
        raise ValidationFailed(
            f"The {role} {other} is in pool {other_pool}, but queue {queue} is in pool {pool}: "
            "linked queues must share a pool (the move between them is one atomic operation of "
            "that pool's store).")


def fan_out_queue(subscriber: str) -> str | None:
    """Return the queue a ``trust+http(s)`` subscriber posts to (``.../v2/queues/Q/messages``), or None."""
    if not subscriber.startswith(("trust+http://", "trust+https://")):
        return None
    found = FAN_OUT_PATH.fullmatch(urllib.parse.urlsplit(subscriber).path)
    return urllib.parse.unquote(found.group(1)) if found else None


def capabilities(pools: Iterable[Pool]) -> list[str]:
    """Return what every pool of a flavor can do: the capabilities their kinds share, sorted."""
    shared: set[str] | None = None
    for pool in pools:
        scheme = urllib.parse.urlsplit(pool.uri).scheme
        kind = next((k for k in CAPABILITIES if scheme.startswith(k)), "")
        found = set(CAPABILITIES.get(kind, ()))
        shared = found if shared is None else shared & found
    return sorted(shared or ())


# -- the stores a pool may name -----------------------------------------------------

#: what a masked secret of a URI reads as
MASK = "****"
#: query options whose value is a secret (masked like the URI's password)
_SECRET_OPTION = re.compile(r"pass|secret|token|key", re.IGNORECASE)
#: the default port of each network scheme a pool may name (Swift's: by its ``https`` option)
DEFAULT_PORTS: dict[str, int] = {"redis": 6379, "rediss": 6379, "redis+cluster": 6379,
                                 "rediss+cluster": 6379, "mongodb": 27017, "swift": 80}
#: the query options a pool's URI may carry, by kind (lower case): none names a host, a file or
#: a proxy, so the allow-list of hosts is the whole of where a pool may make the server connect
POOL_URI_OPTIONS: dict[str, frozenset[str]] = {
    "sqlite": frozenset({"synchronous"}),
    "redis": frozenset({"wait_replicas", "wait_timeout", "socket_timeout", "socket_connect_timeout",
                        "health_check_interval"}),
    "mongodb": frozenset({"replicaset", "authsource", "authmechanism", "tls", "ssl", "w", "journal",
                          "wtimeoutms", "readpreference", "retrywrites", "retryreads", "appname",
                          "connecttimeoutms", "sockettimeoutms", "serverselectiontimeoutms",
                          "directconnection", "maxpoolsize", "minpoolsize"}),
    "swift": frozenset({"prefix", "settle", "timeout", "retries", "operation_timeout", "auth_version",
                        "https",
                        "os_project_name", "os_project_id", "os_project_domain_name",
                        "os_project_domain_id", "os_user_domain_name", "os_user_domain_id",
                        "os_tenant_name", "os_tenant_id", "os_region_name", "os_endpoint_type",
                        "os_service_type"}),
}


def masked_uri(uri: str) -> str:
    """Return a storage URI as answers, errors and logs show it: its password and secret options masked.

    ``redis://:s3cret@host:6379/0`` reads ``redis://:****@host:6379/0``; the
    user name, hosts, path and other options are kept.
    """
    parts = urllib.parse.urlsplit(uri)
    credentials, at, hosts = parts.netloc.rpartition("@")
    netloc = parts.netloc
    if at and ":" in credentials:
        netloc = f"{credentials.partition(':')[0]}:{MASK}@{hosts}"
    query = parts.query
    if query:
        items = (item.partition("=") for item in query.split("&"))
        query = "&".join(f"{key}={MASK}" if sep and _SECRET_OPTION.search(urllib.parse.unquote(key))
                         else f"{key}{sep}{value}" for key, sep, value in items)
    if netloc == parts.netloc and query == parts.query:
        return uri
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


def _kind(scheme: str) -> str:
    return next((kind for kind in POOL_URI_OPTIONS if scheme.startswith(kind)), "")


def _hosts(parts: urllib.parse.SplitResult, scheme: str, https: bool) -> list[tuple[str, int]]:
    """Return the ``(host, port)`` pairs a network URI names (several for a cluster or replica set)."""
    default_port = 443 if scheme == "swift" and https else DEFAULT_PORTS[scheme]
    found = []
    for node in parts.netloc.rpartition("@")[2].split(","):
        host, port = node, ""
        if node.startswith("["):  # [IPv6]:port
            host, _, rest = node[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else rest
        elif ":" in node:
            host, _, port = node.rpartition(":")
        if not host or (port and not (port.isascii() and port.isdigit())):
            raise ValidationFailed("uri: each server of a pool's URI is HOST or HOST:PORT.")
        found.append((host.lower(), int(port) if port else default_port))
    return found


def pool_store_identity(uri: str, cwd: str) -> tuple[str, ...]:
    """Return what names the store of a URI, so that two spellings of one store compare equal.

    A SQLite file by its absolute normalised path (a relative one from
    ``cwd``, the server's directory); a network store by its kind, its
    servers (lower case, default ports filled in) and what selects its data
    there (Redis's database number, MongoDB's database, Swift's user and
    container prefix). A URI it cannot read is its own text.
    """
    parts = urllib.parse.urlsplit(uri)
    scheme, kind = parts.scheme.lower(), _kind(parts.scheme.lower())
    options = {k.lower(): v for k, v in urllib.parse.parse_qsl(parts.query)}
    if kind == "sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        return ("sqlite", path if path == ":memory:" else posixpath.normpath(posixpath.join(cwd, path)))
    if scheme not in DEFAULT_PORTS:
        return (uri,)
    try:
        hosts = _hosts(parts, scheme, options.get("https", "").lower() in ("1", "true", "yes"))
    except ValidationFailed:
        return (uri,)
    servers = ",".join(f"{host}:{port}" for host, port in sorted(hosts))
    if kind == "redis":
        return ("redis", servers, parts.path.strip("/") or "0")
    if kind == "mongodb":
        return ("mongodb", servers, parts.path.strip("/") or "zaqar")
    user = urllib.parse.unquote(parts.netloc.rpartition("@")[0].partition(":")[0])
    return ("swift", servers, user, options.get("prefix", "zaqar"))


def check_pool_uri(uri: str, *, sqlite_dir: str, allowed_hosts: Iterable[str], default_uri: str,
                   cwd: str) -> tuple[str, ...]:
    """Refuse a pool URI outside the operator's allow-list; return the identity of its store.

    A SQLite pool is a file named by an absolute, normalised path (no ``.``,
    ``..`` or doubled ``/``) under ``sqlite_dir`` (``[pools] sqlite_dir``;
    empty: no SQLite pool), never ``:memory:``. A network pool (Redis,
    MongoDB, Swift; not ``mongodb+srv``, whose servers DNS names) names only
    servers of ``allowed_hosts`` (``[pools] allowed_hosts``, ``HOST:PORT``; a
    URI without a port names its scheme's default). Either carries only the
    options of :data:`POOL_URI_OPTIONS`, and none names the ``[storage] uri``
    store (``default_uri``, a relative SQLite path read from ``cwd``), in any
    spelling (:func:`pool_store_identity`).

    Raises:
        ValidationFailed: the URI breaks one of these rules (the message says
            which and names the setting; it never repeats a password).
    """
    parts = urllib.parse.urlsplit(uri)
    scheme, kind = parts.scheme.lower(), _kind(parts.scheme.lower())
    if not kind or (kind != "sqlite" and scheme not in DEFAULT_PORTS):
        raise ValidationFailed("uri: a pool is a sqlite://, redis://, rediss://, redis+cluster://, "
                               "mongodb:// or swift:// URI.")
    if parts.fragment:
        raise ValidationFailed("uri: a pool's URI has no #fragment.")
    options = [key for key, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)]
    unknown = sorted({key for key in options if key.lower() not in POOL_URI_OPTIONS[kind]})
    if unknown:
        raise ValidationFailed(f"uri: a {kind} pool may not set the option(s) {', '.join(unknown)}; "
                               f"it may set: {', '.join(sorted(POOL_URI_OPTIONS[kind]))}.")
    identity = pool_store_identity(uri, cwd)
    if identity == pool_store_identity(default_uri, cwd):
        raise ValidationFailed("uri: this is the [storage] uri store, which holds the queues of no pool; "
                               "a pool needs a store of its own.")
    if kind == "sqlite":
        _check_sqlite_path(parts, sqlite_dir)
    else:
        allowed = {entry.strip().lower() for entry in allowed_hosts}
        https = dict(urllib.parse.parse_qsl(parts.query)).get("https", "").lower() in ("1", "true", "yes")
        for host, port in _hosts(parts, scheme, https):
            shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            if shown not in allowed:
                raise ValidationFailed(f"uri: {shown} is not a store pools may use; the operator lists "
                                       "those in [pools] allowed_hosts.")
    return identity


def _check_sqlite_path(parts: urllib.parse.SplitResult, sqlite_dir: str) -> None:
    if not sqlite_dir:
        raise ValidationFailed("uri: SQLite pools are off on this server; the operator allows them "
                               "under one directory with [pools] sqlite_dir.")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if path == ":memory:":
        raise ValidationFailed("uri: a SQLite pool is a file, not :memory: (a database that each "
                               "connection would see empty).")
    if parts.netloc or not path.startswith("/") or path != posixpath.normpath(path) \
            or path.endswith("/"):
        raise ValidationFailed("uri: a SQLite pool is sqlite:////ABSOLUTE/PATH, a normalised path "
                               "(no ., .. or doubled /).")
    directory = posixpath.normpath(sqlite_dir)
    if posixpath.commonpath([directory, path]) != directory or path == directory:
        raise ValidationFailed("uri: a SQLite pool is a file under [pools] sqlite_dir.")
