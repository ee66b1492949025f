"""A throwaway single-node OpenStack Swift (tempauth, memcached) for the suites.

The session fixture writes configs and one-replica rings into a temporary
directory, starts memcached and the account, container, object and proxy
servers on free 127.0.0.1 ports (``workers = 0``: one process, one PID each),
waits until tempauth hands out a token, and stops every process by its PID at
the end. Each test gets a store URI with a container prefix of its own, so
stores never share data and nothing needs deleting between tests.
``swift_restartable_store`` kills the session's Swift servers (not memcached)
and starts them again on the same ports and files.

Configuration as in ``shared/BACKENDS.md``; ``error_suppression_interval = 0``
keeps one failed request from blocking the only node for a minute.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.conftest import free_port, missing_server

BIN = Path("/usr/bin")
SERVERS = ("account", "container", "object")
USER, KEY = "test:tester", "testing"
READY_TIMEOUT = 40.0
#: clusters tried, each on fresh ports, before the session's Swift fails to start
START_ATTEMPTS = 3
#: what a server's log says when another process took its port between choosing and binding
PORT_TAKEN = ("Could not bind to", "Address already in use")

RING_SCRIPT = """
import sys
from swift.common.ring import RingBuilder
swift_dir = sys.argv[1]
for kind, port in zip(("account", "container", "object"), sys.argv[2:]):
    builder = RingBuilder(8, 1, 1)
    builder.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1", "port": int(port),
                     "device": "sdb1", "weight": 1.0})
    builder.rebalance()
    builder.get_ring().save(f"{swift_dir}/{kind}.ring.gz")
"""

PROXY_PIPELINE = ("catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk tempurl "
                  "tempauth copy dlo slo versioned_writes proxy-logging proxy-server")


def _storage_conf(kind: str, root: Path, port: int) -> str:
    return textwrap.dedent(f"""\
        [DEFAULT]
        devices = {root}/node
        mount_check = false
        bind_ip = 127.0.0.1
        bind_port = {port}
        workers = 0
        user = root
        swift_dir = {root}/etc
        log_name = {kind}-server

        [pipeline:main]
        pipeline = {kind}-server

        [app:{kind}-server]
        use = egg:swift#{kind}
        """)


def _proxy_conf(root: Path, port: int, memcached_port: int) -> str:
    simple = ["catch_errors", "gatekeeper", "healthcheck", "listing_formats", "bulk", "tempurl",
              "copy", "dlo", "slo", "versioned_writes"]
    filters = "".join(f"\n[filter:{name}]\nuse = egg:swift#{name}\n" for name in simple)
    return textwrap.dedent(f"""\
        [DEFAULT]
        bind_ip = 127.0.0.1
        bind_port = {port}
        workers = 0
        user = root
        swift_dir = {root}/etc
        log_name = proxy-server

        [pipeline:main]
        pipeline = {PROXY_PIPELINE}

        [app:proxy-server]
        use = egg:swift#proxy
        account_autocreate = true
        allow_account_management = true
        error_suppression_interval = 0

        [filter:tempauth]
        use = egg:swift#tempauth
        user_test_tester = testing .admin

        [filter:cache]
        use = egg:swift#memcache
        memcache_servers = 127.0.0.1:{memcached_port}

        [filter:proxy-logging]
        use = egg:swift#proxy_logging
        """) + filters


#: seconds the driver waits before reading back a write it must keep (default 0.5). Not lower:
#: in the Swift pass (four processes) on a shared, loaded two-core machine, the read-to-PUT
#: times of about 1,650 claims and kept writes reached 0.34 to 0.97 s (99th percentile 0.20 to
#: 0.47 s; up to 11 above 0.5 s), and a write slower than the settle is given up, failing a test
#: that counts what it claimed. The pass is bound by these waits (one per claim, queue creation,
#: edit and record write): up to 1,650 of a second each, about 400 s of each process's run.
TEST_SETTLE = 1.0


class PortTaken(RuntimeError):
    """A server exited because another process bound its port after it was chosen (free_port races)."""


class SwiftServer:
    """One single-node Swift: its ports, files and processes (each stopped by its PID)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.memcached_port = free_port()
        self.ports = {kind: free_port() for kind in (*SERVERS, "proxy")}
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def proxy_port(self) -> int:
        """Return the port clients talk to."""
        return self.ports["proxy"]

    def uri(self, prefix: str) -> str:
        """Return a store URI whose containers all start with ``prefix``.

        The suites run four Swift clusters and four test processes on two cores: a
        PUT starved for longer than the driver's ``settle`` is (rightly) not kept,
        and a queue creation then answers "existed". ``TEST_SETTLE`` leaves room.
        """
        user = USER.replace(":", "%3A")
        return (f"swift://{user}:{KEY}@127.0.0.1:{self.proxy_port}/auth/v1.0"
                f"?prefix={prefix}&settle={TEST_SETTLE}")

    def write_files(self) -> None:
        """Write the server configs and build the three rings in one interpreter."""
        etc = self.root / "etc"
        (self.root / "node" / "sdb1").mkdir(parents=True)
        (self.root / "logs").mkdir()
        etc.mkdir()
        for kind in SERVERS:
            (etc / f"{kind}-server.conf").write_text(_storage_conf(kind, self.root, self.ports[kind]))
        (etc / "proxy-server.conf").write_text(_proxy_conf(self.root, self.proxy_port, self.memcached_port))
        ports = [str(self.ports[kind]) for kind in SERVERS]
        subprocess.run(["/usr/bin/python3", "-c", RING_SCRIPT, str(etc), *ports],
                       check=True, timeout=60, capture_output=True)

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.root / "logs" / f"{name}.log", "ab") as log:  # the child keeps its own copy
            self.processes[name] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

    def start(self) -> None:
        """Start memcached and the four servers, then wait until auth answers."""
        self._spawn("memcached", [str(BIN / "memcached"), "-l", "127.0.0.1", "-p", str(self.memcached_port),
                                  "-U", "0", "-m", "64", "-u", "root"])
        for kind in SERVERS:
            self.start_server(kind, wait=False)
        self.start_server("proxy")

    def start_server(self, kind: str, wait: bool = True) -> None:
        """Start one Swift server (again) on its own port."""
        conf = self.root / "etc" / f"{kind}-server.conf"
        self._spawn(kind, [str(BIN / f"swift-{kind}-server"), str(conf), "-v"])
        if wait:
            self.wait_ready()

    def stop_server(self, kind: str, sig: int = signal.SIGTERM) -> None:
        """Stop one process by its PID, waiting (bounded) until it is gone."""
        process = self.processes.pop(kind, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def stop(self) -> None:
        """Stop every process this server started."""
        for kind in ("proxy", *SERVERS, "memcached"):
            self.stop_server(kind)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait until tempauth answers 200 with a token; fail with the logs after ``timeout``."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.proxy_port}/auth/v1.0",
                                         headers={"X-Storage-User": USER, "X-Storage-Pass": KEY})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    logs = self.logs()
                    failure = PortTaken if any(text in logs for text in PORT_TAKEN) else RuntimeError
                    raise failure(f"swift {name} exited early:\n{logs}")
            try:
                with urllib.request.urlopen(request, timeout=2) as response:
                    if response.status == 200 and response.headers.get("X-Auth-Token"):
                        self._warm_up(response.headers["X-Storage-Url"], response.headers["X-Auth-Token"])
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"swift did not answer auth within {timeout} s:\n{self.logs()}")

    @staticmethod
    def _warm_up(storage_url: str, token: str) -> None:
        """Write, read and delete one object, so the account exists and no test pays the first requests."""
        steps = (("PUT", "/warm-up", b""), ("PUT", "/warm-up/o", b"x"), ("GET", "/warm-up/o", None),
                 ("DELETE", "/warm-up/o", None), ("DELETE", "/warm-up", None))
        for method, path, body in steps:
            request = urllib.request.Request(storage_url + path, data=body, method=method,
                                             headers={"X-Auth-Token": token})
            with urllib.request.urlopen(request, timeout=5):
                pass

    def logs(self) -> str:
        """Return the tail of every server log, for failure messages."""
        tails = []
        for log in sorted((self.root / "logs").glob("*.log")):
            tails.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:]))
        return "\n".join(tails)


