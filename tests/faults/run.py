"""One fault run, and the long run's command line.

A run starts the store (in a network namespace for Redis, a Redis Cluster behind a link, MongoDB
and Swift, on a small ext4 image for SQLite), a real server with 2 workers on a fake clock, and
the workload; it applies the seed's schedule of faults, heals them all, reads the final state and
checks the history. A failing run writes its schedule, history, anomalies and server log to
``<out>/<store>-seed-<seed>/`` so that it can be replayed (the same seed gives the same schedule) and read.

The long run (docs/faults.rst)::

    sudo PYTHONPATH=. .venv/bin/python -m tests.faults.run --store redis --seeds 0-49 --out faults-runs
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from tests.e2e.harness import RunningServer, start_server, stop_server
from tests.faults import nemesis
from tests.faults.checker import Anomaly, check, undelivered
from tests.faults.history import OK, History, Op
from tests.faults.workload import (
    CLAIM_GRACE,
    CLAIM_TTL,
    MAX_CLAIM_COUNT,
    PROJECT,
    RECOVERY_TIMEOUT,
    SERVER_CONFIG,
    Receiver,
    Workload,
    final_read,
    set_up,
    subscribe,
)
from tests.servers.redis_cluster import RedisCluster

#: seconds of faults in a run of the short subset, and of the long run by default
SHORT, LONG = 12.0, 30.0
#: the ways a latency or loss fault acts: towards the store, back from it, or both
LINK_DIRECTIONS = ("both", "to", "from")
#: the stores' visibility lag (the drivers' ``visibility_lag``, docs/api.rst "At least once"), and
#: the stores whose markers come from the server's clock
VISIBILITY_LAG, CLOCK_MARKERS = {"mongodb": 2.0, "swift": 2.0}, frozenset({"swift"})


@dataclasses.dataclass
class Outcome:
    store: str
    seed: int
    steps: list[nemesis.Step]
    anomalies: list[Anomaly]
    operations: int
    seconds: float
    #: how many answers of each status (and "none": no answer) the clients got
    statuses: dict[str, int]
    #: the namespaces, links and mount points the run made (and removed)
    made: list[str]

    @property
    def valid(self) -> bool:
        return not self.anomalies


class Faults:
    """Applies a schedule's faults to one run's store, server and clock, and heals them."""

    def __init__(self, server: RunningServer, store: nemesis.NamespacedStore | RedisCluster | Path,
                 clock: nemesis.SteppedClock, seed: int, history: History) -> None:
        self.server, self.clock = server, clock
        self.store = store if isinstance(store, nemesis.NamespacedStore) else None
        self.cluster = store if isinstance(store, RedisCluster) else None
        if isinstance(store, nemesis.NamespacedRedisCluster):  # a cluster behind a link: faults of both
            self.cluster = store.cluster
        self.disk = store if isinstance(store, Path) else None
        self.paused: list[int] = []
        self.history = history
        self.choose = random.Random(seed)
        self.balloon: Path | None = None
        self.stopping = threading.Event()

    def apply(self, step: nemesis.Step) -> None:
        self._note("start", step)
        if step.fault == "kill-worker":
            workers = sorted(self.server.worker_pids())
            if workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.choose.choice(workers), signal.SIGKILL)
        elif step.fault == "clock-step":
            self.clock.set(step.size)
        elif step.fault == "disk-full":
            assert self.disk is not None
            self.balloon = nemesis.fill(self.disk)
        elif step.fault.endswith("-primary"):
            self._apply_to_cluster(step.fault)
        elif step.fault.endswith("-node"):
            self._apply_to_node(step.fault)
        else:
            self._apply_to_store(step.fault)

    def _apply_to_cluster(self, fault: str) -> None:
        """Pause or kill the primary that serves the workload's project (all its keys are in one slot)."""
        assert self.cluster is not None
        primary = self.cluster.serving(f"zl:{{{PROJECT}}}:due")
        if primary is None or primary.pid is None:
            return  # a failover is under way: nobody to pause
        if fault == "pause-primary":
            self.paused.append(primary.pid)
            os.kill(primary.pid, signal.SIGSTOP)
        else:
            primary.stop(signal.SIGKILL)

    def _apply_to_node(self, fault: str) -> None:
        """Partition, slow or thin the link's frames of one cluster node alone (its client port), one
        way or both: the primary serving the workload's project half the time, else another node.
        The server still reaches the other nodes, and the nodes each other inside the namespace."""
        assert self.store is not None and self.cluster is not None
        to_primary, direction = self.choose.random() < 0.5, self.choose.choice(LINK_DIRECTIONS)
        pick = self.choose.randrange(len(self.cluster.servers) - 1)
        primary = self.cluster.serving(f"zl:{{{PROJECT}}}:due")
        if primary is None:
            return  # a failover is under way: which node serves the workload is not known
        others = [server for server in self.cluster.servers if server is not primary]
        node = primary if to_primary else others[pick]
        self._note("target", None, {"port": node.port, "node": "primary" if to_primary else "other",
                                    "direction": direction})
        if fault == "partition-node":
            self.store.drop(direction, port=node.port)
        elif fault == "latency-node":
            self.store.delay(direction, port=node.port)
        else:
            self.store.lose(direction, self.choose.randint(10, 30), self.choose.randrange(2**32),
                            port=node.port)

    def _apply_to_store(self, fault: str) -> None:
        assert self.store is not None and self.store.running
        if fault.startswith("partition"):
            self.store.cut(to_store=fault != "partition-from-store", from_store=fault != "partition-to-store")
        elif fault == "pause-store":
            self.store.pause()
        elif fault == "kill-store":
            self.store.kill()
        elif fault == "latency":
            self.store.delay(self.choose.choice(LINK_DIRECTIONS))
        elif fault == "loss":
            self.store.lose(self.choose.choice(LINK_DIRECTIONS), self.choose.randint(10, 30),
                            self.choose.randrange(2**32))
        else:
            raise ValueError(f"no fault {fault}")

    def _note(self, what: str, step: nemesis.Step | None = None,
              value: dict[str, object] | None = None) -> None:
        """Record a fault's start (and a node fault's target) or the heal in the history, beside the
        clients' operations."""
        at = self.history.now()
        self.history.add(Op("nemesis", what, at, at, OK, None,
                            dataclasses.asdict(step) if step is not None else value or {}))

    def heal(self) -> None:
        """Undo every fault (each heal is harmless when its fault is not in place)."""
        self._note("heal")
        self.clock.set(0)
        if self.balloon is not None:
            self.balloon.unlink(missing_ok=True)
            self.balloon = None
        for pid in self.paused:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.paused = []
        if self.store is not None:  # first: a cluster behind a link is reached through it
            self.store.mend()
            if self.store.running:
                self.store.resume()
            else:
                self.store.start()
        if self.cluster is not None:
            self.cluster.restart()

    def run(self, steps: list[nemesis.Step], start: float) -> None:
        """Apply the steps at their times (from ``start``, a monotonic time), healing each after its
        duration; stop early when :attr:`stopping` is set. Everything is healed on the way out."""
        try:
            for step in steps:
                if self.stopping.wait(max(0.0, start + step.at - time.monotonic())):
                    return
                self.apply(step)
                if step.fault not in nemesis.INSTANT:
                    self.stopping.wait(step.duration)
                    self.heal()
        finally:
            self.heal()


