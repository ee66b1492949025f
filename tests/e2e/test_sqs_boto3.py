"""The SQS-compatible endpoint on the real server, driven by the real boto3 (AWS JSON 1.0) and by
botocore's query protocol: queues, messages, dead letters and move tasks, one server per module."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest

from tests.e2e.harness import RunningServer

boto3 = pytest.importorskip("boto3")
botocore_exceptions = pytest.importorskip("botocore.exceptions")
ClientError = botocore_exceptions.ClientError

ACCOUNT = "123456789012"


def client(server: RunningServer, key: str = ACCOUNT) -> Any:
    """Return boto3's SQS client on the server (AWS JSON 1.0, as current SDKs speak it)."""
    from botocore.config import Config

    return boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key="secret", config=Config(retries={"max_attempts": 1}))


@pytest.fixture
def sqs(server: RunningServer) -> Any:
    return client(server)


@pytest.fixture
def name() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def error_code(exc: pytest.ExceptionInfo[Any]) -> str:
    return exc.value.response["Error"]["Code"]


def test_a_queue_is_created_found_listed_and_deleted(sqs: Any, name: str, server: RunningServer):
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"},
                           tags={"team": "billing"})["QueueUrl"]
    assert url == f"{server.url}/{ACCOUNT}/{name}"
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert url in sqs.list_queues(QueueNamePrefix=name[:6])["QueueUrls"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["VisibilityTimeout"] == "45"
    assert attributes["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "billing"}
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(ClientError) as refused:
        sqs.get_queue_url(QueueName=name)
    assert error_code(refused) == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_message_is_sent_received_and_deleted_with_its_md5s(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="hello", MessageAttributes={
        "colour": {"DataType": "String", "StringValue": "blue"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}})
    assert sent["MD5OfMessageBody"] == hashlib.md5(b"hello").hexdigest()
    received = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"],
                                   WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in received] == ["hello"]
    message = received[0]
    assert message["MessageId"] == sent["MessageId"]
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert message["MessageAttributes"]["blob"]["BinaryValue"] == b"\x00\x01"
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)
