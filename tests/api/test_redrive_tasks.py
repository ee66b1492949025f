"""Redrive tasks (``"async": true``): start, list, read, cancel, every 4xx, and the runner moving them.

The app under test runs no runner thread; each test drives a
:class:`~zaqar_lite.server.redrive_runner.RedriveRunner` over the same store (as a
server's runner thread would), step by step.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from tests.api.helpers import assert_error, claim, headers
from tests.api.test_redrive import dead_letter, listed, redrive
from zaqar_lite import errors
from zaqar_lite.server.redrive_runner import RedriveRunner
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage

TASK_FIELDS = {"id", "href", "queue", "status", "destination", "filter", "limit", "max_per_second",
               "moved", "remaining", "started", "finished", "error"}


@pytest.fixture
def worker(settings, clock):
    """The messaging service of a server's runner, on the same store and clock as the app."""
    storage = open_storage(settings.storage_uri)
    yield Messaging(storage, settings, clock)
    storage.close()


@pytest.fixture
def runner(worker):
    return RedriveRunner(worker, interval=0.0, owner="runner-1")


def start(client, queue="dlq", **body):
    return redrive(client, queue=queue, body={"async": True, **body})


def task_of(client, started):
    response = client.simulate_get(started.headers["location"])
    assert response.status_code == 200, response.text
    return response.json


def run_until_ended(runner, worker, steps=200):
    """Step the runner (waiting as its rates say) until no task is running; return the steps taken."""
    for taken in range(steps):
        wait = runner.step()
        if not runner.held and not worker.running_redrive_tasks():
            return taken + 1
        time.sleep(min(wait, 0.05))
    raise AssertionError("the redrive tasks did not end")


def test_an_async_redrive_answers_202_with_the_task_and_its_location(client):
    dead_letter(client, 1, 2, 3)
    response = start(client)
    assert response.status_code == 202
    task = response.json
    assert set(task) == TASK_FIELDS
    assert response.headers["location"] == f"/v2/queues/dlq/redrive/tasks/{task['id']}"
    assert task["href"] == response.headers["location"]
    assert (task["queue"], task["status"], task["moved"], task["remaining"]) == ("dlq", "running", 0, None)
    assert (task["destination"], task["filter"], task["limit"], task["error"]) == (None, {}, None, None)
    assert task["max_per_second"] == 500.0
    assert task["started"] == "2100-01-01T00:00:00Z"
    assert task["finished"] is None
    assert len(listed(client, "dlq")) == 3  # nothing moves until a runner takes it


def test_the_runner_completes_the_task_moving_every_dead_letter_once(client, runner, worker, clock):
    ids = dead_letter(client, 1, 2, 3, 4, 5)
    started = start(client)
    clock.advance(7)
    run_until_ended(runner, worker)
    task = task_of(client, started)
    assert (task["status"], task["moved"], task["remaining"], task["error"]) == ("completed", 5, 0, None)
    assert task["finished"] == "2100-01-01T00:00:07Z"
    assert [m["id"] for m in listed(client, "src")] == ids
    assert listed(client, "dlq") == []


def test_the_rate_caps_each_batch_and_progress_shows_moved_and_remaining(client, worker):
    # the runner's time stands still, however long a store takes to move a batch
    runner = RedriveRunner(worker, interval=0.0, owner="runner-1", monotonic=lambda: 1000.0)
    dead_letter(client, *range(5))
    started = start(client, max_per_second=2)
    runner.step()
    task = task_of(client, started)
    assert (task["status"], task["moved"], task["remaining"]) == ("running", 2, 3)
    assert task["max_per_second"] == 2.0
    assert len(listed(client, "src")) == 2
    runner.step()  # the rate allows the next batch one second after the first
    assert task_of(client, started)["moved"] == 2


def test_filter_destination_and_limit_are_the_tasks(client, runner, worker):
    timeouts = dead_letter(client, "a", "b", "c", error_type="TimeoutError", error="slow")
    dead_letter(client, "d", error_type="KeyError", error="sku")
    started = start(client, destination="replay", create_destination=True, limit=2,
                    filter={"error_type": "TimeoutError"})
    run_until_ended(runner, worker)
    task = task_of(client, started)
    assert (task["status"], task["moved"], task["remaining"]) == ("completed", 2, 0)
    assert (task["destination"], task["limit"]) == ("replay", 2)
    assert task["filter"] == {"error_type": "TimeoutError"}
    assert [m["id"] for m in listed(client, "replay")] == timeouts[:2]
    assert len(listed(client, "dlq")) == 2


