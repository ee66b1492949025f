"""The pause and dead-letter breaker rules (zaqar_lite.claims.pause), with literal cases."""

from __future__ import annotations

import pytest

from zaqar_lite.claims import metadata, pause
from zaqar_lite.claims.pause import Breaker, Window
from zaqar_lite.config import Limits
from zaqar_lite.errors import ValidationFailed

LIMITS = Limits()


def test_a_breaker_with_a_count_or_a_share_is_accepted():
    assert pause.check_breaker({"seconds": 60, "max_dead_letters": 5}) == Breaker(60, 5, None, 10)
    assert pause.check_breaker({"seconds": 1, "max_share": 0.5, "min_claimed": 4}) == Breaker(1, None, 0.5, 4)
    assert pause.check_breaker({"seconds": 86400, "max_dead_letters": 0, "max_share": 0}) == \
        Breaker(86400, 0, 0.0, 10)


@pytest.mark.parametrize(("value", "description"), [
    ([], "_dead_letter_breaker must be an object with seconds and max_dead_letters and/or max_share, "
         "got an array."),
    ({"max_dead_letters": 5}, "_dead_letter_breaker needs seconds, the window it counts dead letters over."),
    ({"seconds": 60}, "_dead_letter_breaker needs max_dead_letters, max_share or both."),
    ({"seconds": 0, "max_dead_letters": 1},
     "_dead_letter_breaker.seconds must be an integer between 1 and 86400, got 0."),
    ({"seconds": 86401, "max_dead_letters": 1},
     "_dead_letter_breaker.seconds must be an integer between 1 and 86400, got 86401."),
    ({"seconds": 60, "max_dead_letters": -1},
     "_dead_letter_breaker.max_dead_letters must be an integer between 0 and 1000000, got -1."),
    ({"seconds": 60, "max_dead_letters": True},
     "_dead_letter_breaker.max_dead_letters must be an integer between 0 and 1000000, got true."),
    ({"seconds": 60, "max_share": 1},
     "_dead_letter_breaker.max_share must be a number from 0 to below 1, got 1."),
    ({"seconds": 60, "max_share": "half"},
     "_dead_letter_breaker.max_share must be a number from 0 to below 1, got a string."),
    ({"seconds": 60, "max_share": 0.5, "min_claimed": 0},
     "_dead_letter_breaker.min_claimed must be an integer between 1 and 1000000, got 0."),
    ({"seconds": 60, "max_dead_letters": 1, "window": 5},
     "_dead_letter_breaker has no field window; its fields are seconds, max_dead_letters, max_share, "
     "min_claimed."),
])
def test_a_wrong_breaker_is_refused_naming_the_rule(value, description):
    with pytest.raises(ValidationFailed) as caught:
        metadata.validate({"_dead_letter_breaker": value}, LIMITS)
    assert str(caught.value) == description


@pytest.mark.parametrize(("stored", "description"), [
    ({"_paused": "yes"}, "_paused must be true or false, got a string."),
    ({"_paused": 1}, "_paused must be true or false, got 1."),
    ({"_paused": True, "_paused_by": "me"}, "_paused_by must be an object, got a string."),
])
def test_a_wrong_pause_is_refused(stored, description):
    with pytest.raises(ValidationFailed) as caught:
        metadata.validate(stored, LIMITS)
    assert str(caught.value) == description


def test_a_misspelt_pause_key_is_refused_naming_the_key():
    with pytest.raises(ValidationFailed, match="did you mean _paused"):
        metadata.validate({"_pasued": True}, LIMITS)


def test_resuming_drops_the_record_of_why_the_queue_paused():
    assert metadata.validate({"_paused": False, "_paused_by": {"by": "x"}, "a": 1}, LIMITS) == \
        {"_paused": False, "a": 1}
    assert metadata.validate({"_paused_by": {"by": "x"}}, LIMITS) == {}
    assert metadata.validate({"_paused": True, "_paused_by": {"by": "x"}}, LIMITS) == \
        {"_paused": True, "_paused_by": {"by": "x"}}


def test_only_a_true_pause_pauses():
    assert pause.is_paused({"_paused": True})
    assert not pause.is_paused({"_paused": False})
    assert not pause.is_paused({})
    assert not pause.is_paused(None)


COUNT = Breaker(seconds=60, max_dead_letters=3)
SHARE = Breaker(seconds=60, max_share=0.5, min_claimed=4)


def test_a_count_breaker_trips_on_the_dead_letter_that_passes_its_count_within_the_window():
    window, trips = pause.counted(None, COUNT, 100.0, 2, 0)
    assert (window, trips) == (Window(100.0, 2, 0, False), False)
    window, trips = pause.counted(window, COUNT, 130.0, 1, 0)
    assert (window, trips) == (Window(100.0, 3, 0, False), False)
    window, trips = pause.counted(window, COUNT, 159.0, 1, 0)
    assert (window, trips) == (Window(100.0, 4, 0, True), True)
    # the same window trips once
    assert pause.counted(window, COUNT, 159.5, 5, 0) == (Window(100.0, 9, 0, True), False)


def test_a_window_that_ended_gives_way_to_a_new_one():
    window, _ = pause.counted(Window(100.0, 3, 0, False), COUNT, 160.0, 1, 0)
    assert window == Window(160.0, 1, 0, False)
    window, trips = pause.counted(Window(100.0, 9, 0, True), COUNT, 170.0, 4, 0)
    assert (window, trips) == (Window(170.0, 4, 0, True), True)


def test_a_share_breaker_waits_for_its_least_claims_then_trips_above_the_share():
    assert pause.counted(None, SHARE, 0.0, 3, 3) == (Window(0.0, 3, 3, False), False)  # 3 claimed < 4
    assert pause.counted(Window(0.0, 3, 3), SHARE, 1.0, 0, 3) == (Window(0.0, 3, 6, False), False)  # 3=3
    assert pause.counted(Window(0.0, 3, 6), SHARE, 2.0, 1, 0) == (Window(0.0, 4, 6, True), True)  # 4 > 3


def test_the_pause_record_says_what_was_counted_and_the_rule():
    record = pause.pause_record(Breaker(60, 3, 0.25, 8), Window(1767225600.0, 4, 9, True), 1767225630.0)
    assert record == {
        "by": "dead_letter_breaker", "at": "2026-01-01T00:00:30Z",
        "rule": "more than 3 dead letters or dead letters above 0.25 of the messages claimed "
                "(from 8 claimed on) within 60 s",
        "window_started": "2026-01-01T00:00:00Z", "dead_letters": 4, "claimed": 9,
    }


def test_a_queue_paused_already_is_not_paused_again():
    assert pause.paused_metadata({"_paused": True}, {"by": "dead_letter_breaker"}) is None
    assert pause.paused_metadata({"a": 1}, {"by": "dead_letter_breaker"}) == \
        {"a": 1, "_paused": True, "_paused_by": {"by": "dead_letter_breaker"}}
