"""The dead-letter data source: which queues it reads, how it splits them, and the rows of every store."""

from __future__ import annotations

import json
import time

import pytest

from spark_jobs.sources import dead_letter_batches, store_reader
from spark_jobs.sources import plan as planning
from spark_jobs.sources import rows as stored_rows
from spark_jobs.sources.plan import Target
from spark_jobs.sources.rows import dead_letter_batch
from tests.storage.conftest import STORES, storage_uri
from zaqar_lite.models import Message
from zaqar_lite.storage import open_storage

ID = "00000000-0000-4000-8000-{:012d}".format
NOW = time.time()
LATER = NOW + 3600


def test_the_dead_letter_queues_are_the_queues_named_by_others():
    queues = [
        ("p", "orders", {"_dead_letter_queue": "dlq", "_max_claim_count": 3}),
        ("p", "payments", {"_dead_letter_queue": "dlq", "_max_claim_count": 3}),
        ("p", "dlq", {}),
        ("p", "plain", {}),
        ("q", "mails", {"_dead_letter_queue": "mails-dlq", "_max_claim_count": 1}),
        ("q", "mails-dlq", {}),
        ("r", "jobs", {"_dead_letter_queue": "never-created", "_max_claim_count": 1}),
    ]
    assert planning.dead_letter_queues(queues) == [Target("p", "dlq"), Target("q", "mails-dlq")]
    assert planning.dead_letter_queues(queues, projects=["q"]) == [Target("q", "mails-dlq")]
    assert planning.dead_letter_queues(queues, names=["plain", "mails-dlq"]) == [
        Target("p", "plain"),
        Target("q", "mails-dlq"),
    ]


def test_partitions_are_shared_by_size_and_capped_in_rows():
    big, small, empty, unknown = (
        Target("p", "big"),
        Target("p", "small"),
        Target("p", "empty"),
        Target("p", "u"),
    )
    assert planning.pieces_per_target({big: 900, small: 100, empty: 0}, partitions=10, max_rows=10**6) == {
        big: 9,
        small: 1,
        empty: 1,
    }
    assert planning.pieces_per_target({big: 900, unknown: None}, partitions=4, max_rows=100) == {
        big: 9,
        unknown: 2,
    }
    assert planning.pieces_per_target({small: 3}, partitions=8, max_rows=100) == {small: 3}
    # each piece goes where the pieces are largest, and the total stays the one asked for
    assert planning.pieces_per_target({big: 714, small: 286}, partitions=4, max_rows=10**6) == {
        big: 3,
        small: 1,
    }
    assert planning.pieces_per_target({big: 900, small: 60, empty: 40}, partitions=4, max_rows=10**6) == {
        big: 2,
        small: 1,
        empty: 1,
    }


def test_the_partition_count_is_a_multiple_of_the_cores_fitted_to_the_rows():
    assert planning.partitions_for([100], cores=2, max_rows=50_000) == 4
    assert planning.partitions_for([71_450, 28_550], cores=2, max_rows=50_000) == 4
    assert planning.partitions_for([1_000_000], cores=2, max_rows=50_000) == 20
    # 15 pieces and 6: a 22nd keeps both cores busy to the end
    assert planning.partitions_for([714_500, 285_500], cores=2, max_rows=50_000) == 22
    assert planning.partitions_for([1_000_000, 0, None], cores=8, max_rows=50_000) == 24


