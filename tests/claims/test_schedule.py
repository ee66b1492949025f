"""Long schedules (zaqar_lite.claims.schedule): deliver_at's forms and range, the default ttl."""

from __future__ import annotations

import pytest

from zaqar_lite.claims import schedule
from zaqar_lite.errors import ValidationFailed

AT = "messages[0].deliver_at"


@pytest.mark.parametrize(("value", "seconds"), [
    ("2026-11-29T08:00:00Z", 1795939200.0),
    ("2026-11-29T08:00:00+00:00", 1795939200.0),
    ("2026-11-29T09:30:00+01:30", 1795939200.0),
    ("2026-11-29T08:00:00.250Z", 1795939200.25),
    ("2026-11-29 08:00:00Z", 1795939200.0),
    ("2026-11-29t08:00:00z", 1795939200.0),
    (1795939200, 1795939200.0),
    (1795939200.5, 1795939200.5),
])
def test_deliver_at_is_an_iso_time_with_an_offset_or_posix_seconds(value, seconds):
    assert schedule.instant(value, AT) == seconds


@pytest.mark.parametrize(("value", "words"), [
    ("2026-11-29T08:00:00", "messages[0].deliver_at must be an ISO 8601 time with a UTC offset "
                            "(2026-11-29T08:00:00Z) or POSIX seconds: the time has no UTC offset (add Z)."),
    ("2026-11-29", "the time has no UTC offset (add Z)."),
    ("tomorrow", "got a string that is not a time."),
    ("", "got a string that is not a time."),
    ("2026-02-30T08:00:00Z", "got a string that is not a time."),
    ("2026-11-29T23:59:60Z", "got a string that is not a time."),
    (True, "POSIX seconds, got true."),
    (None, "POSIX seconds, got null."),
    ({"at": 1}, "POSIX seconds, got an object."),
    ([1], "POSIX seconds, got an array."),
    (float("nan"), "POSIX seconds, got NaN."),
    (float("inf"), "POSIX seconds, got Infinity."),
])
def test_anything_else_is_refused_in_words_naming_the_message(value, words):
    with pytest.raises(ValidationFailed) as raised:
        schedule.instant(value, AT)
    assert str(raised.value).startswith(AT) and str(raised.value).endswith(words)


def test_a_future_time_within_the_limit_is_the_delay_end():
    assert schedule.delay_until(1000.0 + 604800, 1000.0, 604800, AT) == 605800.0
    assert schedule.delay_until(1000.5, 1000.0, 900, AT) == 1000.5


def test_now_and_up_to_30_seconds_ago_mean_at_once():
    assert schedule.delay_until(1000.0, 1000.0, 900, AT) == 0.0
    assert schedule.delay_until(970.0, 1000.0, 900, AT) == 0.0


def test_further_in_the_past_is_refused():
    with pytest.raises(ValidationFailed) as raised:
        schedule.delay_until(969.0, 1000.0, 900, AT)
    assert str(raised.value) == ("messages[0].deliver_at is 31 s in the past; "
                                 "it may be at most 30 s in the past (it then means now).")


def test_further_ahead_than_max_message_delay_is_refused():
    assert schedule.delay_until(1900.0, 1000.0, 900, AT) == 1900.0
    with pytest.raises(ValidationFailed) as raised:
        schedule.delay_until(1900.5, 1000.0, 900, AT)
    assert str(raised.value) == ("messages[0].deliver_at is 901 s ahead; "
                                 "this server delivers at most 900 s ahead (max_message_delay).")


@pytest.mark.parametrize(("default", "delay", "ttl"), [
    (3600, 0, 3600), (3600, 900, 3600), (3600, 3599, 3600), (3600, 3600, 7200), (3600, 86400, 90000),
    (60, 120, 180), (3600, 86399.5, 90000),
])
def test_the_default_ttl_counts_from_when_the_message_is_due_when_it_would_end_before(default, delay, ttl):
    assert schedule.default_ttl(default, delay) == ttl
