"""A Redis write through a failover: its ``WAIT`` cut short, its script cache emptied.

Found by the fault harness (tests/faults, docs/faults.rst): a Redis Cluster primary paused past
``cluster-node-timeout`` comes back as a replica, and Redis ends the ``WAIT`` it was blocked in
with ``UNBLOCKED force unblock ... (master -> replica?)``. Whether the write survives is then
unknown, as after a timeout: the server must answer 503, not 500.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pytest

from tests.conftest import missing_server
from tests.servers.redis import RedisServer
from zaqar_lite import errors
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage

VOLATILE = ("--save", "", "--appendonly", "no")


@pytest.fixture
def primary_and_replica(tmp_path):
    if shutil.which("redis-server") is None:
        missing_server("redis-server")
    (tmp_path / "primary").mkdir()
    (tmp_path / "replica").mkdir()
    primary = RedisServer(tmp_path / "primary", *VOLATILE)
    primary.start()
    replica = RedisServer(tmp_path / "replica", *VOLATILE, "--replicaof", "127.0.0.1", str(primary.port))
    replica.start()
    try:
        with primary.client() as client:
            deadline = time.monotonic() + 10
            while client.info("replication")["connected_slaves"] < 1:
                assert time.monotonic() < deadline, "the replica never connected"
                time.sleep(0.05)
        yield primary, replica
    finally:
        if replica.pid is not None:
            os.kill(replica.pid, signal.SIGCONT)
        replica.stop()
        primary.stop()


def test_a_wait_ended_by_a_demotion_is_storage_unavailable(primary_and_replica):
    primary, replica = primary_and_replica
    settings = load_settings(None, storage_uri="sqlite:///unused.db")
    messaging = Messaging(open_storage(f"{primary.uri()}?wait_replicas=1&wait_timeout=10"), settings,
                          ManualClock())
    item = {"body": 1, "ttl": 300, "delay": None, "dlq_eligible": True}
    assert messaging.post("p", "q", "client", [item], 10)
    assert replica.pid is not None
    os.kill(replica.pid, signal.SIGSTOP)  # the next write's WAIT blocks: no replica acknowledges

    def demote() -> None:
        time.sleep(0.5)
        with primary.client() as client:
            client.execute_command("REPLICAOF", "127.0.0.1", str(replica.port))

    demotion = threading.Thread(target=demote)
    demotion.start()
    try:
        with pytest.raises(errors.StorageUnavailable, match="may not survive"):
            messaging.post("p", "q", "client", [item], 10)
    finally:
        demotion.join()
        messaging.storage.close()


def test_a_script_cache_emptied_between_load_and_run_does_not_fail_a_write(redis_server):
    """A primary promoted in a failover, or a replica resynced, has an empty script cache, and the
    slot map may send a load and the next run to different nodes: after a NOSCRIPT the script
    runs by its text (EVAL), which no emptied cache can refuse. Here the cache is emptied
    without pause while the writes run."""
    storage_uri = redis_server.uri(3)
    settings = load_settings(None, storage_uri="sqlite:///unused.db")
    messaging = Messaging(open_storage(storage_uri), settings, ManualClock())
    item = {"body": 1, "ttl": 300, "delay": None, "dlq_eligible": True}
    stop = threading.Event()

    def flush_scripts() -> None:
        with redis_server.client() as client:
            while not stop.is_set():
                client.script_flush()

    flushers = [threading.Thread(target=flush_scripts) for _ in range(2)]
    for flusher in flushers:
        flusher.start()
    try:
        for _ in range(100):
            assert messaging.post("p", "q", "client", [item], 10)
    finally:
        stop.set()
        for flusher in flushers:
            flusher.join()
        messaging.storage.close()
        redis_server.flushall()