def test_a_limit_above_the_blocking_maximum_is_a_tasks_right(client):
    dead_letter(client, 1)
    assert start(client, limit=5000).json["limit"] == 5000
    assert "limit must be at most 1000, got 5000." in assert_error(
        redrive(client, body={"limit": 5000}), 400)["description"]


def test_dead_letters_that_arrive_after_the_start_are_left_for_the_next_task(client, runner, worker):
    first = dead_letter(client, 1, 2)
    started = start(client)
    later = dead_letter(client, 3)
    run_until_ended(runner, worker)
    assert task_of(client, started)["moved"] == 2
    assert [m["id"] for m in listed(client, "src")] == first
    assert [m["id"] for m in listed(client, "dlq")] == later


def test_claimed_dead_letters_are_skipped_by_a_task(client, runner, worker):
    held, free = dead_letter(client, 1, 2)
    claim(client, "dlq", limit=1)
    started = start(client)
    run_until_ended(runner, worker)
    assert task_of(client, started)["moved"] == 1
    assert [m["id"] for m in listed(client, "src")] == [free]


def test_one_task_runs_per_queue_and_a_second_start_is_409(client, runner, worker):
    dead_letter(client, 1)
    first = start(client).json
    error = assert_error(start(client), 409, "Resource conflict")
    assert first["id"] in error["description"]
    assert start(client, queue="src").status_code == 202  # another queue is free
    run_until_ended(runner, worker)
    assert start(client).status_code == 202  # the first ended: the queue is free again


def test_a_running_task_is_cancelled_and_moves_nothing_more(client, worker, clock):
    elapsed = [0.0]  # the runner's time, moved by the test
    runner = RedriveRunner(worker, interval=0.0, owner="runner-1", monotonic=lambda: elapsed[0])
    dead_letter(client, *range(4))
    started = start(client, max_per_second=1)
    runner.step()
    clock.advance(3)
    response = client.simulate_post(started.headers["location"] + "/cancel")
    assert response.status_code == 200
    cancelled = response.json
    assert (cancelled["status"], cancelled["moved"], cancelled["remaining"]) == ("cancelled", 1, 3)
    assert response.json["finished"] == "2100-01-01T00:00:03Z"
    elapsed[0] += 1.1  # the rate would allow the next batch
    run_until_ended(runner, worker)
    assert task_of(client, started)["moved"] == 1
    assert len(listed(client, "dlq")) == 3
    assert start(client).status_code == 202  # a cancelled task frees its queue at once


def test_only_a_running_task_can_be_cancelled(client, runner, worker):
    dead_letter(client, 1)
    started = start(client)
    run_until_ended(runner, worker)
    error = assert_error(client.simulate_post(started.headers["location"] + "/cancel"), 409)
    assert "is completed; only a running task can be cancelled" in error["description"]


def test_a_cancel_whose_write_landed_though_the_store_answered_conflict_is_a_cancel(
        store_client, storage, monkeypatch):
    # Swift's compare-and-set: a writer slower than its settle time is told Conflict
    # although its value may be the one left (storage/swift/records.py)
    dead_letter(store_client, 1, 2)
    started = start(store_client, max_per_second=0.01)
    write = storage.put_record

    def landed_but_conflict(project, kind, key, value, *args, **kwargs):
        version = write(project, kind, key, value, *args, **kwargs)
        if value.get("status") == "cancelled":
            monkeypatch.setattr(storage, "put_record", write)
            raise errors.Conflict(f"{kind} {key} was changed by someone else; read it again.")
        return version

    monkeypatch.setattr(storage, "put_record", landed_but_conflict)
    response = store_client.simulate_post(started.headers["location"] + "/cancel")
    assert response.status_code == 200, response.text
    assert response.json["status"] == "cancelled"
    assert start(store_client).status_code == 202  # the queue was freed too


