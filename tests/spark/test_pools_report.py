"""The DLQ report over a deployment with pools: it reads every pool and says where each dead letter was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_jobs import dlq_report
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.models import Pool
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage
from zaqar_lite.storage.pools.catalog import Catalog
from zaqar_lite.storage.pools.router import PooledStorage

pytestmark = pytest.mark.slow


def deployment(directory: Path) -> tuple[str, dict[str, str]]:
    """Register pools east and west in a catalog kept in the default store; return their URIs."""
    default_uri = f"sqlite:///{directory}/default.db"
    pools = {name: f"sqlite:///{directory}/{name}.db" for name in ("east", "west")}
    store = open_storage(default_uri)
    try:
        for name, uri in pools.items():
            Catalog(store).put_pool(Pool(name, uri, 1), None)
    finally:
        store.close()
    return default_uri, pools


def dead_letter(messaging: Messaging, clock: ManualClock, queue: str, count: int) -> None:
    """Give ``queue`` a dead-letter queue ``<queue>-dlq`` and send ``count`` messages there."""
    messaging.create_queue("shop", f"{queue}-dlq", {})
    messaging.create_queue("shop", queue, {"_dead_letter_queue": f"{queue}-dlq", "_max_claim_count": 1})
    messaging.post("shop", queue, "client-id-1", [
        {"body": {"n": n}, "ttl": None, "delay": None, "dlq_eligible": True} for n in range(count)], 100)
    messaging.claim("shop", queue, 20, 60, 60)
    clock.advance(61)  # the claim lapses: the next claim finds them exhausted and moves them
    messaging.claim("shop", queue, 20, 60, 60)


def test_the_report_reads_every_pool_and_names_each_dead_letters_pool(spark, tmp_path):
    default_uri, pools = deployment(tmp_path)
    store = open_storage(default_uri)
    # orders goes to east and refunds to west (the first and the second half of the weights)
    router = PooledStorage(store, Catalog(store), open_storage, queue_cache_size=100, refresh_interval=60,
                           draw=lambda project, queue: 0.0 if queue.startswith("orders") else 0.99)
    clock = ManualClock()
    messaging = Messaging(router, load_settings(None, storage_uri=default_uri), clock)
    dead_letter(messaging, clock, "orders", 2)
    dead_letter(messaging, clock, "refunds", 1)
    router.close()

    options = dlq_report.Options(storage=default_uri, out=tmp_path / "report",
                                 pools=tuple(sorted(pools.items())))
    document = dlq_report.run(spark, options, lambda line: None)

    assert document["summary"]["dead_letters"] == 3
    assert sorted((q["queue"], q["pool"], q["messages"]) for q in document["summary"]["queues"]) == [
        ("orders-dlq", "east", 2), ("refunds-dlq", "west", 1)]
    assert {(s["queue"], s["pool"]) for s in document["signatures"]} == {
        ("orders-dlq", "east"), ("refunds-dlq", "west")}
    assert document["source"]["pools"] == {"[storage] uri": default_uri, **pools}


def test_a_config_with_pools_names_every_pool_of_its_catalog(tmp_path, monkeypatch):
    for name in [n for n in os.environ if n.startswith("ZAQAR_LITE_")]:
        monkeypatch.delenv(name)
    default_uri, pools = deployment(tmp_path)
    conf = tmp_path / "server.conf"
    conf.write_text(f"[storage]\nuri = {default_uri}\n\n[pools]\nenabled = true\n")
    options = dlq_report.parse_args(["--config", str(conf)])
    assert options.storage == default_uri
    assert options.pools == (("east", pools["east"]), ("west", pools["west"]))
    assert dlq_report.parse_args(["--storage", default_uri]).pools == ()
