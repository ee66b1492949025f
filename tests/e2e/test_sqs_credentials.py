"""Credentials of the SQS face on the real server: under token auth every request's Signature Version 4
is checked against ``[sqs] credentials``; under noauth the access key names the account."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import RunningServer, start_server, stop_server

#: who a request acts for is decided before any store is reached
pytestmark = pytest.mark.store_independent

boto3 = pytest.importorskip("boto3")
ClientError = pytest.importorskip("botocore.exceptions").ClientError

KEY, SECRET, PROJECT = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "billing"
CONFIG = f"""[auth]
strategy = token
[tokens]
t0ken-for-ping = {PROJECT}:member
[sqs]
credentials = {KEY}:{SECRET}:{PROJECT}, OTHERKEY:othersecret:shop
"""


@pytest.fixture(scope="module")
def signed_server(store: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("sqs-auth")
    config = directory / "zaqar-lite.conf"
    config.write_text(CONFIG)
    running = start_server(store.uri(directory), directory, extra_args=["--config", str(config)],
                           token="t0ken-for-ping")
    yield running
    stop_server(running)


def client(server: RunningServer, key: str, secret: str) -> Any:
    from botocore.config import Config

    return boto3.client("sqs", endpoint_url=server.url, region_name="eu-west-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}))


def code(exc: pytest.ExceptionInfo[Any]) -> str:
    return exc.value.response["Error"]["Code"]


def test_a_request_signed_with_a_configured_key_acts_for_its_project(signed_server: RunningServer):
    sqs = client(signed_server, KEY, SECRET)
    name = f"q-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url.endswith(f"/{PROJECT}/{name}")
    sqs.send_message(QueueUrl=url, MessageBody="signed body")
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "signed body"
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn == f"arn:aws:sqs:eu-west-1:{PROJECT}:{name}"


def test_a_wrong_secret_or_an_unknown_key_is_refused(signed_server: RunningServer):
    with pytest.raises(ClientError) as wrong:
        client(signed_server, KEY, "not-the-secret").list_queues()
    assert code(wrong) == "SignatureDoesNotMatch"
    assert wrong.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as unknown:
        client(signed_server, "AKIDUNKNOWN", SECRET).list_queues()
    assert code(unknown) == "InvalidClientTokenId"


def test_another_accounts_queue_url_is_denied(signed_server: RunningServer):
    owner = client(signed_server, KEY, SECRET)
    url = owner.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    with pytest.raises(ClientError) as denied:
        client(signed_server, "OTHERKEY", "othersecret").send_message(QueueUrl=url, MessageBody="x")
    assert code(denied) == "AccessDenied"


def test_a_request_signed_too_long_ago_is_refused(signed_server: RunningServer,
                                                  monkeypatch: pytest.MonkeyPatch):
    import datetime

    import botocore.auth

    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=20)

    class Then(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime.datetime:  # type: ignore[override]
            return past if tz is None else past.astimezone(tz)

        @classmethod
        def utcnow(cls) -> datetime.datetime:  # type: ignore[override]
            return past.replace(tzinfo=None)

    monkeypatch.setattr(botocore.auth.datetime, "datetime", Then)
    with pytest.raises(ClientError) as expired:
        client(signed_server, KEY, SECRET).list_queues()
    assert code(expired) == "RequestExpired"


def test_under_noauth_a_twelve_digit_key_names_the_account_and_others_the_default(server: RunningServer,
                                                                                 tmp_path: Path):
    named = client(server, "111122223333", "x").create_queue(QueueName="acct-q")["QueueUrl"]
    assert named.endswith("/111122223333/acct-q")
    default = client(server, "test", "x").create_queue(QueueName="acct-q")["QueueUrl"]
    assert default.endswith("/000000000000/acct-q")
