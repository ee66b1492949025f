"""Reserved queue metadata (docs/api.rst, "Reserved metadata"), case by case, with no store.

Each refusal is checked with its whole description: the documented rule is a
400 "with a clear description naming the key".
"""

from __future__ import annotations

import pytest

from zaqar_lite.claims import metadata
from zaqar_lite.config import Limits
from zaqar_lite.errors import ValidationFailed
from zaqar_lite.models import DeadLetterPolicy

LIMITS = Limits()
ZAQAR_DEFAULTS = {
    "_max_messages_post_size": 262144,
    "_default_message_ttl": 3600,
    "_default_message_delay": 0,
    "_dead_letter_queue": None,
    "_dead_letter_queue_messages_ttl": None,
    "_max_claim_count": None,
    "_enable_encrypt_messages": False,
}


def refused(value) -> str:
    with pytest.raises(ValidationFailed) as raised:
        metadata.validate(value, LIMITS)
    return str(raised.value)


# -- defaults ---------------------------------------------------------------------------

def test_defaults_are_zaqars_reserved_keys_with_the_configured_limits():
    assert metadata.defaults(LIMITS) == ZAQAR_DEFAULTS


def test_defaults_follow_the_configured_limits():
    limits = Limits(max_messages_post_size=1000, default_message_ttl=120)
    shown = metadata.defaults(limits)
    assert (shown["_max_messages_post_size"], shown["_default_message_ttl"]) == (1000, 120)


def test_reserved_keys_are_zaqars_and_our_own():
    assert metadata.reserved_keys(LIMITS) == {*ZAQAR_DEFAULTS, "_dead_letter_on_expiry", "_max_message_ttl",
                                              "_dedup_window", "_retry_backoff", "_paused", "_paused_by",
                                              "_dead_letter_breaker"}


def test_unset_metadata_shows_zaqars_defaults_and_not_our_own_keys():
    assert metadata.with_defaults(None, LIMITS) == ZAQAR_DEFAULTS
    assert metadata.with_defaults({}, LIMITS) == ZAQAR_DEFAULTS


def test_stored_keys_replace_defaults_and_appear_beside_them():
    stored = {"_max_claim_count": 3, "_dead_letter_on_expiry": True, "owner": "team-a"}
    assert metadata.with_defaults(stored, LIMITS) == {**ZAQAR_DEFAULTS, "_max_claim_count": 3,
                                                      "_dead_letter_on_expiry": True, "owner": "team-a"}


# -- the whole object ------------------------------------------------------------------

@pytest.mark.parametrize("value", [[], "x", None, 3])
def test_metadata_must_be_an_object(value):
    assert refused(value) == "Queue metadata must be a JSON object."


def test_metadata_may_be_as_large_as_the_limit_but_no_larger():
    limits = Limits(max_queue_metadata=20)
    assert metadata.validate({"k": "x" * 11}, limits) == {"k": "x" * 11}  # {"k": "xxxxxxxxxxx"}: 20
    with pytest.raises(ValidationFailed) as raised:
        metadata.validate({"k": "x" * 12}, limits)
    assert str(raised.value) == "Queue metadata may not exceed 20 bytes."


def test_the_metadata_limit_counts_utf8_bytes_not_ascii_escapes():
    limits = Limits(max_queue_metadata=15)
    # {"k": "éé"} is 13 bytes in UTF-8 (11 written compactly); as \u00e9 escapes it is 21 characters
    assert metadata.validate({"k": "éé"}, limits) == {"k": "éé"}


def test_an_empty_object_and_free_keys_are_stored_as_given():
    assert metadata.validate({}, LIMITS) == {}
    free = {"owner": "team-a", "n": 1.5, "nested": {"_max_claim_count": "not checked"}, "_other": True}
    assert metadata.validate(free, LIMITS) == free


def test_null_reserved_values_mean_unset_and_are_dropped_but_free_nulls_are_kept():
    given = {key: None for key in (*ZAQAR_DEFAULTS, "_dead_letter_on_expiry", "_max_message_ttl",
                                   "_dedup_window")} | {
        "owner": None}
    assert metadata.validate(given, LIMITS) == {"owner": None}


def test_validation_returns_a_new_object():
    given = {"_max_claim_count": 2}
    stored = metadata.validate(given, LIMITS)
    assert stored == given and stored is not given


# -- integer keys -----------------------------------------------------------------------