#: a message as SQLite and Redis readers hand it over: failures and provenance as JSON text
STORED_AS_TEXT = (
    "m1",
    '{"a": 1}',
    1000.5,
    "",
    4,
    '[{"at": "2024-01-01T00:00:10Z", "claim_count": 1, "error_type": "E", "error": "x"},'
    ' {"at": "2024-01-01T00:01:00Z", "claim_count": 2, "error_type": null, "extra": 1}]',
    '{"source_queue": "orders", "reason": "max_claims", "dead_lettered_at": 2000.25,'
    ' "last_claim_id": "c9", "ttl_since": 2000.25}',
)
ROW_OF_STORED = {
    "project": "p",
    "queue": "dlq",
    "id": "m1",
    "source_queue": "orders",
    "reason": "max_claims",
    "dead_lettered_at": 2000.25,
    "first_posted_at": 1000.5,
    "claim_count": 4,
    "last_claim_id": "c9",
    "client_id": None,
    "body": '{"a": 1}',
    "failures": [
        {"at": 1704067210.0, "claim_count": 1, "error_type": "E", "error": "x"},
        {"at": 1704067260.0, "claim_count": 2, "error_type": None, "error": None},
    ],
}


def test_a_page_of_stored_messages_becomes_one_batch_of_rows_whatever_their_encoding():
    decoded = (*STORED_AS_TEXT[:5], json.loads(STORED_AS_TEXT[5]), json.loads(STORED_AS_TEXT[6]))
    no_history = ("m2", "{}", 7.0, "client-a", 1, None, '{"source_queue": "q", "claim_count": 2}')
    for page in ([STORED_AS_TEXT, no_history], [decoded, no_history]):
        rows = dead_letter_batch("p", "dlq", page).to_pylist()
        assert rows[0] == ROW_OF_STORED
        assert rows[1]["failures"] == [] and rows[1]["claim_count"] == 2
        assert rows[1]["client_id"] == "client-a"
        assert rows[1]["dead_lettered_at"] is None and rows[1]["reason"] is None
    # the text took Arrow's JSON reader, not the row-by-row path
    assert stored_rows._batch_from_json("p", "dlq", [STORED_AS_TEXT]).to_pylist() == [ROW_OF_STORED]


def test_times_and_types_the_server_does_not_write_are_read_row_by_row_all_the_same():
    other_times = STORED_AS_TEXT[5].replace("00:00:10Z", "00:00:10.5+00:00").replace("00:01:00Z", "00:01:00")
    iso_move = STORED_AS_TEXT[6].replace("2000.25", '"1970-01-01T00:33:20.25Z"')
    rows = dead_letter_batch("p", "dlq", [(*STORED_AS_TEXT[:5], other_times, iso_move)]).to_pylist()
    assert [f["at"] for f in rows[0]["failures"]] == [1704067210.5, 1704067260.0]
    assert rows[0]["dead_lettered_at"] == 2000.25


def test_an_unknown_store_names_the_readers_there_are():
    with pytest.raises(
        ValueError, match="no dead-letter reader for 'memcached'.*mongodb, .*redis.*sqlite.*swift"
    ):
        store_reader("memcached://127.0.0.1:11211")


def dead_message(n: int, source: str = "orders", expires: float = LATER, **extra) -> Message:
    return Message(
        id=ID(n),
        body={"n": n, "kind": source},
        created=1000.0 + n,
        expires=expires,
        client_id=f"client-{n % 2}",
        claim_count=3,
        failures=[
            {"at": "2024-01-01T00:00:10Z", "claim_count": 1, "error_type": "E", "error": f"failed {n}"}
        ],
        dead_letter={
            "source_queue": source,
            "reason": "max_claims",
            "dead_lettered_at": 2000.0 + n,
            "claim_count": 3,
            "last_claim_id": f"claim-{n}",
        },
        **extra,
    )


def expected_row(n: int, source: str = "orders", project: str = "p", queue: str = "dlq") -> dict:
    return {
        "project": project,
        "queue": queue,
        "id": ID(n),
        "source_queue": source,
        "reason": "max_claims",
        "dead_lettered_at": 2000.0 + n,
        "first_posted_at": 1000.0 + n,
        "claim_count": 3,
        "last_claim_id": f"claim-{n}",
        "client_id": f"client-{n % 2}",
        "body": {"n": n, "kind": source},
        "failures": [{"at": 1704067210.0, "claim_count": 1, "error_type": "E", "error": f"failed {n}"}],
    }


