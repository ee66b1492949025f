"""``zaqar-lite export --dlq`` and reading its files back: the same rows as reading the store."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from spark_jobs.sources.plan import Target
from tests.spark.test_sources import ID, NOW, comparable, dead_message, expected_row, fill
from tests.storage.conftest import storage_uri
from zaqar_lite.cli import main
from zaqar_lite.rules import encryption
from zaqar_lite.storage import open_storage

pytestmark = pytest.mark.slow


def test_export_writes_one_json_line_per_dead_letter_with_its_provenance(tmp_path):
    uri = f"sqlite:///{tmp_path}/zaqar.db"
    fill(uri, 3)
    out = tmp_path / "dlq.jsonl"
    result = CliRunner().invoke(main, ["export", "--dlq", "--storage", uri, "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == [ID(1), ID(2), ID(3)]
    first = lines[0]
    assert {k: first[k] for k in ("project", "queue", "client_id", "body", "claim_count")} == {
        "project": "p",
        "queue": "dlq",
        "client_id": "client-1",
        "body": {"n": 1, "kind": "orders"},
        "claim_count": 3,
    }
    assert first["dead_letter"] == {
        "source_queue": "orders",
        "reason": "max_claims",
        "dead_lettered_at": "1970-01-01T00:33:21Z",
        "claim_count": 3,
        "first_posted_at": "1970-01-01T00:16:41Z",
        "last_claim_id": "claim-1",
        "failures": [
            {"at": "2024-01-01T00:00:10Z", "claim_count": 1, "error_type": "E", "error": "failed 1"}
        ],
    }


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_an_export_reads_back_as_the_rows_of_the_store(spark, tmp_path, suffix):
    from spark_jobs.export import export
    from spark_jobs.sources import read_export

    uri = f"sqlite:///{tmp_path}/zaqar.db"
    fill(uri, 5)
    out = tmp_path / f"dlq.{suffix}"
    count, _, encrypted = export(uri, str(out))
    assert (count, encrypted) == (5, 0)
    got = sorted(
        (comparable(r.asDict(recursive=True)) for r in read_export(spark, str(out)).collect()),
        key=lambda r: r["id"],
    )
    expected = [expected_row(n) for n in range(1, 6)]
    if suffix == "jsonl":  # the JSON lines keep whole seconds (ISO-8601 times)
        for row in expected:
            row["dead_lettered_at"], row["first_posted_at"] = (
                float(int(row["dead_lettered_at"])),
                float(int(row["first_posted_at"])),
            )
    assert got == expected


def fill_two_projects(uri: str) -> None:
    """Store five dead letters in p/dlq (:func:`fill`) and one in q/mails-dlq."""
    fill(uri, 5)
    store = open_storage(uri)
    try:
        store.create_queue("q", "mails", {"_max_claim_count": 1, "_dead_letter_queue": "mails-dlq"}, NOW)
        store.create_queue("q", "mails-dlq", {}, NOW)
        store.post_messages("q", "mails-dlq", [dead_message(7, source="mails")], NOW)
    finally:
        store.close()


# Swift's and Redis Cluster's readers are held to the same rows by test_sources (seconds more each here)
@pytest.mark.parametrize("kind", ["sqlite", "redis", "mongodb"])
def test_a_parquet_export_holds_the_rows_the_report_reads_from_the_store(spark, kind, request, tmp_path):
    import pyarrow.parquet as pq

    from spark_jobs.export import dead_letter_reader, export, write_parquet_through_contract
    from spark_jobs.sources import read_store
    from spark_jobs.sources.rows import arrow_schema

    uri = storage_uri(kind, request, tmp_path)
    fill_two_projects(uri)
    out = tmp_path / "dlq.parquet"
    assert dead_letter_reader(uri) is not None, "written by the store's own reader"
    count, targets, encrypted = export(uri, str(out))
    assert (count, targets, encrypted) == (6, [Target("p", "dlq"), Target("q", "mails-dlq")], 0)
    table = pq.read_table(out)
    assert table.schema == arrow_schema()
    exported = table.to_pylist()
    expected = [*(expected_row(n) for n in range(1, 6)), expected_row(7, "mails", "q", "mails-dlq")]
    assert [comparable(row) for row in exported] == expected
    # row for row what the report reads, bodies as the store holds their text
    report_rows = [row.asDict(recursive=True) for row in read_store(spark, uri).collect()]
    assert exported == sorted(report_rows, key=lambda row: (row["project"], row["queue"], row["id"]))
    # the selections of the command line
    assert export(uri, str(tmp_path / "q.parquet"), projects=["q"])[0] == 1
    assert pq.read_table(tmp_path / "q.parquet").column("id").to_pylist() == [ID(7)]
    assert export(uri, str(tmp_path / "dlq-only.parquet"), queues=["dlq"])[0] == 5
    dlq_only = pq.read_table(tmp_path / "dlq-only.parquet").column("id").to_pylist()
    assert dlq_only == [ID(n) for n in range(1, 6)]
    # the contract's rows, the path of a store without a reader, are the same dead letters
    store = open_storage(uri)
    try:
        assert write_parquet_through_contract(tmp_path / "contract.parquet", store, targets, NOW) == (6, 0)
    finally:
        store.close()
    assert [comparable(row) for row in pq.read_table(tmp_path / "contract.parquet").to_pylist()] == expected


def test_a_store_without_a_reader_is_exported_through_the_contract(tmp_path):
    import pyarrow.parquet as pq

    from spark_jobs.export import dead_letter_reader, export

    assert dead_letter_reader("sqlite:///:memory:") is None
    assert export("sqlite:///:memory:", str(tmp_path / "none.parquet")) == (0, [], 0)
    assert pq.read_table(tmp_path / "none.parquet").num_rows == 0


def test_the_report_command_forwards_its_options_and_shows_their_help():
    result = CliRunner().invoke(main, ["dlq-report", "--help"])
    assert result.exit_code == 0
    assert "--storage" in result.output and "--since" in result.output and "--master" in result.output


def fill_with_encrypted(uri: str) -> None:
    """Store five dead letters in p/dlq (:func:`fill`), then two whose bodies are encrypted at rest."""
    fill(uri, 5)
    keyring = encryption.Keyring.from_setting(("k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=",))
    sealed = [dead_message(n) for n in (6, 7)]
    for message in sealed:
        message.body = encryption.seal(message.body, keyring, "p", message.id)
    store = open_storage(uri)
    try:
        store.post_messages("p", "dlq", sealed, NOW)
    finally:
        store.close()


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_an_export_says_which_dead_letters_are_encrypted_and_how_many(tmp_path, suffix):
    uri = f"sqlite:///{tmp_path}/zaqar.db"
    fill_with_encrypted(uri)
    out = tmp_path / f"dlq.{suffix}"
    result = CliRunner().invoke(main, ["export", "--dlq", "--storage", uri, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "exported 7 dead letters from 1 DLQs" in result.output
    assert "2 of them have bodies encrypted at rest: written as stored, not decrypted" in result.output
    if suffix == "jsonl":
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert [(line["id"], line["body_encrypted"]) for line in lines] == [
            *((ID(n), False) for n in range(1, 6)), (ID(6), True), (ID(7), True)]
        assert list(lines[5]["body"]) == ["zaqar_lite:encrypted"]
