"""The waiting room: who a wake-up wakes, wake-ups during an attempt, due times, deadlines (real threads)."""

from __future__ import annotations

import threading
import time

from zaqar_lite.service.waiting.room import WaitingRoom, Woken


def sleep_in_thread(room: WaitingRoom, queue: str, seconds: float, results: list[tuple[str, Woken]],
                    name: str, entered: threading.Event) -> threading.Thread:
    """Start a thread that takes a place in ``queue``'s line and sleeps there up to ``seconds``."""
    def run() -> None:
        with room.place("p", queue) as place:
            seen = place.generation
            entered.set()
            results.append((name, place.sleep(seen, time.monotonic() + seconds)))
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def wait_for_sleepers(room: WaitingRoom, queue: str, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(room.lines[("p", queue)].sleepers) < count:
        assert time.monotonic() < deadline, "the places never went to sleep"
        time.sleep(0.01)


def test_a_wake_up_wakes_the_claim_asleep_longest_and_no_other():
    room, results = WaitingRoom(), []
    first = sleep_in_thread(room, "q", 3, results, "first", threading.Event())
    wait_for_sleepers(room, "q", 1)
    second = sleep_in_thread(room, "q", 1, results, "second", threading.Event())
    wait_for_sleepers(room, "q", 2)
    room.wake("p", "q")
    first.join(2)
    assert results == [("first", Woken.WAKE_UP)]
    second.join(3)
    assert results == [("first", Woken.WAKE_UP), ("second", Woken.DEADLINE)]


def test_a_wake_up_of_another_queue_wakes_nobody_here():
    room, results = WaitingRoom(), []
    thread = sleep_in_thread(room, "q", 0.5, results, "only", threading.Event())
    wait_for_sleepers(room, "q", 1)
    room.wake("p", "other")
    room.wake("other-project", "q")
    thread.join(3)
    assert results == [("only", Woken.DEADLINE)]


def test_a_wake_up_while_the_claim_was_trying_ends_its_sleep_at_once():
    room = WaitingRoom()
    with room.place("p", "q") as place:
        seen = place.generation
        room.wake("p", "q")  # arrives between the claim attempt and the sleep
        started = time.monotonic()
        assert place.sleep(seen, time.monotonic() + 5) is Woken.WAKE_UP
        assert time.monotonic() - started < 0.5


def test_only_the_first_sleeper_wakes_at_the_due_time():
    room, results = WaitingRoom(), []
    first = sleep_in_thread(room, "q", 3, results, "first", threading.Event())
    wait_for_sleepers(room, "q", 1)
    second = sleep_in_thread(room, "q", 1.5, results, "second", threading.Event())
    wait_for_sleepers(room, "q", 2)
    with room.place("p", "q") as place:
        place.expect(time.monotonic() + 0.3)
    first.join(2)
    assert results == [("first", Woken.DUE)]
    second.join(3)
    assert results == [("first", Woken.DUE), ("second", Woken.DEADLINE)]


def test_the_line_keeps_the_earliest_due_time_it_is_told():
    room = WaitingRoom()
    with room.place("p", "q") as place:
        place.expect(100.0)
        place.expect(50.0)
        place.expect(70.0)
        assert room.lines[("p", "q")].due == 50.0


def test_a_line_goes_when_its_last_claim_leaves():
    room = WaitingRoom()
    with room.place("p", "q"), room.place("p", "q"):
        assert room.waiting() == 2
    assert room.lines == {}
    assert room.waiting() == 0
