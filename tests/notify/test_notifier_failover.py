"""Notifier processes dying, restarting and running side by side: nothing lost, reordered or doubled up."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import start_server, stop_server
from tests.notify.conftest import PATIENT, wait_until
from tests.notify.streams import acknowledged_numbers, check_stream, post_numbered
from zaqar_lite.notify import state
from zaqar_lite.storage import open_storage


def subscribe(api, queue: str, url: str) -> str:
    result = api.post(f"/v2/queues/{queue}/subscriptions",
                      json={"subscriber": url, "options": {"_retry_policy": PATIENT}})
    assert result.status_code == 201, result.text
    return result.json()["subscription_id"]


def children(pid: int) -> set[int]:
    """Return the live child processes of a process."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


class OwnerWatch:
    """Records, in a thread, every notifier seen holding a lease of a project's subscriptions."""

    def __init__(self, storage_uri: str, project: str) -> None:
        self.storage = open_storage(storage_uri)
        self.project = project
        self.owners: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            for record in self.storage.list_records(self.project, state.DELIVERY):
                if record.value.get("owner"):
                    self.owners.add(record.value["owner"])

    def __enter__(self) -> OwnerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.storage.close()


@pytest.mark.slow
def test_kill_9_of_the_notifier_mid_stream_then_a_restart_delivers_everything_in_order(
        api, receiver, notifiers):
    receiver.behave("stream", delay=0.01)
    subscribe(api, "stream", receiver.url("stream"))
    post_numbered(api, "stream", 200)
    first = notifiers.start()
    wait_until(lambda: len(receiver.acknowledged("stream")) >= 50, 30, "50 deliveries")
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    stopped_at = len(receiver.acknowledged("stream"))
    assert stopped_at < 200
    notifiers.start()
    wait_until(lambda: len(acknowledged_numbers(receiver.deliveries("stream"))) == 200, 40,
               "every message after the restart")
    assert check_stream(receiver.deliveries("stream"), 200) <= 1
    assert receiver.overlaps == []


@pytest.mark.slow
def test_two_notifiers_share_the_subscriptions_and_never_serve_one_twice_at_once(
        api, receiver, notifiers, storage_uri):
    # Twelve subscriptions: rendezvous hashing hands them all to one of two
    # notifiers with probability 2 ** -11, so both get a share.
    queues = ["q0", "q1", "q2", "q3"]
    paths = [f"{queue}-{n}" for queue in queues for n in range(3)]
    for path in paths:
        receiver.behave(path, delay=0.005, fail_rate=0.1)
        subscribe(api, path.split("-")[0], receiver.url(path))
    with OwnerWatch(storage_uri, api.headers["X-Project-ID"]) as watch:
        notifiers.start()
        notifiers.start()
        for queue in queues:
            post_numbered(api, queue, 40)
        wait_until(lambda: all(len(acknowledged_numbers(receiver.deliveries(p))) == 40 for p in paths), 60,
                   "40 deliveries on every subscription")
        # A notifier learns of one started after it at its next heartbeat and
        # then hands over the subscriptions hashing gives to the newcomer; the
        # deliveries may all be done before that, so wait for the handover.
        wait_until(lambda: len(watch.owners) == 2, 20, "both notifiers to hold leases")
    assert receiver.overlaps == []
    for path in paths:
        check_stream(receiver.deliveries(path), 40)


@pytest.mark.slow
def test_a_pool_restarts_a_killed_child_and_stops_all_children_on_sigterm(api, receiver, notifiers):
    receiver.behave("pool", delay=0.01)
    subscribe(api, "pool", receiver.url("pool"))
    pool = notifiers.start("--workers", "2")
    wait_until(lambda: len(children(pool.pid)) >= 2, 20, "two notifier children")
    post_numbered(api, "pool", 150)
    wait_until(lambda: len(receiver.acknowledged("pool")) >= 30, 30, "30 deliveries")
    before = children(pool.pid)
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: len(children(pool.pid) - before) >= 2, 20, "two new children")
    wait_until(lambda: len(acknowledged_numbers(receiver.deliveries("pool"))) == 150, 40, "every message")
    assert check_stream(receiver.deliveries("pool"), 150) <= 1
    assert receiver.overlaps == []
    survivors = children(pool.pid) - before
    pool.send_signal(signal.SIGTERM)
    assert pool.wait(20) == 0
    assert not any(alive(pid) for pid in survivors)


@pytest.fixture
def server_with_notifier(storage_uri: str, tmp_path: Path) -> Iterator:
    running = start_server(storage_uri, tmp_path, workers=1, extra_args=["--with-notifier"])
    yield running
    stop_server(running)


def test_serve_with_notifier_delivers_and_stops_its_notifier_with_the_server(server_with_notifier, receiver):
    from tests.e2e.harness import ApiSession

    with ApiSession(server_with_notifier.url, project="with-notifier") as api:
        subscribe(api, "side", receiver.url("side"))
        post_numbered(api, "side", 5)
        wait_until(lambda: len(receiver.acknowledged("side")) == 5, 20, "five deliveries")
    check_stream(receiver.deliveries("side"), 5)
    processes = children(server_with_notifier.pid)
    # the gunicorn worker, the notifier and multiprocessing's resource tracker
    assert len(processes) >= 2
    assert stop_server(server_with_notifier) == 0
    wait_until(lambda: not any(alive(pid) for pid in processes), 10, "every child process to end")
