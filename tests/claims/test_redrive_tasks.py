"""How a redrive task's record changes (claims/redrive.py): counts, progress, a crash settled, the end."""

from __future__ import annotations

import pytest

from zaqar_lite import errors
from zaqar_lite.claims import redrive
from zaqar_lite.models import RedriveTask

NOW = 1_700_000_000.0


def task(status: str = "running", **fields) -> RedriveTask:
    return RedriveTask(id="t1", queue="orders-dlq", status=status, created=NOW - 60, **fields)


def test_nothing_remains_uncounted_until_the_task_counted():
    assert redrive.remaining(task()) is None
    assert redrive.remaining(task(to_move=10, moved=4)) == 6


def test_a_completed_task_has_nothing_remaining_and_a_cancelled_one_what_it_left():
    assert redrive.remaining(task("completed", to_move=10, moved=7)) == 0
    assert redrive.remaining(task("cancelled", to_move=10, moved=7)) == 3
    assert redrive.remaining(task("failed", to_move=10, moved=12)) == 0


def test_the_count_is_capped_by_the_limit():
    assert redrive.counted(task(), 40).to_move == 40
    assert redrive.counted(task(limit=25), 40).to_move == 25
    assert redrive.counted(task(limit=25), 3).to_move == 3


def test_what_is_left_to_move_under_a_limit():
    assert redrive.left_to_move(task()) is None
    assert redrive.left_to_move(task(limit=25, moved=20)) == 5
    assert redrive.left_to_move(task(limit=25, moved=25)) == 0


def test_progress_adds_the_moved_and_sets_the_cursor_and_the_next_batch():
    after = redrive.progressed(task(moved=5, pending=("a", "b")), 2, 17, ["c"])
    assert (after.moved, after.cursor, after.pending) == (7, 17, ("c",))


def test_a_pending_batch_settled_after_a_crash_counts_what_left_the_queue():
    settled = redrive.reconciled(task(moved=10, pending=("a", "b", "c")), ["b"])
    assert (settled.moved, settled.pending) == (12, ())


def test_a_running_task_ends_once_and_an_ended_one_is_kept():
    done = redrive.ended(task(), "completed", NOW)
    assert (done.status, done.finished, done.error) == ("completed", NOW, None)
    assert redrive.ended(done, "failed", NOW + 5, "boom") == done
    failed = redrive.ended(task(), "failed", NOW, "RuntimeError: boom")
    assert (failed.status, failed.error) == ("failed", "RuntimeError: boom")


def test_only_a_running_task_is_cancelled():
    assert redrive.cancelled(task(), NOW).status == "cancelled"
    with pytest.raises(errors.RedriveTaskFinished, match="t1 is completed"):
        redrive.cancelled(task("completed"), NOW)


def test_the_ended_tasks_beyond_those_kept_are_forgotten_oldest_first():
    tasks = [RedriveTask(id=f"t{n}", queue="q", status="completed", created=NOW + n) for n in range(4)]
    tasks.append(RedriveTask(id="live", queue="q", status="running", created=NOW - 100))
    assert [t.id for t in redrive.forgotten(tasks, 2)] == ["t1", "t0"]
    assert redrive.forgotten(tasks, 10) == []


@pytest.mark.parametrize(("rate", "size"), [(None, 100), (0.5, 1), (2, 2), (2.9, 2), (500, 100)])
def test_a_batch_is_at_most_one_seconds_worth_and_at_most_a_hundred(rate, size):
    assert redrive.batch_size(rate) == size
