"""The driver's JVM is chosen by the dead letters counted before Spark starts."""

from __future__ import annotations

from spark_jobs import synthetic
from spark_jobs.dlq_report import expected_dead_letters, parse_args
from spark_jobs.session import driver_java_options


def test_a_store_is_counted_by_its_dead_letter_queues(tmp_path):
    uri = f"sqlite:///{tmp_path}/zaqar.db"
    assert synthetic.seed_store(uri, 30) == 30
    assert expected_dead_letters(parse_args(["--storage", uri])) == 30


def test_an_export_file_is_estimated_from_its_size(tmp_path):
    export = tmp_path / "dlq.parquet"
    export.write_bytes(b"x" * 1_900_000)
    assert expected_dead_letters(parse_args(["--storage", str(export)])) == 10_000
    lines = tmp_path / "dlq.jsonl"
    lines.write_bytes(b"x" * 600_000)
    assert expected_dead_letters(parse_args(["--storage", str(lines)])) == 1_000
    assert expected_dead_letters(parse_args(["--storage", str(tmp_path / "absent.parquet")])) is None


def test_a_large_report_gets_both_compilers_and_the_parallel_collector():
    assert "-XX:TieredStopAtLevel=1" in driver_java_options(10_000)
    assert "-XX:+UseSerialGC" in driver_java_options(249_999)
    assert "-XX:TieredStopAtLevel=1" in driver_java_options(None)
    large = driver_java_options(1_000_000)
    assert "-XX:+UseParallelGC" in large
    assert not any(option.startswith("-XX:TieredStopAtLevel") for option in large)
