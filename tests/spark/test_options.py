"""The report's command line: where it reads from when no store is named."""

from __future__ import annotations

import pytest

from spark_jobs.dlq_report import parse_args
from zaqar_lite.config import default_storage_uri


@pytest.fixture(autouse=True)
def no_environment_overrides(monkeypatch):
    """Keep the caller's ZAQAR_LITE_* variables out of these tests."""
    import os

    for name in list(os.environ):
        if name.startswith("ZAQAR_LITE_"):
            monkeypatch.delenv(name)


def test_without_storage_the_report_reads_the_file_the_server_uses_by_default():
    assert parse_args([]).storage == default_storage_uri()
    assert default_storage_uri().endswith("/zaqar-lite/zaqar.db")


def test_without_storage_the_report_reads_the_store_of_the_servers_config(tmp_path):
    conf = tmp_path / "server.conf"
    conf.write_text("[storage]\nuri = redis://127.0.0.1:6390/3\n")
    assert parse_args(["--config", str(conf)]).storage == "redis://127.0.0.1:6390/3"


def test_the_environment_names_the_store_as_it_does_for_the_server(monkeypatch):
    monkeypatch.setenv("ZAQAR_LITE_STORAGE_URI", "sqlite:////srv/zaqar/zaqar.db")
    assert parse_args([]).storage == "sqlite:////srv/zaqar/zaqar.db"


def test_a_named_store_wins():
    assert parse_args(["--storage", "sqlite:////tmp/x.db"]).storage == "sqlite:////tmp/x.db"
