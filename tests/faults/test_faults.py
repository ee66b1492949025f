"""The fault harness: a short subset of the seeded runs (docs/faults.rst), and each store fault's
answer, on real servers. The long run is ``python -m tests.faults.run`` (its module docstring).

The runs on Redis, SQLite, MongoDB and Swift need root (network namespaces, TAP devices, loop
mounts): without it they are skipped, and under CI they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import missing_server
from tests.e2e.harness import ApiSession, RunningServer, start_server, stop_server
from tests.faults import nemesis
from tests.faults.run import SHORT, run
from tests.faults.workload import CLIENT_TIMEOUT

pytestmark = pytest.mark.slow
#: the seeds of the short subset, per store: schedules with most kinds of fault (docs/faults.rst);
#: Redis's has latency, loss and a kill of the store
SHORT_SEEDS = {"redis": (14,), "sqlite": (1,), "redis_cluster": (4,)}


def _still_there(names: list[str]) -> list[str]:
    """Return those of the names that a namespace, a link or a mount point still has."""
    found = nemesis.sh("ip", "netns", "list").stdout + nemesis.sh("ip", "-o", "link").stdout
    found += Path("/proc/mounts").read_text()
    return [name for name in names if name in found]


@pytest.fixture
def root() -> None:
    if os.geteuid() != 0:
        missing_server("root (network namespaces and loop mounts)")
    for command in ("ip", "redis-server", "redis-cli", "mkfs.ext4", "mount"):
        if shutil.which(command) is None:
            missing_server(command)


def test_a_seed_always_gives_the_same_schedule():
    faults = nemesis.FAULTS["redis"]
    assert nemesis.schedule(7, faults, 30) == nemesis.schedule(7, faults, 30)
    assert nemesis.schedule(7, faults, 30) != nemesis.schedule(8, faults, 30)
    for step in nemesis.schedule(7, faults, 30):
        assert step.at < 30 and 0 <= step.duration <= 6


def test_a_longer_longest_fault_draws_longer_faults_and_the_default_keeps_every_schedule():
    faults = nemesis.FAULTS["redis"]
    # redis seed 7 of docs/faults.rst's tables, as run there: the seeds measured stay replayable
    assert [(s.at, s.fault, s.duration, s.size) for s in nemesis.schedule(7, faults, 12)] == [
        (0.82, "partition-from-store", 2.97, 0.0), (4.37, "loss", 1.47, 0.0), (7.21, "loss", 2.07, 0.0),
        (9.91, "clock-step", 1.35, -18.8), (11.85, "partition-to-store", 5.74, 0.0)]
    durations = [s.duration for seed in range(20) for s in nemesis.schedule(seed, faults, 120, longest=60.0)]
    assert max(durations) > 30 and max(durations) <= 60


@pytest.mark.parametrize(("store", "seed"), [(store, seed) for store, seeds in SHORT_SEEDS.items()
                                             for seed in seeds])
def test_a_seeded_fault_run_keeps_every_rule(request, store, seed, tmp_path):
    if store != "redis_cluster":  # the cluster runs on loopback, without a namespace or a mount
        request.getfixturevalue("root")
    elif shutil.which("redis-server") is None:
        missing_server("redis-server")
    outcome = run(store, seed, SHORT, tmp_path, out=tmp_path / "failed")
    assert outcome.anomalies == [], f"replay with: python -m tests.faults.run --store {store} --seeds {seed}"
    assert outcome.statuses.get("503", 0) > 0, "the faults never reached the server"
    assert _still_there(outcome.made) == [], "the run left a namespace, link or mount behind"


@pytest.fixture
def redis_behind_a_link(root, tmp_path) -> Iterator[tuple[nemesis.NamespacedRedis, RunningServer]]:
    with nemesis.NamespacedRedis(tmp_path) as store:
        server = start_server(store.uri, tmp_path, workers=1)
        try:
            yield store, server
        finally:
            stop_server(server)


def _post(server: RunningServer) -> tuple[int, float]:
    began = time.monotonic()
    with ApiSession(server.url, project="faults") as api:
        status = api.post("/v2/queues/q/messages", json={"messages": [{"body": 1}]},
                          timeout=CLIENT_TIMEOUT).status_code
    return status, time.monotonic() - began


def _recovers(server: RunningServer) -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if _post(server)[0] == 201:
                return True
        except requests.RequestException:
            pass
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("cut", [(True, True), (True, False), (False, True)],
                         ids=["partition", "to-store", "from-store"])
def test_a_store_behind_a_cut_link_is_answered_503_in_time_and_recovers(redis_behind_a_link, cut):
    store, server = redis_behind_a_link
    assert _post(server)[0] == 201
    store.cut(to_store=cut[0], from_store=cut[1])
    try:
        status, took = _post(server)
    finally:
        store.mend()
    assert status == 503
    assert took < CLIENT_TIMEOUT
    assert _recovers(server), "the server did not recover without a restart"


@pytest.mark.parametrize("kind", ["mongodb", "swift"])
def test_a_mongodb_or_swift_behind_a_cut_link_is_answered_503_in_time_and_recovers(root, kind, tmp_path):
    namespaced = nemesis.NamespacedMongo if kind == "mongodb" else nemesis.NamespacedSwift
    try:
        store = namespaced(tmp_path)
        store.__enter__()
    except (RuntimeError, OSError) as exc:
        missing_server(f"{kind} in a namespace ({exc})")
    try:
        server = start_server(store.uri, tmp_path, workers=1)
        try:
            assert _post(server)[0] == 201
            store.cut(to_store=True, from_store=True)
            try:
                status, took = _post(server)
            finally:
                store.mend()
            assert (status, took < CLIENT_TIMEOUT) == (503, True)
            assert _recovers(server), "the server did not recover without a restart"
        finally:
            stop_server(server)
    finally:
        store.__exit__(None, None, None)
    assert _still_there([store.namespace, store.host_link]) == []


def _store_round_trip(store: nemesis.NamespacedRedis, connection: socket.socket) -> float:
    """Return the median seconds of five PINGs to the store on an open connection."""
    times = []
    for _ in range(5):
        began = time.monotonic()
        connection.sendall(b"PING\r\n")
        assert connection.recv(64) == b"+PONG\r\n"
        times.append(time.monotonic() - began)
    return statistics.median(times)


def test_latency_slows_a_store_round_trip_and_loss_drops_frames_yet_requests_end_in_time(redis_behind_a_link):
    store, server = redis_behind_a_link
    with socket.create_connection((store.store_ip, nemesis.REDIS_PORT), timeout=CLIENT_TIMEOUT) as connection:
        calm = _store_round_trip(store, connection)
        store.delay("to")  # 200 ms ± 50 ms towards the store, none back
        try:
            slowed = _store_round_trip(store, connection)
            status, took = _post(server)
        finally:
            store.mend()
        assert 0.15 <= slowed - calm <= 0.5, (calm, slowed)
        assert (status, took >= 0.15) == (201, True)
        assert _store_round_trip(store, connection) < calm + 0.1

    before = store.link_stats()
    store.lose("both", 30, seed=1)
    try:
        answers = [_post(server) for _ in range(8)]
    finally:
        store.mend()
    after = store.link_stats()
    # TCP saw real losses: frames were dropped each way, and retransmitted
    assert all(after[way][2] > before[way][2] for way in ("to", "from")), (before, after)
    assert {status for status, _ in answers} <= {201, 503} and 201 in {status for status, _ in answers}
    assert max(took for _, took in answers) < CLIENT_TIMEOUT
    assert _recovers(server)


def test_a_paused_store_is_answered_503_in_time_and_recovers(redis_behind_a_link):
    store, server = redis_behind_a_link
    assert store.pid is not None
    os.kill(store.pid, 19)  # SIGSTOP
    try:
        status, took = _post(server)
    finally:
        os.kill(store.pid, 18)  # SIGCONT
    assert (status, took < CLIENT_TIMEOUT) == (503, True)
    assert _recovers(server)


def test_a_full_disk_is_answered_503_and_the_server_recovers_once_space_is_freed(root, tmp_path):
    with nemesis.small_disk(tmp_path) as disk:
        server = start_server(f"sqlite:///{disk}/zaqar.db", tmp_path, workers=1)
        try:
            assert _post(server)[0] == 201
            balloon = nemesis.fill(disk)
            # the first posts may still fit in pages SQLite holds already
            statuses = {_post(server)[0] for _ in range(20)}
            balloon.unlink()
            assert 503 in statuses and statuses <= {201, 503}
            assert _recovers(server)
        finally:
            stop_server(server)


def test_a_clock_step_moves_the_servers_wall_clock(tmp_path):
    clock = nemesis.SteppedClock(tmp_path)
    server = start_server(f"sqlite:///{tmp_path}/zaqar.db", tmp_path, workers=1, env=clock.environment())
    try:
        with ApiSession(server.url, project="faults") as api:
            href = api.post("/v2/queues/q/messages", json={"messages": [{"body": 1, "ttl": 3600}]}
                            ).json()["resources"][0]
            clock.set(600)
            assert api.get(href).json()["age"] >= 600
            clock.set(0)
            assert api.get(href).json()["age"] < 600
    finally:
        stop_server(server)


def _ping(connection: socket.socket, timeout: float) -> float | None:
    """Send a PING and return the seconds until its PONG, or None when none came within ``timeout``."""
    connection.settimeout(timeout)
    began = time.monotonic()
    connection.sendall(b"PING\r\n")
    try:
        answer = connection.recv(64)
    except TimeoutError:
        return None
    assert answer == b"+PONG\r\n"
    return time.monotonic() - began


def test_a_fault_to_one_cluster_node_spares_the_others_behind_the_same_link(root, tmp_path):
    try:
        store = nemesis.NamespacedRedisCluster(tmp_path)
        store.__enter__()
    except (RuntimeError, OSError) as exc:
        missing_server(f"a redis cluster in a namespace ({exc})")
    try:
        faulted, spared = store.cluster.servers[0], store.cluster.servers[1]
        with socket.create_connection((store.store_ip, faulted.port), timeout=2) as hit, \
                socket.create_connection((store.store_ip, spared.port), timeout=2) as other:
            assert _ping(hit, 2) is not None and _ping(other, 2) is not None
            for direction in ("to", "from", "both"):
                store.drop(direction, port=faulted.port)
                assert _ping(other, 2) is not None
                assert _ping(hit, 1) is None, f"a PING crossed a partition of its node ({direction})"
                store.mend()
                # TCP retransmits the PING (or its PONG) once the node is reached again
                hit.settimeout(5)
                assert hit.recv(64) == b"+PONG\r\n"
                assert _ping(hit, 2) is not None

            store.delay("to", port=faulted.port)  # 200 ms ± 50 ms towards that node alone
            try:
                slowed = [_ping(hit, 2) for _ in range(3)]
                spared_times = [_ping(other, 2) for _ in range(3)]
            finally:
                store.mend()
            assert all(took is not None and took >= 0.15 for took in slowed), slowed
            assert all(took is not None and took < 0.1 for took in spared_times), spared_times
            assert (_ping(hit, 2) or 1.0) < 0.1

            before = store.link_stats()
            store.lose("both", 100, seed=1, port=faulted.port)
            try:
                assert _ping(other, 2) is not None and _ping(hit, 0.5) is None
            finally:
                store.mend()
            assert store.link_stats()["to"][2] > before["to"][2]
            hit.settimeout(5)
            assert hit.recv(64) == b"+PONG\r\n"
        # the nodes still saw each other: no failover happened, every slot is still served
        store.cluster.wait_until_ok()
        assert len(store.cluster.primaries()) == 3
        with pytest.raises(RuntimeError):
            store.link(f"drop both port {2**16}")
    finally:
        store.__exit__(None, None, None)
    assert _still_there([store.namespace, store.host_link]) == []
