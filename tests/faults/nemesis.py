"""The faults of a run, their seeded schedules, and the places they act on.

Every fault acts on something the run made itself and names with the prefix ``zlf``: a network
namespace holding the store, the pair of TAP devices joining it to the host (addresses in
10.254.0.0/16, chosen free) and the forwarder process between them (``forwarder.py``), a store
process, the server's worker processes, the server's wall clock (stepped through a file of ours)
or a small ext4 image mounted on a directory of ours. Nothing else on the machine is touched: not
loopback, not the host's routes. Each place removes what it made in ``finally`` blocks, and every
fault has a heal that the run calls whatever happens.

Partitions work on the neighbour entries of the link: pointing the server's entry for the store
(or the store's entry for the server) at a MAC address nobody has drops every packet one way,
silently, as a cut cable does; both ways is a full partition. Latency (200 ms ± 50 ms) and loss
(10-30 %), one way or both, are the forwarder's: it holds or drops the Ethernet frames it copies
between the two devices, as the kernel's ``sch_netem`` would (which the machines measured lack).
The forwarder also partitions, slows or thins the frames of one TCP port alone: one node of a
Redis Cluster whose six nodes share the namespace's address, the others reached as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import os
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

PREFIX = "zlf"
#: a MAC address no interface has: frames sent to it are dropped by the other end
NOWHERE_MAC = "02:00:5e:00:fa:17"
#: the directory whose sitecustomize.py makes a server's wall clock steppable
CLOCK_HOOK = Path(__file__).parent / "clockstep"
REDIS_PORT = 6379
#: the process that copies frames between a namespace's two TAP devices, delaying or dropping them
FORWARDER = Path(__file__).parent / "forwarder.py"
#: the longest a forwarder (so a namespaced store's link) lives: no run is longer
LINK_LIFETIME = 1800.0


def sh(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command (ip, tc, mount...) and return how it ended."""
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=check)


@dataclasses.dataclass(frozen=True)
class Step:
    """One fault of a schedule: it starts ``at`` seconds into the run and heals ``duration`` later."""

    at: float
    fault: str
    duration: float
    #: the fault's size, where it has one: the seconds of a clock step (negative: backwards)
    size: float = 0.0


#: faults that happen at once and need no heal (the server restarts its workers itself)
INSTANT = frozenset({"kill-worker"})
#: the faults of each store kind the harness runs on
FAULTS = {
    "redis": ("partition", "partition-to-store", "partition-from-store", "pause-store", "kill-store",
              "kill-worker", "clock-step", "latency", "loss"),
    "sqlite": ("disk-full", "kill-worker", "clock-step"),
    # a primary paused past cluster-node-timeout (1 s): its replica takes over while it sleeps
    "redis_cluster": ("pause-primary", "kill-primary", "kill-worker", "clock-step"),
    # a Redis that persists nothing (the suites' default): what a kill -9 costs it
    "redis_volatile": ("kill-store",),
    "redis_cluster_volatile": ("pause-primary", "kill-primary"),
    # the durable cluster in a namespace: the link between the server and every node, the link's
    # frames of one node alone (the primary serving the workload, or another), and its primary
    "redis_cluster_link": ("partition", "partition-to-store", "partition-from-store", "latency", "loss",
                           "pause-primary", "kill-primary", "partition-node", "latency-node", "loss-node"),
    # SecantusDB, the MongoDB wire server, and Swift's proxy (its servers for a pause or a kill)
    "mongodb": ("partition", "partition-to-store", "partition-from-store", "pause-store", "kill-store",
                "kill-worker", "clock-step", "latency", "loss"),
    "swift": ("partition", "partition-to-store", "partition-from-store", "pause-store", "kill-store",
              "kill-worker", "clock-step", "latency", "loss"),
}
#: the faults of the link's forwarder: 200 ms ± 50 ms, and 10-30 % of frames dropped, one way or both
LINK_FAULTS = ("latency", "loss")
LATENCY_MS, JITTER_MS = 200, 50


#: the longest a fault lasts, by default (seconds)
LONGEST = 6.0


def schedule(seed: int, faults: tuple[str, ...], length: float, longest: float = LONGEST) -> list[Step]:
    """Return the faults of a run of ``length`` seconds, chosen by ``seed`` (the same seed, the same
    schedule): one fault at a time, each 1 to ``longest`` seconds, with 0.5-2 seconds of calm between them."""
    choose = random.Random(seed)
    steps = []
    at = choose.uniform(0.5, 1.5)
    while at < length:
        fault = choose.choice(faults)
        duration = 0.0 if fault in INSTANT else round(choose.uniform(1.0, longest), 2)
        size = round(choose.choice((-1, 1)) * choose.uniform(5.0, 30.0), 1) if fault == "clock-step" else 0.0
        steps.append(Step(round(at, 2), fault, duration, size))
        at += duration + choose.uniform(0.5, 2.0)
    return steps