def swift_installed() -> bool:
    """Return whether the Swift servers and memcached are installed."""
    needed = [BIN / f"swift-{kind}-server" for kind in (*SERVERS, "proxy")] + [BIN / "memcached"]
    return all(path.exists() for path in needed)


@pytest.fixture(scope="session")
def swift_server(tmp_path_factory):
    """A running single-node Swift for the whole session, stopped at its end."""
    if not swift_installed():
        missing_server("swift")
    for attempt in range(1, START_ATTEMPTS + 1):
        server = SwiftServer(tmp_path_factory.mktemp("swift"))
        try:
            server.write_files()
            server.start()
            break
        except PortTaken:  # five ports chosen a second or two before binding: try fresh ones
            server.stop()
            if attempt == START_ATTEMPTS:
                raise
        except BaseException:
            server.stop()
            raise
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def swift_store_uri(swift_server) -> str:
    """A URI naming an empty store: a container prefix no other test uses."""
    return swift_server.uri("t" + uuid.uuid4().hex[:12])


class RestartableSwift:
    """A store on the session's Swift, whose servers the test kills and restarts; see ``RestartableStore``."""

    def __init__(self, server: SwiftServer) -> None:
        self.server = server
        self.uri = server.uri("t" + uuid.uuid4().hex[:12])

    def stop(self) -> None:
        for kind in ("proxy", *SERVERS):
            self.server.stop_server(kind, signal.SIGKILL)

    def start(self) -> None:
        for kind in (*SERVERS, "proxy"):
            if kind not in self.server.processes:
                self.server.start_server(kind, wait=False)
        self.server.wait_ready()


@pytest.fixture
def swift_restartable_store(swift_server):
    """A store on the session's Swift that the test may kill and restart; all running again at the end."""
    store = RestartableSwift(swift_server)
    yield store
    if any(kind not in swift_server.processes for kind in (*SERVERS, "proxy")):
        store.start()
