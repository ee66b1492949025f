"""SQS names: queue URLs, ARNs, accounts, receipt and task handles, page tokens."""

from __future__ import annotations

import pytest

from zaqar_lite.errors import SqsRefused
from zaqar_lite.rules.sqs import names


def test_a_queue_url_and_arn_name_the_account_and_the_queue():
    assert names.queue_url("http://h:8888/", "123456789012", "q") == "http://h:8888/123456789012/q"
    assert names.queue_arn("eu-west-1", "123456789012", "q") == "arn:aws:sqs:eu-west-1:123456789012:q"
    assert names.parse_queue_url("http://other-host/123456789012/q") == ("123456789012", "q")
    assert names.parse_arn("arn:aws:sqs:eu-west-1:123456789012:q", "SourceArn") \
        == ("eu-west-1", "123456789012", "q")


@pytest.mark.parametrize("url", ["http://h/only-one", "http://h/a/b/c"])
def test_a_url_that_names_no_queue_is_an_invalid_address(url):
    with pytest.raises(SqsRefused) as refused:
        names.parse_queue_url(url)
    assert refused.value.code == "InvalidAddress"


def test_a_url_without_a_path_names_a_queue_that_does_not_exist():
    with pytest.raises(SqsRefused) as refused:
        names.parse_queue_url("http://whatever-incorrect-queue-address")
    assert refused.value.code == "QueueDoesNotExist"


def test_the_access_key_is_read_from_a_sigv4_header_or_the_query():
    header = ("AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-west-1/sqs/aws4_request, "
              "SignedHeaders=host, Signature=abc")
    assert names.access_key_of(header, None) == ("AKID", "eu-west-1")
    assert names.access_key_of(None, "KEY/20260101/us-east-2/sqs/aws4_request") == ("KEY", "us-east-2")
    assert names.access_key_of(None, None) is None


def test_under_noauth_only_a_twelve_digit_key_names_an_account():
    assert names.noauth_account("123456789012", "000000000000") == "123456789012"
    assert names.noauth_account("test", "000000000000") == "000000000000"
    assert names.noauth_account(None, "000000000000") == "000000000000"


def test_a_receipt_handle_names_its_queue_message_and_claim():
    handle = names.receipt_handle("orders", "m-1", "c-1")
    assert names.parse_receipt_handle(handle, "orders") == ("m-1", "c-1")
    with pytest.raises(SqsRefused) as other_queue:
        names.parse_receipt_handle(handle, "billing")
    assert other_queue.value.code == "ReceiptHandleIsInvalid"
    with pytest.raises(SqsRefused):
        names.parse_receipt_handle("%%%", "orders")


def test_a_task_handle_and_a_page_token_are_read_back():
    assert names.parse_task_handle(names.task_handle("a", "r", "q", "t")) == ("a", "r", "q", "t")
    assert names.parse_page_token(names.page_token("q-7")) == "q-7"
    with pytest.raises(SqsRefused):
        names.parse_page_token(names.task_handle("a", "r", "q", "t"))


@pytest.mark.parametrize(("name", "fifo"), [("ok-name_1", False), ("jobs.fifo", True)])
def test_queue_names_sqs_allows(name, fifo):
    assert names.check_queue_name(name, fifo) == name


@pytest.mark.parametrize(("name", "fifo"), [("has space", False), ("x" * 81, False), ("jobs", True),
                                            ("jobs.fifo", False), ("", False)])
def test_queue_names_sqs_refuses(name, fifo):
    with pytest.raises(SqsRefused):
        names.check_queue_name(name, fifo)


def test_sqs_words_the_bounds_of_a_wait_as_comparisons_and_others_as_a_range():
    from zaqar_lite.rules.sqs import whole_number
    with pytest.raises(SqsRefused) as refused:
        whole_number("21", "WaitTimeSeconds", 0, 20)
    assert str(refused.value) == ("Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 "
                                     "and <= 20, if provided.")
    with pytest.raises(SqsRefused) as refused:
        whole_number(11, "MaxNumberOfMessages", 1, 10)
    assert str(refused.value) == ("Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be "
                                     "between 1 and 10, if provided.")


def test_a_region_other_than_the_home_region_is_a_project_and_a_url_path_of_its_own():
    assert names.project_of("123456789012", "us-east-1", "us-east-1") == "123456789012"
    assert names.project_of("123456789012", "eu-west-1", "us-east-1") == "123456789012.eu-west-1"
    assert names.place_of("123456789012.eu-west-1", "us-east-1") == ("123456789012", "eu-west-1")
    assert names.place_of("billing", "us-east-1") == ("billing", "us-east-1")
    assert names.place_of("team.v2", "us-east-1") == ("team.v2", "us-east-1")
    assert names.queue_url("http://h/", "1", "q", "eu-west-1") == "http://h/queue/eu-west-1/1/q"
    assert names.locate_queue("http://h/queue/eu-west-1/1/q") == ("eu-west-1", "1", "q")
    assert names.locate_queue("http://h/1/q") == (None, "1", "q")
    assert names.locate_queue("q") == (None, "", "q")
