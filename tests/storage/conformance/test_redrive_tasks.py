"""The redrive tasks kept in every driver's records; and a task resumed after a crash.

The task primitives (``storage/tasks.py``, ``RedriveTasks(records)``) are
written once over each driver's versioned records: these tests hold every
driver to them, and run the service's task steps on every driver, a server dying between the move of
a batch and the record of its progress included.
"""

from __future__ import annotations

import dataclasses

import pytest

from zaqar_lite import errors
from zaqar_lite.claims import redrive as redrive_policy
from zaqar_lite.models import RedriveFilter, RedriveRequest, RedriveTask
from zaqar_lite.storage import tasks
from zaqar_lite.storage.lease import LeaseLost
from zaqar_lite.storage.tasks import RedriveTasks

P = "project-a"
T0 = 4_102_444_800.0


def task(task_id: str = "11111111-1111-4111-8111-111111111111", queue: str = "dlq", **fields) -> RedriveTask:
    return RedriveTask(id=task_id, queue=queue, status="running", created=T0, **fields)


def ended(redrive_tasks: RedriveTasks, project: str, queue: str, task_id: str,
          status: str = "completed") -> None:
    stored, version = redrive_tasks.get(project, queue, task_id)
    redrive_tasks.update(project, dataclasses.replace(stored, status=status, finished=T0 + 1), version)


@pytest.fixture
def redrive_tasks(driver) -> RedriveTasks:
    """The redrive tasks kept in the driver's records."""
    return RedriveTasks(driver)


def test_a_task_is_stored_and_read_back_whole(redrive_tasks):
    made = task(destination="replay", limit=7, max_per_second=2.5, until_marker=42,
                filter=RedriveFilter(source_queue="src", error_type="E", signature="0123456789ab",
                                     ids=frozenset({"b", "a"})),
                pending=("a", "b"), cursor=3, to_move=5, moved=1)
    redrive_tasks.create(P, made)
    stored, version = redrive_tasks.get(P, "dlq", made.id)
    assert stored == made
    assert version == 1
    assert redrive_tasks.get(P, "other", made.id) is None
    assert redrive_tasks.get("project-b", "dlq", made.id) is None


def test_a_task_is_kept_in_two_records_of_the_store_as_documented(driver, redrive_tasks):
    redrive_tasks.create(P, task())
    value = {"id": "11111111-1111-4111-8111-111111111111", "queue": "dlq", "status": "running",
             "created": T0, "destination": None,
             "filter": {"source_queue": None, "error_type": None, "signature": None, "ids": None},
             "limit": None, "max_per_second": 1.0, "finished": None, "moved": 0, "to_move": None,
             "error": None, "until_marker": None, "cursor": None, "pending": [], "owner": None,
             "lease_expires": 0.0}
    stored = driver.get_record(P, "redrive_task", "dlq/11111111-1111-4111-8111-111111111111")
    assert (stored.value, stored.version) == (value, 1)
    running = driver.get_record(P, "redrive_running", "dlq")
    assert running.value == {"task_id": "11111111-1111-4111-8111-111111111111", "task": value}
    assert driver.record_projects("redrive_running") == [P]


def test_one_task_runs_per_queue_of_a_project(redrive_tasks):
    redrive_tasks.create(P, task("11111111-1111-4111-8111-111111111111"))
    with pytest.raises(errors.RedriveTaskRunning, match="11111111-1111-4111-8111-111111111111"):
        redrive_tasks.create(P, task("22222222-2222-4222-8222-222222222222"))
    assert redrive_tasks.get(P, "dlq", "22222222-2222-4222-8222-222222222222") is None
    redrive_tasks.create(P, task("33333333-3333-4333-8333-333333333333", queue="other"))
    redrive_tasks.create("project-b", task("44444444-4444-4444-8444-444444444444"))


