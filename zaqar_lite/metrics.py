"""The counters and histograms of zaqar-lite, defined once and counted where each event happens.

``GET /metrics`` (:mod:`zaqar_lite.api.metrics`) exposes them with the queue
gauges it computes at scrape time. Each is counted in one place: messages by the
service (``service/``) and the sweep and claim results it gets, requests and 503s by
the API's first middleware, other storage errors where they are caught (the
sweeper, a scrape, the notifier), deliveries by the notifier.

Under ``zaqar-lite serve`` prometheus-client runs in multiprocess mode: the
server gives its processes a fresh directory in ``PROMETHEUS_MULTIPROC_DIR``
before the workers fork (:func:`zaqar_lite.server.gunicorn.metrics_directory`), every
process writes its counts there, and a scrape of any worker adds them all up.
This module must therefore be imported after that variable is set, which the
workers do (they import the application after the fork).

Counts are taken under a lock of the operating system, never gevent's: under the
gevent worker the service runs in threads of gevent's pool (each with a hub of
its own) while requests count on the main hub, and a gevent lock shared across
threads loses wake-ups (a greenlet waiting on it is never woken; gevent issues
1744 and 2013). The lock is held for a few writes to memory, never across a switch.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter, Histogram
from prometheus_client import values as _values

from zaqar_lite.config import NOTIFIER_SCHEMES
from zaqar_lite.models import QueueStats


def _os_lock_factory() -> Callable[[], Any]:
    """Return the operating system's lock type, even when gevent has patched ``threading``."""
    if "gevent.monkey" in sys.modules:
        from gevent import monkey

        return monkey.get_original("_thread", "allocate_lock")  # type: ignore[no-any-return]
    return threading.Lock


# prometheus-client takes its lock type from its module's globals when it makes a value
# class (multiprocess mode: one lock for all values) or a value (otherwise: one each)
_values.Lock = _os_lock_factory()  # type: ignore[attr-defined,assignment]
_values.ValueClass = _values.get_value_class()  # type: ignore[no-untyped-call]

#: the environment variable prometheus-client's multiprocess mode reads
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

MESSAGES_POSTED = Counter("zaqar_lite_messages_posted_total", "Messages stored by posts.")
MESSAGES_CLAIMED = Counter("zaqar_lite_messages_claimed_total", "Messages handed out by claims.")
MESSAGES_DELETED = Counter(
    "zaqar_lite_messages_deleted_total",
    "Messages deleted by clients: the ids of acknowledged deletes, and popped messages.")
MESSAGES_RELEASED = Counter("zaqar_lite_messages_released_total",
                            "Claimed messages released one by one (with a failure reason or none).")
CLAIMS_RELEASED = Counter("zaqar_lite_claims_released_total",
                          "Claims released (DELETE of a claim); their messages are claimable again.")
MESSAGES_DISCARDED = Counter(
    "zaqar_lite_messages_discarded_total",
    "Messages removed unread: expired ones the sweep did not move to a dead-letter queue, and "
    "exhausted ones that are not DLQ-eligible (removed by the sweep or by a claim).")
MESSAGES_DEAD_LETTERED = Counter(
    "zaqar_lite_messages_dead_lettered_total",
    "Messages moved to a dead-letter queue (arrivals), by reason, source project and queue and "
    "dead-letter queue: by the sweep (expired, max_claims, or expired_or_max_claims for a queue "
    "whose policy allows both), by a claim on its way (max_claims) or by a consumer's reject "
    "(rejected). Queues beyond [metrics] max_labelled_queues count under (other).",
    ["reason", "project", "queue", "dead_letter_queue"])
BREAKER_TRIPS = Counter("zaqar_lite_dead_letter_breaker_trips_total",
                        "Queues paused by their dead-letter circuit breaker (_dead_letter_breaker).")
MESSAGES_REDRIVEN = Counter("zaqar_lite_messages_redriven_total",
                            "Dead letters moved back to a queue by redrives.")

HTTP_REQUESTS = Counter("zaqar_lite_http_requests_total",
                        "HTTP requests answered, by method, route template and status.",
                        ["method", "route", "status"])
HTTP_DURATION = Histogram("zaqar_lite_http_request_duration_seconds",
                          "Time from a request's head to its answer, by method, route template and status.",
                          ["method", "route", "status"],
                          buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                                   2.5, 5.0, 10.0, 30.0))
STORAGE_ERRORS = Counter("zaqar_lite_storage_errors_total",
                         "Operations that found the store unreachable: 503 answers, skipped sweeps, "
                         "scrapes without queue gauges, notifier rounds.",
                         ["driver"])

NOTIFIER_DELIVERIES = Counter("zaqar_lite_notifier_deliveries_total",
                              "Notifications the subscriber acknowledged, by subscriber scheme.", ["scheme"])
NOTIFIER_FAILURES = Counter("zaqar_lite_notifier_delivery_failures_total",
                            "Delivery attempts that failed, by subscriber scheme.", ["scheme"])
NOTIFIER_SUSPENSIONS = Counter("zaqar_lite_notifier_suspensions_total",
                               "Subscriptions suspended after their retry policy was used up, "
                               "by subscriber scheme.", ["scheme"])

