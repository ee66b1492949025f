"""Each transform of the report on a few literal rows, compared with literal expected rows."""

from __future__ import annotations

import pytest

from spark_jobs import transforms
from tests.spark.conftest import dead_letter, failure

pytestmark = pytest.mark.slow


def rows(df):
    return [tuple(r) for r in df.collect()]


def test_failure_signatures_group_masked_errors_per_source_queue(dead_letters):
    df = dead_letters(
        dead_letter(
            "m1",
            failures=[
                failure(100.0, 1, "ValueError", "bad id 42"),
                failure(200.0, 2, "ValueError", "bad id 7"),
            ],
            dead_lettered_at=300.0,
        ),
        dead_letter("m2", failures=[failure(150.0, 1, "ValueError", "bad id 99")], dead_lettered_at=400.0),
        dead_letter("m3", failures=[], dead_lettered_at=500.0),
        dead_letter(
            "m4",
            source_queue="payments",
            failures=[failure(120.0, 1, "IOError", "cannot open /var/x.db")],
            dead_lettered_at=600.0,
        ),
    )
    assert rows(transforms.failure_signatures(df)) == [
        (
            "p",
            "orders",
            "68a77eba133a",
            "ValueError: bad id <n>",
            "ValueError",
            3,
            2,
            100.0,
            200.0,
            "bad id 42",
            ["m1", "m2"],
        ),
        ("p", "orders", "49471713812f", "(no reason given)", None, 1, 1, 500.0, 500.0, None, ["m3"]),
        (
            "p",
            "payments",
            "b6015d91ce7f",
            "IOError: cannot open <path>",
            "IOError",
            1,
            1,
            120.0,
            120.0,
            "cannot open /var/x.db",
            ["m4"],
        ),
    ]


def test_signature_examples_are_the_three_smallest_ids(dead_letters):
    df = dead_letters(
        *[dead_letter(f"m{i}", failures=[failure(1.0, 1, "E", f"n {i}")]) for i in range(5, 0, -1)]
    )
    (row,) = transforms.failure_signatures(df).collect()
    assert (row["messages"], row["examples"]) == (5, ["m1", "m2", "m3"])


def test_signature_members_list_each_message_once_per_signature(dead_letters):
    df = dead_letters(
        dead_letter(
            "m1",
            failures=[
                failure(1.0, 1, "ValueError", "bad id 1"),
                failure(2.0, 2, "ValueError", "bad id 2"),
                failure(3.0, 3, "IOError", "cannot open /x"),
            ],
        ),
        dead_letter("m2", failures=[]),
    )
    assert sorted(rows(transforms.signature_members(df))) == [
        ("49471713812f", "m2"),
        ("68a77eba133a", "m1"),
        ("b6015d91ce7f", "m1"),
    ]


def test_body_paths_list_every_key_path_with_its_type():
    body = (
        '{"id": 7, "ok": true, "price": 1.5, "tags": ["a", 2], "customer": {"name": null},'
        ' "items": [{"sku": "x"}]}'
    )
    assert transforms.body_paths(body) == [
        "$:object",
        "customer.name:null",
        "customer:object",
        "id:integer",
        "items:array",
        "items[].sku:string",
        "items[]:object",
        "ok:boolean",
        "price:number",
        "tags:array",
        "tags[]:integer",
        "tags[]:string",
    ]
    assert transforms.body_paths('"text"') == ["$:string"]
    assert transforms.body_paths("{not json") == ["$:invalid"]


def test_payload_shapes_group_bodies_and_name_the_paths_other_shapes_have(dead_letters):
    df = dead_letters(
        dead_letter("a1", body='{"a": 1}'),
        dead_letter("a2", body='{"a": 2}'),
        dead_letter("a3", body='{"a": "x"}'),
        dead_letter("a4", source_queue="payments", body='{"a": 5, "b": ["s"]}'),
    )
    assert rows(transforms.payload_shapes(transforms.enrich(df))) == [
        ("p", "orders", "2a11eef7fa57", ["$:object", "a:integer"], 2, ["a:string"], ["a1", "a2"]),
        ("p", "orders", "45762c6048f2", ["$:object", "a:string"], 1, ["a:integer"], ["a3"]),
        ("p", "payments", "a55cef19f1d5", ["$:object", "a:integer", "b:array", "b[]:string"], 1, [], ["a4"]),
    ]