Store = nemesis.NamespacedStore | RedisCluster | Path
#: a Redis Cluster node that appends every write to its file and fsyncs it before answering
DURABLE_NODE = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")


@contextlib.contextmanager
def _store(kind: str, directory: Path) -> Iterator[tuple[str, Store]]:
    if kind in ("redis", "redis_volatile"):
        with nemesis.NamespacedRedis(directory, durable=kind == "redis") as redis_store:
            yield redis_store.uri, redis_store
    elif kind in ("mongodb", "swift"):
        namespaced = nemesis.NamespacedMongo if kind == "mongodb" else nemesis.NamespacedSwift
        with namespaced(directory) as store:
            yield store.uri, store
    elif kind == "sqlite":
        with nemesis.small_disk(directory) as disk:
            yield f"sqlite:///{disk}/zaqar.db", disk
    elif kind == "redis_cluster_link":
        with nemesis.NamespacedRedisCluster(directory, *DURABLE_NODE) as cluster_store:
            yield cluster_store.uri, cluster_store
    elif kind in ("redis_cluster", "redis_cluster_volatile"):
        # durable: each node appends every write to its file and fsyncs it before answering
        durable = DURABLE_NODE
        cluster = RedisCluster(directory / "cluster", *(durable if kind == "redis_cluster" else ()))
        try:
            cluster.start()
            yield cluster.uri(), cluster
        finally:
            cluster.stop(signal.SIGKILL)
    else:
        raise ValueError(f"the fault harness does not run on {kind}")


#: the longest the end of a run waits for deliveries that keep coming (a backlog built while the
#: store was down is delivered at the store's pace: on Swift one cursor write, and its settle, each)
DELIVERY_BACKLOG_TIMEOUT = 600.0


def _await_deliveries(history: History, kind: str) -> None:
    """Wait until every subscription got every acknowledged post: at most :data:`RECOVERY_TIMEOUT`
    without a new delivery, and :data:`DELIVERY_BACKLOG_TIMEOUT` in all."""
    started = time.monotonic()
    delivered, progress = -1, started
    while undelivered(history.ops, VISIBILITY_LAG.get(kind, 0.0), kind in CLOCK_MARKERS):
        now = time.monotonic()
        count = sum(op.process == "webhook" for op in history.ops)
        if count != delivered:
            delivered, progress = count, now
        if now - progress > RECOVERY_TIMEOUT or now - started > DELIVERY_BACKLOG_TIMEOUT:
            return
        time.sleep(0.5)


