"""Failure signatures: each mask, the text, the id.

docs/api.rst, "Redrive (zaqar-lite extension)" (filter ``signature``), and
spark_jobs/README.rst, "The analyses" (Failure signatures).

``tests/spark/test_signatures.py`` checks that Spark masks exactly as this
module does; here each rule is checked on its own, in plain Python.
"""

from __future__ import annotations

import pytest

from zaqar_lite.claims import signatures


@pytest.mark.parametrize(("text", "masked"), [
    ('missing field "customer.id"', 'missing field "<str>"'),
    ("key 'abc' missing", "key '<str>' missing"),
    ("it's fine", "it's fine"),
    ("see http://x.example/a?b=1 now", "see <url> now"),
    ("mail to a.b@c.example.org bounced", "mail to <email> bounced"),
    ("txn 123e4567-e89b-12d3-a456-426614174000 lost", "txn <uuid> lost"),
    ("from 192.168.0.1:8080 refused", "from <ip> refused"),
    ("from 10.0.0.1 refused", "from <ip> refused"),
    ("version 1.2.3.4.5", "version <n>"),
    ("cannot read /var/log/app.log", "cannot read <path>"),
    ("relative a/b 1", "relative a/b <n>"),
    ("pointer 0xDEADbeef", "pointer <hex>"),
    ("block 9f86d0818 bad", "block <hex> bad"),
    ("block deadbeefcafe bad", "block deadbeefcafe bad"),
    ("short 9f86d08 id", "short <n>f<n>d<n> id"),
    ("count 12345678", "count <n>"),
    ("pi 3.14 of 1,000 for user42", "pi <n> of <n> for user<n>"),
    ("  spaces\t and\nnewlines \r\n", "spaces and newlines"),
    ("", ""),
    (None, ""),
], ids=["double-quoted", "single-quoted", "apostrophe", "url", "email", "uuid", "ip-port", "ip",
        "five-part-version", "absolute-path", "relative-path", "0x-hex", "long-hex-with-digits",
        "hex-letters-only-word", "short-hex", "digits-only", "numbers", "whitespace", "empty", "none"])
def test_variable_parts_of_an_error_text_are_masked(text, masked):
    assert signatures.mask_error(text) == masked


def test_a_masked_text_keeps_at_most_300_characters():
    assert signatures.mask_error("x" * 400) == "x" * 300
    assert signatures.mask_error("x" * 300) == "x" * 300


@pytest.mark.parametrize(("error_type", "error", "text"), [
    ("ValueError", "bad id 42", "ValueError: bad id <n>"),
    (" ValueError ", None, "ValueError"),
    (None, "bad id 42", "bad id <n>"),
    ("ValueError", "", "ValueError"),
    (None, None, "(no reason given)"),
    ("", "", "(no reason given)"),
    (" ", "   ", "(no reason given)"),
])
def test_a_signature_joins_the_type_and_the_masked_text_or_says_no_reason(error_type, error, text):
    assert signatures.signature(error_type, error) == text


@pytest.mark.parametrize(("text", "identifier"), [
    ("ValueError: bad id <n>", "68a77eba133a"),
    ("(no reason given)", "49471713812f"),
    ("TimeoutError", "22a4ad2c60d9"),
])
def test_a_signature_id_is_the_first_12_hex_digits_of_the_sha1_of_the_text(text, identifier):
    assert signatures.signature_id(text) == identifier


def test_failures_differing_only_in_masked_parts_share_one_id():
    assert signatures.failure_signature_id("ValueError", "bad id 42") == "68a77eba133a"
    assert signatures.failure_signature_id("ValueError", "bad id 7") == "68a77eba133a"
    assert signatures.failure_signature_id(None, None) == "49471713812f"
    assert signatures.failure_signature_id("TimeoutError", None) == "22a4ad2c60d9"
