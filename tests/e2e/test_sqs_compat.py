"""Where the SQS face answers as SQS answered LocalStack's validated suite: a queue as its own dead-letter
queue, a visibility change after its receive ended, a name deleted less than a minute ago, FIFO
deduplication within a group and after a purge, and queues of several regions. The real server, the real
boto3; one server per module."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.e2e.harness import RunningServer

boto3 = pytest.importorskip("boto3")
botocore_exceptions = pytest.importorskip("botocore.exceptions")
ClientError = botocore_exceptions.ClientError

ACCOUNT = "123456789012"


def client(server: RunningServer, region: str = "us-east-1") -> Any:
    from botocore.config import Config

    return boto3.client("sqs", endpoint_url=server.url, region_name=region, aws_access_key_id=ACCOUNT,
                        aws_secret_access_key="secret", config=Config(retries={"max_attempts": 1}))


@pytest.fixture
def sqs(server: RunningServer) -> Any:
    return client(server)


@pytest.fixture
def name() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def error_code(exc: pytest.ExceptionInfo[Any]) -> str:
    return exc.value.response["Error"]["Code"]


def test_a_queue_may_name_itself_as_its_dead_letter_queue_and_an_empty_policy_clears_it(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = {"deadLetterTargetArn": arn, "maxReceiveCount": "2"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": json.dumps(policy)})
    shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert json.loads(shown["RedrivePolicy"]) == {"deadLetterTargetArn": arn, "maxReceiveCount": 2}
    # its messages stay in it however often they are received
    sqs.send_message(QueueUrl=url, MessageBody="stays")
    for _ in range(3):
        assert [m["Body"] for m in sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]] \
            == ["stays"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    assert "RedrivePolicy" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def test_a_visibility_change_after_the_receive_ended_is_taken_unless_another_received_it(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="late")
    first = sqs.receive_message(QueueUrl=url)["Messages"][0]["ReceiptHandle"]
    time.sleep(1.2)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first, VisibilityTimeout=2)
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)  # received by another, visible again at once
    with pytest.raises(ClientError) as taken:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first, VisibilityTimeout=2)
    assert error_code(taken) == "AWS.SimpleQueueService.MessageNotInflight"


def test_a_queue_name_deleted_less_than_a_minute_ago_is_refused(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(ClientError) as recently:
        sqs.create_queue(QueueName=name)
    assert error_code(recently) == "AWS.SimpleQueueService.QueueDeletedRecently"
    assert "wait 60 seconds" in recently.value.response["Error"]["Message"]


def test_a_deduplication_id_counts_within_its_group_under_the_message_group_scope(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={
        "FifoQueue": "true", "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId"})["QueueUrl"]
    for group, body in (("g1", "one"), ("g2", "two"), ("g1", "again")):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group,
                         MessageDeduplicationId="same")
    received = []
    for _ in range(3):
        for message in sqs.receive_message(QueueUrl=url, AttributeNames=["MessageDeduplicationId"]).get(
                "Messages", []):
            received.append((message["Body"], message["Attributes"]["MessageDeduplicationId"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert sorted(received) == [("one", "same"), ("two", "same")]


def test_a_purge_forgets_the_deduplication_ids_sent_before_it(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="before", MessageGroupId="g", MessageDeduplicationId="d")
    sqs.purge_queue(QueueUrl=url)
    sqs.send_message(QueueUrl=url, MessageBody="after", MessageGroupId="g", MessageDeduplicationId="d")
    sqs.send_message(QueueUrl=url, MessageBody="duplicate", MessageGroupId="g", MessageDeduplicationId="d")
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                   AttributeNames=["MessageDeduplicationId"])["Messages"]
    assert [(m["Body"], m["Attributes"]["MessageDeduplicationId"]) for m in messages] == [("after", "d")]


def test_each_region_has_its_own_queue_of_a_name_at_its_own_url(server: RunningServer, name: str):
    home, other = client(server), client(server, "eu-central-1")
    home_url = home.create_queue(QueueName=name)["QueueUrl"]
    other_url = other.create_queue(QueueName=name)["QueueUrl"]
    assert home_url == f"{server.url}/{ACCOUNT}/{name}"
    assert other_url == f"{server.url}/queue/eu-central-1/{ACCOUNT}/{name}"
    assert other.get_queue_url(QueueName=name)["QueueUrl"] == other_url
    assert other_url in other.list_queues(QueueNamePrefix=name)["QueueUrls"]
    assert home.list_queues(QueueNamePrefix=name)["QueueUrls"] == [home_url]
    assert other.get_queue_attributes(QueueUrl=other_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"] == f"arn:aws:sqs:eu-central-1:{ACCOUNT}:{name}"
    # the query protocol, sent to the queue URL itself, reaches that region's queue
    import requests

    assert requests.get(other_url, params={"Action": "SendMessage", "MessageBody": "eu"},
                        timeout=10).status_code == 200
    assert "Messages" not in home.receive_message(QueueUrl=home_url)
    assert [m["Body"] for m in home.receive_message(QueueUrl=other_url)["Messages"]] == ["eu"]
    # a deleted name is refused again in its region only
    other.delete_queue(QueueUrl=other_url)
    with pytest.raises(ClientError) as recently:
        other.create_queue(QueueName=name)
    assert error_code(recently) == "AWS.SimpleQueueService.QueueDeletedRecently"
    assert home.get_queue_url(QueueName=name)["QueueUrl"] == home_url


def test_the_deduplication_scope_a_queue_was_created_with_holds_after_a_change(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "messageGroup"})
    for group in ("g1", "g2"):
        sqs.send_message(QueueUrl=url, MessageBody=group, MessageGroupId=group, MessageDeduplicationId="d")
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in received] == ["g1"]


def test_untagging_no_tag_key_or_an_overlong_one_is_refused(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name, tags={"team": "ops"})["QueueUrl"]
    for keys in ([], ["k" * 129]):
        with pytest.raises(ClientError) as refused:
            sqs.untag_queue(QueueUrl=url, TagKeys=keys)
        assert refused.value.response["Error"]["Message"] == \
            "Tag keys must be between 1 and 128 characters in length."
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "ops"}
