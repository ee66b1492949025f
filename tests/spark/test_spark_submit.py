"""``spark-submit spark_jobs/dlq_report.py``: the report as a cluster would run it, in a Spark of its own.

The job file is handed to the ``spark-submit`` that PySpark installs, with a
``--master`` of spark-submit's own (``local[2]`` here; a ``spark://`` URL,
``yarn`` or ``k8s://`` on a cluster), and must find the planted causes of
dead letters written straight into a store, reporting each stage on stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spark_jobs import synthetic

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEAD_LETTERS = 400
STAGES = ["plan", "extract", "fields", "rules", "signatures", "time", "write"]


def spark_submit() -> str:
    """Return the spark-submit of the running environment's PySpark."""
    found = Path(sys.executable).with_name("spark-submit")
    if found.exists():
        return str(found)
    on_path = shutil.which("spark-submit")
    if on_path is None:
        from tests.conftest import missing_server

        missing_server("spark-submit")
    return str(on_path)


def test_spark_submit_runs_the_job_file_and_it_finds_every_planted_cause(tmp_path):
    uri = f"sqlite:///{tmp_path}/zaqar.db"
    assert synthetic.seed_store(uri, DEAD_LETTERS) == DEAD_LETTERS
    out = tmp_path / "report"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    finished = subprocess.run(
        [spark_submit(), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
         str(ROOT / "spark_jobs" / "dlq_report.py"), "--storage", uri, "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    # spark-submit's PythonRunner merges the job's stderr into its own output stream
    output = finished.stdout + finished.stderr
    assert finished.returncode == 0, output[-4000:]
    stages = [line.split(":")[1].strip() for line in output.splitlines() if line.startswith("dlq-report: ")]
    assert [s for s in stages if s in STAGES] == STAGES, output[-4000:]
    document = json.loads((out / "report.json").read_text())
    assert document["summary"]["dead_letters"] == DEAD_LETTERS
    signatures = {(s["source_queue"], s["signature"]) for s in document["signatures"]}
    for cause in synthetic.CAUSES.values():
        assert (cause.source_queue, cause.signature) in signatures, cause.name
    assert (out / "report.html").stat().st_size > 0