INTEGER_BOUNDS = [
    ("_max_claim_count", 1, None),
    ("_dead_letter_queue_messages_ttl", 60, 1209600),
    ("_default_message_delay", 0, 900),
    ("_default_message_ttl", 60, 1209600),
    ("_max_messages_post_size", 1, 262144),
    ("_max_message_ttl", 60, 1209600),
    ("_dedup_window", 1, 86400),
]


@pytest.mark.parametrize(("key", "low", "high"), INTEGER_BOUNDS)
def test_integer_keys_accept_both_bounds(key, low, high):
    assert metadata.validate({key: low}, LIMITS) == {key: low}
    if high is not None:
        assert metadata.validate({key: high}, LIMITS) == {key: high}


@pytest.mark.parametrize(("key", "value", "text"), [
    ("_max_claim_count", 0, "_max_claim_count must be at least 1, got 0."),
    ("_max_claim_count", -3, "_max_claim_count must be at least 1, got -3."),
    ("_dead_letter_queue_messages_ttl", 59,
     "_dead_letter_queue_messages_ttl must be between 60 and 1209600, got 59."),
    ("_dead_letter_queue_messages_ttl", 1209601,
     "_dead_letter_queue_messages_ttl must be between 60 and 1209600, got 1209601."),
    ("_default_message_delay", -1, "_default_message_delay must be between 0 and 900, got -1."),
    ("_default_message_delay", 901, "_default_message_delay must be between 0 and 900, got 901."),
    ("_default_message_ttl", 59, "_default_message_ttl must be between 60 and 1209600, got 59."),
    ("_default_message_ttl", 1209601, "_default_message_ttl must be between 60 and 1209600, got 1209601."),
    ("_max_messages_post_size", 0, "_max_messages_post_size must be between 1 and 262144, got 0."),
    ("_max_messages_post_size", 262145, "_max_messages_post_size must be between 1 and 262144, got 262145."),
    ("_max_message_ttl", 59, "_max_message_ttl must be between 60 and 1209600, got 59."),
    ("_max_message_ttl", 1209601, "_max_message_ttl must be between 60 and 1209600, got 1209601."),
    ("_dedup_window", 0, "_dedup_window must be between 1 and 86400, got 0."),
    ("_dedup_window", 86401, "_dedup_window must be between 1 and 86400, got 86401."),
])
def test_integer_keys_out_of_range_are_refused_naming_the_key_and_the_range(key, value, text):
    assert refused({key: value}) == text


@pytest.mark.parametrize(("value", "shown"), [(True, "true"), (False, "false"), ("3", "a string"),
                                              (2.5, "2.5"), (3.0, "3.0"), ([3], "an array"),
                                              ({"n": 3}, "an object")])
@pytest.mark.parametrize("key", [key for key, _, _ in INTEGER_BOUNDS])
def test_integer_keys_refuse_bools_strings_floats_and_containers(key, value, shown):
    assert refused({key: value}) == f"{key} must be an integer, got {shown}."


def test_the_ranges_follow_the_configured_limits():
    limits = Limits(max_message_delay=30, min_message_ttl=10, max_message_ttl=100, max_messages_post_size=50)
    stored = {"_default_message_delay": 30, "_default_message_ttl": 10,
              "_dead_letter_queue_messages_ttl": 100, "_max_messages_post_size": 50}
    assert metadata.validate(stored, limits) == stored
    with pytest.raises(ValidationFailed) as raised:
        metadata.validate({"_default_message_delay": 31}, limits)
    assert str(raised.value) == "_default_message_delay must be between 0 and 30, got 31."


# -- the dead-letter queue -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["orders-dlq", "a", "A.b_c-1", "x" * 64, "..."])
def test_the_dead_letter_queue_may_be_any_valid_queue_name(name):
    assert metadata.validate({"_dead_letter_queue": name}, LIMITS) == {"_dead_letter_queue": name}


@pytest.mark.parametrize(("value", "shown"), [
    ("bad name!", "a string"), ("", "an empty string"), ("x" * 65, "a string"), (".", "a string"),
    ("..", "a string"), ("a/b", "a string"), (5, "5"), (True, "true"), (["q"], "an array"),
])
def test_the_dead_letter_queue_must_be_a_valid_queue_name(value, shown):
    assert refused({"_dead_letter_queue": value}) == (
        "_dead_letter_queue must be a queue name: ASCII letters, digits, _ - and ., 1 to 64 characters, "
        f"not . or .. (got {shown}).")


def test_max_claim_count_dead_letter_queue_and_its_ttl_may_each_be_set_alone_or_together():
    for alone in ({"_max_claim_count": 3}, {"_dead_letter_queue": "dlq"},
                  {"_dead_letter_queue_messages_ttl": 600}):
        assert metadata.validate(alone, LIMITS) == alone
    together = {"_max_claim_count": 3, "_dead_letter_queue": "dlq", "_dead_letter_queue_messages_ttl": 600}
    assert metadata.validate(together, LIMITS) == together


