"""The queue-name rule: ``^[a-zA-Z0-9_.-]+$``, 1-64 characters, not ``.`` or ``..``.

docs/api.rst, "Limits".
"""

from __future__ import annotations

import pytest

from zaqar_lite.claims.names import is_queue_name
from zaqar_lite.config import Limits

LIMITS = Limits()


@pytest.mark.parametrize("name", ["a", "orders", "orders-dlq", "A.b_c-9", "0", "x" * 64, "...", ".a", "a.",
                                  "_", "-"])
def test_names_of_letters_digits_dots_dashes_and_underscores_up_to_64_are_queue_names(name):
    assert is_queue_name(name, LIMITS) is True


@pytest.mark.parametrize("name", ["", "x" * 65, ".", "..", "a b", "a/b", "a:b", "é", "a\x00b", "q?x", "%2e",
                                  "a\nb", "\na"])
def test_empty_too_long_dot_segments_and_other_characters_are_not(name):
    assert is_queue_name(name, LIMITS) is False


@pytest.mark.parametrize("value", [None, 5, 1.5, True, ["q"], {"q": 1}, b"q"])
def test_values_that_are_not_strings_are_not_queue_names(value):
    assert is_queue_name(value, LIMITS) is False


def test_the_longest_name_follows_the_configured_limit():
    limits = Limits(max_queue_name_length=3)
    assert (is_queue_name("abc", limits), is_queue_name("abcd", limits)) == (True, False)


@pytest.mark.parametrize("name", ["a\n", "orders-dlq\n"])
def test_a_name_ending_in_a_newline_is_not_a_queue_name(name):
    assert is_queue_name(name, LIMITS) is False
