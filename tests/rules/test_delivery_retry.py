"""The subscription retry policy: schedule, precedence and validation.

docs/api.rst, "How delivery works" (Retries).
"""

from __future__ import annotations

import pytest

from zaqar_lite.errors import ValidationFailed
from zaqar_lite.rules import delivery_retry as retry

KNOWN_KEYS = ("ignore_subscription_override, maximum_delay, maximum_delay_retries, minimum_delay, "
              "minimum_delay_retries, retries_with_no_delay, retry_backoff_function")


# -- the schedule ------------------------------------------------------------------------

def test_the_default_policy_waits_as_zaqar_does_before_each_retry():
    assert retry.DEFAULT_POLICY.delays() == [0, 0, 0, 5, 5, 5, 5, 10, 15, 20, 25, 30, 30, 30]


def test_with_the_defaults_a_message_is_tried_15_times_over_three_minutes():
    delays = retry.DEFAULT_POLICY.delays()
    assert (1 + len(delays), sum(delays)) == (15, 180)


def test_the_default_policy_has_zaqars_values():
    assert retry.DEFAULT_POLICY == retry.RetryPolicy(
        retries_with_no_delay=3, minimum_delay_retries=3, minimum_delay=5, maximum_delay=30,
        maximum_delay_retries=3, retry_backoff_function="linear", ignore_subscription_override=False)


@pytest.mark.parametrize(("function", "expected"), [
    ("linear", [5, 10, 15, 20, 25]),
    ("arithmetic", [5, 7, 12, 20, 30]),
    ("geometric", [5, 8, 12, 19, 30]),
    ("exponential", [5, 10, 20, 30, 30]),
])
def test_each_backoff_function_goes_from_the_minimum_towards_the_maximum(function, expected):
    assert retry.backoff(function, 5, 30) == expected


@pytest.mark.parametrize(("function", "expected"), [
    ("linear", [0, 5, 10, 15]),
    ("arithmetic", [0, 3, 10, 20]),
    ("geometric", [1, 3, 7, 20]),
    ("exponential", [1, 2, 4, 8]),
])
def test_from_a_zero_minimum_geometric_and_exponential_start_at_one_second(function, expected):
    assert retry.backoff(function, 0, 20) == expected


@pytest.mark.parametrize(("function", "expected"), [
    ("linear", [5]), ("arithmetic", [5]), ("geometric", [5]), ("exponential", [5]),
])
def test_a_gap_of_one_interval_is_one_step_at_the_minimum(function, expected):
    assert retry.backoff(function, 5, 10) == expected


@pytest.mark.parametrize(("function", "expected"), [
    ("linear", [5]), ("arithmetic", []), ("geometric", []), ("exponential", []),
])
def test_a_gap_shorter_than_one_interval_is_one_linear_step_as_in_zaqar_and_none_otherwise(function,
                                                                                           expected):
    assert retry.backoff(function, 5, 9) == expected


def test_a_one_step_exponential_backoff_from_zero_still_waits_one_second():
    assert retry.backoff("exponential", 0, 5) == [1]


@pytest.mark.parametrize("function", retry.BACKOFF_FUNCTIONS)
def test_no_backoff_phase_when_the_delays_are_equal(function):
    assert retry.backoff(function, 0, 0) == []
    assert retry.backoff(function, 30, 30) == []


def test_a_policy_without_delays_retries_at_once_the_given_number_of_times():
    policy = retry.RetryPolicy(retries_with_no_delay=2, minimum_delay_retries=0, maximum_delay_retries=0,
                               minimum_delay=0, maximum_delay=0)
    assert policy.delays() == [0, 0]


def test_a_policy_of_no_retries_has_an_empty_schedule():
    policy = retry.RetryPolicy(retries_with_no_delay=0, minimum_delay_retries=0, maximum_delay_retries=0,
                               minimum_delay=10, maximum_delay=10)
    assert policy.delays() == []


def test_the_four_phases_come_in_order():
    policy = retry.RetryPolicy(retries_with_no_delay=1, minimum_delay_retries=2, minimum_delay=10,
                               maximum_delay=20, maximum_delay_retries=1,
                               retry_backoff_function="exponential")
    assert policy.delays() == [0, 10, 10, 10, 20, 20]


# -- precedence ----------------------------------------------------------------------------

def test_the_subscription_policy_wins_over_the_queue_policy():
    policy = retry.effective_policy({"_retry_policy": {"retries_with_no_delay": 1}},
                                    {"_retry_policy": {"retries_with_no_delay": 7}})
    assert policy == retry.RetryPolicy(retries_with_no_delay=1)


def test_the_queue_policy_applies_when_the_subscription_has_none():
    assert retry.effective_policy({}, {"_retry_policy": {"maximum_delay": 60}}) == retry.RetryPolicy(
        maximum_delay=60)
    assert retry.effective_policy(None, {"_retry_policy": {"maximum_delay": 60}}).maximum_delay == 60