# -- booleans ---------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["_enable_encrypt_messages", "_dead_letter_on_expiry"])
@pytest.mark.parametrize(("value", "shown"), [("yes", "a string"), (1, "1"), (0, "0"), ("true", "a string")])
def test_boolean_keys_must_be_true_or_false(key, value, shown):
    assert refused({key: value}) == f"{key} must be true or false, got {shown}."


def test_encryption_on_or_off_is_valid_metadata_on_its_own():
    for value in (True, False):
        given = {"_enable_encrypt_messages": value}
        assert metadata.validate(given, LIMITS) == given


def test_encryption_on_is_refused_without_keys_naming_the_setting():
    with pytest.raises(ValidationFailed) as raised:
        metadata.check_encryption({"_enable_encrypt_messages": True}, keys_configured=False)
    assert str(raised.value) == (
        "_enable_encrypt_messages: true needs the setting [encryption] keys (ZAQAR_LITE_ENCRYPTION_KEYS), "
        "which this server does not have; message bodies would be stored in plaintext, so true is refused. "
        "Leave it out or set it to false.")


def test_encryption_on_is_accepted_with_keys_and_off_without():
    metadata.check_encryption({"_enable_encrypt_messages": True}, keys_configured=True)
    metadata.check_encryption({"_enable_encrypt_messages": False}, keys_configured=False)
    metadata.check_encryption({}, keys_configured=False)
    assert metadata.encrypts({"_enable_encrypt_messages": True}) is True
    assert metadata.encrypts({"_enable_encrypt_messages": False}) is False
    assert metadata.encrypts(None) is False


def test_dead_letter_on_expiry_needs_a_dead_letter_queue():
    assert refused({"_dead_letter_on_expiry": True}) == "_dead_letter_on_expiry needs _dead_letter_queue."
    assert refused({"_dead_letter_on_expiry": True, "_dead_letter_queue": None}) == (
        "_dead_letter_on_expiry needs _dead_letter_queue.")
    assert metadata.validate({"_dead_letter_on_expiry": False}, LIMITS) == {"_dead_letter_on_expiry": False}
    both = {"_dead_letter_on_expiry": True, "_dead_letter_queue": "dlq"}
    assert metadata.validate(both, LIMITS) == both


def test_with_a_default_dead_letter_queue_dead_letter_on_expiry_may_stand_alone():
    alone = {"_dead_letter_on_expiry": True}
    assert metadata.validate(alone, LIMITS, "dead-letters") == alone
    with pytest.raises(ValidationFailed, match="^_dead_letter_on_expiry needs _dead_letter_queue.$"):
        metadata.validate(alone, LIMITS, "")


# -- the max message ttl -------------------------------------------------------------------

@pytest.mark.parametrize(("ttl", "stored", "capped"), [
    (3600, {}, 3600),
    (3600, {"_max_message_ttl": 600}, 600),
    (600, {"_max_message_ttl": 600}, 600),
    (120, {"_max_message_ttl": 600}, 120),
    (1209600, {"_max_message_ttl": 60}, 60),
])
def test_a_posted_ttl_is_lowered_to_the_queues_max_message_ttl(ttl, stored, capped):
    assert metadata.capped_ttl(ttl, stored) == capped


def test_the_max_message_ttl_shows_only_when_set():
    assert "_max_message_ttl" not in metadata.with_defaults({}, LIMITS)
    shown = metadata.with_defaults({"_max_message_ttl": 600}, LIMITS)
    assert shown == {**ZAQAR_DEFAULTS, "_max_message_ttl": 600}


# -- the default dead-letter queue ---------------------------------------------------------

@pytest.mark.parametrize(("queue", "stored", "default", "wanted"), [
    ("orders", {"_max_claim_count": 3}, "dead-letters", "dead-letters"),
    ("orders", {"_dead_letter_on_expiry": True}, "dead-letters", "dead-letters"),
    ("orders", {"_max_claim_count": 3, "_dead_letter_on_expiry": False}, "dead-letters", "dead-letters"),
    ("orders", {"_max_claim_count": 3, "_dead_letter_queue": "own-dlq"}, "dead-letters", None),
    ("orders", {"_dead_letter_on_expiry": False}, "dead-letters", None),
    ("orders", {"owner": "team-a"}, "dead-letters", None),
    ("orders", {}, "dead-letters", None),
    ("orders", None, "dead-letters", None),
    ("dead-letters", {"_max_claim_count": 3}, "dead-letters", None),
    ("orders", {"_max_claim_count": 3}, "", None),
    ("orders", {"_max_claim_count": 3}, None, None),
])
def test_a_queue_uses_the_default_dlq_when_it_counts_claims_or_expires_into_one_and_names_none(
        queue, stored, default, wanted):
    assert metadata.wanted_default_dead_letter_queue(queue, stored, default) == wanted


