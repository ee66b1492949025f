"""The retry schedule, the policy precedence, and what one webhook request carries."""

from __future__ import annotations

import json

import pytest

from zaqar_lite.claims import retry
from zaqar_lite.errors import ValidationFailed
from zaqar_lite.models import Message
from zaqar_lite.notify import webhook


def test_the_default_policy_waits_as_zaqar_does_before_each_retry():
    assert retry.DEFAULT_POLICY.delays() == [0, 0, 0, 5, 5, 5, 5, 10, 15, 20, 25, 30, 30, 30]


@pytest.mark.parametrize(("function", "expected"), [
    ("linear", [5, 10, 15, 20, 25]),
    ("arithmetic", [5, 7, 12, 20, 30]),
    ("geometric", [5, 8, 12, 19, 30]),
    ("exponential", [5, 10, 20, 30, 30]),
])
def test_each_backoff_function_goes_from_the_minimum_towards_the_maximum(function, expected):
    assert retry.backoff(function, 5, 30) == expected


@pytest.mark.parametrize("function", retry.BACKOFF_FUNCTIONS)
def test_no_backoff_phase_when_the_delays_are_equal(function):
    assert retry.backoff(function, 0, 0) == []


def test_a_policy_without_delays_retries_at_once_the_given_number_of_times():
    policy = retry.RetryPolicy(retries_with_no_delay=2, minimum_delay_retries=0, maximum_delay_retries=0,
                               minimum_delay=0, maximum_delay=0)
    assert policy.delays() == [0, 0]


def test_the_subscription_policy_wins_over_the_queue_policy():
    policy = retry.effective_policy({"_retry_policy": {"retries_with_no_delay": 1}},
                                    {"_retry_policy": {"retries_with_no_delay": 7}})
    assert policy.retries_with_no_delay == 1
    assert policy.minimum_delay == 5


def test_the_queue_policy_applies_when_the_subscription_has_none():
    assert retry.effective_policy({}, {"_retry_policy": {"maximum_delay": 60}}).maximum_delay == 60


@pytest.mark.parametrize("where", ["queue", "subscription"])
def test_ignore_subscription_override_on_either_side_selects_the_queue_policy(where):
    subscription = {"retries_with_no_delay": 1}
    queue = {"retries_with_no_delay": 7}
    (queue if where == "queue" else subscription)["ignore_subscription_override"] = True
    policy = retry.effective_policy({"_retry_policy": subscription}, {"_retry_policy": queue})
    assert policy.retries_with_no_delay == 7


def test_an_invalid_queue_policy_counts_as_absent():
    assert retry.effective_policy({}, {"_retry_policy": {"minimum_delay": "soon"}}) == retry.DEFAULT_POLICY


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


def message() -> Message:
    return Message(id="m1", body={"event": "done"}, created=1000.0, expires=1300.0, claim_count=2)


def test_the_notification_has_exactly_zaqars_fields():
    assert webhook.notification(message(), "orders") == {
        "body": {"event": "done"}, "ttl": 300, "queue_name": "orders", "Message_Type": "Notification"}


def test_post_data_text_has_the_quoted_placeholder_replaced_by_the_notification():
    options = {"post_data": '{"workflow": "w1", "params": {"notification": "$zaqar_message$"}}'}
    body = json.loads(webhook.render_body({"id": "m1"}, options))
    assert body == {"workflow": "w1", "params": {"notification": {"id": "m1"}}}


def test_post_data_may_also_be_a_json_object():
    options = {"post_data": {"wrapped": "$zaqar_message$", "n": 1}}
    assert json.loads(webhook.render_body({"id": "m1"}, options)) == {"wrapped": {"id": "m1"}, "n": 1}


def test_headers_carry_post_headers_and_an_hmac_of_the_exact_body_when_a_secret_is_set():
    body = b'{"id": "m1"}'
    headers = webhook.request_headers(body, {"secret": "top-secret", "post_headers": {"X-Trace": "t1"}},
                                      "s1", "m1")
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Trace"] == "t1"
    assert headers["X-Zaqar-Lite-Message-Id"] == "m1"
    assert headers["X-Zaqar-Lite-Subscription-Id"] == "s1"
    assert headers["X-Zaqar-Lite-Signature"] == (
        "sha256=eab1b7eef385eeed20a9ed4035e5849526a720846058e899008eb644b25f7824")


def test_no_signature_without_a_secret():
    assert "X-Zaqar-Lite-Signature" not in webhook.request_headers(b"{}", {}, "s1", "m1")
