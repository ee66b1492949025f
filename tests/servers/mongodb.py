"""A MongoDB wire-protocol server for the suites: SecantusDB, or a real mongod when named.

``ZAQAR_LITE_TEST_MONGODB_URI`` naming a running mongod (any MongoDB URI) makes
the suites use it. Otherwise SecantusDB (``pip install secantusdb``; no mongod
can be installed on these machines) is started once per session, in memory, on
a free 127.0.0.1 port, and stopped by its PID at the end. Each test gets a
database of its own, dropped afterwards. ``mongodb_restartable_store`` is a
SecantusDB of the test's own that keeps its data in files (synced on every
commit) across a kill -9 and a restart.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pymongo
import pytest
from pymongo.errors import PyMongoError

from tests.conftest import free_port, missing_server

ENV_URI = "ZAQAR_LITE_TEST_MONGODB_URI"
READY_TIMEOUT = 30.0


def secantus_command() -> str | None:
    """Return the SecantusDB launcher of this interpreter's environment, or one on PATH."""
    beside = Path(sys.executable).parent / "secantusd-py"
    return str(beside) if beside.exists() else shutil.which("secantusd-py")


def with_database(uri: str, database: str) -> str:
    """Return ``uri`` naming ``database``, keeping its hosts, credentials and options."""
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, ""))


def answers(uri: str, timeout_ms: int = 500) -> bool:
    """Return whether a MongoDB server at ``uri`` answers a ping."""
    client: pymongo.MongoClient[dict] = pymongo.MongoClient(
        uri, serverSelectionTimeoutMS=timeout_ms, connectTimeoutMS=timeout_ms)
    try:
        client.admin.command("ping")
        return True
    except PyMongoError:
        return False
    finally:
        client.close()


class SecantusServer:
    """One SecantusDB process on 127.0.0.1, in a session of its own.

    Its data lives in memory, or, given ``data_dir``, in files there, each
    commit synced before it is acknowledged, so that a restart finds it again.
    """

    def __init__(self, port: int | None = None, log_dir: str | None = None,
                 data_dir: str | None = None, *extra_args: str) -> None:
        self.extra_args = extra_args
        self.port = port or free_port()
        self.log_path = Path(log_dir or tempfile.mkdtemp(prefix="secantus-")) / f"secantus-{self.port}.log"
        self.data_dir = data_dir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        """The server's URI, without a database."""
        return f"mongodb://127.0.0.1:{self.port}/"

    def start(self) -> None:
        """Start the server and wait, bounded, until it answers; raise RuntimeError if it does not."""
        command = secantus_command()
        if command is None:
            raise RuntimeError("secantusd-py is not installed (pip install secantusdb)")
        storage = ["--storage-path", self.data_dir, "--sync-on-commit"] if self.data_dir else [
            "--storage-path", ":memory:"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [command, "--host", "127.0.0.1", "--port", str(self.port), *storage, "--cache-size", "256M",
                 *self.extra_args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if answers(self.uri):
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"SecantusDB did not answer on port {self.port}; see {self.log_path}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server by its PID (its process group is its own), waiting at most 10 s."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def mongodb_server_uri(tmp_path_factory) -> Iterator[str]:
    """URI of the session's MongoDB server (no database in it)."""
    if os.environ.get(ENV_URI):
        if not answers(os.environ[ENV_URI], timeout_ms=5000):
            missing_server(f"the MongoDB named by {ENV_URI}")
        yield os.environ[ENV_URI]
        return
    server = SecantusServer(log_dir=str(tmp_path_factory.mktemp("secantus")))
    try:
        server.start()
    except RuntimeError as exc:
        missing_server(f"SecantusDB ({exc})")
    yield server.uri
    server.stop()


@pytest.fixture
def mongodb_store_uri(mongodb_server_uri) -> Iterator[str]:
    """URI of an empty database of its own on the session's server, dropped afterwards."""
    database = f"zaqar_lite_test_{uuid.uuid4().hex[:12]}"
    yield with_database(mongodb_server_uri, database)
    client: pymongo.MongoClient[dict] = pymongo.MongoClient(mongodb_server_uri, serverSelectionTimeoutMS=3000)
    try:
        client.drop_database(database)
    except PyMongoError:
        pass  # a test that stopped the server has nothing left to drop
    finally:
        client.close()


class RestartableSecantus:
    """A SecantusDB of one test, its data in files; see ``tests.servers.RestartableStore``."""

    def __init__(self, directory: Path) -> None:
        self.server = SecantusServer(log_dir=str(directory), data_dir=str(directory / "data"))
        self.server.start()
        self.uri = with_database(self.server.uri, "restartable")

    def stop(self) -> None:
        self.server.stop(signal.SIGKILL)

    def start(self) -> None:
        self.server.start()


@pytest.fixture
def mongodb_restartable_store(tmp_path) -> Iterator[RestartableSecantus]:
    """A MongoDB-protocol server the test may kill and restart; stopped at the end.

    Always a SecantusDB of the test's own, even when ``ZAQAR_LITE_TEST_MONGODB_URI``
    names a mongod: a test must not kill a server it did not start.
    """
    try:
        store = RestartableSecantus(tmp_path)
    except RuntimeError as exc:
        missing_server(f"SecantusDB ({exc})")
    yield store
    store.server.stop()