def test_a_task_that_ended_frees_its_queue_even_if_its_runner_did_not_say_so(redrive_tasks):
    redrive_tasks.create(P, task("11111111-1111-4111-8111-111111111111"))
    ended(redrive_tasks, P, "dlq", "11111111-1111-4111-8111-111111111111", "failed")
    redrive_tasks.create(P, task("22222222-2222-4222-8222-222222222222"))
    assert redrive_tasks.running() == [(P, "dlq", "22222222-2222-4222-8222-222222222222")]


def test_a_start_that_stopped_half_way_is_finished_by_the_next_one(driver, redrive_tasks):
    half = task("11111111-1111-4111-8111-111111111111")
    driver.put_record(P, tasks.RUNNING, "dlq", {"task_id": half.id, "task": half.to_record()}, None)
    with pytest.raises(errors.RedriveTaskRunning):
        redrive_tasks.create(P, task("22222222-2222-4222-8222-222222222222"))
    assert redrive_tasks.get(P, "dlq", half.id)[0] == half


def test_a_task_is_updated_by_compare_and_set_only(redrive_tasks):
    made = task()
    redrive_tasks.create(P, made)
    assert redrive_tasks.update(P, dataclasses.replace(made, moved=3), 1) == 2
    with pytest.raises(errors.Conflict):
        redrive_tasks.update(P, dataclasses.replace(made, moved=9), 1)
    assert redrive_tasks.get(P, "dlq", made.id) == (dataclasses.replace(made, moved=3), 2)


def test_tasks_are_listed_per_queue_or_per_project_and_forgotten(redrive_tasks):
    ids = ["11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"]
    redrive_tasks.create(P, task(ids[0]))
    ended(redrive_tasks, P, "dlq", ids[0])
    redrive_tasks.create(P, task(ids[1]))
    redrive_tasks.create(P, task("33333333-3333-4333-8333-333333333333", queue="dlq2"))
    assert [t.id for t in redrive_tasks.of(P, "dlq")] == ids
    assert [(t.queue, t.id) for t in redrive_tasks.of(P)] == [
        ("dlq", ids[0]), ("dlq", ids[1]), ("dlq2", "33333333-3333-4333-8333-333333333333")]
    assert redrive_tasks.of("project-b") == []
    assert redrive_tasks.delete(P, "dlq", ids[0]) is True
    assert redrive_tasks.delete(P, "dlq", ids[0]) is False
    assert [t.id for t in redrive_tasks.of(P, "dlq")] == ids[1:]


def test_the_running_mark_is_released_only_for_its_own_task(redrive_tasks):
    redrive_tasks.create(P, task("11111111-1111-4111-8111-111111111111"))
    redrive_tasks.create("project-b", task("22222222-2222-4222-8222-222222222222", queue="dlq9"))
    redrive_tasks.release_queue(P, "dlq", "99999999-9999-4999-8999-999999999999")
    assert sorted(redrive_tasks.running()) == [
        (P, "dlq", "11111111-1111-4111-8111-111111111111"),
        ("project-b", "dlq9", "22222222-2222-4222-8222-222222222222")]
    redrive_tasks.release_queue(P, "dlq", "11111111-1111-4111-8111-111111111111")
    assert redrive_tasks.running() == [("project-b", "dlq9", "22222222-2222-4222-8222-222222222222")]



def test_a_task_is_leased_on_its_own_record_by_one_server_at_a_time(driver, redrive_tasks, clock):
    redrive_tasks.create(P, task())
    first = redrive_tasks.lease(P, "dlq", "11111111-1111-4111-8111-111111111111", "server-1", 30, clock)
    second = redrive_tasks.lease(P, "dlq", "11111111-1111-4111-8111-111111111111", "server-2", 30, clock)
    assert first.acquire() is True
    assert second.acquire() is False
    stored = driver.get_record(P, "redrive_task", "dlq/11111111-1111-4111-8111-111111111111").value
    assert (stored["owner"], stored["lease_expires"], stored["status"]) == ("server-1", T0 + 30, "running")
    clock.advance(31)
    assert second.acquire() is True
    with pytest.raises(LeaseLost):
        first.write(lambda t: dataclasses.replace(t, moved=1))

