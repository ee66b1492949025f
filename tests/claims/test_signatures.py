"""Failure signatures: each mask, the text, the id, the first scheme, and grouping of labelled samples.

docs/api.rst, "Redrive (zaqar-lite extension)" (filter ``signature``), and
spark_jobs/README.rst, "The analyses" (Failure signatures).

``tests/spark/test_signatures.py`` checks that Spark masks exactly as this
module does; here each rule is checked on its own, in plain Python.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

import pytest

from zaqar_lite.claims import signatures


@pytest.mark.parametrize(("text", "masked"), [
    ('missing field "customer.id"', "missing field <*>"),
    ("key 'abc' missing", "key <*> missing"),
    ("it's fine", "it's fine"),
    ("see http://x.example/a?b=1 now", "see <*> now"),
    ("mail to a.b7@c.example.org bounced", "mail to <*> bounced"),
    ("txn 123e4567-e89b-12d3-a456-426614174000 lost", "txn <*> lost"),
    ("from 192.168.0.1:8080 refused", "from <*>:<*> refused"),
    ("from 10.0.0.1 refused", "from <*> refused"),
    ("version 1.2.3.4.5", "version <*>"),
    ("cannot read /var/log/app.log", "cannot read <*>"),
    ("cannot read ./app.log or ~/x", "cannot read <*> or <*>"),
    ("relative a/b 1", "relative a/b <*>"),
    ("pointer 0xDEADbeef", "pointer <*>"),
    ("block 9f86d0818 bad", "block <*> bad"),
    ("block deadbeefcafe bad", "block deadbeefcafe bad"),
    ("block blk_-1608999687919862906 lost", "block <*> lost"),
    ("pi 3.14 of 1,000 for user42", "pi <*> of <*>,<*> for <*>"),
    ("uid=0 tty=ssh ruser= rhost=host.example", "uid=<*> tty=<*> ruser= rhost=<*>"),
    ("nodes [12] (a1) {x}", "nodes [<*>] <*> {x}"),
    ("mac 00:1A:2b:3C:4d:5E up", "mac <*> up"),
    ("at 12:30:45 PDT", "at <*> PDT"),
    ("from 10.0.0.1 at Sun Jul 10 03:55:15 2005", "from <*> at <*>"),
    ("May I? Monday", "<*> I? Monday"),
    ("ids 1 2 3 4 done", "ids <*> done"),
    ("stored 5.0 KB, free 3 MB)", "stored <*>, free <*>)"),
    ("took 5 seconds", "took <*> seconds"),
    ("sent 1190 bytes (1.16 KB)", "sent <*> bytes <*>)"),
    ("  spaces\t and\nnewlines \r\n", "spaces and newlines"),
    ("", ""),
    (None, ""),
], ids=["double-quoted", "single-quoted", "apostrophe", "url", "email-with-digit", "uuid", "ip-port", "ip",
        "five-part-version", "absolute-path", "relative-paths", "a-slash-in-a-word", "0x-hex",
        "hex-with-digits", "hex-letters-only-word", "block-id", "numbers", "key-values", "brackets",
        "mac", "time", "date", "day-and-month-names-alone", "a-list-is-one-part", "sizes-with-units",
        "not-a-unit", "bytes-is-a-word", "whitespace", "empty", "none"])
def test_variable_parts_of_an_error_text_are_masked(text, masked):
    assert signatures.mask_error(text) == masked


def test_a_masked_text_keeps_at_most_300_characters():
    assert signatures.mask_error("x" * 400) == "x" * 300
    assert signatures.mask_error("x" * 300) == "x" * 300


@pytest.mark.parametrize(("error_type", "error", "text"), [
    ("ValueError", "bad id 42", "ValueError: bad id <*>"),
    (" ValueError ", None, "ValueError"),
    (None, "bad id 42", "bad id <*>"),
    ("ValueError", "", "ValueError"),
    (None, None, "(no reason given)"),
    ("", "", "(no reason given)"),
    (" ", "   ", "(no reason given)"),
])
def test_a_signature_joins_the_type_and_the_masked_text_or_says_no_reason(error_type, error, text):
    assert signatures.signature(error_type, error) == text


@pytest.mark.parametrize(("text", "identifier"), [
    ("ValueError: bad id <*>", "v2-5bc6c406f8f7"),
    ("(no reason given)", "v2-49471713812f"),
    ("TimeoutError", "v2-22a4ad2c60d9"),
])
def test_a_signature_id_is_v2_and_the_first_12_hex_digits_of_the_sha1_of_the_text(text, identifier):
    assert signatures.signature_id(text) == identifier


def test_failures_differing_only_in_masked_parts_share_one_id():
    assert signatures.failure_signature_id("ValueError", "bad id 42") == "v2-5bc6c406f8f7"
    assert signatures.failure_signature_id("ValueError", "bad id 7") == "v2-5bc6c406f8f7"
    assert signatures.failure_signature_id(None, None) == "v2-49471713812f"
    assert signatures.failure_signature_id("TimeoutError", None) == "v2-22a4ad2c60d9"


@pytest.mark.parametrize(("error_type", "error", "text", "identifier"), [
    ("ValueError", "bad id 42", "ValueError: bad id <n>", "68a77eba133a"),
    ("TimeoutError", "db timeout 30 s after 12 ms", "TimeoutError: db timeout <n> s after <n> ms",
     "34ea5819c882"),
    (None, "from 10.0.0.1 see /var/x 'k' \"v\" 0xff", "from <ip> see <path> '<str>' \"<str>\" <hex>", None),
    (None, None, "(no reason given)", "49471713812f"),
])
def test_the_first_scheme_still_gives_its_texts_and_ids(error_type, error, text, identifier):
    assert signatures.legacy_signature(error_type, error) == text
    expected = identifier or hashlib.sha1(text.encode()).hexdigest()[:12]
    assert signatures.legacy_failure_signature_id(error_type, error) == expected
    assert signatures.is_legacy_id(expected) and not signatures.is_legacy_id("v2-" + expected)


#: small labelled samples, in the manner of public log sets: (template label, line)
SAMPLES = {
    "storage": [
        ("recv", "Receiving block blk_-5143 src: /10.1.2.3:50010 dest: /10.1.2.4:50010"),
        ("recv", "Receiving block blk_77123 src: /10.1.9.3:41122 dest: /10.1.2.9:50010"),
        ("done", "PacketResponder 1 for block blk_-99 terminating"),
        ("done", "PacketResponder 0 for block blk_4411 terminating"),
        ("del", "Deleting block blk_12 file /data/d1/current/subdir3/blk_12"),
        ("del", "Deleting block blk_-8 file /data/d2/current/blk_-8"),
    ],
    "auth": [
        ("pam", "authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=203.0.113.9 user=root"),
        ("pam", "authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=gw-7.example.net "
                "user=git"),
        ("pam-anon", "authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=198.51.100.4"),
        ("closed", "Connection closed by 198.51.100.4 [preauth]"),
        ("closed", "Connection closed by 203.0.113.77 [preauth]"),
        ("refused", "Did not receive identification string from 203.0.113.77"),
    ],
    "cluster": [
        ("sync", "synchronized to 10.100.20.250, stratum 2"),
        ("sync", "synchronized to LOCAL(127.127.1.0), stratum 10"),
        ("nodes", "inconsistent nodesets node-31 0x1fffffffe <ok> node-0 0xfffffffe <ok>"),
        ("nodes", "inconsistent nodesets node-9 0x0 <ok> node-10 0x1 <ok>"),
        ("link", "Link 00:11:22:aa:bb:cc is up at 12:01:33"),
        ("link", "Link 00:11:22:aa:bb:0d is up at 23:59:00"),
    ],
    "app": [
        ("store", "Block rdd_4_1 stored as bytes in memory (estimated size 16.0 B, free 317.5 KB)"),
        ("store", "Block broadcast_9 stored as bytes in memory (estimated size 2.1 KB, free 1.2 MB)"),
        ("times", "Times: total = 42, boot = -3, init = 45, finish = 0"),
        ("times", "Times: total = 7, boot = 1, init = 6, finish = 0"),
        ("step", "onStandStepChanged 3579"),
        ("step", "onStandStepChanged 12"),
        ("ext", "onExtend:1514038530000 14125 0 0"),
        ("ext", "onExtend:1514038530001 7 1 0"),
    ],
}


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_lines_of_one_template_share_one_signature_and_lines_of_two_do_not(sample):
    by_label: dict[str, set[str]] = defaultdict(set)
    for label, line in SAMPLES[sample]:
        by_label[label].add(signatures.failure_signature_id("LogError", line))
    assert all(len(ids) == 1 for ids in by_label.values()), by_label
    assert len(set.union(*by_label.values())) == len(by_label), by_label