def fill(uri: str, dead_letters: int) -> None:
    """Store dead letters in p/dlq, plus messages that are not to be read."""
    store = open_storage(uri)
    try:
        store.create_queue("p", "dlq", {}, NOW)
        store.create_queue("p", "orders", {"_max_claim_count": 3, "_dead_letter_queue": "dlq"}, NOW)
        store.create_queue("p", "elsewhere", {}, NOW)
        store.post_messages("p", "dlq", [dead_message(n) for n in range(1, dead_letters + 1)], NOW)
        store.post_messages(
            "p",
            "dlq",
            [
                Message(id=ID(900), body={"posted": "straight into the DLQ"}, created=NOW, expires=LATER),
                dead_message(901, expires=NOW - 10),
            ],
            NOW,
        )
        store.post_messages("p", "elsewhere", [dead_message(902)], NOW)
        store.post_messages("p", "orders", [Message(id=ID(903), body={}, created=NOW, expires=LATER)], NOW)
    finally:
        store.close()


def comparable(row: dict) -> dict:
    return {**row, "body": json.loads(row["body"])}


@pytest.mark.slow
@pytest.mark.parametrize("kind", STORES)
def test_every_store_reader_yields_the_dead_letters_of_its_ranges(kind, request, tmp_path):
    uri = storage_uri(kind, request, tmp_path)
    fill(uri, 12)
    reader = store_reader(uri)
    targets = planning.dead_letter_queues(reader.queues())
    assert targets == [Target("p", "dlq")]
    specs = reader.plan(targets[0], 3)
    assert len(specs) == 3
    parts = [[comparable(r) for b in dead_letter_batches(reader, spec, time.time()) for r in b.to_pylist()]
             for spec in specs]
    assert all(parts), "every range holds some of the dead letters"
    ids = [r["id"] for part in parts for r in part]
    assert sorted(ids) == ids == [ID(n) for n in range(1, 13)], "ranges are disjoint and in marker order"
    assert [r for part in parts for r in part] == [expected_row(n) for n in range(1, 13)]


@pytest.mark.slow
def test_sqlite_source_reads_its_partitions_in_parallel_with_the_right_rows(spark, tmp_path):
    from pyspark.sql import functions as F

    from spark_jobs.sources import DeadLetterSource, read_store

    uri = f"sqlite:///{tmp_path}/zaqar.db"
    fill(uri, 40)
    df = read_store(spark, uri, partitions=4)
    assert df.rdd.getNumPartitions() == 4
    sizes = df.groupBy(F.spark_partition_id().alias("part")).count().orderBy("part").collect()
    # 42 rows in the DLQ cut at ranks 10, 21 and 31; the last range also holds the two rows left out
    assert [tuple(r) for r in sizes] == [(0, 10), (1, 11), (2, 10), (3, 9)]
    got = sorted((comparable(r.asDict(recursive=True)) for r in df.collect()), key=lambda r: r["id"])
    assert got == [expected_row(n) for n in range(1, 41)]
    since = read_store(spark, uri, since=2030.0, partitions=2).select("id").orderBy("id").collect()
    assert [r["id"] for r in since] == [ID(n) for n in range(30, 41)]
    # the same plan through Spark's data source API
    spark.dataSource.register(DeadLetterSource)
    through_format = spark.read.format("zaqar_dlq").option("uri", uri).option("partitions", 3).load()
    assert through_format.rdd.getNumPartitions() == 3
    assert sorted(r["id"] for r in through_format.select("id").collect()) == [ID(n) for n in range(1, 41)]


@pytest.mark.slow
def test_sqlite_source_opens_the_file_read_only_and_never_creates_one(tmp_path):
    uri = f"sqlite:///{tmp_path}/absent.db"
    with pytest.raises(FileNotFoundError, match="no zaqar-lite database"):
        list(store_reader(uri).queues())
    assert not (tmp_path / "absent.db").exists()