# -- the service's task steps on every driver ---------------------------------------

def dead_letters(messaging, clock, count: int) -> list[str]:
    """Post ``count`` messages to ``src`` and dead-letter them into ``dlq`` by one claim each; return ids."""
    messaging.create_queue(P, "dlq", {})
    messaging.create_queue(P, "src", {"_max_claim_count": 1, "_dead_letter_queue": "dlq"})
    ids = messaging.post(P, "src", "client-1", [{"body": n, "ttl": 3600, "delay": None, "dlq_eligible": True}
                                                for n in range(count)], body_size=10)
    claim_id, held, _ = messaging.claim(P, "src", count, 60, 60)
    assert len(held) == count
    messaging.release_claim(P, "src", claim_id)
    assert messaging.claim(P, "src", count, 60, 60)[1] == []  # each one exhausted: dead-lettered
    return ids


def ids_in(messaging, queue: str) -> list[str]:
    found, _ = messaging.list_messages(P, queue, client_id="reader", marker=None, limit=20, echo=True,
                                       include_claimed=True, include_delayed=True)
    return [m.id for m in found]


def test_a_task_killed_between_a_move_and_its_record_resumes_and_moves_each_message_once(
        messaging, other_worker, clock):
    ids = dead_letters(messaging, clock, 5)
    assert ids_in(messaging, "dlq") == ids
    started = messaging.start_redrive_task(P, "dlq", RedriveRequest(limit=0, max_per_second=2, as_task=True))
    crashed = messaging.redrive_task_lease(P, "dlq", started.id, "server-that-dies")
    assert crashed.acquire()
    assert messaging.advance_redrive_task(crashed) == 2  # counts 5, moves 2, records them
    # the next step's batch is recorded as pending and moved, then the server dies
    batch = [(m, "src") for m in messaging.storage.get_messages(P, "dlq", ids[2:4], clock())]
    crashed.write(lambda t: dataclasses.replace(t, pending=tuple(ids[2:4])))
    messaging._move_batch(P, "dlq", batch)
    resumed = other_worker.redrive_task_lease(P, "dlq", started.id, "server-after")
    assert not resumed.acquire()  # the dead server's lease still runs
    clock.advance(31)
    assert resumed.acquire()
    while other_worker.advance_redrive_task(resumed) is not None:
        pass
    done = other_worker.redrive_task(P, "dlq", started.id)
    assert (done.status, done.moved, done.to_move, done.pending) == ("completed", 5, 5, ())
    assert redrive_policy.remaining(done) == 0
    assert ids_in(messaging, "src") == ids
    assert ids_in(messaging, "dlq") == []
    assert messaging.running_redrive_tasks() == []


def test_a_cancelled_task_stops_before_its_next_batch_on_every_driver(messaging, clock):
    ids = dead_letters(messaging, clock, 3)
    started = messaging.start_redrive_task(P, "dlq", RedriveRequest(limit=0, max_per_second=1, as_task=True))
    lease = messaging.redrive_task_lease(P, "dlq", started.id, "server-1")
    assert lease.acquire()
    assert messaging.advance_redrive_task(lease) == 1
    assert messaging.cancel_redrive_task(P, "dlq", started.id).status == "cancelled"
    assert messaging.advance_redrive_task(lease) is None
    stored = messaging.redrive_task(P, "dlq", started.id)
    assert (stored.status, stored.moved, stored.owner) == ("cancelled", 1, None)
    assert ids_in(messaging, "dlq") == ids[1:]
    with pytest.raises(errors.RedriveTaskFinished):
        messaging.cancel_redrive_task(P, "dlq", started.id)

