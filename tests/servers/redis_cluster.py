"""A real Redis Cluster for the suites: six redis-server processes on 127.0.0.1, three primaries
with a replica each, made a cluster by ``redis-cli --cluster create``.

Provides ``redis_cluster_server`` (session), ``redis_cluster_store_uri`` (every primary emptied
per test), ``redis_cluster_restartable_store`` (a cluster of the test's own that appends every
write to its files before answering, killed and started again whole) and
``fresh_redis_cluster`` (a cluster of the test's own, whose primaries the test may kill to see
a replica take over). A missing ``redis-server`` skips the tests that need it, or fails them
under CI.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import free_port, missing_server
from tests.servers.redis import RedisServer

START_TIMEOUT = 30.0
#: milliseconds a primary may be unreachable before its replica takes over
NODE_TIMEOUT_MS = 1000
NODES = 6


class RedisCluster:
    """Six redis-server processes (three primaries, three replicas) under ``directory``."""

    def __init__(self, directory: Path, *options: str) -> None:
        self.directory = Path(directory)
        self.options = options or ("--save", "", "--appendonly", "no")
        self.servers: list[RedisServer] = []

    def uri(self, first: int = 0, **query: str) -> str:
        """Return the cluster URI with every node as a seed, starting with the ``first``-th one."""
        turn = first % len(self.servers)
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.servers[turn:] + self.servers[:turn])
        tail = "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
        return f"redis+cluster://{hosts}/{tail}"

    def _node_options(self, node_dir: Path) -> tuple[str, ...]:
        return (*self.options, "--cluster-enabled", "yes",
                "--cluster-config-file", str(node_dir / "nodes.conf"),
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--cluster-port", str(free_port()))

    def start(self) -> None:
        """Start six servers, make them a cluster, and wait until every slot is served."""
        for index in range(NODES):
            node_dir = self.directory / f"node{index}"
            node_dir.mkdir(parents=True, exist_ok=True)
            server = RedisServer(node_dir, *self._node_options(node_dir))
            server.start(attempts=3)
            self.servers.append(server)
        subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{s.port}" for s in self.servers),
                        "--cluster-replicas", "1", "--cluster-yes"],
                       check=True, timeout=START_TIMEOUT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.wait_until_ok()

    def restart(self) -> None:
        """Start every stopped server again on its port with its files (its cluster config too)."""
        for server in self.servers:
            if server.pid is None:
                server.start(attempts=1)
        self.wait_until_ok()

    def wait_until_ok(self) -> None:
        """Wait until every running node says the cluster is ok and sees every other running node."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if all(self._node_ok(s) for s in self.servers if s.pid is not None):
                return
            time.sleep(0.1)
        raise RuntimeError("the redis cluster did not become ok")

    def _node_ok(self, server: RedisServer) -> bool:
        """Whether a node sees the cluster ok and, if a replica, is in sync with its primary."""
        try:
            with server.client() as c:
                replication = c.info("replication")
                in_sync = replication["role"] == "master" or replication.get("master_link_status") == "up"
                return in_sync and "cluster_state:ok" in c.execute_command("CLUSTER", "INFO")
        except redis.exceptions.RedisError:
            return False

    def primaries(self) -> list[RedisServer]:
        """Return the running servers that are primaries now."""
        found = []
        for server in self.servers:
            if server.pid is None:
                continue
            with server.client() as c:
                if c.info("replication")["role"] == "master":
                    found.append(server)
        return found

    def serving(self, key: str) -> RedisServer | None:
        """Return the running primary that serves a key's slot now (the one not answering MOVED),
        or None while none does (a failover under way)."""
        for server in self.primaries():
            with server.client() as c:
                try:
                    c.execute_command("EXISTS", key)
                except redis.exceptions.ResponseError:
                    continue
                return server
        return None

    def primary_of(self, key: str) -> RedisServer:
        """Return the running primary that serves a key's slot now."""
        server = self.serving(key)
        if server is None:
            raise RuntimeError(f"no primary serves the slot of {key}")
        return server

    def flushall(self) -> None:
        """Empty every primary (replicas follow)."""
        for server in self.primaries():
            server.flushall()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop every server by its PID."""
        for server in self.servers:
            server.stop(sig)


def _require_redis() -> None:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        missing_server("redis-server and redis-cli")


@pytest.fixture(scope="session")
def redis_cluster_server(tmp_path_factory) -> Iterator[RedisCluster]:
    """One throwaway cluster for the whole session, stopped by PID at the end."""
    _require_redis()
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster_store_uri(redis_cluster_server) -> str:
    """The URI of the session's cluster, every primary emptied."""
    redis_cluster_server.flushall()
    return redis_cluster_server.uri()


@pytest.fixture
def fresh_redis_cluster(tmp_path) -> Iterator[RedisCluster]:
    """A cluster of the test's own, whose primaries it may kill; stopped at the end."""
    _require_redis()
    cluster = RedisCluster(tmp_path / "cluster")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop(signal.SIGKILL)


class RestartableRedisCluster:
    """A cluster of one test whose nodes fsync every write before answering; see ``RestartableStore``."""

    OPTIONS = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")

    def __init__(self, directory: Path) -> None:
        self.cluster = RedisCluster(directory, *self.OPTIONS)
        self.cluster.start()
        self.uri = self.cluster.uri()

    def stop(self) -> None:
        self.cluster.stop(signal.SIGKILL)

    def start(self) -> None:
        self.cluster.restart()


@pytest.fixture
def redis_cluster_restartable_store(tmp_path) -> Iterator[RestartableRedisCluster]:
    """A cluster the test may kill and restart whole; stopped at the end."""
    _require_redis()
    store = RestartableRedisCluster(tmp_path)
    try:
        yield store
    finally:
        store.cluster.stop(signal.SIGKILL)
