"""One store, two faces: SQS calls (the query protocol in XML, the AWS CLI, boto3) and the Zaqar API on the
same queues of the real server; a receipt handle is a claim, an SQS dead letter carries Zaqar's provenance."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.e2e.harness import ApiSession, RunningServer

boto3 = pytest.importorskip("boto3")

ACCOUNT = "210987654321"
NS = {"sqs": "http://queue.amazonaws.com/doc/2012-11-05/"}


@pytest.fixture
def name() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def sqs(server: RunningServer) -> Any:
    return boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1", aws_access_key_id=ACCOUNT,
                        aws_secret_access_key="any")


@pytest.fixture
def zaqar(server: RunningServer) -> ApiSession:
    with ApiSession(server.url, project=ACCOUNT) as session:
        yield session


def query(server: RunningServer, path: str, **params: str) -> ET.Element:
    """Post a query-protocol call as older SDKs do (form body, signed with the account's key) and parse it."""
    answer = requests.post(server.url + path, data=params, timeout=10, headers={
        "Authorization": f"AWS4-HMAC-SHA256 Credential={ACCOUNT}/20260101/us-east-1/sqs/aws4_request, "
                         "SignedHeaders=host, Signature=0"})
    root = ET.fromstring(answer.content)
    root.set("status", str(answer.status_code))
    return root


@pytest.mark.store_independent  # the wire, the same over every store
def test_the_query_protocol_answers_in_xml_on_the_root_and_on_queue_urls(server: RunningServer, name: str):
    created = query(server, "/", Action="CreateQueue", QueueName=name, **{
        "Attribute.1.Name": "VisibilityTimeout", "Attribute.1.Value": "40", "Tag.1.Key": "team",
        "Tag.1.Value": "ops"})
    url = created.findtext("sqs:CreateQueueResult/sqs:QueueUrl", namespaces=NS)
    assert url == f"{server.url}/{ACCOUNT}/{name}"
    path = f"/{ACCOUNT}/{name}"
    sent = query(server, path, Action="SendMessage", MessageBody="<b>&", **{
        "MessageAttribute.1.Name": "n", "MessageAttribute.1.Value.DataType": "Number",
        "MessageAttribute.1.Value.StringValue": "7"})
    md5 = sent.findtext("sqs:SendMessageResult/sqs:MD5OfMessageAttributes", namespaces=NS)
    received = query(server, path, Action="ReceiveMessage", MaxNumberOfMessages="5", **{
        "AttributeName.1": "All", "MessageAttributeName.1": "All"})
    message = received.find("sqs:ReceiveMessageResult/sqs:Message", NS)
    assert message is not None
    assert message.findtext("sqs:Body", namespaces=NS) == "<b>&"
    assert message.findtext("sqs:MD5OfMessageAttributes", namespaces=NS) == md5
    attributes = {a.findtext("sqs:Name", namespaces=NS): a.findtext("sqs:Value", namespaces=NS)
                  for a in message.findall("sqs:Attribute", NS)}
    assert attributes["ApproximateReceiveCount"] == "1"
    shown = query(server, path, Action="GetQueueAttributes", **{"AttributeName.1": "VisibilityTimeout"})
    assert [(a.findtext("sqs:Name", namespaces=NS), a.findtext("sqs:Value", namespaces=NS))
            for a in shown.iter(f"{{{NS['sqs']}}}Attribute")] == [("VisibilityTimeout", "40")]
    tags = query(server, path, Action="ListQueueTags")
    assert [t.findtext("sqs:Key", namespaces=NS) for t in tags.iter(f"{{{NS['sqs']}}}Tag")] == ["team"]
    wrong_place = query(server, path, Action="ListQueues")
    assert wrong_place.findtext("sqs:Error/sqs:Code", namespaces=NS) == "InvalidAction"
    unknown = query(server, path, Action="FooBar")
    assert (unknown.findtext("sqs:Error/sqs:Code", namespaces=NS),
            unknown.findtext("sqs:Error/sqs:Message", namespaces=NS)) \
        == ("InvalidAction", "The action FooBar is not valid for this endpoint.")
    plain_get = requests.get(server.url + path, timeout=10)
    assert (plain_get.status_code, ET.fromstring(plain_get.content).tag) == (404, "UnknownOperationException")
    as_json = requests.get(server.url + path,
                           params={"Action": "GetQueueAttributes", "AttributeName.1": "All"},
                           headers={"Accept": "application/json"}, timeout=10).json()
    listed = as_json["GetQueueAttributesResponse"]["GetQueueAttributesResult"]["Attributes"]
    assert {"Name": "VisibilityTimeout", "Value": "40"} in listed
    missing = query(server, f"/{ACCOUNT}/no-such-queue", Action="GetQueueAttributes")
    assert missing.get("status") == "400"
    assert missing.findtext("sqs:Error/sqs:Code", namespaces=NS) == "AWS.SimpleQueueService.NonExistentQueue"
    assert missing.findtext("sqs:Error/sqs:Type", namespaces=NS) == "Sender"


@pytest.mark.store_independent  # the wire, the same over every store
def test_the_zaqar_api_answers_as_before_beside_the_sqs_face(server: RunningServer):
    assert requests.get(server.url + "/", timeout=10).json()["versions"][0]["id"] == "2"
    assert requests.post(server.url + "/", json={}, timeout=10).status_code == 405
    assert requests.get(server.url + "/v2/nothing-here", timeout=10).status_code == 404
    assert requests.post(server.url + "/v2/nothing-here", json={}, timeout=10).status_code == 404


def test_a_message_sent_through_sqs_is_claimed_through_zaqar_and_the_reverse(sqs: Any, zaqar: ApiSession,
                                                                            name: str):
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="from sqs", MessageAttributes={
        "k": {"DataType": "String", "StringValue": "v"}})
    claimed = zaqar.post(f"/v2/queues/{name}/claims", json={"ttl": 60, "grace": 60})
    assert claimed.status_code == 201
    body = claimed.json()["messages"][0]["body"]
    assert body == {"MessageBody": "from sqs",
                    "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}}}
    posted = zaqar.post(f"/v2/queues/{name}/messages", json={"messages": [
        {"body": "from zaqar"}, {"body": {"order": 7}}]})
    assert posted.status_code == 201
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in received) == ["from zaqar", '{"order":7}']


