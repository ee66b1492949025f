"""The class-data archive of the report's driver JVM: written by the first report, mapped by the next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_jobs import class_archive, synthetic

ROOT = Path(__file__).resolve().parents[2]


def test_the_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(class_archive.CACHE_ENV, "off")
    assert class_archive.cache_directory() is None
    monkeypatch.setenv(class_archive.CACHE_ENV, str(tmp_path / "mine"))
    assert class_archive.cache_directory() == tmp_path / "mine"
    monkeypatch.delenv(class_archive.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert class_archive.cache_directory() == tmp_path / "xdg" / "zaqar-lite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert class_archive.cache_directory() == tmp_path / "home" / ".cache" / "zaqar-lite"


def test_the_archive_is_named_by_the_java_and_the_jars_it_was_made_with(tmp_path):
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_bytes(b"java")
    (tmp_path / "jdk" / "lib").mkdir()
    modules = tmp_path / "jdk" / "lib" / "modules"
    modules.write_bytes(b"modules")
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"v1")
    first = class_archive.archive_name(java, jars)
    assert first.startswith("spark-classes-") and first.endswith(".jsa")
    assert class_archive.archive_name(java, jars) == first
    (jars / "spark-core.jar").write_bytes(b"v2 longer")  # Spark upgraded
    second = class_archive.archive_name(java, jars)
    assert second != first
    modules.write_bytes(b"modules of a Java update")
    assert class_archive.archive_name(java, jars) not in (first, second)


def test_a_missing_archive_is_written_at_exit_under_a_name_of_its_own_and_an_existing_one_mapped(tmp_path):
    archive = class_archive.ClassArchive(tmp_path / "spark-classes-0.jsa")
    options = archive.java_options()
    assert options[0] == f"-XX:ArchiveClassesAtExit={tmp_path}/spark-classes-0.jsa.{os.getpid()}.tmp"
    assert class_archive.QUIET in options
    archive.path.write_bytes(b"archive")
    assert archive.java_options()[0] == f"-XX:SharedArchiveFile={archive.path}"


def test_an_archive_is_not_written_where_it_cannot_be_and_old_leftovers_are_removed(monkeypatch, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    monkeypatch.setenv(class_archive.CACHE_ENV, str(blocked / "cache"))
    assert class_archive.class_archive() is None
    monkeypatch.setenv(class_archive.CACHE_ENV, str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    old = tmp_path / "cache" / "spark-classes-1.jsa.999.tmp"
    fresh = tmp_path / "cache" / "spark-classes-1.jsa.998.tmp"
    old.write_bytes(b"half")
    fresh.write_bytes(b"half")
    long_ago = time.time() - class_archive.STALE_SECONDS - 60
    os.utime(old, (long_ago, long_ago))
    archive = class_archive.class_archive()
    assert archive is not None and archive.path.parent == tmp_path / "cache"
    assert not old.exists() and fresh.exists()  # a driver may still be writing the fresh one


def _report(uri: str, out: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, class_archive.CACHE_ENV: str(cache), "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "spark_jobs.dlq_report", "--master", "local[2]", "--storage", uri,
         "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=600,
    )


@pytest.mark.slow
def test_the_first_report_writes_the_archive_and_the_next_maps_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/zaqar.db"
    assert synthetic.seed_store(uri, 200) == 200
    cache = tmp_path / "cache"

    first = _report(uri, tmp_path / "first", cache)
    assert first.returncode == 0, first.stderr[-4000:]
    lines = first.stderr.strip().splitlines()
    assert any("Spark's classes archived when the report ends" in line for line in lines)
    done = next(i for i, line in enumerate(lines) if line.startswith("dlq-report: done: "))
    assert "MB written in" in lines[-1] and done < len(lines) - 1  # the report is out before the archive
    archives = list(cache.iterdir())
    assert len(archives) == 1 and archives[0].name.endswith(".jsa")  # in place, no temporary file left
    assert archives[0].stat().st_size > 10_000_000

    second = _report(uri, tmp_path / "second", cache)
    assert second.returncode == 0, second.stderr[-4000:]
    assert "Spark's classes from the class-data archive" in second.stderr  # its JVM maps the file
    assert second.stderr.strip().splitlines()[-1].startswith("dlq-report: done: ")
    assert list(cache.iterdir()) == archives

    def comparable(out: Path) -> dict:
        document = json.loads((out / "report.json").read_text())
        return {key: value for key, value in document.items() if key != "generated_at"}

    assert comparable(tmp_path / "first") == comparable(tmp_path / "second")