def test_the_default_dlq_fills_in_only_a_missing_dead_letter_queue_and_says_so():
    assert metadata.dead_letter_policy({"_max_claim_count": 3}, "dead-letters") == DeadLetterPolicy(
        max_claim_count=3, queue="dead-letters", default_queue=True)
    own = {"_max_claim_count": 3, "_dead_letter_queue": "own"}
    assert metadata.dead_letter_policy(own, "dead-letters") == DeadLetterPolicy(
        max_claim_count=3, queue="own")
    assert metadata.dead_letter_policy({"_max_claim_count": 3}, None) == DeadLetterPolicy(max_claim_count=3)


@pytest.mark.parametrize("stored", [None, {}])
def test_a_queue_of_default_settings_dead_letters_nothing(stored):
    assert metadata.dead_letter_policy(stored) == DeadLetterPolicy()
    assert metadata.dead_letter_policy(stored, None) == DeadLetterPolicy()
    assert metadata.dead_letter_policy(stored, "dead-letters") == DeadLetterPolicy(
        queue="dead-letters", default_queue=True)


@pytest.mark.parametrize(("stored", "default", "holds"), [
    ({"_dead_letter_on_expiry": True}, None, True),
    ({"_dead_letter_on_expiry": True}, "dead-letters", False),
    ({"_max_claim_count": 3}, None, False),
    ({"_dead_letter_on_expiry": True, "_dead_letter_queue": "own"}, None, False),
])
def test_expired_messages_are_held_while_the_default_dlq_they_expire_into_is_missing(stored, default, holds):
    assert metadata.holds_expired(stored, metadata.dead_letter_policy(stored, default)) is holds


# -- the retry policy in queue metadata ----------------------------------------------------

def test_a_queue_retry_policy_is_checked_and_named_under_metadata():
    policy = {"minimum_delay": 10, "maximum_delay": 60, "retry_backoff_function": "geometric"}
    assert metadata.validate({"_retry_policy": policy}, LIMITS) == {"_retry_policy": policy}
    assert refused({"_retry_policy": {"minimum_delay": 40}}) == (
        "metadata._retry_policy.minimum_delay (40) may not be greater than "
        "metadata._retry_policy.maximum_delay (30).")
    assert refused({"_retry_policy": "fast"}) == 'metadata._retry_policy must be a JSON object, got "fast".'


# -- cross-queue rules ---------------------------------------------------------------------

def links(queue: str, stored: dict, queues: dict[str, dict]) -> None:
    metadata.check_dead_letter_links(queue, stored, queues.get, lambda: iter(queues.items()))


def refused_link(queue: str, stored: dict, queues: dict[str, dict]) -> str:
    with pytest.raises(ValidationFailed) as raised:
        links(queue, stored, queues)
    return str(raised.value)


def test_a_queue_without_a_dead_letter_queue_needs_no_other_queue():
    links("orders", {"_max_claim_count": 3}, {})
    links("orders", {}, {"upstream": {"_dead_letter_queue": "orders"}})


def test_an_existing_dead_letter_queue_without_one_of_its_own_is_accepted():
    links("orders", {"_dead_letter_queue": "orders-dlq"}, {"orders": {}, "orders-dlq": {"owner": "x"}})


def test_the_dead_letter_queue_cannot_be_the_queue_itself():
    assert refused_link("orders", {"_dead_letter_queue": "orders"}, {"orders": {}}) == (
        "_dead_letter_queue cannot be the queue itself (orders).")


def test_the_dead_letter_queue_must_already_exist():
    assert refused_link("orders", {"_dead_letter_queue": "orders-dlq"}, {"orders": {}}) == (
        "_dead_letter_queue names queue orders-dlq, which does not exist in this project; create it first.")


def test_a_dead_letter_queue_with_a_dead_letter_queue_of_its_own_is_refused():
    queues = {"orders": {}, "orders-dlq": {"_dead_letter_queue": "graveyard"}, "graveyard": {}}
    assert refused_link("orders", {"_dead_letter_queue": "orders-dlq"}, queues) == (
        "_dead_letter_queue: queue orders-dlq has a dead-letter queue of its own; chains are not supported.")


