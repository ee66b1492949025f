"""Error-text masking and signature ids: plain Python, and the same in Spark."""

from __future__ import annotations

import re

import pytest

from spark_jobs.signatures import MASK_NEEDLES, MASKS, NO_REASON, failure_signature_id, mask_error, signature

MASKED = [
    ('missing field "customer.id" in order 81723', "missing field <*> in order <*>"),
    ("can't parse 'abc' at /srv/data/x.json line 3", "can't parse <*> at <*> line <*>"),
    (
        "upstream 10.0.3.17:8443 returned 502 for txn 5f1c2a3b-1111-2222-3333-444455556666 after 30000 ms",
        "upstream <*>:<*> returned <*> for txn <*> after <*> ms",
    ),
    ("bad pointer 0xDEADbeef in block blk_-9f86d081884c7d65", "bad pointer <*> in block <*>"),
    (
        "mail to bob.smith@example.com via https://api.example.com/v1/send?x=1 failed",
        "mail to bob.smith@example.com via <*> failed",
    ),
    ("  spaces\t and\nnewlines  ", "spaces and newlines"),
    ("ratio 3.14 of 1,000 items for user42", "ratio <*> of <*>,<*> items for <*>"),
    ("deadbeefcafe is a word, not an id", "deadbeefcafe is a word, not an id"),
    (
        "uid=0 tty=ssh rhost= at 00:1a:2b:3c:4d:5e (LOCAL(127.0.0.1)) ids 1 2 3",
        "uid=<*> tty=<*> rhost= at <*> ids <*>",
    ),
    ("stored 5.0 KB, free 3 MB) [x9] {y}", "stored <*>, free <*>) [<*>] {y}"),
    ("status=M Thu Aug 4 10:00:01 PDT 2005 sent 12 bytes", "status=<*> PDT <*> sent <*> bytes"),
    ("it's a path ./run.sh, not a word", "it's a path <*>, not a word"),
    ("", ""),
]


@pytest.mark.parametrize(("text", "expected"), MASKED, ids=[m[1] or "empty" for m in MASKED])
def test_error_texts_are_masked(text, expected):
    assert mask_error(text) == expected


def test_a_mask_without_its_needle_in_the_text_changes_nothing():
    assert set(MASK_NEEDLES) <= {pattern for pattern, _ in MASKS}  # a stale key would guard nothing
    texts = [t for t, _ in MASKED] + ["a b c", "one space only", "x.y/z", "0X1f", "a\fb", "a\rb", "q@r"]
    skipped = 0
    for pattern, replacement in MASKS:
        for text in texts:
            if pattern in MASK_NEEDLES and not any(n in text for n in MASK_NEEDLES[pattern]):
                skipped += 1
                assert re.sub(pattern, replacement, text) == text, (pattern, text)
    assert skipped == 17  # the check ran on every text a mask skips


def test_signature_joins_type_and_masked_text_and_names_missing_reasons():
    assert signature("ValueError", "bad id 42") == "ValueError: bad id <*>"
    assert signature(" ValueError ", None) == "ValueError"
    assert signature(None, "bad id 42") == "bad id <*>"
    assert signature(None, None) == NO_REASON
    assert signature("", "") == NO_REASON


def test_signature_id_is_the_short_sha1_of_the_signature():
    # sha1("ValueError: bad id <*>") = 5bc6c406f8f7...
    assert failure_signature_id("ValueError", "bad id 42") == "v2-5bc6c406f8f7"
    assert failure_signature_id("ValueError", "bad id 7") == "v2-5bc6c406f8f7"
    assert failure_signature_id(None, None) == "v2-49471713812f"


@pytest.mark.slow
def test_spark_masks_exactly_as_python_does(spark):
    from pyspark.sql import functions as F

    from spark_jobs.transforms import signature_hash, signature_text

    texts = [t for t, _ in MASKED] + [
        "über 5 €",
        "path/with/relative 12 and /abs/one/",
        "'unterminated 5",
        "a\x0bb",
        "x" * 400 + " 1",
    ]
    df = spark.createDataFrame(
        [(i, "E" if i % 2 else None, t) for i, t in enumerate(texts)],
        "i int, error_type string, error string",
    )
    got = (
        df.select("i", signature_text(F.col("error_type"), F.col("error")).alias("s")).orderBy("i").collect()
    )
    ids = (
        df.select("i", signature_hash(signature_text(F.col("error_type"), F.col("error"))).alias("h"))
        .orderBy("i")
        .collect()
    )
    for row, hashed, text in zip(got, ids, texts, strict=True):
        error_type = "E" if row["i"] % 2 else None
        assert row["s"] == signature(error_type, text), text
        assert hashed["h"] == failure_signature_id(error_type, text), text


