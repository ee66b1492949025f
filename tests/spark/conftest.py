"""One local Spark session for the whole Spark suite, and literal dead-letter rows.

Without PySpark (and pyarrow) the modules that import it are left out
locally and the Spark test of the others is skipped; under CI (``CI=true``)
the run fails instead (``tests/conftest.py:missing_server``). ``make test``
installs both with the ``spark`` extra.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import IN_CI

#: modules that import PySpark when collected
NEEDS_PYSPARK = ["test_export.py", "test_paused_sources.py", "test_report_causes.py",
                 "test_report_end_to_end.py", "test_sources.py", "test_transforms.py"]
if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
    if IN_CI:
        raise RuntimeError("pyspark[sql] is required under CI: pip install 'zaqar-lite[spark]'")
    collect_ignore = NEEDS_PYSPARK

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` session shared by every Spark test (starting one takes seconds)."""
    from tests.conftest import missing_server

    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
        missing_server("pyspark")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("zaqar-lite-tests")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def failure(at: float, claim_count: int, error_type: str | None, error: str | None) -> dict[str, Any]:
    """Return one failure-history entry of a row."""
    return {"at": at, "claim_count": claim_count, "error_type": error_type, "error": error}


def dead_letter(message_id: str, **fields: Any) -> dict[str, Any]:
    """Return a dead-letter row (``DEAD_LETTER_DDL``) with plain defaults for what the test leaves out."""
    row = {
        "project": "p",
        "queue": "dlq",
        "id": message_id,
        "source_queue": "orders",
        "reason": "max_claims",
        "dead_lettered_at": 7200.0,
        "first_posted_at": 3600.0,
        "claim_count": 3,
        "last_claim_id": "c1",
        "client_id": "client-a",
        "body": "{}",
        "failures": [],
    }
    row.update(fields)
    return row


@pytest.fixture
def dead_letters(spark):
    """A function making a DataFrame of dead-letter rows."""
    from spark_jobs.sources.rows import DEAD_LETTER_DDL

    def make(*rows: dict[str, Any]):
        return spark.createDataFrame(list(rows), DEAD_LETTER_DDL)

    return make
