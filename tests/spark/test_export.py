"""``zaqar-lite export --dlq`` and reading its files back: the same rows as reading the store."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.spark.test_sources import ID, comparable, expected_row, fill
from zaqar_lite.cli import main

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
    count, _ = export(uri, str(out))
    assert count == 5
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


def test_the_report_command_forwards_its_options_and_shows_their_help():
    result = CliRunner().invoke(main, ["dlq-report", "--help"])
    assert result.exit_code == 0
    assert "--storage" in result.output and "--since" in result.output and "--master" in result.output