def test_without_any_policy_the_defaults_apply():
    assert retry.effective_policy(None, None) == retry.DEFAULT_POLICY
    assert retry.effective_policy({"other": 1}, {"owner": "x"}) == retry.DEFAULT_POLICY


@pytest.mark.parametrize("where", ["queue", "subscription"])
def test_ignore_subscription_override_on_either_side_selects_the_queue_policy(where):
    subscription = {"retries_with_no_delay": 1}
    queue = {"retries_with_no_delay": 7}
    (queue if where == "queue" else subscription)["ignore_subscription_override"] = True
    policy = retry.effective_policy({"_retry_policy": subscription}, {"_retry_policy": queue})
    assert policy.retries_with_no_delay == 7


def test_ignore_subscription_override_without_a_queue_policy_gives_the_defaults():
    policy = retry.effective_policy({"_retry_policy": {"retries_with_no_delay": 1,
                                                       "ignore_subscription_override": True}}, {})
    assert policy == retry.DEFAULT_POLICY


def test_an_invalid_stored_policy_counts_as_absent():
    assert retry.effective_policy({}, {"_retry_policy": {"minimum_delay": "soon"}}) == retry.DEFAULT_POLICY
    policy = retry.effective_policy({"_retry_policy": {"retries": 3}},
                                    {"_retry_policy": {"minimum_delay": 1}})
    assert policy == retry.RetryPolicy(minimum_delay=1)


# -- validation ------------------------------------------------------------------------------

def refused(value, field="options._retry_policy") -> str:
    with pytest.raises(ValidationFailed) as raised:
        retry.check_policy(value, field)
    return str(raised.value)


@pytest.mark.parametrize(("policy", "named"), [
    ({"retries_with_no_delay": -1}, "retries_with_no_delay"),
    ({"minimum_delay_retries": True}, "minimum_delay_retries"),
    ({"maximum_delay_retries": "3"}, "maximum_delay_retries"),
    ({"minimum_delay": 1.5}, "minimum_delay"),
    ({"maximum_delay": 10**9}, "maximum_delay"),
    ({"retry_backoff_function": "cubic"}, "retry_backoff_function"),
    ({"ignore_subscription_override": "yes"}, "ignore_subscription_override"),
    ({"minimum_delay": 40}, "minimum_delay"),
    ({"retries": 3}, "retries"),
])
def test_check_policy_names_the_bad_key(policy, named):
    with pytest.raises(ValidationFailed, match=rf"options\._retry_policy\.{named}"):
        retry.check_policy(policy, "options._retry_policy")


@pytest.mark.parametrize(("policy", "text"), [
    ([], "options._retry_policy must be a JSON object, got []."),
    (None, "options._retry_policy must be a JSON object, got null."),
    ({"retries": 3}, f"options._retry_policy.retries is not a retry policy key; known keys: {KNOWN_KEYS}."),
    ({"retries_with_no_delay": 10001},
     "options._retry_policy.retries_with_no_delay must be between 0 and 10000, got 10001."),
    ({"minimum_delay_retries": -1},
     "options._retry_policy.minimum_delay_retries must be between 0 and 10000, got -1."),
    ({"maximum_delay": 86401}, "options._retry_policy.maximum_delay must be between 0 and 86400, got 86401."),
    ({"minimum_delay": True}, "options._retry_policy.minimum_delay must be an integer, got true."),
    ({"retry_backoff_function": "cubic"}, "options._retry_policy.retry_backoff_function must be one of "
                                          'linear, arithmetic, geometric, exponential, got "cubic".'),
    ({"ignore_subscription_override": 1},
     "options._retry_policy.ignore_subscription_override must be true or false, got 1."),
    ({"minimum_delay": 31}, "options._retry_policy.minimum_delay (31) may not be greater than "
                            "options._retry_policy.maximum_delay (30)."),
    ({"maximum_delay": 4}, "options._retry_policy.minimum_delay (5) may not be greater than "
                           "options._retry_policy.maximum_delay (4)."),
])
def test_check_policy_refuses_with_the_documented_description(policy, text):
    assert refused(policy) == text


def test_check_policy_accepts_every_bound_and_returns_a_copy():
    edges = {"retries_with_no_delay": 0, "minimum_delay_retries": 10000, "maximum_delay_retries": 0,
             "minimum_delay": 0, "maximum_delay": 86400, "retry_backoff_function": "geometric",
             "ignore_subscription_override": False}
    checked = retry.check_policy(edges, "options._retry_policy")
    assert checked == edges and checked is not edges
    assert retry.check_policy({"minimum_delay": 30}, "x") == {"minimum_delay": 30}
    assert retry.check_policy({}, "x") == {}
