"""A primary of a real Redis Cluster dies: every write acknowledged before, during and after
its replica's takeover is still there, and the same service goes on.

The driver answers a write only once a replica holds it (``WAIT``, the cluster default
``wait_replicas=1``). A write made while the slot has no primary, or while its new primary has
no replica yet, is refused (StorageUnavailable, a 503 over HTTP), never acknowledged and lost;
once the old primary is back as the new one's replica, writes are acknowledged again.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from tests.storage.conformance.conftest import CLIENT, P, Q
from zaqar_lite import errors
from zaqar_lite.clock import ManualClock
from zaqar_lite.config import load_settings
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage
from zaqar_lite.storage.redis.layout import project_prefix

pytestmark = pytest.mark.slow

PATIENCE = 30.0


def item(body: object) -> dict[str, object]:
    return {"body": body, "ttl": None, "delay": None, "dlq_eligible": True}


def service(uri: str, clock: ManualClock) -> Messaging:
    return Messaging(open_storage(uri), load_settings(None, storage_uri="sqlite:///unused.db"), clock)


class Writer(threading.Thread):
    """Posts one message after another, recording the ids acknowledged and the refusals."""

    def __init__(self, messaging: Messaging) -> None:
        super().__init__(daemon=True)
        self.messaging = messaging
        self.acknowledged: list[str] = []
        self.refused = 0
        self.stop = threading.Event()

    def run(self) -> None:
        count = 0
        while not self.stop.is_set():
            count += 1
            try:
                self.acknowledged += self.messaging.post(P, Q, CLIENT, [item(count)], 10)
            except errors.StorageUnavailable:
                self.refused += 1
                time.sleep(0.02)

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + PATIENCE
        while len(self.acknowledged) < count:
            assert time.monotonic() < deadline, f"only {len(self.acknowledged)} posts acknowledged"
            time.sleep(0.02)


def test_every_acknowledged_post_survives_the_failover_of_its_primary(fresh_redis_cluster):
    clock = ManualClock()
    messaging = service(fresh_redis_cluster.uri(), clock)
    messaging.create_queue(P, Q, {})
    slot_key = project_prefix(P) + "queues"
    doomed = fresh_redis_cluster.primary_of(slot_key)
    writer = Writer(messaging)
    writer.start()
    writer.wait_for(50)

    doomed.stop(signal.SIGKILL)
    deadline = time.monotonic() + PATIENCE
    while fresh_redis_cluster.serving(slot_key) in (doomed, None):
        assert time.monotonic() < deadline, "no replica took over"
        time.sleep(0.1)
    # the new primary has no replica yet: a write it takes could not survive its loss, so none
    # is acknowledged until the old primary is back, as its replica
    refused, acknowledged = writer.refused, len(writer.acknowledged)
    time.sleep(3.0)  # each refusal waits WAIT's 1 s
    assert (writer.refused > refused, len(writer.acknowledged)) == (True, acknowledged)
    doomed.start(attempts=1)
    fresh_redis_cluster.wait_until_ok()
    writer.wait_for(acknowledged + 50)
    writer.stop.set()
    writer.join(PATIENCE)

    fresh = service(fresh_redis_cluster.uri(), clock)
    stored = {m.id for m in fresh.get_messages(P, Q, writer.acknowledged)[0]}
    assert len(writer.acknowledged) >= 100
    assert set(writer.acknowledged) - stored == set()
    assert [m.body for m in fresh.list_messages(P, Q, client_id=CLIENT, marker=None, limit=5, echo=True,
                                                include_claimed=True, include_delayed=True)[0]][:1] == [1]


def test_a_write_no_replica_acknowledges_is_refused(fresh_redis_cluster):
    messaging = service(fresh_redis_cluster.uri(wait_timeout="0.2"), ManualClock())
    messaging.create_queue(P, Q, {})
    slot_key = project_prefix(P) + "queues"
    primary = fresh_redis_cluster.primary_of(slot_key)
    for server in fresh_redis_cluster.servers:
        if server is not primary and server.pid is not None:
            with server.client() as c:
                if c.info("replication").get("master_port") == primary.port:
                    server.stop(signal.SIGKILL)  # the primary's only replica
    with pytest.raises(errors.StorageUnavailable, match="reached 0 of 1 replicas"):
        messaging.post(P, Q, CLIENT, [item("unsafe")], 10)
    relaxed = service(fresh_redis_cluster.uri(wait_replicas="0"), ManualClock())
    assert len(relaxed.post(P, Q, CLIENT, [item("accepted")], 10)) == 1


@pytest.mark.parametrize("refusal", [ValueError("Invalid file object: None"),
                                     TypeError("argument must be an int, or have a fileno() method.")])
def test_a_connection_closed_as_the_pool_hands_it_out_is_an_unavailable_store(
        redis_cluster_store_uri, monkeypatch, refusal):
    # a failover's handling in another thread closes a connection while the pool checks it: the
    # poll of its missing socket fails (gevent: ValueError, the standard library: TypeError)
    messaging = service(redis_cluster_store_uri, ManualClock())
    messaging.create_queue(P, Q, {})
    pool_class = type(messaging.storage.inner.client.get_default_node().redis_connection.connection_pool)
    real = pool_class.get_connection
    refused: list[Exception] = []

    def get_connection(pool, *args, **kwargs):
        if not refused:
            refused.append(refusal)
            raise refusal
        return real(pool, *args, **kwargs)

    monkeypatch.setattr(pool_class, "get_connection", get_connection)
    with pytest.raises(errors.StorageUnavailable):
        messaging.post(P, Q, CLIENT, [item("first")], 10)
    assert refused == [refusal]
    assert len(messaging.post(P, Q, CLIENT, [item("again")], 10)) == 1
