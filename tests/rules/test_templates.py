"""Queue templates: patterns, the most specific match, the merge under the request, checks."""

from __future__ import annotations

import pytest

from zaqar_lite.config import Limits, Settings
from zaqar_lite.errors import ValidationFailed
from zaqar_lite.models import QueueTemplate
from zaqar_lite.rules import templates

LIMITS = Limits()


def template(name, pattern, **metadata):
    return QueueTemplate(name=name, pattern=pattern, metadata=metadata)


@pytest.mark.parametrize(("queue", "expected"), [
    ("orders-eu", "orders"),
    ("orders-", "orders"),
    ("orders-eu-1", "orders-eu"),
    ("orders", None),
    ("Orders-eu", None),
    ("payments", "catch-all"),
])
def test_the_most_specific_matching_template_applies(queue, expected):
    found = templates.matching(queue, [
        template("catch-all", "pay*"),
        template("orders", "orders-*"),
        template("orders-eu", "orders-eu-?"),
    ])
    assert (found.name if found else None) == expected


def test_equally_specific_templates_are_chosen_by_name():
    found = templates.matching("ab", [template("zeta", "a*"), template("alpha", "*b")])
    assert found.name == "alpha"


def test_a_template_never_applies_to_its_own_dead_letter_queue():
    rule = template("orders", "orders-*", _dead_letter_queue="orders-dlq", _max_claim_count=3)
    assert templates.matching("orders-dlq", [rule]) is None
    assert templates.matching("orders-eu", [rule]) is rule


def test_the_request_wins_over_the_template_and_null_unsets():
    rule = template("orders", "orders-*", _dead_letter_queue="orders-dlq", _max_claim_count=3,
                    _default_message_ttl=600)
    result = templates.merged(rule, {"_max_claim_count": 5, "_dead_letter_queue": None, "team": "eu"})
    assert result == {"_dead_letter_queue": None, "_max_claim_count": 5, "_default_message_ttl": 600,
                      "team": "eu", "_queue_template": "orders"}


@pytest.mark.parametrize(("pattern", "message"), [
    ("orders/*", "pattern must be a string of queue-name characters"),
    ("", "pattern must be a string of queue-name characters"),
    (7, "pattern must be a string of queue-name characters"),
    ("x" * 65, "pattern may have at most 64 characters, got 65"),
])
def test_bad_patterns_are_refused_naming_the_rule(pattern, message):
    with pytest.raises(ValidationFailed, match=message):
        templates.check_template("orders", pattern, {}, LIMITS)


def test_template_metadata_carries_reserved_keys_only():
    with pytest.raises(ValidationFailed, match="reserved keys only; team is not one"):
        templates.check_template("orders", "orders-*", {"team": "eu", "_max_claim_count": 2}, LIMITS)


def test_template_metadata_is_checked_by_the_queue_rules():
    with pytest.raises(ValidationFailed, match="_max_claim_count must be at least 1, got 0"):
        templates.check_template("orders", "orders-*", {"_max_claim_count": 0}, LIMITS)
    with pytest.raises(ValidationFailed, match="_dead_letter_on_expiry needs _dead_letter_queue"):
        templates.check_template("orders", "orders-*", {"_dead_letter_on_expiry": True}, LIMITS)


def test_a_template_name_follows_the_queue_name_rule():
    with pytest.raises(ValidationFailed, match="template name follows the queue-name rule"):
        templates.check_template("bad name", "orders-*", {}, LIMITS)


def test_null_reserved_values_of_a_template_are_dropped():
    checked = templates.check_template("orders", "o*", {"_max_claim_count": 2, "_dead_letter_queue": None},
                                       LIMITS)
    assert checked.metadata == {"_max_claim_count": 2}


def test_clients_may_not_set_the_template_key():
    with pytest.raises(ValidationFailed, match="_queue_template is set by the server"):
        templates.refuse_template_key({"_queue_template": "mine"})
    templates.refuse_template_key({"_queue_templates": 1})


def test_configured_templates_are_checked_naming_their_section():
    settings = Settings(queue_templates=(template("orders", "orders-*", _default_message_delay=-1),))
    with pytest.raises(ValueError, match=r"^\[queue_template:orders\] _default_message_delay must be"):
        templates.configured(settings)
    good = Settings(queue_templates=(template("orders", "orders-*", _max_claim_count=2),))
    assert [(t.name, t.source) for t in templates.configured(good)] == [("orders", "config")]
