"""SQS queue attributes: their rules, defaults, and where each lies in queue metadata."""

from __future__ import annotations

import json

import pytest

from zaqar_lite.errors import SqsRefused
from zaqar_lite.rules.sqs import attributes

ACCOUNT = "123456789012"
DLQ_ARN = f"arn:aws:sqs:us-east-1:{ACCOUNT}:dead"


def test_attributes_with_a_zaqar_concept_are_its_reserved_metadata():
    checked = attributes.check({"DelaySeconds": "5", "MessageRetentionPeriod": 600, "VisibilityTimeout": "7",
                                "RedrivePolicy": json.dumps({"deadLetterTargetArn": DLQ_ARN,
                                                             "maxReceiveCount": "3"})},
                               fifo=False, creating=True)
    stored = attributes.stored({}, checked, ACCOUNT, 1000.0, {"team": "ops"})
    assert stored["_default_message_delay"] == 5
    assert stored["_default_message_ttl"] == 600
    assert (stored["_dead_letter_queue"], stored["_max_claim_count"]) == ("dead", 3)
    assert stored["sqs"] == {"attributes": {"VisibilityTimeout": "7"}, "created": 1000, "modified": 1000,
                             "tags": {"team": "ops"}}


def test_a_new_queue_keeps_messages_four_days_as_sqs():
    assert attributes.stored({}, {}, ACCOUNT, 0.0)["_default_message_ttl"] == 345600


def test_an_empty_redrive_policy_removes_the_dead_letter_queue():
    current = {"_dead_letter_queue": "dead", "_max_claim_count": 3}
    assert "_dead_letter_queue" not in attributes.stored(current, {"RedrivePolicy": ""}, ACCOUNT, 0.0)


def test_a_queue_made_through_zaqar_shows_its_metadata_as_attributes():
    shown = attributes.shown({"_default_message_delay": 2, "_dead_letter_queue": "dead",
                              "_max_claim_count": 4}, False, 3600, "us-east-1", ACCOUNT)
    assert shown["DelaySeconds"] == "2"
    assert shown["MessageRetentionPeriod"] == "3600"
    assert shown["VisibilityTimeout"] == "30"
    assert json.loads(shown["RedrivePolicy"]) == {"deadLetterTargetArn": DLQ_ARN, "maxReceiveCount": 4}
    assert "FifoQueue" not in shown


@pytest.mark.parametrize(("given", "fifo", "code"), [
    ({"VisibilityTimeout": "43201"}, False, "InvalidAttributeValue"),
    ({"DelaySeconds": "-1"}, False, "InvalidAttributeValue"),
    ({"Colour": "red"}, False, "InvalidAttributeName"),
    ({"ContentBasedDeduplication": "true"}, False, "InvalidAttributeName"),
    ({"DeduplicationScope": "everything"}, True, "InvalidAttributeValue"),
    ({"Policy": "not json"}, False, "InvalidAttributeValue"),
])
def test_attributes_sqs_refuses_are_refused_with_its_code(given, fifo, code):
    with pytest.raises(SqsRefused) as refused:
        attributes.check(given, fifo=fifo, creating=True)
    assert refused.value.code == code


