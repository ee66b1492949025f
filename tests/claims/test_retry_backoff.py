"""The ``_retry_backoff`` rules of ``zaqar_lite.claims.retry_backoff`` (and their use by the policy), by case.

Every expected wait is worked out by hand from the documented rule
(``docs/api.rst``, "Retry backoff"): after the n-th claim a message waits
``min(max, base * factor ** (n - 1))`` seconds, less ``jitter * draw`` of that.
"""

from __future__ import annotations

import pytest

from zaqar_lite.claims import metadata, policy, retry_backoff
from zaqar_lite.config import Limits
from zaqar_lite.errors import ValidationFailed
from zaqar_lite.models import ClaimRequest, DeadLetterPolicy, Message, RetryBackoff

NOW = 1_700_000_000.0
LIMITS = Limits()  # max_message_delay 900
DOUBLING = RetryBackoff(base=1.0, factor=2.0, max=300.0, jitter=0.0)


def refused(value) -> str:
    with pytest.raises(ValidationFailed) as raised:
        metadata.validate({"_retry_backoff": value}, LIMITS)
    return str(raised.value)


# -- validation (like every reserved key: the key and the rule named) ------------------------

def test_a_full_policy_is_accepted_and_stored_as_given():
    value = {"base": 1, "factor": 2, "max": 300, "jitter": 0.1}
    assert metadata.validate({"_retry_backoff": value}, LIMITS) == {"_retry_backoff": value}
    assert metadata.retry_backoff({"_retry_backoff": value}, LIMITS) == RetryBackoff(1.0, 2.0, 300.0, 0.1)


def test_factor_jitter_and_max_have_defaults():
    expected = RetryBackoff(base=5.0, factor=2.0, max=900.0, jitter=0.0)
    assert retry_backoff.check_backoff({"base": 5}, 900) == expected


def test_a_policy_stored_under_a_larger_delay_limit_is_capped_at_todays():
    stored = {"_retry_backoff": {"base": 600, "factor": 2}}  # stored while max_message_delay was 3600
    capped = metadata.retry_backoff(stored, Limits(max_message_delay=300))
    assert capped == RetryBackoff(base=300.0, factor=2.0, max=300.0, jitter=0.0)


def test_a_queue_without_the_key_has_no_policy():
    assert metadata.retry_backoff({"_max_claim_count": 3}, LIMITS) is None
    assert metadata.retry_backoff(None, LIMITS) is None


def test_null_removes_the_policy():
    assert metadata.validate({"_retry_backoff": None}, LIMITS) == {}


@pytest.mark.parametrize(("value", "description"), [
    (5, "_retry_backoff must be an object with keys base, factor, max, jitter, got 5."),
    ([1, 2], "_retry_backoff must be an object with keys base, factor, max, jitter, got [1, 2]."),
    ({}, "_retry_backoff.base is required (seconds before the first retry)."),
    ({"base": 1, "cap": 5}, "_retry_backoff has unknown key 'cap'; its keys are base, factor, max, jitter."),
    ({"base": "1"}, '_retry_backoff.base must be a number, got "1".'),
    ({"base": True}, "_retry_backoff.base must be a number, got true."),
    ({"base": 0}, "_retry_backoff.base must be above 0, got 0."),
    ({"base": -1}, "_retry_backoff.base must be between 0 and 900, got -1."),
    ({"base": 901}, "_retry_backoff.base must be between 0 and 900, got 901."),
    ({"base": 1, "factor": 0.5}, "_retry_backoff.factor must be between 1 and 10, got 0.5."),
    ({"base": 1, "factor": 11}, "_retry_backoff.factor must be between 1 and 10, got 11."),
    ({"base": 10, "max": 5}, "_retry_backoff.max must be between 10 and 900, got 5."),
    ({"base": 1, "max": 1000}, "_retry_backoff.max must be between 1 and 900, got 1000."),
    ({"base": 1, "jitter": 1.5}, "_retry_backoff.jitter must be between 0 and 1, got 1.5."),
    ({"base": 1, "jitter": None}, "_retry_backoff.jitter must be a number, got null."),
])
def test_a_bad_policy_is_refused_naming_the_key_and_the_rule(value, description):
    assert refused(value) == description


# -- the wait ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("count", "wait"), [
    (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 256.0), (10, 300.0), (11, 300.0), (5000, 300.0),
])
def test_the_wait_doubles_with_each_claim_up_to_max(count, wait):
    assert retry_backoff.retry_wait(DOUBLING, count, 0.0) == wait


def test_a_factor_of_one_waits_base_every_time():
    steady = RetryBackoff(base=30.0, factor=1.0, max=900.0, jitter=0.0)
    assert [retry_backoff.retry_wait(steady, n, 0.0) for n in (1, 2, 50)] == [30.0, 30.0, 30.0]


def test_a_huge_exponent_is_max_not_an_overflow():
    fast = RetryBackoff(base=0.5, factor=10.0, max=600.0, jitter=0.0)
    assert retry_backoff.retry_wait(fast, 10_000, 0.0) == 600.0


@pytest.mark.parametrize(("draw", "wait"), [(0.0, 8.0), (0.5, 7.6), (0.999, 7.2008)])
def test_jitter_shortens_the_wait_by_up_to_its_fraction(draw, wait):
    jittery = RetryBackoff(base=1.0, factor=2.0, max=300.0, jitter=0.1)
    assert retry_backoff.retry_wait(jittery, 4, draw) == pytest.approx(wait)


