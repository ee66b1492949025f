"""``GET /metrics``: the counters of every process and the queue gauges, in Prometheus's text format.

The queue gauges are computed at scrape time by :class:`QueueCollector`, in the
worker that answers the scrape: one read of the queue list and one
``queue_stats`` per queue through the service (``Messaging.queue_census``), so
no write path pays for them. A worker reads them once at a time and serves a
read to the scrapes of the next ``[metrics] census_max_age`` seconds
(:class:`CensusCache`), so scrapers cannot make the API wait on census reads. Label
cardinality is bounded by ``[metrics] max_labelled_queues``: dead-letter
queues first, then the others by project and name, get series of their own;
the rest are added up under ``project="(other)", queue="(other)"`` (the oldest
age is their maximum).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import falcon
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from zaqar_lite import errors
from zaqar_lite import metrics as counted
from zaqar_lite.api.middleware import credentials, identity
from zaqar_lite.config import Settings
from zaqar_lite.models import QueueStats
from zaqar_lite.service import Messaging

LOG = logging.getLogger(__name__)
#: the text format every Prometheus 2 and 3 reads (our names need none of 1.0.0's escaping)
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
REACHABLE = "zaqar_lite_storage_reachable"
REACHABLE_HELP = "1 when the store answered this scrape's queue reads, 0 when it did not."
#: the labels of the queues beyond ``[metrics] max_labelled_queues`` (no queue is named so)
OTHER = "(other)"
LABELS = ("project", "queue")
STATES = ("ready", "delayed", "claimed")


class _Totals:
    """The summed counts of the queues that get no series of their own."""

    def __init__(self) -> None:
        self.ready = self.delayed = self.claimed = 0
        self.oldest: float | None = None
        self.queues = 0

    def add(self, stats: QueueStats) -> None:
        """Add one queue's counts."""
        self.ready += stats.free
        self.delayed += stats.delayed
        self.claimed += stats.claimed
        self.queues += 1
        if stats.oldest is not None:
            created = stats.oldest.created
            self.oldest = created if self.oldest is None else min(self.oldest, created)

    @property
    def messages(self) -> int:
        """Return the summed messages in any state."""
        return self.ready + self.delayed + self.claimed

    def as_stats(self) -> tuple[int, int, int, float | None]:
        """Return the summed ready, delayed and claimed counts and the oldest creation time."""
        return self.ready, self.delayed, self.claimed, self.oldest


def labelled_first(census: Sequence[counted.QueueCensus], limit: int) -> tuple[list[counted.QueueCensus],
                                                                              list[counted.QueueCensus]]:
    """Split the queues into those with series of their own (at most ``limit``) and the rest.

    Dead-letter queues come first, then every queue by project and name, so the
    labelled set only changes when queues are created or deleted.
    """
    ordered = sorted(census, key=lambda c: (not c.dead_letter_queue, c.project, c.queue))
    return ordered[:limit], ordered[limit:]


Census = tuple[list[counted.QueueCensus], float, float]