#: the route label of a request no route matched
UNMATCHED_ROUTE = "unmatched"
#: the ``method`` label of a request whose method is none of :data:`HTTP_METHODS`
OTHER_METHOD = "other"
#: the methods counted under their own name (any other is :data:`OTHER_METHOD`): a client
#: chooses its method, and each name it invents must not make series of its own
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: the ``scheme`` label of a subscriber whose scheme the notifier does not know
OTHER_SCHEME = "other"
#: the subscriber schemes counted under their own name (``[notifier] subscriber_schemes`` choose among them)
SUBSCRIBER_SCHEMES = NOTIFIER_SCHEMES
#: every ``reason`` of ``zaqar_lite_messages_dead_lettered_total``
DEAD_LETTER_REASONS = ("expired", "max_claims", "expired_or_max_claims", "rejected")
#: the ``project``, ``queue`` and ``dead_letter_queue`` labels of dead letters of the source queues
#: beyond ``[metrics] max_labelled_queues`` (no queue is named so), as the queue gauges' rest
OTHER_QUEUES = "(other)"
#: (project, source queue, dead-letter queue) links that got dead-letter series of their own in this process
_labelled_links: set[tuple[str, str, str]] = set()
_links_lock = _values.Lock()  # type: ignore[attr-defined]


def dead_letter_labels(project: str, queue: str, dead_letter_queue: str, limit: int) -> tuple[str, str, str]:
    """Return the labels of dead letters moved from ``queue`` into ``dead_letter_queue``.

    The first ``limit`` links (source and dead-letter queue of a project) a
    process meets keep their names; later ones are added up under
    ``(other)``, so a process makes at most ``limit`` series per reason,
    whatever the number of queues (``[metrics] max_labelled_queues``).
    """
    link = (project, queue, dead_letter_queue)
    if link in _labelled_links:
        return link
    with _links_lock:
        if len(_labelled_links) < limit:
            _labelled_links.add(link)
            return link
    return OTHER_QUEUES, OTHER_QUEUES, OTHER_QUEUES


def count_dead_letters(reason: str, project: str, queue: str, dead_letter_queue: str, moved: int,
                       limit: int) -> None:
    """Count ``moved`` dead letters of ``queue`` arriving in ``dead_letter_queue``.

    Labelled as :func:`dead_letter_labels` says.
    """
    labels = dead_letter_labels(project, queue, dead_letter_queue, limit)
    MESSAGES_DEAD_LETTERED.labels(reason, *labels).inc(moved)


def watch_dead_letters(reasons: tuple[str, ...], project: str, queue: str, dead_letter_queue: str,
                       limit: int) -> None:
    """Make the dead-letter series of a link exist at 0 before its first arrival (the sweeper calls it).

    ``rate()`` and ``increase()`` see no increase in a series whose first
    sample is already 1: a series that exists at 0 counts its first arrival.
    """
    labels = dead_letter_labels(project, queue, dead_letter_queue, limit)
    for reason in reasons:
        MESSAGES_DEAD_LETTERED.labels(reason, *labels)


def dead_letter_reason(on_expiry: bool, counts_claims: bool) -> str:
    """Return the reason label of the sweep's dead-letter moves under a queue's policy.

    The store reports how many messages one sweep of a queue moved, not why;
    the policy says which reasons are possible.
    """
    expired, max_claims, both = DEAD_LETTER_REASONS[:3]
    if on_expiry and counts_claims:
        return both
    return expired if on_expiry else max_claims


def scheme_of(subscriber: str) -> str:
    """Return the scheme label of a subscriber URI (``http``, ``mailto``, ...; ``other`` for any other)."""
    scheme, _, _ = subscriber.partition(":")
    scheme = scheme.lower()
    return scheme if scheme in SUBSCRIBER_SCHEMES else OTHER_SCHEME


def method_label(method: str) -> str:
    """Return the method label of a request: its method when it is a known one, else ``other``."""
    return method if method in HTTP_METHODS else OTHER_METHOD


def status_label(status: int) -> str:
    """Return the status label of an answer: its code, or ``other`` outside 100-599."""
    return str(status) if 100 <= status <= 599 else "other"


def initialise_series(driver: str) -> None:
    """Make every labelled counter whose labels are known at start exist at 0.

    Alert rules and dashboards (``rate()``, ``increase()``) need a series
    before its first event: a counter seen first at 1 counts no increase.
    """
    STORAGE_ERRORS.labels(driver)
    for reason in DEAD_LETTER_REASONS:  # so sums by reason exist from the start
        MESSAGES_DEAD_LETTERED.labels(reason, OTHER_QUEUES, OTHER_QUEUES, OTHER_QUEUES)
    for scheme in (*SUBSCRIBER_SCHEMES, OTHER_SCHEME):
        for counter in (NOTIFIER_DELIVERIES, NOTIFIER_FAILURES, NOTIFIER_SUSPENSIONS):
            counter.labels(scheme)


@dataclasses.dataclass(frozen=True)
class QueueCensus:
    """One queue's message counts at a scrape, and whether it is a dead-letter queue."""

    project: str
    queue: str
    stats: QueueStats
    dead_letter_queue: bool
    #: whether the queue is paused (``_paused``)
    paused: bool = False
