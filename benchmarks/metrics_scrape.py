"""What one ``GET /metrics`` scrape costs with many queues: the queue gauges read at scrape time.

The queue gauges are computed when Prometheus scrapes
(``zaqar_lite/api/metrics.py``): one read of the queue list
(``Storage.all_queues``), then one ``queue_stats`` per queue, through the
service (``Messaging.queue_census``). This benchmark stocks ``--queues`` queues
(default 10,000; one in ten holds ``--messages`` messages, one in a hundred is
the dead-letter queue of another) in a store of each kind of ``--stores``
(SQLite in a temporary file; Redis on a throwaway redis-server started by the
suites' harness), then times, in this one process (no HTTP):

* ``census``: ``Messaging.queue_census()`` alone (the store's part);
* ``scrape``: the whole answer of ``GET /metrics`` (``generate_latest`` of the
  scrape registry: the census, the series, the text), with the default
  ``[metrics] max_labelled_queues`` (1,000) and with every queue labelled;
* ``per queue``: the census time divided by the number of queues.

Printed: the median and the largest of ``--rounds`` rounds, the answer's size
and its number of series. Usage:
``python benchmarks/metrics_scrape.py [--stores sqlite,redis] [--queues 10000] [--json]``
(the default run takes about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from http_load import store_server  # noqa: E402
from prometheus_client import generate_latest  # noqa: E402

from zaqar_lite.api.metrics import scrape_registry  # noqa: E402
from zaqar_lite.config import MetricsSettings, load_settings  # noqa: E402
from zaqar_lite.models import Message  # noqa: E402
from zaqar_lite.service import Messaging  # noqa: E402
from zaqar_lite.storage import open_storage  # noqa: E402

PROJECT = "bench"


@contextlib.contextmanager
def store_uri(kind: str, directory: Path) -> Iterator[str]:
    """Yield the URI of an empty store of ``kind``."""
    if kind == "sqlite":
        yield f"sqlite:///{directory}/bench.db?synchronous=normal"
        return
    with store_server(kind, directory / kind) as uri:
        yield uri


def stock(messaging: Messaging, queues: int, messages: int) -> None:
    """Create the queues; one in ten gets messages, one in a hundred is another's dead-letter queue."""
    storage, now = messaging.storage, time.time()
    for number in range(queues):
        name = f"q{number:06d}"
        metadata: dict[str, Any] = {}
        if number % 100 == 1:  # q...01 dead-letters into q...00
            metadata = {"_dead_letter_queue": f"q{number - 1:06d}", "_max_claim_count": 5}
        storage.create_queue(PROJECT, name, metadata, now)
        if number % 10 == 0:
            storage.post_messages(PROJECT, name, [
                Message(id=f"{name}-{n}", body={"n": n}, created=now, expires=now + 3600)
                for n in range(messages)], now)


def timed(action: Callable[[], Any], rounds: int) -> tuple[list[float], Any]:
    """Run ``action`` ``rounds`` times; return the seconds of each and the last result."""
    seconds, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = action()
        seconds.append(time.perf_counter() - started)
    return seconds, result


def measure(kind: str, queues: int, messages: int, rounds: int) -> dict[str, Any]:
    """Stock a store of ``kind`` and time its census and scrapes."""
    with tempfile.TemporaryDirectory(prefix="zaqar-lite-metrics-bench-") as tmp, \
            store_uri(kind, Path(tmp)) as uri:
        settings = load_settings(None, storage_uri=uri)
        storage = open_storage(uri)
        messaging = Messaging(storage, settings)
        started = time.perf_counter()
        stock(messaging, queues, messages)
        figures: dict[str, Any] = {"store": kind, "queues": queues,
                                   "stock_seconds": time.perf_counter() - started}
        census_seconds, (census, _) = timed(messaging.queue_census, rounds)
        assert len(census) == queues
        figures["census"] = census_seconds
        figures["per_queue_ms"] = statistics.median(census_seconds) / queues * 1000
        for label, limit in (("scrape_default", MetricsSettings().max_labelled_queues),
                             ("scrape_all_labelled", queues)):
            # census_max_age = 0: every round reads the store (a scrape within the default 5 s
            # would serve the previous round's census)
            registry = scrape_registry(messaging, settings.replace(
                metrics=MetricsSettings(max_labelled_queues=limit, census_max_age=0)), storage.name)
            scrape_seconds, text = timed(lambda registry=registry: generate_latest(registry), rounds)
            figures[label] = scrape_seconds
            figures[label + "_bytes"] = len(text)
            figures[label + "_series"] = sum(1 for line in text.splitlines() if not line.startswith(b"#"))
        return figures


def report(figures: dict[str, Any]) -> None:
    """Print one store's figures."""
    print(f"== {figures['store']}: {figures['queues']} queues (stocked in {figures['stock_seconds']:.1f} s)")
    print(f"  census (store reads)        median {statistics.median(figures['census']):7.3f} s  "
          f"max {max(figures['census']):7.3f} s  ({figures['per_queue_ms']:.3f} ms per queue)")
    for label, title in (("scrape_default", "scrape, 1,000 labelled"),
                         ("scrape_all_labelled", "scrape, all labelled")):
        seconds = figures[label]
        print(f"  {title:<27} median {statistics.median(seconds):7.3f} s  max {max(seconds):7.3f} s  "
              f"{figures[label + '_bytes'] / 1024:8.0f} KiB  {figures[label + '_series']} series")


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,redis")
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=3, help="messages of every tenth queue")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    results = []
    for kind in args.stores.split(","):
        figures = measure(kind, args.queues, args.messages, args.rounds)
        report(figures)
        results.append(figures)
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