class CensusCache:
    """The queue census of this process: read by one scrape at a time, reused for ``max_age`` seconds.

    A scrape that arrives while another reads the census waits for that read
    and takes its result, so concurrent scrapes cost one read, not one each. A
    read that fails (the store is down) is not kept: the next scrape tries again.
    """

    def __init__(self, messaging: Messaging, max_age: float,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.messaging = messaging
        self.max_age = max_age
        self.monotonic = monotonic
        # made when the app is built, after gevent's monkey-patching in a gevent worker:
        # a waiting scrape then yields to the worker's other requests
        self._lock = threading.Lock()
        self._census: Census | None = None
        self._read_at = float("-inf")

    def census(self) -> Census:
        """Return every queue's counts, the store's time of the read and how long the read took.

        Raises:
            StorageUnavailable: the store did not answer.
        """
        asked = self.monotonic()
        with self._lock:
            now = self.monotonic()
            # ended after this scrape asked (it waited for it), or young enough
            if self._census is not None and (self._read_at >= asked or now - self._read_at <= self.max_age):
                return self._census
            census, at = self.messaging.queue_census()
            self._read_at = self.monotonic()
            self._census = (census, at, self._read_at - now)
            return self._census


class QueueCollector:
    """A prometheus-client collector of the queue gauges, read from the store (or the census cache)."""

    def __init__(self, driver: str, max_labelled: int, census: CensusCache) -> None:
        """``driver`` is the store's name, the label of the storage errors a failed read counts."""
        self.driver = driver
        self.max_labelled = max_labelled
        self.cache = census

    def describe(self) -> list[Metric]:
        """Return nothing: the registry must not call :meth:`collect` when it is registered."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield the queue gauges and how long reading them took; only a 0 when the store is down.

        The counters are served all the same: a store outage is when they matter.
        """
        try:
            census, now, took = self.cache.census()
        except errors.StorageUnavailable as exc:
            LOG.warning("queue gauges left out of /metrics, storage unavailable: %s", exc)
            counted.STORAGE_ERRORS.labels(self.driver).inc()
            yield GaugeMetricFamily(REACHABLE, REACHABLE_HELP, value=0)
            return
        yield GaugeMetricFamily(REACHABLE, REACHABLE_HELP, value=1)
        labelled, rest = labelled_first(census, self.max_labelled)
        messages = GaugeMetricFamily("zaqar_lite_queue_messages",
                                     "Unexpired messages of a queue, by state (ready, delayed, claimed).",
                                     labels=[*LABELS, "state"])
        depth = GaugeMetricFamily("zaqar_lite_queue_depth", "Unexpired messages of a queue, in any state.",
                                  labels=LABELS)
        oldest = GaugeMetricFamily("zaqar_lite_queue_oldest_message_age_seconds",
                                   "Age of a queue's oldest unexpired message (0 when it is empty).",
                                   labels=LABELS)
        dead = GaugeMetricFamily("zaqar_lite_dead_letter_queue_depth",
                                 "Unexpired messages of a dead-letter queue.", labels=LABELS)
        paused = GaugeMetricFamily("zaqar_lite_queue_paused",
                                   "1 when a queue is paused (_paused), else 0; under (other): how many "
                                   "of the queues beyond [metrics] max_labelled_queues are paused.",
                                   labels=LABELS)

        def add(labels: list[str], ready: int, delayed: int, claimed: int, created: float | None,
                is_dead_letter_queue: bool) -> None:
            for state, value in zip(STATES, (ready, delayed, claimed), strict=True):
                messages.add_metric([*labels, state], value)
            depth.add_metric(labels, ready + delayed + claimed)
            oldest.add_metric(labels, max(0.0, now - created) if created is not None else 0.0)
            if is_dead_letter_queue:
                dead.add_metric(labels, ready + delayed + claimed)

        for entry in labelled:
            stats = entry.stats
            add([entry.project, entry.queue], stats.free, stats.delayed, stats.claimed,
                stats.oldest.created if stats.oldest else None, entry.dead_letter_queue)
            paused.add_metric([entry.project, entry.queue], 1 if entry.paused else 0)
        if rest:
            others, other_dead = _Totals(), _Totals()
            for entry in rest:
                others.add(entry.stats)
                if entry.dead_letter_queue:
                    other_dead.add(entry.stats)
            add([OTHER, OTHER], *others.as_stats(), False)
            paused.add_metric([OTHER, OTHER], sum(1 for entry in rest if entry.paused))
            if other_dead.queues:
                dead.add_metric([OTHER, OTHER], other_dead.messages)
        yield from (messages, depth, oldest, dead, paused)
        yield GaugeMetricFamily("zaqar_lite_queues", "Queues in the store, every project.", value=len(census))
        yield GaugeMetricFamily("zaqar_lite_queues_paused", "Paused queues in the store, every project.",
                                value=sum(1 for entry in census if entry.paused))
        yield GaugeMetricFamily("zaqar_lite_queue_scrape_duration_seconds",
                                "Time the read of the queue gauges this scrape serves took "
                                "(a read is reused for [metrics] census_max_age seconds).",
                                value=took)


class _ThisProcess:
    """A collector of the counters of this process (when the server is not in multiprocess mode)."""

    def describe(self) -> list[Metric]:
        """Return nothing (see :meth:`QueueCollector.describe`)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield this process's counters and histograms."""
        for collector in (counted.MESSAGES_POSTED, counted.MESSAGES_CLAIMED, counted.MESSAGES_DELETED,
                          counted.MESSAGES_RELEASED, counted.CLAIMS_RELEASED, counted.MESSAGES_DISCARDED,
                          counted.MESSAGES_DEAD_LETTERED, counted.MESSAGES_REDRIVEN, counted.BREAKER_TRIPS,
                          counted.HTTP_REQUESTS, counted.HTTP_DURATION, counted.STORAGE_ERRORS,
                          counted.NOTIFIER_DELIVERIES, counted.NOTIFIER_FAILURES,
                          counted.NOTIFIER_SUSPENSIONS):
            yield from collector.collect()


def scrape_registry(messaging: Messaging, settings: Settings, driver: str) -> CollectorRegistry:
    """Return the registry a scrape reads: every process's counters (or this one's) and the queue gauges.

    Args:
        messaging: the service the queue census is read through.
        settings: the settings (``[metrics]``).
        driver: the store's name, the label of the storage errors a failed census counts.
    """
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get(counted.MULTIPROC_ENV):
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_ThisProcess())
    registry.register(QueueCollector(driver, settings.metrics.max_labelled_queues,
                                     CensusCache(messaging, settings.metrics.census_max_age)))
    return registry