def run(kind: str, seed: int, length: float, work: Path, out: Path | None = None,
        extended: bool = False, longest: float = nemesis.LONGEST) -> Outcome:
    """Run the workload under the seed's schedule on a store ``kind`` and check its history.

    A failing run writes what replays and explains it to ``out``, when given. An extended run
    (the long run's default) adds subscriptions, delivered by a notifier beside the server to a
    receiver of the run's, and redrive tasks. A fault lasts 1 to ``longest`` seconds.
    """
    began = time.monotonic()
    steps = nemesis.schedule(seed, nemesis.FAULTS[kind], length, longest)
    history = History()
    config = work / "zaqar-lite.conf"
    config.write_text(SERVER_CONFIG)
    clock = nemesis.SteppedClock(work)
    receiver = Receiver(history) if extended else None
    with _store(kind, work) as (uri, store), contextlib.ExitStack() as stack:
        if receiver is not None:
            stack.callback(receiver.close)
        server = start_server(uri, work, workers=2, extra_args=["--config", str(config)]
                              + (["--with-notifier"] if extended else []), env=clock.environment())
        try:
            set_up(server.url)
            if receiver is not None:
                subscribe(server.url, history, receiver)
            faults = Faults(server, store, clock, seed, history)
            workload = Workload(server.url, history, seed, extended=extended)
            workload.start()
            nemesis_thread = threading.Thread(target=faults.run, args=(steps, time.monotonic()), daemon=True)
            nemesis_thread.start()
            nemesis_thread.join(length + longest + 30)
            faults.stopping.set()
            nemesis_thread.join(30)
            workload.stop()
            # a claim made while the clock was ahead lasts that much longer once it is back
            final_read(server.url, history, settle=CLAIM_TTL + CLAIM_GRACE + 3 + nemesis.clock_margin(steps),
                       extended=extended)
            if extended:
                _await_deliveries(history, kind)
            anomalies = check(history.ops, max_claim_count=MAX_CLAIM_COUNT,
                              clock_margin=nemesis.clock_margin(steps),
                              visibility_lag=VISIBILITY_LAG.get(kind, 0.0),
                              clock_markers=kind in CLOCK_MARKERS)
        finally:
            stop_server(server)
        statuses = Counter(str(op.status or "none") for op in history.ops
                           if op.process not in ("nemesis", "webhook"))
        made = [store.namespace, store.host_link] if isinstance(store, nemesis.NamespacedStore) else []
        made += [str(store)] if isinstance(store, Path) else []
        outcome = Outcome(kind, seed, steps, anomalies, len(history.ops), time.monotonic() - began,
                          dict(sorted(statuses.items())), made)
        if anomalies and out is not None:
            _write(outcome, history, server, out / f"{kind}-seed-{seed}")
    return outcome


def _write(outcome: Outcome, history: History, server: RunningServer, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "schedule.json").write_text(json.dumps(
        {"store": outcome.store, "seed": outcome.seed,
         "steps": [dataclasses.asdict(s) for s in outcome.steps]}, indent=1))
    history.dump(directory / "history.jsonl")
    (directory / "anomalies.txt").write_text("".join(f"{a.kind}: {a.detail}\n" for a in outcome.anomalies))
    (directory / "server.log").write_text(server.log())


def _seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        seeds += range(int(first), int(last or first) + 1)
    return seeds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run seeded fault schedules and check their histories.")
    parser.add_argument("--store", choices=sorted(nemesis.FAULTS), required=True)
    parser.add_argument("--seeds", default="0-49", help="seeds: 0-49, or 3,7,12 (default 0-49)")
    parser.add_argument("--seconds", type=float, default=LONG,
                        help=f"seconds of faults a run (default {LONG})")
    parser.add_argument("--longest-fault", type=float, default=nemesis.LONGEST, metavar="SECONDS",
                        help=f"the longest a fault lasts, in seconds (default {nemesis.LONGEST:g})")
    parser.add_argument("--out", type=Path, default=Path("faults-runs"),
                        help="where failing runs write their schedule and history (default faults-runs)")
    parser.add_argument("--without-subscriptions", action="store_true",
                        help="leave the subscriptions and redrive tasks out of the workload (as make test)")
    args = parser.parse_args(argv)
    failed = 0
    for seed in _seeds(args.seeds):
        with tempfile.TemporaryDirectory(prefix="zlf-run-") as work:
            outcome = run(args.store, seed, args.seconds, Path(work), args.out,
                          extended=not args.without_subscriptions, longest=args.longest_fault)
        faults = sorted({s.fault for s in outcome.steps})
        verdict = "valid" if outcome.valid else "INVALID"
        print(f"{args.store} seed {seed}: {verdict}, {len(outcome.steps)} faults ({', '.join(faults)}), "
              f"{outcome.operations} operations {outcome.statuses}, {outcome.seconds:.0f} s", flush=True)
        for anomaly in outcome.anomalies[:10]:
            print(f"    {anomaly.kind}: {anomaly.detail}", flush=True)
        failed += not outcome.valid
    print(f"{failed} of {len(_seeds(args.seeds))} runs found anomalies", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