def clock_margin(steps: list[Step]) -> float:
    """Return the most by which a schedule moves the server's clock ahead of the clients' at once:
    a step forward does, and so does the heal of a step back."""
    return max((abs(step.size) for step in steps if step.fault == "clock-step"), default=0.0)


def _port(port: int | None) -> str:
    """Return the tail of a forwarder command that limits it to one TCP port (none: every frame)."""
    return "" if port is None else f" port {port}"


def _free_subnet() -> ipaddress.IPv4Network:
    """Return a /30 of 10.254.0.0/16 that no interface uses."""
    used = sh("ip", "-o", "-4", "addr").stdout
    choose = random.Random()
    while True:
        subnet = ipaddress.IPv4Network(f"10.254.{choose.randrange(256)}.{4 * choose.randrange(64)}/30")
        if f"10.254.{subnet.network_address.packed[2]}." not in used:
            return subnet


class NamespacedStore:
    """A store alone in a network namespace, reached from the host through a pair of TAP devices
    (one in the host, one in the namespace) and the forwarder that copies frames between them.

    Subclasses start and kill the store's processes; this class makes and removes the namespace
    and the link, cuts, slows, thins and mends it, and pauses and resumes the store's processes.
    """

    def __init__(self, directory: Path) -> None:
        token = uuid.uuid4().hex[:6]
        self.namespace = f"{PREFIX}{token}"
        self.host_link, self.ns_link = f"{PREFIX}{token}h", f"{PREFIX}{token}n"
        subnet = _free_subnet()
        self.host_ip, self.store_ip = (str(host) for host in subnet.hosts())
        self.directory = directory
        self.pid: int | None = None
        self.forwarder: subprocess.Popen[str] | None = None

    @property
    def uri(self) -> str:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        """Whether the store's processes are up (False after a kill, until :meth:`start`)."""
        return self.pid is not None

    def pids(self) -> list[int]:
        """Return the processes a pause stops."""
        return [self.pid] if self.pid is not None else []

    def start(self) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def pause(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def __enter__(self) -> NamespacedStore:
        try:
            sh("ip", "netns", "add", self.namespace)
            self._in_ns("ip", "link", "set", "lo", "up")
            self._start_forwarder()
            sh("ip", "link", "set", self.ns_link, "netns", self.namespace)
            sh("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_link)
            sh("ip", "link", "set", self.host_link, "up")
            self._in_ns("ip", "addr", "add", f"{self.store_ip}/30", "dev", self.ns_link)
            self._in_ns("ip", "link", "set", self.ns_link, "up")
            self.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.kill()
        finally:
            try:
                self._stop_forwarder()
            finally:
                sh("ip", "link", "del", self.host_link, check=False)
                sh("ip", "netns", "del", self.namespace, check=False)

    def _start_forwarder(self) -> None:
        """Start the forwarder, which creates both TAP devices in the host (they go when it ends)."""
        with open(self.directory / f"{PREFIX}-forwarder.log", "ab") as log:
            self.forwarder = subprocess.Popen(
                [sys.executable, str(FORWARDER), self.host_link, self.ns_link,
                 "--lifetime", str(LINK_LIFETIME)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        answer = self.forwarder.stdout.readline() if self.forwarder.stdout else ""
        if answer.strip() != "ready":
            raise RuntimeError(f"the forwarder of {self.namespace} did not start: {answer!r}")

    def _stop_forwarder(self) -> None:
        """End the forwarder (the end of its input), and with it both TAP devices."""
        forwarder, self.forwarder = self.forwarder, None
        if forwarder is None:
            return
        try:
            if forwarder.stdin is not None:
                with contextlib.suppress(OSError):
                    forwarder.stdin.close()
            forwarder.wait(timeout=5)
        except subprocess.TimeoutExpired:
            forwarder.kill()
            forwarder.wait(timeout=5)
        finally:
            if forwarder.stdout is not None:
                forwarder.stdout.close()

    def link(self, command: str) -> str:
        """Send the forwarder a command (``delay both 200 50``, ``loss to 20 7``, ``clear``,
        ``stats``; forwarder.py says what each does) and return its answer."""
        forwarder = self.forwarder
        if forwarder is None or forwarder.stdin is None or forwarder.stdout is None:
            raise RuntimeError(f"{self.namespace} has no forwarder")
        forwarder.stdin.write(command + "\n")
        forwarder.stdin.flush()
        answer = forwarder.stdout.readline().strip()
        if not answer or answer.startswith("error"):
            raise RuntimeError(f"the forwarder of {self.namespace} refused {command!r}: {answer!r}")
        return answer

    def link_stats(self) -> dict[str, tuple[int, int, int]]:
        """Return, for ``to`` (the store) and ``from``, the frames forwarded, delayed and dropped."""
        words = self.link("stats").split()[1:]
        stats = {}
        for word in words:
            direction, _, counts = word.partition("=")
            forwarded, delayed, dropped = (int(count) for count in counts.split(","))
            stats[direction] = (forwarded, delayed, dropped)
        return stats

    def delay(self, direction: str, mean_ms: float = LATENCY_MS, jitter_ms: float = JITTER_MS,
              port: int | None = None) -> None:
        """Hold each frame towards the store (``to``), back (``from``) or both ways a while; with
        ``port``, only the frames to and from that TCP port of the store."""
        self.link(f"delay {direction} {mean_ms} {jitter_ms}{_port(port)}")

    def lose(self, direction: str, percent: float, seed: int, port: int | None = None) -> None:
        """Drop that share of the frames one way or both, at random (the same seed, the same drops);
        with ``port``, only the frames to and from that TCP port of the store."""
        self.link(f"loss {direction} {percent} {seed}{_port(port)}")

    def drop(self, direction: str, port: int) -> None:
        """Drop every frame to and from one TCP port of the store, one way or both: a partition of
        the process listening on it alone, its neighbours on other ports still reached."""
        self.link(f"drop {direction}{_port(port)}")

    def _in_ns(self, *command: str) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", self.namespace, *command)

    def cut(self, to_store: bool, from_store: bool) -> None:
        """Drop the packets from the server to the store, from the store to the server, or both."""
        if to_store:
            sh("ip", "neigh", "replace", self.store_ip, "lladdr", NOWHERE_MAC, "dev", self.host_link,
               "nud", "permanent")
        if from_store:
            self._in_ns("ip", "neigh", "replace", self.host_ip, "lladdr", NOWHERE_MAC, "dev", self.ns_link,
                        "nud", "permanent")

    def mend(self) -> None:
        """Deliver every packet again."""
        sh("ip", "neigh", "del", self.store_ip, "dev", self.host_link, check=False)
        sh("ip", "netns", "exec", self.namespace, "ip", "neigh", "del", self.host_ip, "dev", self.ns_link,
           check=False)
        if self.forwarder is not None:
            self.link("clear")


class NamespacedRedis(NamespacedStore):
    """A redis-server alone in a network namespace, reached from the host through its link.

    ``durable``: it appends every write to its file and fsyncs it before answering, so a kill -9
    loses nothing acknowledged; otherwise it persists nothing (docs/faults.rst says what that loses).
    """

    def __init__(self, directory: Path, durable: bool = True) -> None:
        super().__init__(directory)
        self.persistence = ("--appendonly", "yes", "--appendfsync", "always") if durable else \
            ("--appendonly", "no")

    @property
    def uri(self) -> str:
        return f"redis://{self.store_ip}:{REDIS_PORT}/0"

    def start(self) -> None:
        """Start redis-server in the namespace (on the same files after a kill) and wait until it answers."""
        pidfile = self.directory / "redis.pid"
        pidfile.unlink(missing_ok=True)
        self._in_ns("redis-server", "--bind", self.store_ip, "--port", str(REDIS_PORT), *self.persistence,
                    "--save", "",
                    # it listens only on the namespace's address, which only this host reaches
                    "--protected-mode", "no", "--daemonize", "yes", "--pidfile", str(pidfile),
                    "--logfile", str(self.directory / "redis.log"), "--dir", str(self.directory))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):  # not written yet, or half written
                self.pid = self.pid or int(pidfile.read_text())
            answer = sh("ip", "netns", "exec", self.namespace, "redis-cli", "-h", self.store_ip, "-p",
                        str(REDIS_PORT), "ping", check=False).stdout
            if self.pid is not None and "PONG" in answer:
                return
            time.sleep(0.05)
        self.kill()  # a server that never answered is not left behind
        raise RuntimeError(f"redis-server did not start in {self.namespace}")

    def kill(self) -> None:
        """Kill redis-server at once (SIGKILL, and SIGCONT should it be paused); wait until it is gone."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGCONT)
        while Path(f"/proc/{pid}").exists() and "State:\tZ" not in _status(pid):
            time.sleep(0.02)


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""


@contextlib.contextmanager
def small_disk(directory: Path, megabytes: int = 24) -> Iterator[Path]:
    """Mount a fresh ext4 image of ``megabytes`` on a directory in ``directory``; unmount it after."""
    image = directory / f"{PREFIX}-disk.img"
    mount_point = directory / f"{PREFIX}-mnt"
    mount_point.mkdir()
    with open(image, "wb") as file:
        file.truncate(megabytes * 1024 * 1024)
    sh("mkfs.ext4", "-q", "-F", str(image))
    sh("mount", "-o", "loop", str(image), str(mount_point))
    try:
        yield mount_point
    finally:
        for _ in range(50):
            if sh("umount", str(mount_point), check=False).returncode == 0:
                break
            time.sleep(0.1)
        image.unlink(missing_ok=True)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its filesystem has no space left; return the file."""
    balloon = directory / f"{PREFIX}-balloon"
    chunk = b"\0" * 65536
    with open(balloon, "wb") as file:
        while True:
            try:
                file.write(chunk)
                file.flush()
            except OSError:
                break
        with contextlib.suppress(OSError):
            os.fsync(file.fileno())
    return balloon


class SteppedClock:
    """The server's wall clock, stepped by a file its Python reads at every ``time.time()``
    (``tests/faults/clockstep/sitecustomize.py``, which says why not libfaketime)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / f"{PREFIX}-clock"
        self.set(0)

    def environment(self) -> dict[str, str]:
        """Return the variables that put a server on this clock."""
        path = [str(CLOCK_HOOK), *filter(None, [os.environ.get("PYTHONPATH")])]
        return {"PYTHONPATH": os.pathsep.join(path), "ZLF_CLOCK_FILE": str(self.path)}

    def set(self, seconds: float) -> None:
        """Step the clock to ``seconds`` from the true time."""
        temporary = self.path.with_suffix(".new")
        temporary.write_text(f"{seconds}\n")
        temporary.replace(self.path)


def _stop_group(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGKILL) -> None:
    """Signal a process started in a session of its own, and all of its group; wait until it is gone."""
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
        os.killpg(process.pid, signal.SIGCONT)
    process.wait(timeout=10)


class NamespacedMongo(NamespacedStore):
    """A SecantusDB (the suites' MongoDB wire server, tests/servers/mongodb.py) alone in a network
    namespace; its data lives in files, each commit synced before it is acknowledged, so that a
    kill -9 and a restart lose nothing acknowledged."""

    PORT = 27017

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"mongodb://{self.store_ip}:{self.PORT}/faults"

    def start(self) -> None:
        from tests.servers.mongodb import answers, secantus_command

        command = secantus_command()
        if command is None:
            raise RuntimeError("secantusd-py is not installed (pip install secantusdb)")
        with open(self.directory / "secantus.log", "ab") as log:
            self.process = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace, command, "--host", self.store_ip, "--port",
                 str(self.PORT), "--storage-path", str(self.directory / "mongo-data"), "--sync-on-commit",
                 "--cache-size", "256M"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.process.pid
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.process.poll() is None:
            if answers(f"mongodb://{self.store_ip}:{self.PORT}/"):
                return
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"SecantusDB did not start in {self.namespace}")

    def kill(self) -> None:
        """Kill the server at once (SIGKILL to its group); wait until it is gone."""
        process, self.process, self.pid = self.process, None, None
        _stop_group(process)

    def pause(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGCONT)


class NamespacedSwift(NamespacedStore):
    """A single-node Swift (the suites' one, tests/servers/swift.py) alone in a network namespace:
    its proxy listens on the namespace's address, its account, container and object servers and
    memcached on the namespace's own loopback. A kill -9 kills the four Swift servers (memcached,
    a cache, stays); a pause stops them all."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        from tests.servers.swift import SwiftServer

        namespace = self.namespace
        store_ip = self.store_ip

        class InNamespace(SwiftServer):
            def _spawn(self, name: str, argv: list[str]) -> None:
                super()._spawn(name, ["ip", "netns", "exec", namespace, *argv])

            def write_files(self) -> None:
                super().write_files()
                proxy = self.root / "etc" / "proxy-server.conf"
                proxy.write_text(proxy.read_text().replace("bind_ip = 127.0.0.1", f"bind_ip = {store_ip}", 1))

            def wait_ready(self, timeout: float = 0.0) -> None:
                pass  # the proxy is not on the host's loopback: NamespacedSwift waits for it

        (directory / "swift").mkdir()
        self.swift = InNamespace(directory / "swift")
        self.swift.write_files()
        self.memcached_started = False

    @property
    def uri(self) -> str:
        from tests.servers.swift import KEY, USER

        user = USER.replace(":", "%3A")
        return f"swift://{user}:{KEY}@{self.store_ip}:{self.swift.proxy_port}/auth/v1.0?prefix=zlf&settle=1.0"

    @property
    def running(self) -> bool:
        return "proxy" in self.swift.processes

    def pids(self) -> list[int]:
        return [process.pid for name, process in self.swift.processes.items() if name != "memcached"]

    def start(self) -> None:
        from tests.servers.swift import SERVERS

        if not self.memcached_started:
            self.swift.start()  # memcached and the four servers
            self.memcached_started = True
        else:
            for kind in SERVERS:
                self.swift.start_server(kind, wait=False)
            self.swift.start_server("proxy", wait=False)
        self._wait_ready()

    def _wait_ready(self) -> None:
        from tests.servers.swift import KEY, USER

        request = urllib.request.Request(f"http://{self.store_ip}:{self.swift.proxy_port}/auth/v1.0",
                                         headers={"X-Storage-User": USER, "X-Storage-Pass": KEY})
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(request, timeout=2) as response:
                    if response.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"swift did not start in {self.namespace}:\n{self.swift.logs()}")

    def kill(self) -> None:
        """Kill the four Swift servers at once (SIGKILL); memcached too when the namespace goes."""
        from tests.servers.swift import SERVERS

        for kind in ("proxy", *SERVERS):
            _stop_group(self.swift.processes.pop(kind, None))

    def __exit__(self, *exc: object) -> None:
        try:
            self.kill()
            _stop_group(self.swift.processes.pop("memcached", None))
        finally:
            super().__exit__(*exc)


class NamespacedRedisCluster(NamespacedStore):
    """A Redis Cluster (six nodes, as tests/servers/redis_cluster.py makes it) alone in a network
    namespace: every node listens on the namespace's address, so the server reaches each node
    through the link, and the nodes reach each other inside the namespace. A fault of the link
    therefore stands between the server and the whole cluster, not between its nodes."""

    def __init__(self, directory: Path, *options: str) -> None:
        super().__init__(directory)
        import redis

        from tests.servers.redis import RedisServer
        from tests.servers.redis_cluster import NODES, START_TIMEOUT, RedisCluster

        namespace, store_ip = self.namespace, self.store_ip

        class Node(RedisServer):
            def uri(self, db: int = 0) -> str:
                return f"redis://{store_ip}:{self.port}/{db}"

            def client(self) -> redis.Redis:
                return redis.Redis(host=store_ip, port=self.port, socket_timeout=5, decode_responses=True)

            def start(self, attempts: int = 1) -> None:
                self.pidfile.unlink(missing_ok=True)
                sh("ip", "netns", "exec", namespace, "redis-server", "--bind", store_ip,
                   "--port", str(self.port), *self.options, "--protected-mode", "no", "--daemonize", "yes",
                   "--pidfile", str(self.pidfile), "--logfile", str(self.directory / "redis.log"),
                   "--dir", str(self.directory))
                if not self._wait_until_ready():
                    self.stop(signal.SIGKILL)
                    raise RuntimeError(f"redis-server did not start in {namespace} on port {self.port}")

        class InNamespace(RedisCluster):
            def uri(self, first: int = 0, **query: str) -> str:
                return super().uri(first, **query).replace("127.0.0.1:", f"{store_ip}:")

            def start(self) -> None:
                for index in range(NODES):
                    node_dir = self.directory / f"node{index}"
                    node_dir.mkdir(parents=True, exist_ok=True)
                    node = Node(node_dir, *self._node_options(node_dir))
                    self.servers.append(node)
                    node.start()
                subprocess.run(["ip", "netns", "exec", namespace, "redis-cli", "--cluster", "create",
                                *(f"{store_ip}:{s.port}" for s in self.servers), "--cluster-replicas", "1",
                                "--cluster-yes"], check=True, timeout=START_TIMEOUT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                self.wait_until_ok()

        self.cluster = InNamespace(directory / "cluster", *options)

    @property
    def uri(self) -> str:
        return self.cluster.uri()

    @property
    def running(self) -> bool:
        """Always, once started: the run restarts stopped nodes itself (:meth:`RedisCluster.restart`)."""
        return bool(self.cluster.servers)

    def pids(self) -> list[int]:
        return []  # a pause stops one primary, by the cluster's faults, not the whole store

    def start(self) -> None:
        self.cluster.start()

    def kill(self) -> None:
        """Kill every node at once (SIGKILL); wait until each is gone."""
        self.cluster.stop(signal.SIGKILL)
