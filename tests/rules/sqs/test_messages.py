"""The SQS message rules: bodies, message attributes and their MD5s, what a message stores."""

from __future__ import annotations

import hashlib

import pytest

from zaqar_lite.errors import SqsRefused
from zaqar_lite.rules.sqs import messages


def test_the_md5_of_message_attributes_is_the_one_sqs_documents():
    # each field length-prefixed, the transport byte 1 for text: what the AWS SDKs check
    attributes = {"attr": {"DataType": "String", "StringValue": "value"}}
    encoded = (b"\x00\x00\x00\x04attr" + b"\x00\x00\x00\x06String" + b"\x01" + b"\x00\x00\x00\x05value")
    assert messages.attributes_md5(attributes) == hashlib.md5(encoded).hexdigest()


def test_attributes_are_hashed_in_name_order_with_binary_values_marked_2():
    attributes = {"b": {"DataType": "Binary", "BinaryValue": "AAE="},
                  "a": {"DataType": "Number.int", "StringValue": "7"}}
    encoded = (b"\x00\x00\x00\x01a\x00\x00\x00\x0aNumber.int\x01\x00\x00\x00\x017"
               b"\x00\x00\x00\x01b\x00\x00\x00\x06Binary\x02\x00\x00\x00\x02\x00\x01")
    assert messages.attributes_md5(attributes) == hashlib.md5(encoded).hexdigest()


def test_the_md5_of_a_body_is_that_of_its_utf8_text():
    assert messages.body_md5("hello") == "5d41402abc4b2a76b9719d911017c592"


@pytest.mark.parametrize(("body", "code"), [
    ("", "MissingParameter"), (None, "MissingParameter"), ("bad \x00 char", "InvalidMessageContents"),
    ("x" * 1025, "InvalidParameterValue")])
def test_a_body_sqs_refuses_is_refused_with_its_code(body, code):
    with pytest.raises(SqsRefused) as refused:
        messages.check_body(body, 1024, 0)
    assert refused.value.code == code


@pytest.mark.parametrize("attributes", [
    {"AWS.x": {"DataType": "String", "StringValue": "v"}},
    {"a..b": {"DataType": "String", "StringValue": "v"}},
    {"a": {"DataType": "Text", "StringValue": "v"}},
    {"a": {"DataType": "Number", "StringValue": "seven"}},
    {"a": {"DataType": "String", "StringValue": ""}},
    {"a": {"DataType": "Binary", "BinaryValue": "not base64!"}},
    {f"a{n}": {"DataType": "String", "StringValue": "v"} for n in range(11)},
])
def test_message_attributes_sqs_refuses_are_refused(attributes):
    with pytest.raises(SqsRefused) as refused:
        messages.check_attributes(attributes)
    assert refused.value.code == "InvalidParameterValue"


def test_message_attributes_are_stored_with_their_size():
    stored, size = messages.check_attributes({"n": {"DataType": "Number", "StringValue": "12"},
                                              "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01\x02"}})
    assert stored == {"n": {"DataType": "Number", "StringValue": "12"},
                      "b": {"DataType": "Binary", "BinaryValue": "AAEC"}}
    assert size == len("n") + len("Number") + 2 + len("b") + len("Binary") + 3


def test_a_body_without_attributes_is_stored_as_its_text_and_read_back():
    assert messages.stored_body("plain", {}, {}) == "plain"
    assert messages.sent_parts("plain") == ("plain", {}, {})


def test_a_body_with_attributes_is_stored_as_an_object_and_read_back():
    attributes = {"k": {"DataType": "String", "StringValue": "v"}}
    stored = messages.stored_body("text", attributes, {})
    assert stored == {"MessageBody": "text", "MessageAttributes": attributes}
    assert messages.sent_parts(stored) == ("text", attributes, {})


def test_a_zaqar_body_that_is_not_text_is_shown_as_its_json():
    assert messages.sent_parts({"order": 7, "MessageBody": 3}) == ('{"order":7,"MessageBody":3}', {}, {})
    assert messages.sent_parts({"MessageBody": "only"}) == ('{"MessageBody":"only"}', {}, {})


def test_receive_selects_attributes_by_name_prefix_or_all():
    attributes = {"a.x": 1, "a.y": 2, "b": 3}
    assert messages.selected_attributes(attributes, ["a.*"]) == {"a.x": 1, "a.y": 2}
    assert messages.selected_attributes(attributes, ["b", "missing"]) == {"b": 3}
    assert messages.selected_attributes(attributes, ["All"]) == attributes
    assert messages.selected_attributes(attributes, ["*"]) == attributes
    assert messages.selected_attributes({"Hello": 1, "Help.Me": 2, "General": 3}, ["Hel.*"]) \
        == {"Hello": 1, "Help.Me": 2}
    assert messages.wanted_system_attributes(["SentTimestamp", "ApproximateNumberOfMessages"]) \
        == {"SentTimestamp"}


def test_content_based_deduplication_is_the_sha256_of_the_body():
    assert messages.content_dedup_id("abc") \
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.parametrize(("attributes", "md5"), [
    ({"SOME_Valid.attribute-Name": {"StringValue": "1493147359900", "DataType": "Number"}},
     "36655e7e9d7c0e8479fa3f3f42247ae7"),
    ({"id": {"StringValue": "453ae55e-f03b-21a6-a4b1-70c2e2e8fe71", "DataType": "String"},
      "mybin": {"BinaryValue": b"kekchebukek", "DataType": "Binary"},
      "timestamp": {"StringValue": "1603134247654", "DataType": "Number.java.lang.Long"},
      "contentType": {"StringValue": "application/json", "DataType": "String"}},
     "049075255ebc53fb95f7f9f3cedf3c50"),
])
def test_the_md5s_match_those_the_aws_sdks_accept(attributes, md5):
    # the values boto3 checks a send's answer against, as moto's suite records them
    stored, _ = messages.check_attributes(attributes)
    assert messages.attributes_md5(stored) == md5


def test_a_deduplication_id_is_scoped_by_its_group_and_the_last_purge_only_when_asked():
    assert messages.dedup_key("d", None, None) == "d"
    scoped = {messages.dedup_key("d", "g1", None), messages.dedup_key("d", "g2", None),
              messages.dedup_key("d", None, 5.0), messages.dedup_key("d", None, 6.0)}
    assert len(scoped) == 4
    assert all(key.startswith("sqs-") and len(key) == 68 for key in scoped)
    assert messages.dedup_key("d", "g1", None) == messages.dedup_key("d", "g1", None)