def test_enrich_takes_the_cause_from_the_last_failure(dead_letters):
    df = dead_letters(
        dead_letter(
            "m1", failures=[failure(1.0, 1, "IOError", "x"), failure(2.0, 2, " ValueError", "bad id 3")]
        ),
        dead_letter("m2", failures=[]),
    )
    got = transforms.enrich(df).select("id", "cause_error_type", "cause_signature", "cause_signature_id")
    assert sorted(rows(got)) == [
        ("m1", "ValueError", "ValueError: bad id <n>", "68a77eba133a"),
        ("m2", None, "(no reason given)", "49471713812f"),
    ]


def test_body_field_values_count_messages_and_distinct_scalar_values(dead_letters):
    df = dead_letters(
        dead_letter("m1", body='{"currency": "EUR", "id": 1}'),
        dead_letter("m2", body='{"currency": "JPY", "id": 2, "nested": {"x": 1}, "list": [1]}'),
        dead_letter("m3", body='{"currency": "EUR", "id": 3}'),
        dead_letter("m4", body='{"currency": "JPY", "id": 4}'),
        dead_letter("m5", body="[1, 2]"),
    )
    values = transforms.body_field_values(df)
    assert rows(values) == [("currency", 4, 2), ("id", 4, 4)]
    assert rows(transforms.categorical_fields(values, max_values=12)) == [("currency",)]
    assert rows(transforms.categorical_fields(values, max_values=1)) == []


def test_message_features_name_queue_cause_shape_client_hour_and_chosen_fields(dead_letters):
    body = '{"currency": "JPY", "customer": {"tier": "gold"}, "items": [1]}'
    df = dead_letters(
        dead_letter(
            "m1", body=body, first_posted_at=5 * 3600 + 120.0, failures=[failure(1.0, 1, "E", "x 1")]
        ),
        dead_letter(
            "m2",
            body="{}",
            client_id="",
            source_queue="mails",
            reason="expired",
            first_posted_at=86400.0 + 59,
        ),
    )
    features = transforms.message_features(
        transforms.enrich(df), ["currency", "customer.tier", "items", "missing"]
    )
    # sha1("E: x <n>")[:12] = 4a667bb50d6c; sha1 of the six shape paths joined by newlines = 73ccece5eea3
    assert sorted(rows(features)) == [
        (
            "m1",
            [
                "client=client-a",
                "currency=JPY",
                "customer.tier=gold",
                "error_type=E",
                "hour=05",
                "queue=orders",
                "reason=max_claims",
                "shape=73ccece5eea3",
                "signature=4a667bb50d6c",
            ],
        ),
        (
            "m2",
            [
                "error_type=(none)",
                "hour=00",
                "queue=mails",
                "reason=expired",
                "shape=95262741db3e",
                "signature=49471713812f",
            ],
        ),
    ]


def test_cause_rules_keep_informative_rules_that_conclude_a_cause(spark):
    rules = spark.createDataFrame(
        [
            (["client=x"], ["error_type=E"], 1.0, 2.0, 0.5),
            (["hour=05", "client=x"], ["error_type=E"], 1.0, 2.0, 0.4),  # a subset says as much
            (["client=x"], ["signature=s1"], 1.0, 2.0, 0.5),  # the error type rule says as much
            (["currency=USD"], ["error_type=E"], 1.0, 2.0, 0.3),  # its messages all have client=x
            (["region=us"], ["error_type=E"], 1.0, 2.0, 0.2),  # not all its messages have client=x
            (["currency=JPY"], ["signature=s2"], 0.8, 3.0, 0.2),
            (["error_type=E"], ["signature=s1"], 1.0, 2.0, 0.5),  # concludes from a cause
            (["client=x"], ["hour=05"], 1.0, 1.5, 0.5),  # concludes no cause
            (["hour=05"], ["error_type=E"], 0.5, 1.0, 0.5),  # lift 1: no information
            (["region=eu", "client=x"], ["error_type=F"], 0.9, 1.5, 0.3),
        ],
        "antecedent array<string>, consequent array<string>, confidence double, lift double, support double",
    )
    itemsets = spark.createDataFrame(
        [
            (["client=x"], 5),
            (["currency=USD"], 3),
            (["client=x", "currency=USD"], 3),
            (["region=us"], 2),
            (["client=x", "region=us"], 1),
            (["client=x", "hour=05"], 4),
            (["region=eu", "client=x"], 3),
            (["currency=JPY"], 2),
        ],
        "items array<string>, freq long",
    )
    assert rows(transforms.cause_rules(rules, itemsets)) == [
        (["client=x"], ["error_type=E"], 1.0, 2.0, 0.5),
        (["region=us"], ["error_type=E"], 1.0, 2.0, 0.2),
        (["client=x", "region=eu"], ["error_type=F"], 0.9, 1.5, 0.3),
        (["currency=JPY"], ["signature=s2"], 0.8, 3.0, 0.2),
    ]


