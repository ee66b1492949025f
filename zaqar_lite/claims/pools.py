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