def _token(req: falcon.Request) -> str | None:
    bearer = req.get_header("Authorization") or ""
    scheme, _, value = bearer.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return req.get_header("X-Auth-Token")


class Metrics:
    """``GET /metrics``: the Prometheus text format.

    Under token auth an admin token must come in ``Authorization: Bearer``
    (what Prometheus's ``authorization`` setting sends) or ``X-Auth-Token``,
    and under keystone auth a Keystone token with the admin role in
    ``X-Auth-Token``, unless ``[metrics] require_token`` is false: the queue
    series name every project's queues. Open under noauth, as every route is.
    """

    #: answered without Client-ID or project (Prometheus sends neither); see on_get for tokens
    public = True

    def __init__(self, settings: Settings, registry: CollectorRegistry) -> None:
        """``registry`` is what a scrape reads (:func:`scrape_registry`)."""
        self.settings = settings
        self.registry = registry

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Answer the current metrics."""
        if self.settings.auth_strategy == "keystone" and self.settings.metrics.require_token:
            _, role = credentials(self.settings, None, None, identity=identity(req))
            if role != "admin":
                raise errors.Forbidden("/metrics needs the admin role.")
        if self.settings.auth_strategy == "token" and self.settings.metrics.require_token:
            token = _token(req)
            if not token or token not in self.settings.tokens:
                raise errors.Unauthorized("/metrics needs an admin token (Authorization: Bearer TOKEN).")
            if self.settings.tokens[token][1] != "admin":
                raise errors.Forbidden("/metrics needs the admin role.")
        resp.content_type = TEXT_FORMAT
        resp.data = generate_latest(self.registry)


class RequestMetrics:
    """Counts every answered request and its time, by method, route template (never the raw path) and status.

    Every label takes few values: a method none of ``metrics.HTTP_METHODS`` is
    ``other``, a path no route serves ``unmatched``.

    It also counts an unreachable store (a 503) against the driver. It is the
    first middleware, so requests the other checks refuse are counted too.
    """

    def __init__(self, driver: str) -> None:
        self.driver = driver
        #: (method, route, status) -> that series' request counter and duration histogram: the labels
        #: are resolved once per series, not once per request (every label takes few values)
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self._storage_errors = counted.STORAGE_ERRORS.labels(driver)

    def series(self, method: str, route: str, status: int) -> tuple[Any, Any]:
        """Return the request counter and the duration histogram of one method, route and status."""
        # every key from a bounded set: the client chooses its method and path
        key = (counted.method_label(method), route, status)
        found = self._series.get(key)
        if found is None:
            labels = (key[0], route, counted.status_label(status))
            found = self._series[key] = (counted.HTTP_REQUESTS.labels(*labels),
                                         counted.HTTP_DURATION.labels(*labels))
        return found

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Note when the request started."""
        req.context.metrics_started = time.perf_counter()

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: Any,
                         req_succeeded: bool) -> None:
        """Count the answer."""
        started = getattr(req.context, "metrics_started", None)
        route = req.uri_template if resource is not None and req.uri_template else counted.UNMATCHED_ROUTE
        status = resp.status_code
        # found by the request's own method first: a known method is its own label (see series)
        requests, duration = self._series.get((req.method, route, status)) or self.series(req.method, route,
                                                                                          status)
        requests.inc()
        if started is not None:
            duration.observe(time.perf_counter() - started)
        if status == 503:
            self._storage_errors.inc()
