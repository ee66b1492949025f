"""The SQS-compatible endpoint on the real server, driven by the real boto3 (AWS JSON 1.0) and by
botocore's query protocol: queues, messages, dead letters and move tasks, one server per module."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

import pytest

from tests.conftest import STORE_KIND
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


def test_listing_pages_by_prefix_with_a_next_token(sqs: Any):
    prefix = f"p{uuid.uuid4().hex[:8]}"
    urls = sorted(sqs.create_queue(QueueName=f"{prefix}-{n}")["QueueUrl"] for n in range(3))
    sqs.create_queue(QueueName=f"other{prefix}")
    first = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2)
    second = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2, NextToken=first["NextToken"])
    assert first["QueueUrls"] + second["QueueUrls"] == urls
    assert "NextToken" not in second


def test_attributes_are_set_and_refused_with_sqs_errors(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "5"})["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "120", "DelaySeconds": "0"})
    shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MessageRetentionPeriod", "DelaySeconds"])
    assert shown["Attributes"] == {"MessageRetentionPeriod": "120", "DelaySeconds": "0"}
    with pytest.raises(ClientError) as refused:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "99999"})
    assert error_code(refused) == "InvalidAttributeValue"
    with pytest.raises(ClientError) as unknown:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Colour"])
    assert error_code(unknown) == "InvalidAttributeName"
    with pytest.raises(ClientError) as clash:
        sqs.create_queue(QueueName=name, Attributes={"DelaySeconds": "7"})
    assert error_code(clash) == "QueueAlreadyExists"
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url


def test_tags_are_added_and_removed(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)
    sqs.tag_queue(QueueUrl=url, Tags={"a": "1", "b": "2"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["a"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"b": "2"}


def test_batches_send_delete_and_change_visibility_entry_by_entry(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "one"}, {"Id": "b", "MessageBody": "two"},
        {"Id": "c", "MessageBody": ""}])
    assert sorted(e["Id"] for e in sent["Successful"]) == ["a", "b"]
    assert [(e["Id"], e["Code"]) for e in sent["Failed"]] == [("c", "MissingParameter")]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)["Messages"]
    assert sorted(m["Body"] for m in received) == ["one", "two"]
    first, second = received
    changed = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "x", "ReceiptHandle": first["ReceiptHandle"], "VisibilityTimeout": 0},
        {"Id": "y", "ReceiptHandle": "not-a-handle", "VisibilityTimeout": 0}])
    assert [e["Id"] for e in changed["Successful"]] == ["x"]
    assert [(e["Id"], e["Code"], e["Message"]) for e in changed["Failed"]] == [
        ("y", "ReceiptHandleIsInvalid",
         'The input receipt handle "not-a-handle" is not a valid receipt handle.')]
    with pytest.raises(ClientError) as invalid:  # a single change's words name no handle, as SQS's
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle="not-a-handle", VisibilityTimeout=5)
    assert (error_code(invalid), invalid.value.response["Error"]["Message"]) \
        == ("ReceiptHandleIsInvalid", "The input receipt handle is invalid.")
    with pytest.raises(ClientError) as invalid:  # a delete's do
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
    assert invalid.value.response["Error"]["Message"] \
        == 'The input receipt handle "not-a-handle" is not a valid receipt handle.'
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                AttributeNames=["ApproximateReceiveCount"])
    assert [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in again["Messages"]] \
        == [(first["Body"], "2")]
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "p", "ReceiptHandle": second["ReceiptHandle"]},
        {"Id": "q", "ReceiptHandle": again["Messages"][0]["ReceiptHandle"]}])
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["p", "q"]
    assert "Failed" not in deleted  # as SQS answers a batch whose every entry succeeded
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (counts["ApproximateNumberOfMessages"], counts["ApproximateNumberOfMessagesNotVisible"]) \
        == ("0", "0")
    with pytest.raises(ClientError) as empty:
        sqs.delete_message_batch(QueueUrl=url, Entries=[])
    assert error_code(empty) == "AWS.SimpleQueueService.EmptyBatchRequest"


def test_a_visibility_change_extends_the_claim_twice_and_zero_lets_it_go(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="slow")
    handle = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"][0]["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=60)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=60)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    again = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"]
    assert [m["Body"] for m in again] == ["slow"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again[0]["ReceiptHandle"])
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])[
        "Attributes"] == {"ApproximateNumberOfMessagesNotVisible": "0"}


def test_a_delayed_message_waits_and_a_long_poll_gets_it(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])[
        "Attributes"] == {"ApproximateNumberOfMessagesDelayed": "1"}
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)
    assert [m["Body"] for m in received["Messages"]] == ["later"]


def test_a_message_past_max_receive_count_moves_to_the_dlq_and_a_move_task_brings_it_back(sqs: Any,
                                                                                         name: str):
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    shown = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"][
        "RedrivePolicy"])
    assert shown == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [url]
    sent = sqs.send_message(QueueUrl=url, MessageBody="poison")["MessageId"]
    # (a wait: a store whose listings settle, Swift, shows a new message a moment later; there a claim
    # whose read and write outlast the settle time gives the message up, counted, so on a loaded
    # machine the one receive may hand out nothing: the message must reach the DLQ all the same)
    received = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=5).get("Messages", [])
    assert [m["MessageId"] for m in received] == ([sent] if STORE_KIND != "swift" else [sent][:len(received)])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    dead = sqs.receive_message(QueueUrl=dlq, AttributeNames=["All"], VisibilityTimeout=0,
                               WaitTimeSeconds=5)["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in dead] == [(sent, "poison")]
    assert dead[0]["Attributes"]["DeadLetterQueueSourceArn"] == dlq_arn.replace(f"{name}-dlq", name)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    with pytest.raises(ClientError) as not_a_dlq:
        sqs.start_message_move_task(SourceArn=dlq_arn)
    assert error_code(not_a_dlq) == "InvalidParameterValue"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=50)["TaskHandle"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        tasks = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        if tasks[0]["Status"] != "RUNNING":
            break
        time.sleep(0.2)
    assert tasks[0]["Status"] == "COMPLETED"
    assert tasks[0]["ApproximateNumberOfMessagesMoved"] == 1
    back = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [m["MessageId"] for m in back] == [sent]
    with pytest.raises(ClientError) as finished:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert error_code(finished) in ("FailedPrecondition", "ResourceNotFoundException")


def test_a_fifo_queue_keeps_group_order_and_drops_duplicates(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="a1", MessageGroupId="a")
    again = sqs.send_message(QueueUrl=url, MessageBody="a1", MessageGroupId="a")
    assert again["MessageId"] == first["MessageId"]
    sqs.send_message(QueueUrl=url, MessageBody="a2", MessageGroupId="a")
    assert int(first["SequenceNumber"]) > 0
    assert len(first["SequenceNumber"]) == 20 and not first["SequenceNumber"].startswith("0")  # as SQS's
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                              AttributeNames=["MessageGroupId", "SequenceNumber"])
    assert [(m["Body"], m["Attributes"]["MessageGroupId"]) for m in got["Messages"]] == [
        ("a1", "a"), ("a2", "a")]
    assert got["Messages"][0]["Attributes"]["SequenceNumber"] == first["SequenceNumber"]
    with pytest.raises(ClientError) as no_group:
        sqs.send_message(QueueUrl=url, MessageBody="x")
    assert error_code(no_group) == "MissingParameter"
    with pytest.raises(ClientError) as bad_name:
        sqs.create_queue(QueueName=f"{name}-2", Attributes={"FifoQueue": "true"})
    assert error_code(bad_name) == "InvalidParameterValue"


def test_a_fifo_receive_takes_a_groups_messages_together_and_a_delete_frees_the_rest(sqs: Any, name: str):
    import threading

    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    for body, group in (("g1-m1", "g1"), ("g2-m1", "g2"), ("g1-m2", "g1"), ("g1-m3", "g1")):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)

    def receive(**options: Any) -> list[Any]:
        return sqs.receive_message(QueueUrl=url, VisibilityTimeout=30, **options).get("Messages", [])

    first = receive(MaxNumberOfMessages=2)
    assert [m["Body"] for m in first] == ["g1-m1", "g1-m2"]
    assert [m["Body"] for m in receive(MaxNumberOfMessages=10)] == ["g2-m1"]  # g1 is in flight: g1-m3 waits
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"], VisibilityTimeout=0)
    again = receive(MaxNumberOfMessages=10)
    assert [m["Body"] for m in again] == ["g1-m1"]  # back, so its group is; g1-m2 is still in flight
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again[0]["ReceiptHandle"])
    assert receive(MaxNumberOfMessages=10) == []
    waiting: list[list[Any]] = []
    thread = threading.Thread(
        target=lambda: waiting.append(receive(MaxNumberOfMessages=10, WaitTimeSeconds=5)))
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[1]["ReceiptHandle"])  # the last of g1 in flight
    thread.join(10)
    assert [m["Body"] for m in waiting[0]] == ["g1-m3"]
    assert time.monotonic() - started < 3  # the delete woke the waiting receive


def test_errors_carry_the_query_code_botocore_reads(server: RunningServer):
    import requests

    answer = requests.post(server.url + "/", data=json.dumps({"QueueUrl": f"{server.url}/{ACCOUNT}/missing"}),
                           headers={"X-Amz-Target": "AmazonSQS.GetQueueAttributes",
                                    "Content-Type": "application/x-amz-json-1.0"}, timeout=10)
    assert answer.status_code == 400
    assert answer.json()["__type"] == "com.amazonaws.sqs#QueueDoesNotExist"
    assert answer.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"


def test_an_old_receipt_handle_changes_the_visibility_of_the_message_in_flight(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="twice")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]["ReceiptHandle"]
    assert len(sqs.receive_message(QueueUrl=url, VisibilityTimeout=60)["Messages"]) == 1
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first, VisibilityTimeout=0)
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=url)["Messages"]] == ["twice"]


def test_a_fifo_batch_without_a_group_fails_whole_and_a_fifo_queue_needs_its_attribute(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={
        "FifoQueue": "True", "ContentBasedDeduplication": "False"})["QueueUrl"]
    with pytest.raises(ClientError) as whole:
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "a", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "d"},
            {"Id": "b", "MessageBody": "y", "MessageDeduplicationId": "e"}])
    assert error_code(whole) == "InvalidParameterValue"
    with pytest.raises(ClientError) as suffix:
        sqs.create_queue(QueueName=f"{name}-2.fifo")
    assert error_code(suffix) == "InvalidParameterValue"
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ContentBasedDeduplication"])[
        "Attributes"] == {"ContentBasedDeduplication": "false"}


def test_a_queue_name_stands_for_its_url_and_a_message_may_be_up_to_a_mebibyte(sqs: Any, name: str):
    sqs.create_queue(QueueName=name)
    sqs.send_message(QueueUrl=name, MessageBody="x" * 1048576)
    assert len(sqs.receive_message(QueueUrl=name)["Messages"][0]["Body"]) == 1048576
    with pytest.raises(ClientError) as too_large:
        sqs.send_message(QueueUrl=name, MessageBody="x" * 1048577)
    assert error_code(too_large) == "InvalidParameterValue"
    assert too_large.value.response["Error"]["QueryErrorCode"] == "InvalidParameterValueException"


def test_a_purge_within_a_minute_of_another_is_refused(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="gone")
    sqs.purge_queue(QueueUrl=url)
    with pytest.raises(ClientError) as again:
        sqs.purge_queue(QueueUrl=url)
    assert error_code(again) == "AWS.SimpleQueueService.PurgeQueueInProgress"
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_a_standard_queue_keeps_and_shows_a_message_group(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="grouped", MessageGroupId="tenant-1")
    sqs.send_message(QueueUrl=url, MessageBody="same group", MessageGroupId="tenant-1")
    # the group holds nothing back on a standard queue: both are received at once
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                              MessageSystemAttributeNames=["MessageGroupId"])["Messages"]
    assert sorted((m["Body"], m["Attributes"]["MessageGroupId"]) for m in got) \
        == [("grouped", "tenant-1"), ("same group", "tenant-1")]
    sqs.send_message(QueueUrl=url, MessageBody="third", MessageGroupId="tenant-2")
    third = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"][0]["Attributes"]
    assert third["MessageGroupId"] == "tenant-2"
    assert "SequenceNumber" not in third  # a standard queue numbers nothing, as SQS
    with pytest.raises(ClientError) as spaces:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="has spaces")
    assert error_code(spaces) == "InvalidParameterValue"


def test_permissions_are_kept_in_the_queue_policy(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.add_permission(QueueUrl=url, Label="readers", AWSAccountIds=["111122223333"],
                       Actions=["ReceiveMessage"])
    shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]
    policy = json.loads(shown["Policy"])
    assert [(s["Sid"], s["Action"], s["Principal"]) for s in policy["Statement"]] \
        == [("readers", "SQS:ReceiveMessage", {"AWS": "arn:aws:iam::111122223333:root"})]
    with pytest.raises(ClientError) as twice:
        sqs.add_permission(QueueUrl=url, Label="readers", AWSAccountIds=["1"], Actions=["SendMessage"])
    assert error_code(twice) == "InvalidParameterValue"
    sqs.remove_permission(QueueUrl=url, Label="readers")
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])


def test_the_trace_header_of_a_send_is_the_messages_aws_trace_header(sqs: Any, name: str):
    trace = "Root=1-3152b799-8954dae64eda91bc9a23a7e8;Parent=7fa8c0f79203be72;Sampled=1"

    def add_trace(request: Any, **_: Any) -> None:
        request.headers["X-Amzn-Trace-Id"] = trace

    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.meta.events.register("before-send.sqs.SendMessage", add_trace)
    try:
        sqs.send_message(QueueUrl=url, MessageBody="traced")
    finally:
        sqs.meta.events.unregister("before-send.sqs.SendMessage", add_trace)
    got = sqs.receive_message(QueueUrl=url, AttributeNames=["AWSTraceHeader"])["Messages"][0]
    assert got["Attributes"] == {"AWSTraceHeader": trace}


def test_an_empty_deduplication_id_and_a_standard_queues_fifo_attributes_are_refused(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    with pytest.raises(ClientError) as empty:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="")
    assert empty.value.response["Error"]["Message"] == (
        "Value  for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId can only "
        "include alphanumeric and punctuation characters. 1 to 128 in length.")
    with pytest.raises(ClientError) as standard:
        sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "false"})
    assert (error_code(standard), standard.value.response["Error"]["Message"]) \
        == ("InvalidAttributeName", "Unknown Attribute FifoQueue.")
    with pytest.raises(ClientError) as wait:
        sqs.receive_message(QueueUrl=url, WaitTimeSeconds=21)
    assert "Must be >= 0 and <= 20, if provided." in wait.value.response["Error"]["Message"]


def test_a_fifo_queue_refuses_a_receipt_handle_whose_visibility_passed(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="once", MessageGroupId="g")
    handle = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"][0]["ReceiptHandle"]
    with pytest.raises(ClientError) as expired:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    assert (error_code(expired), expired.value.response["Error"]["Message"]) == (
        "InvalidParameterValue",
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.")
    live = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"][0]
    assert live["Body"] == "once"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=live["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_a_fifo_message_sent_with_no_delay_keeps_its_queues_delay(sqs: Any, name: str):
    url = sqs.create_queue(QueueName=f"{name}.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true", "DelaySeconds": "600"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="later", MessageGroupId="g", DelaySeconds=0)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert counts["Attributes"] == {"ApproximateNumberOfMessagesDelayed": "1"}


def test_a_queue_url_without_a_path_is_a_queue_that_does_not_exist(sqs: Any):
    with pytest.raises(ClientError) as missing:
        sqs.get_queue_attributes(QueueUrl="http://whatever-incorrect-queue-address", AttributeNames=["All"])
    assert error_code(missing) == "AWS.SimpleQueueService.NonExistentQueue"