def test_tasks_are_listed_newest_first_per_queue(client, runner, worker, clock):
    dead_letter(client, 1)
    first = start(client).json
    run_until_ended(runner, worker)
    clock.advance(1)
    second = start(client).json
    start(client, queue="src")
    tasks = client.simulate_get("/v2/queues/dlq/redrive/tasks").json["tasks"]
    assert [(t["id"], t["status"]) for t in tasks] == [(second["id"], "running"), (first["id"], "completed")]
    assert all(set(t) == TASK_FIELDS for t in tasks)


def test_the_projects_tasks_of_every_queue_are_listed_newest_first(client, project_b, clock):
    dead_letter(client, 1)
    on_dlq = start(client).json
    clock.advance(1)
    on_src = start(client, queue="src").json
    tasks = client.simulate_get("/v2/redrive/tasks").json["tasks"]
    assert [(t["queue"], t["id"]) for t in tasks] == [("src", on_src["id"]), ("dlq", on_dlq["id"])]
    assert project_b.simulate_get("/v2/redrive/tasks").json == {"tasks": [], "links": []}


def test_the_projects_tasks_are_paged_by_marker_and_limit_following_next_links(client, clock):
    dead_letter(client, 1)
    started = []
    for n in range(7):
        queue = ("dlq", "src")[n % 2]
        task = start(client, queue=queue).json
        started.append(task["id"])
        cancelled = client.simulate_post(f"/v2/queues/{queue}/redrive/tasks/{task['id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        clock.advance(1)
    pages, url = [], "/v2/redrive/tasks?limit=3"
    while True:
        path, _, query = url.partition("?")
        body = client.simulate_get(path, query_string=query).json
        pages.append([task["id"] for task in body["tasks"]])
        if not body["tasks"]:
            assert body["links"] == []
            break
        [link] = body["links"]
        assert link["rel"] == "next"
        url = link["href"]
    assert pages == [started[6:3:-1], started[3:0:-1], started[0:1], []]
    first = client.simulate_get("/v2/redrive/tasks").json["tasks"]
    assert [task["id"] for task in first] == started[::-1]  # default_page_size (10) holds all 7


@pytest.mark.parametrize("query", ["marker=nope", "marker=12-", "marker=-abc", "limit=0", "limit=21",
                                   "limit=x"])
def test_a_malformed_page_of_the_projects_tasks_is_400(client, query):
    assert_error(client.simulate_get("/v2/redrive/tasks", query_string=query), 400)


def test_a_queue_without_tasks_lists_none(client):
    assert client.simulate_get("/v2/queues/never/redrive/tasks").json == {"tasks": []}


def test_only_the_most_recent_ended_tasks_are_kept(make_client, settings, worker, clock):
    limits = dataclasses.replace(settings.limits, redrive_tasks_kept=2)
    client = make_client(headers("project-a"), limits=limits)
    runner = RedriveRunner(worker, interval=0.0)
    client.simulate_put("/v2/queues/dlq")
    made = []
    for _ in range(4):
        made.append(start(client).json["id"])
        run_until_ended(runner, worker)
        clock.advance(1)
    last = start(client).json["id"]
    listed_ids = [t["id"] for t in client.simulate_get("/v2/queues/dlq/redrive/tasks").json["tasks"]]
    assert listed_ids == [last, made[3], made[2]]
    assert_error(client.simulate_get(f"/v2/queues/dlq/redrive/tasks/{made[0]}"), 404)


def test_another_project_sees_no_task_of_this_one(client, project_b):
    dead_letter(client, 1)
    started = start(client)
    assert project_b.simulate_get("/v2/queues/dlq/redrive/tasks").json == {"tasks": []}
    assert_error(project_b.simulate_get(started.headers["location"]), 404, "Not found")
    assert_error(project_b.simulate_post(started.headers["location"] + "/cancel"), 404, "Not found")
    assert project_b.simulate_put("/v2/queues/dlq").status_code == 201
    assert start(project_b).status_code == 202  # its own dlq is free


def test_a_task_on_a_queue_that_does_not_exist_is_404(client):
    error = assert_error(start(client, queue="nowhere"), 404, "Not found")
    assert "Queue nowhere does not exist" in error["description"]


@pytest.mark.parametrize("task_id", ["4b0f1c9e-5a34-4f5e-9d51-0c8a1b2c3d4e", "not-a-task-id"])
def test_an_unknown_task_is_404_to_read_and_to_cancel(client, task_id):
    client.simulate_put("/v2/queues/dlq")
    path = f"/v2/queues/dlq/redrive/tasks/{task_id}"
    assert f"Redrive task {task_id} does not exist on queue dlq" in assert_error(
        client.simulate_get(path), 404, "Not found")["description"]
    assert_error(client.simulate_post(path + "/cancel"), 404, "Not found")


def test_a_task_is_read_on_its_own_queue_only(client):
    dead_letter(client, 1)
    task_id = start(client).json["id"]
    assert_error(client.simulate_get(f"/v2/queues/src/redrive/tasks/{task_id}"), 404)


@pytest.mark.parametrize("body, fragment", [
    ({"async": "yes"}, "async must be true or false, got a string."),
    ({"async": 1}, "async must be true or false, got 1."),
    ({"async": True, "dry_run": True}, "dry_run and async exclude each other"),
    ({"async": True, "max_per_second": 501}, "max_per_second may be at most 500 (max_redrive_rate)"),
    ({"async": True, "max_per_second": 0}, "max_per_second must be more than 0, got 0."),
    ({"async": True, "limit": 0}, "limit must be at least 1, got 0."),
    ({"async": True, "limit": 2**63}, "must fit in 64 bits"),
    ({"async": True, "destination": "dlq"}, "destination cannot be the queue redriven from (dlq)"),
    ({"async": True, "filter": {"signature": "xyz"}}, "filter.signature"),
])
def test_each_bad_async_body_is_400_naming_the_field(client, body, fragment):
    dead_letter(client, 1)
    error = assert_error(redrive(client, body=body), 400)
    assert fragment in error["description"]
    assert client.simulate_get("/v2/queues/dlq/redrive/tasks").json == {"tasks": []}


def test_the_server_maximum_rate_is_configurable_and_is_the_default(make_client, settings):
    limits = dataclasses.replace(settings.limits, max_redrive_rate=20)
    client = make_client(headers("project-a"), limits=limits)
    client.simulate_put("/v2/queues/dlq")
    assert start(client).json["max_per_second"] == 20.0
    assert "at most 20 (max_redrive_rate)" in assert_error(
        start(client, queue="other", max_per_second=21), 400)["description"]


def test_a_bad_queue_name_in_a_task_path_is_400(client):
    assert_error(client.simulate_get("/v2/queues/bad%20name/redrive/tasks"), 400, "Invalid API request")


def test_a_task_that_cannot_go_on_is_failed_with_its_error(client, settings, clock):
    class BrokenMoves(Messaging):
        def _move_batch(self, project, queue, batch):
            raise RuntimeError("disk on fire")

    storage = open_storage(settings.storage_uri)
    broken = BrokenMoves(storage, settings, clock)
    dead_letter(client, 1)
    started = start(client)
    run_until_ended(RedriveRunner(broken, interval=0.0), broken)
    task = task_of(client, started)
    assert (task["status"], task["error"], task["moved"]) == ("failed", "RuntimeError: disk on fire", 0)
    assert task["finished"] == "2100-01-01T00:00:00Z"
    assert start(client).status_code == 202  # a failed task frees its queue
    storage.close()


def test_the_task_routes_are_in_the_json_home_document(client):
    resources = client.simulate_get("/v2").json["resources"]
    assert resources["rel/queue_redrive_tasks"]["href-template"] == "/v2/queues/{queue_name}/redrive/tasks"
    assert resources["rel/queue_redrive_task_cancel"]["hints"]["allow"] == ["POST"]



def test_a_task_to_a_destination_that_does_not_exist_is_refused_unless_asked_to_create_it(client):
    dead_letter(client, "a", error_type="TimeoutError", error="slow")
    refused = assert_error(start(client, destination="replay"), 400)
    assert refused["description"] == ('destination queue replay does not exist in this project; create it '
                                      'first, or send "create_destination": true.')
    assert client.simulate_get("/v2/queues/dlq/redrive/tasks").json["tasks"] == []
    assert start(client, destination="replay", create_destination=True).status_code == 202