def test_a_queue_that_is_another_queues_dead_letter_queue_cannot_get_one():
    queues = {"upstream": {"_dead_letter_queue": "orders"}, "orders": {}, "orders-dlq": {}}
    assert refused_link("orders", {"_dead_letter_queue": "orders-dlq"}, queues) == (
        "_dead_letter_queue: queue orders is the dead-letter queue of upstream; chains are not supported.")


def test_two_queues_may_share_one_dead_letter_queue():
    queues = {"a": {"_dead_letter_queue": "dlq"}, "b": {}, "dlq": {}}
    links("b", {"_dead_letter_queue": "dlq"}, queues)


# -- the policy a claim or sweep is given -------------------------------------------------------

@pytest.mark.parametrize(("stored", "expected"), [
    (None, DeadLetterPolicy(max_claim_count=None, queue=None, messages_ttl=None, on_expiry=False)),
    ({}, DeadLetterPolicy()),
    ({"owner": "x", "_default_message_delay": 5}, DeadLetterPolicy()),
    ({"_max_claim_count": 3}, DeadLetterPolicy(max_claim_count=3)),
    ({"_max_claim_count": 3, "_dead_letter_queue": "dlq", "_dead_letter_queue_messages_ttl": 600,
      "_dead_letter_on_expiry": True},
     DeadLetterPolicy(max_claim_count=3, queue="dlq", messages_ttl=600, on_expiry=True)),
    ({"_dead_letter_queue": "dlq", "_dead_letter_on_expiry": False}, DeadLetterPolicy(queue="dlq")),
])
def test_the_dead_letter_policy_is_read_from_the_reserved_keys(stored, expected):
    assert metadata.dead_letter_policy(stored) == expected


@pytest.mark.parametrize(("stored", "counts"), [
    ({"_max_claim_count": 3}, False),
    ({"_dead_letter_queue": "dlq"}, False),
    ({"_max_claim_count": 3, "_dead_letter_queue": "dlq"}, True),
])
def test_claims_exhaust_messages_only_once_both_count_and_queue_are_set(stored, counts):
    assert metadata.dead_letter_policy(stored).counts_claims is counts


# -- keys that nearly spell a reserved key ----------------------------------------------

@pytest.mark.parametrize(("a", "b", "distance"), [
    ("_max_claim_count", "_max_claim_count", 0),
    ("_max_claims_count", "_max_claim_count", 1),
    ("_max_claim_cuont", "_max_claim_count", 1),
    ("_max_clam_cont", "_max_claim_count", 2),
    ("_maxclaimcount", "_max_claim_count", 2),
    ("", "abc", 3),
    ("abc", "", 3),
])
def test_edit_distance_counts_insertions_deletions_substitutions_and_swaps(a, b, distance):
    assert metadata.edit_distance(a, b) == distance


@pytest.mark.parametrize(("key", "resembles"), [
    ("_max_claims_count", "_max_claim_count"),
    ("_max_claim_counts", "_max_claim_count"),
    ("_dead_letter_queu", "_dead_letter_queue"),
    ("_deadletter_queue", "_dead_letter_queue"),
    ("_dead_letter_on_expiri", "_dead_letter_on_expiry"),
    ("_default_message_tll", "_default_message_ttl"),
    ("_max_messages_ttl", "_max_message_ttl"),
    ("_retry_polcy", "_retry_policy"),
    ("_retry_backof", "_retry_backoff"),
    ("_dedup_windows", "_dedup_window"),
    ("_enable_encrypt_message", "_enable_encrypt_messages"),
])
def test_a_key_one_or_two_edits_from_a_reserved_key_is_refused_naming_it(key, resembles):
    assert refused({key: 3}) == (
        f"{key} is not a reserved metadata key; did you mean {resembles}? Keys that start with _ "
        "and nearly spell a reserved key are refused, since they would change nothing.")


@pytest.mark.parametrize("key", [
    "max_claims_count",       # no leading _: the client's own key
    "_max_claimed_message_count",  # three edits or more away from every reserved key
    "_owner",
    "_flavor",
    "_queue_template",
    "_retry_policy",
])
def test_other_keys_are_accepted_as_zaqar_accepts_them(key):
    assert metadata.validate({key: "x"} if key != "_retry_policy" else {key: {}}, LIMITS) == \
        ({key: "x"} if key != "_retry_policy" else {key: {}})


def test_a_null_misspelt_key_is_refused_too():
    assert refused({"_max_claims_count": None}).startswith("_max_claims_count is not a reserved metadata key")