def test_association_rules_find_the_item_that_predicts_an_error_type(spark):
    items = [["client=a", "error_type=E", "queue=q"]] * 4 + [["client=b", "error_type=F", "queue=q"]] * 4
    features = spark.createDataFrame(
        [(str(i), it) for i, it in enumerate(items)], "id string, items array<string>"
    )
    assert rows(transforms.association_rules(features, 0.2, 0.5)) == [
        (["client=a"], ["error_type=E"], 1.0, 2.0, 0.5),
        (["client=b"], ["error_type=F"], 1.0, 2.0, 0.5),
    ]


def test_dead_letters_per_hour_per_source_queue(dead_letters):
    df = dead_letters(
        dead_letter("m1", dead_lettered_at=7205.0),
        dead_letter("m2", dead_lettered_at=7300.0),
        dead_letter("m3", dead_lettered_at=10800.0),
        dead_letter("m4", source_queue="payments", dead_lettered_at=7200.0),
    )
    assert rows(transforms.dead_letters_per_hour(df)) == [
        ("p", "orders", 7200, 2),
        ("p", "orders", 10800, 1),
        ("p", "payments", 7200, 1),
    ]


def test_claim_count_distribution(dead_letters):
    df = dead_letters(
        dead_letter("m1", claim_count=3),
        dead_letter("m2", claim_count=3),
        dead_letter("m3", claim_count=5),
        dead_letter("m4", source_queue="payments", claim_count=3),
    )
    assert rows(transforms.claim_count_distribution(df)) == [
        ("p", "orders", 3, 2),
        ("p", "orders", 5, 1),
        ("p", "payments", 3, 1),
    ]


def test_time_to_dead_letter_buckets_and_quantiles(dead_letters):
    df = dead_letters(
        dead_letter("m1", first_posted_at=0.0, dead_lettered_at=0.5),
        dead_letter("m2", first_posted_at=0.0, dead_lettered_at=30.0),
        dead_letter("m3", first_posted_at=0.0, dead_lettered_at=45.0),
        dead_letter("m4", source_queue="payments", first_posted_at=0.0, dead_lettered_at=700000.0),
        dead_letter(
            "m5", source_queue="payments", first_posted_at=100.0, dead_lettered_at=95.0
        ),  # clock skew
    )
    assert rows(transforms.time_to_dead_letter(df)) == [
        ("p", "orders", 0, "< 1 s", 0, 1, 1),
        ("p", "orders", 2, "10 s-1 min", 10, 60, 2),
        ("p", "payments", 0, "< 1 s", 0, 1, 1),
        ("p", "payments", 8, "> 7 d", 604800, None, 1),
    ]
    assert rows(transforms.time_to_dead_letter_stats(df)) == [
        ("p", "orders", 3, 30.0, 45.0, 45.0),
        ("p", "payments", 2, 0.0, 700000.0, 700000.0),
    ]


def test_dead_letter_counts_per_queue_source_and_reason(dead_letters):
    df = dead_letters(
        dead_letter("m1", dead_lettered_at=10.0),
        dead_letter("m2", dead_lettered_at=20.0),
        dead_letter("m3", reason="expired", dead_lettered_at=5.0),
        dead_letter("m4", queue="other-dlq", source_queue="mails", dead_lettered_at=1.0),
    )
    assert rows(transforms.dead_letter_counts(df)) == [
        ("p", "dlq", "orders", "expired", 1, 5.0, 5.0),
        ("p", "dlq", "orders", "max_claims", 2, 10.0, 20.0),
        ("p", "other-dlq", "mails", "max_claims", 1, 1.0, 1.0),
    ]