def test_jitter_never_passes_max():
    jittery = RetryBackoff(base=100.0, factor=2.0, max=300.0, jitter=0.5)
    assert retry_backoff.retry_wait(jittery, 3, 0.0) == 300.0
    assert retry_backoff.retry_wait(jittery, 3, 0.5) == 225.0


def test_draws_come_from_the_random_source_only_with_jitter():
    values = iter([0.25, 0.5, 0.75])
    jittery = RetryBackoff(base=1.0, factor=2.0, max=300.0, jitter=0.1)
    assert retry_backoff.draws(jittery, 3, lambda: next(values)) == (0.25, 0.5, 0.75)
    assert retry_backoff.draws(DOUBLING, 3, lambda: pytest.fail("no jitter, no draw")) == ()
    assert retry_backoff.draws(None, 3, lambda: pytest.fail("no policy, no draw")) == ()


# -- the stored delay-expiry d ------------------------------------------------------------------

def test_a_claim_stores_its_end_plus_the_wait():
    assert retry_backoff.claimed_delay_until(DOUBLING, NOW + 60, 3, 0.0, exhausted=False) == NOW + 64


def test_no_policy_or_an_exhausted_count_stores_no_wait():
    assert retry_backoff.claimed_delay_until(None, NOW + 60, 3, 0.0, exhausted=False) == 0.0
    assert retry_backoff.claimed_delay_until(DOUBLING, NOW + 60, 3, 0.0, exhausted=True) == 0.0


@pytest.mark.parametrize(("delay_until", "claim_expires", "delay", "expected"), [
    (NOW + 64, NOW + 60, None, NOW + 10 + 4),   # the claim's wait of 4 s starts at the release
    (0.0, NOW + 60, None, 0.0),                 # no wait: visible at once
    (NOW + 64, NOW + 60, 30, NOW + 10 + 30),    # an explicit delay replaces the wait
    (NOW + 64, NOW + 60, 0, 0.0),               # an explicit 0: visible at once
    (0.0, NOW + 60, 30, NOW + 10 + 30),         # a delay without a policy
])
def test_a_release_starts_the_wait_now(delay_until, claim_expires, delay, expected):
    assert retry_backoff.released_delay_until(delay_until, claim_expires, NOW + 10, delay) == expected


def test_a_renewal_moves_the_wait_with_the_claims_end():
    assert retry_backoff.renewed_delay_until(NOW + 64, NOW + 60, NOW + 300) == NOW + 304
    assert retry_backoff.renewed_delay_until(0.0, NOW + 60, NOW + 300) == 0.0


# -- the policy's use of it ---------------------------------------------------------------------

def message(message_id: str, claim_count: int = 0, **fields) -> Message:
    return Message(id=message_id, body={}, created=NOW - 10, expires=NOW + 3600, claim_count=claim_count,
                   **fields)


def test_a_claim_plans_each_message_wait_by_its_count_and_its_draw():
    jittery = RetryBackoff(base=1.0, factor=2.0, max=300.0, jitter=0.5)
    request = ClaimRequest(claim_id="c", now=NOW, ttl=60, grace=30, limit=3, backoff=jittery,
                           draws=(0.0, 0.5, 0.25))
    plan = policy.plan_claim([message("a"), message("b", 2), message("c", 9)], request, "q")
    # 1 s; 4 s less 25 %; 512 s capped at 300, less 12.5 %
    assert [m.delay_until for m in plan.claimed] == [NOW + 61, NOW + 63, NOW + 60 + 262.5]


def test_the_claim_that_exhausts_the_count_plans_no_wait():
    request = ClaimRequest(claim_id="c", now=NOW, ttl=60, grace=30, limit=2, backoff=DOUBLING,
                           dead_letter=DeadLetterPolicy(max_claim_count=3, queue="dlq"))
    plan = policy.plan_claim([message("a", 1), message("b", 2)], request, "q")
    assert [(m.claim_count, m.delay_until) for m in plan.claimed] == [(2, NOW + 62), (3, 0.0)]


def test_a_claim_without_a_policy_plans_no_wait_and_ends_a_matured_delay():
    request = ClaimRequest(claim_id="c", now=NOW, ttl=60, grace=30, limit=1)
    plan = policy.plan_claim([message("a", delay_until=NOW - 5)], request, "q")
    assert plan.claimed[0].delay_until == 0.0


def test_a_message_waiting_after_its_claim_is_delayed_not_visible():
    waiting = message("a", 1, claim_id="c", claim_expires=NOW - 1, delay_until=NOW + 3)
    assert (policy.is_visible(waiting, NOW), waiting.is_delayed(NOW)) == (False, True)
    held = message("a", 1, claim_id="c", claim_expires=NOW + 1, delay_until=NOW + 3)
    assert (held.is_claimed(NOW), held.is_delayed(NOW)) == (True, False)
    assert policy.is_visible(waiting, NOW + 3)


def test_released_and_claim_released_and_renewed_apply_the_wait():
    held = message("a", 1, claim_id="c", claim_expires=NOW + 60, delay_until=NOW + 61)
    assert policy.released(held, None, NOW, 10).delay_until == NOW + 1
    assert policy.released(held, None, NOW, 10, delay=20).delay_until == NOW + 20
    assert policy.claim_released(held, NOW).delay_until == NOW + 1
    renewed = policy.claim_renewed(held, NOW, 120, 30)
    assert (renewed.claim_expires, renewed.delay_until) == (NOW + 120, NOW + 121)