def test_a_receipt_handle_is_a_claim_of_the_zaqar_api(sqs: Any, zaqar: ApiSession, name: str):
    from zaqar_lite.rules.sqs import names

    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="held")
    message = sqs.receive_message(QueueUrl=url, VisibilityTimeout=120)["Messages"][0]
    message_id, claim_id = names.parse_receipt_handle(message["ReceiptHandle"], name)
    claim = zaqar.get(f"/v2/queues/{name}/claims/{claim_id}")
    assert claim.status_code == 200
    assert [m["href"].rsplit("/", 1)[1].split("?")[0] for m in claim.json()["messages"]] == [message_id]
    assert claim.json()["ttl"] == 120
    zaqar.delete(f"/v2/queues/{name}/claims/{claim_id}")
    again = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])["Messages"]
    assert again[0]["Attributes"]["ApproximateReceiveCount"] == "2"


def test_an_sqs_dead_letter_carries_zaqar_provenance(sqs: Any, zaqar: ApiSession, name: str):
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": arn, "maxReceiveCount": "2"})})["QueueUrl"]
    queue = zaqar.get(f"/v2/queues/{name}").json()
    assert (queue["_dead_letter_queue"], queue["_max_claim_count"]) == (f"{name}-dlq", 2)
    sqs.send_message(QueueUrl=url, MessageBody="fails")
    for _ in range(2):
        sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    listed = zaqar.get(f"/v2/queues/{name}-dlq/messages",
                       params={"echo": "true", "include_dead_letter": "true"}).json()["messages"]
    assert [(m["body"], m["dead_letter"]["source_queue"], m["dead_letter"]["reason"]) for m in listed] \
        == [("fails", name, "max_claims")]


def aws_cli() -> str | None:
    found = shutil.which("aws") or str(Path(sys.executable).parent / "aws")
    return found if os.path.exists(found) else None


@pytest.mark.store_independent  # the wire, the same over every store
def test_the_aws_cli_works_against_the_endpoint(server: RunningServer, name: str, tmp_path: Path):
    cli = aws_cli()
    if cli is None:
        if os.environ.get("CI"):
            pytest.fail("the AWS CLI (awscli, the test extra) is not installed")
        pytest.skip("the AWS CLI is not installed")
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCOUNT, "AWS_SECRET_ACCESS_KEY": "any",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp_path / "none"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "HOME": str(tmp_path)}

    def aws(*args: str) -> dict[str, Any]:
        done = subprocess.run([cli, "--endpoint-url", server.url, "--output", "json", "sqs", *args],
                              capture_output=True, text=True, env=env, timeout=60, check=True)
        return json.loads(done.stdout) if done.stdout.strip() else {}

    url = aws("create-queue", "--queue-name", name)["QueueUrl"]
    assert url == f"{server.url}/{ACCOUNT}/{name}"
    aws("send-message", "--queue-url", url, "--message-body", "from the cli")
    received = aws("receive-message", "--queue-url", url, "--wait-time-seconds", "1")["Messages"]
    assert [m["Body"] for m in received] == ["from the cli"]
    failed = subprocess.run([cli, "--endpoint-url", server.url, "sqs", "get-queue-url", "--queue-name",
                             "no-such-queue"], capture_output=True, text=True, env=env, timeout=60)
    assert failed.returncode != 0
    assert "NonExistentQueue" in failed.stderr