@pytest.mark.slow
def test_enrich_signs_every_failure_of_a_history_as_python_does(dead_letters):
    from spark_jobs import transforms
    from tests.spark.conftest import dead_letter, failure

    texts = [t for t, _ in MASKED] + [None]
    history = [failure(10.0 + i, i + 1, "E" if i % 2 else None, t) for i, t in enumerate(texts)]
    row = transforms.enrich(dead_letters(dead_letter("m1", failures=history))).collect()[0]
    assert [(f["signature"], f["signature_id"]) for f in row["signed"]] == [
        (signature("E" if i % 2 else None, t), failure_signature_id("E" if i % 2 else None, t))
        for i, t in enumerate(texts)
    ]
    assert (row["cause_error_type"], row["cause_signature"]) == ("E", "E")  # the last: type E, no text


#: texts in the manner of real failures and log lines (written here), two or three to a cause
AGREEMENT_TEXTS = [
    ("TimeoutError", "upstream 10.0.3.17:8443 timed out after 30000 ms"),
    ("TimeoutError", "upstream 10.9.0.2:443 timed out after 5 ms"),
    ("KeyError", "'customer.id'"),
    ("KeyError", "'sku'"),
    (None, "Receiving block blk_-1608999687919862906 src: /10.250.19.102:54106 dest: /10.250.19.102:50010"),
    (None, "Receiving block blk_7503483334202473044 src: /10.251.215.16:55695 dest: /10.251.215.16:50010"),
    (None, "authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=218.188.2.4 user=root"),
    (None, "authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=gw.example.net user=git"),
    (None, "Connection from 10.1.2.3 at Sun Jul 10 03:55:15 2005"),
    (None, "Connection from 10.1.2.4 at Mon Jun 27 12:00:01 2005"),
    (None, "synchronized to LOCAL(127.127.1.0), stratum 10"),
    (None, "synchronized to 10.100.20.250, stratum 2"),
    ("E", "über 5 € at ~/x\tand\n\n/abs/path"),
    ("E", None),
    (None, None),
]


@pytest.mark.slow
def test_the_report_the_console_and_the_redrive_filter_agree_on_every_text(dead_letters):
    from spark_jobs import transforms
    from tests.claims.test_redrive import dead_letter as stored
    from tests.spark.conftest import dead_letter, failure
    from zaqar_lite.claims import redrive
    from zaqar_lite.claims.signatures import legacy_failure_signature_id
    from zaqar_lite.models import RedriveFilter

    rows = [dead_letter(f"m{i}", failures=[failure(10.0, 1, kind, text)])
            for i, (kind, text) in enumerate(AGREEMENT_TEXTS)]
    enriched = transforms.enrich(dead_letters(*rows)).select("id", "cause_signature", "cause_signature_id")
    report = {row["id"]: (row["cause_signature_id"], row["cause_signature"]) for row in enriched.collect()}
    messages = [stored(f"m{i}", failures=[{"at": "2023-11-14T22:10:00Z", "claim_count": 1, "error_type": kind,
                                          "error": text}])
                for i, (kind, text) in enumerate(AGREEMENT_TEXTS)]
    console = {m.id: (group.signature_id, group.signature)
               for group in redrive.by_last_signature(messages) for m in group.messages}
    assert console == report
    for message, (kind, text) in zip(messages, AGREEMENT_TEXTS, strict=True):
        identifier = report[message.id][0]
        assert [m.id for m in messages if redrive.matches(m, RedriveFilter(signature=identifier))] == [
            m.id for m in messages if report[m.id][0] == identifier]
        assert redrive.matches(message, RedriveFilter(signature=legacy_failure_signature_id(kind, text)))
    # each cause of two or three texts is one group, and no two causes share one
    assert len({identifier for identifier, _ in report.values()}) == 9
