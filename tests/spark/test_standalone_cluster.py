"""The report on a real Spark standalone cluster: one master and two workers from PySpark's own installation.

``spark-class org.apache.spark.deploy.master.Master`` and two
``...deploy.worker.Worker`` (one core, little memory each) start on
loopback ports; the report runs as ``python -m spark_jobs.dlq_report
--master spark://...`` (its own driver, executors in the workers' JVMs and
Python workers, the job's code shipped to them) against a SQLite store the
executors open by path, and must write the same report as ``local[2]``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_jobs import synthetic
from tests.conftest import free_port, missing_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEAD_LETTERS = 300
WORKERS = 2


def spark_home() -> Path:
    """Return the Spark installation inside PySpark (it has ``bin/spark-class`` and the jars)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        missing_server("spark-class")
    return home


def _start(home: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(home / "bin" / "spark-class"), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _alive_workers(webui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=5) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and two workers on loopback; yields the master URL."""
    home = spark_home()
    directory = tmp_path_factory.mktemp("spark-cluster")
    port, webui = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    processes = [
        _start(home, directory / "master.log", "org.apache.spark.deploy.master.Master",
               "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui))
    ]
    try:
        for n in range(WORKERS):
            work = directory / f"worker-{n}"
            work.mkdir()
            processes.append(
                _start(home, directory / f"worker-{n}.log", "org.apache.spark.deploy.worker.Worker",
                       master, "--host", "127.0.0.1", "--port", str(free_port()),
                       "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                       "--work-dir", str(work))
            )
        deadline = time.monotonic() + 180
        while _alive_workers(webui) < WORKERS:
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                logs = "\n".join(p.read_text()[-2000:] for p in sorted(directory.glob("*.log")))
                pytest.fail(f"the standalone cluster did not come up:\n{logs}")
            time.sleep(1)
        yield master
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    """Return a report without what differs between two runs (when it was made)."""
    return {key: value for key, value in document.items() if key != "generated_at"}


def test_the_report_on_a_standalone_cluster_is_the_report_on_local(cluster, spark, tmp_path):
    from spark_jobs import dlq_report

    uri = f"sqlite:///{tmp_path}/zaqar.db"
    assert synthetic.seed_store(uri, DEAD_LETTERS) == DEAD_LETTERS
    on_cluster = tmp_path / "cluster"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_EXECUTOR_MEMORY": "512m",
        "PYTHONPATH": str(ROOT),
    }
    finished = subprocess.run(
        [sys.executable, "-m", "spark_jobs.dlq_report", "--master", cluster, "--storage", uri,
         "--out", str(on_cluster)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert f"on {cluster}" in finished.stderr
    assert finished.stderr.strip().splitlines()[-1].startswith("dlq-report: done: ")

    on_local = tmp_path / "local"
    local = dlq_report.run(spark, dlq_report.Options(storage=uri, out=on_local), lambda line: None)
    remote = json.loads((on_cluster / "report.json").read_text())
    assert comparable(remote) == comparable(json.loads(json.dumps(local)))
    assert remote["summary"]["dead_letters"] == DEAD_LETTERS
    files = sorted(p.relative_to(on_local) for p in on_local.rglob("*.txt"))
    assert files == sorted(p.relative_to(on_cluster) for p in on_cluster.rglob("*.txt"))
    assert len(files) == len(synthetic.CAUSES)
    for name in files:
        assert (on_cluster / name).read_text() == (on_local / name).read_text(), name
