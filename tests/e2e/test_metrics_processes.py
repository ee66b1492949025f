"""``GET /metrics`` of a real gunicorn server: every worker's counts, across worker deaths and restarts.

The server gives its processes a fresh prometheus-client multiprocess
directory at each start (``PROMETHEUS_MULTIPROC_DIR``, made in its ``TMPDIR``)
and removes it at stop (the master alone: a worker's exit leaves it to the
others). Each test runs its servers with a ``TMPDIR`` of its own, so the one
``zaqar-lite-metrics-*`` directory there is the running server's: never one a
killed server left in a shared ``/tmp``, whose worker pids may have been reused.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.harness import ApiSession, RunningServer, stop_server

pytestmark = pytest.mark.store_independent

WAIT = 30.0


@pytest.fixture
def server_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``TMPDIR`` of the test's own for its servers (a short path: their unix sockets live there too,
    and a socket's path holds at most 107 bytes)."""
    return tmp_path_factory.mktemp("tmp")


def metrics_directory(server_tmp: Path) -> Path:
    """Return the multiprocess directory of the one server running with ``TMPDIR`` ``server_tmp``."""
    found = list(server_tmp.glob("zaqar-lite-metrics-*"))
    assert len(found) == 1, f"not one metrics directory in {server_tmp}: {found}"
    return found[0]


def posts_counted_in(path: Path) -> float:
    """Return the posts one worker's counter file holds (0 when it has none, or no file)."""
    if not path.exists():
        return 0.0
    return sum(value for key, value, *_ in MmapedDict.read_all_values_from_file(str(path))
               if "zaqar_lite_messages_posted" in key)


def posted_total(session: ApiSession) -> float:
    """Return ``zaqar_lite_messages_posted_total`` as the worker answering ``session`` reports it."""
    for family in text_string_to_metric_families(session.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "zaqar_lite_messages_posted_total":
                return sample.value
    raise AssertionError("no zaqar_lite_messages_posted_total")


def await_replacements(server: RunningServer, gone: set[int], workers: int, directory: Path) -> None:
    """Wait until none of the workers ``gone`` lives, gunicorn runs ``workers`` again, and each
    has its counter file in ``directory`` (made as it loads the app): the replacements count
    into the directory of the workers they replace, and are booted when the test stops them.
    """
    deadline = time.monotonic() + WAIT
    while True:
        pids = server.worker_pids()
        if not pids & gone and len(pids) >= workers and all(
                (directory / f"counter_{pid}.db").exists() for pid in pids):
            return
        assert time.monotonic() < deadline, f"gunicorn did not replace its workers {sorted(gone)}"
        time.sleep(0.1)


def posted_total_once_up(server: RunningServer) -> float:
    """Return :func:`posted_total` as soon as a worker answers (new workers may still be booting)."""
    deadline = time.monotonic() + WAIT
    with ApiSession(server.url, project="p") as session:
        while True:
            try:
                return posted_total(session)
            except Exception:  # noqa: BLE001 - the new workers may still be booting
                assert time.monotonic() < deadline
                time.sleep(0.2)


def post(session: ApiSession, count: int) -> None:
    """Post ``count`` messages to queue ``jobs``, one request."""
    answer = session.post("/v2/queues/jobs/messages", json={"messages": [{"body": n} for n in range(count)]})
    assert answer.status_code == 201, answer.text


def test_every_worker_reports_the_counts_of_all_and_a_killed_workers_counts_stay(
        store, start_server_for_test, tmp_path, server_tmp):
    server = start_server_for_test(store.uri(tmp_path / "data"), workers=2, temp_dir=server_tmp)
    directory = metrics_directory(server_tmp)
    assert directory.is_dir() and directory.name.startswith("zaqar-lite-metrics-")
    # connections held open at once, until both workers have counted some posts (the accept
    # balance spreads them, but a loaded machine may hand several to one worker)
    killed = server.worker_pids()
    counted = 0
    sessions: list[ApiSession] = []
    try:
        while sum(1 for pid in killed if posts_counted_in(directory / f"counter_{pid}.db")) < 2:
            assert len(sessions) < 20, "the posts never reached both workers"
            sessions.append(ApiSession(server.url, project="p"))
            post(sessions[-1], 1 + len(sessions) % 3)
            counted += 1 + len(sessions) % 3
        assert {posted_total(session) for session in sessions} == {float(counted)}
    finally:
        for session in sessions:
            session.close()
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    await_replacements(server, killed, 2, directory)
    assert posted_total_once_up(server) == float(counted)
    stop_server(server)
    assert not directory.exists(), "the multiprocess directory outlived the server"


def test_a_restarted_server_counts_from_zero(store, start_server_for_test, tmp_path, server_tmp):
    uri = store.uri(tmp_path / "data")
    first = start_server_for_test(uri, workers=1, temp_dir=server_tmp)
    with ApiSession(first.url, project="p") as session:
        post(session, 2)
        assert posted_total(session) == 2.0
    old_directory = metrics_directory(server_tmp)
    stop_server(first)
    assert not old_directory.exists()
    second = start_server_for_test(uri, workers=1, temp_dir=server_tmp)
    assert metrics_directory(server_tmp) != old_directory
    with ApiSession(second.url, project="p") as session:
        assert posted_total(session) == 0.0
        post(session, 1)
        assert posted_total(session) == 1.0


def test_a_worker_that_exits_gracefully_leaves_the_directory_and_the_counts_to_the_others(
        store, start_server_for_test, tmp_path, server_tmp):
    # a worker is a fork of the master inside the block that owns the directory: its exit
    # must not remove the directory the other workers (and its replacement) count into
    server = start_server_for_test(store.uri(tmp_path / "data"), workers=2, temp_dir=server_tmp)
    with ApiSession(server.url, project="p") as session:
        post(session, 3)
    directory = metrics_directory(server_tmp)
    stopped = min(server.worker_pids())
    os.kill(stopped, signal.SIGTERM)
    await_replacements(server, {stopped}, 2, directory)
    assert directory.is_dir()
    assert posted_total_once_up(server) == 3.0


def first_scrape(server: RunningServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Return every sample of the server's first ``/metrics`` answer as {(name, sorted labels): value}."""
    with ApiSession(server.url, project="p") as session:
        text = session.get("/metrics").text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_a_fresh_server_shows_its_error_and_notifier_series_at_zero(
        store, start_server_for_test, tmp_path, server_tmp):
    # alert rules (rate(), increase()) and dashboards need a series before its first event
    server = start_server_for_test(store.uri(tmp_path / "data"), workers=2, temp_dir=server_tmp)
    samples = first_scrape(server)
    assert samples[("zaqar_lite_storage_errors_total", (("driver", store.name),))] == 0.0
    for reason in ("expired", "max_claims", "expired_or_max_claims", "rejected"):
        others = (("dead_letter_queue", "(other)"), ("project", "(other)"), ("queue", "(other)"))
        assert samples[("zaqar_lite_messages_dead_lettered_total", (*others, ("reason", reason)))] == 0.0
    for scheme in ("http", "https", "mailto", "trust+http", "trust+https", "other"):
        for name in ("zaqar_lite_notifier_deliveries_total", "zaqar_lite_notifier_delivery_failures_total",
                     "zaqar_lite_notifier_suspensions_total"):
            assert samples[(name, (("scheme", scheme),))] == 0.0, (name, scheme)