@pytest.mark.parametrize("policy", [
    "not json", json.dumps({"maxReceiveCount": 3}), json.dumps({"deadLetterTargetArn": DLQ_ARN,
                                                                "maxReceiveCount": 0}),
    json.dumps({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:999999999999:dead", "maxReceiveCount": 1})])
def test_a_redrive_policy_sqs_refuses_is_refused(policy):
    with pytest.raises(SqsRefused) as refused:
        attributes.redrive_target(policy, ACCOUNT)
    assert refused.value.code == "InvalidParameterValue"


def test_an_existing_queue_with_other_values_is_found_out():
    stored = attributes.stored({}, {"VisibilityTimeout": "40"}, ACCOUNT, 0.0)
    assert attributes.differing(stored, {"VisibilityTimeout": "40"}, False, 3600, "r", ACCOUNT) is None
    assert attributes.differing(stored, {"VisibilityTimeout": "41"}, False, 3600, "r", ACCOUNT) \
        == "VisibilityTimeout"


def test_tags_are_limited_to_fifty_and_removed_by_key():
    with pytest.raises(SqsRefused) as refused:
        attributes.check_tags({f"k{n}": "v" for n in range(51)}, {}, "q1")
    assert str(refused.value) == "Too many tags added for queue q1."
    metadata = {"sqs": {"tags": {"a": "1", "b": "2"}}}
    assert attributes.tags_of(attributes.without_tags(metadata, ["a"])) == {"b": "2"}


@pytest.mark.parametrize(("given", "fifo", "creating", "code", "message"), [
    ({"FifoQueue": "false"}, False, True, "InvalidAttributeName", "Unknown Attribute FifoQueue."),
    ({"FifoQueue": "false"}, False, False, "InvalidAttributeName", "Unknown Attribute FifoQueue."),
    ({"FifoQueue": "true"}, False, False, "InvalidAttributeName", "Unknown Attribute FifoQueue."),
    ({"FifoQueue": "false"}, True, False, "InvalidAttributeValue",
     "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."),
    ({"DeduplicationScope": "queue"}, False, True, "InvalidAttributeName",
     "You can specify the DeduplicationScope only when FifoQueue is set to true."),
    ({"FifoThroughputLimit": "perQueue"}, False, True, "InvalidAttributeName",
     "You can specify the FifoThroughputLimit only when FifoQueue is set to true."),
])
def test_a_standard_queue_refuses_every_fifo_attribute_in_sqs_words(given, fifo, creating, code, message):
    with pytest.raises(SqsRefused) as refused:
        attributes.check(given, fifo=fifo, creating=creating)
    assert (refused.value.code, str(refused.value)) == (code, message)


def test_a_fifo_queue_may_restate_that_it_is_fifo():
    assert attributes.check({"FifoQueue": "true"}, fifo=True, creating=False) == {"FifoQueue": "true"}


def test_a_data_key_reuse_period_is_shown_only_beside_a_master_key():
    keying = {"KmsMasterKeyId": "k", "KmsDataKeyReusePeriodSeconds": "600"}
    keyed = attributes.stored({}, attributes.check(keying, fifo=False, creating=True), ACCOUNT, 0.0)
    assert attributes.shown(keyed, False, 60, "r", ACCOUNT)["KmsDataKeyReusePeriodSeconds"] == "600"
    unkeying = {"KmsMasterKeyId": "", "KmsDataKeyReusePeriodSeconds": "300"}
    unkeyed = attributes.stored(keyed, attributes.check(unkeying, fifo=False, creating=False), ACCOUNT, 0.0)
    assert "KmsDataKeyReusePeriodSeconds" not in attributes.shown(unkeyed, False, 60, "r", ACCOUNT)


def test_a_permission_policy_is_written_in_the_policy_language_version_sqs_writes():
    policy = attributes.with_permission("", "l", [ACCOUNT], ["SendMessage"], DLQ_ARN)
    assert json.loads(policy)["Version"] == "2008-10-17"


def test_a_queue_naming_itself_as_its_dead_letter_queue_keeps_the_policy_without_a_dead_letter_queue():
    own_arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:orders"
    policy = json.dumps({"deadLetterTargetArn": own_arn, "maxReceiveCount": "4"})
    stored = attributes.stored({"_dead_letter_queue": "dead", "_max_claim_count": 2},
                               {"RedrivePolicy": policy}, ACCOUNT, 10.0, queue="orders")
    assert "_dead_letter_queue" not in stored and "_max_claim_count" not in stored
    shown = attributes.shown(stored, False, 3600, "us-east-1", ACCOUNT)
    assert json.loads(shown["RedrivePolicy"]) == {"deadLetterTargetArn": own_arn, "maxReceiveCount": 4}
    assert attributes.differing(stored, {"RedrivePolicy": policy}, False, 3600, "us-east-1", ACCOUNT) is None
    cleared = attributes.stored(stored, {"RedrivePolicy": ""}, ACCOUNT, 11.0, queue="orders")
    assert "RedrivePolicy" not in attributes.shown(cleared, False, 3600, "us-east-1", ACCOUNT)


def test_the_group_deduplication_scope_is_fixed_when_the_queue_is_created():
    created = attributes.stored({}, {"DeduplicationScope": "messageGroup"}, ACCOUNT, 1.0)
    assert created["sqs"]["group_dedup"] is True
    changed = attributes.stored({"sqs": {}}, {"DeduplicationScope": "messageGroup"}, ACCOUNT, 1.0)
    assert "group_dedup" not in changed["sqs"]
