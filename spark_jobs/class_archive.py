"""The class-data archive of a report's driver JVM: Spark's classes mapped ready-made instead of loaded.

A driver the report starts loads some 15,000 classes from Spark's jars
before and while it plans its first queries: reading, parsing and linking
them was a fifth of the CPU of a report on 10,000 dead letters. The JVM can
write the classes it loaded into a class-data archive when it exits
(``-XX:ArchiveClassesAtExit``, Java 13 and later) and map that archive at
its next start (``-XX:SharedArchiveFile``): the first report on a machine
writes it (about 180 MB, some 20 s after the report is written), every
later one starts from it.

The archive lives in ``$ZAQAR_LITE_SPARK_CACHE`` (a directory; ``off``
turns the archive off), else ``$XDG_CACHE_HOME/zaqar-lite``, else
``~/.cache/zaqar-lite``. Its name is a digest of the Java installation and
of Spark's jars (their names, sizes and times), so a new Java or Spark gets
an archive of its own; the JVM checks the archive against itself and
silently ignores one that does not fit. It is written under a temporary
name and renamed once the JVM has exited, so a report never maps half a file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: the environment variable naming the archive's directory, or ``off``
CACHE_ENV = "ZAQAR_LITE_SPARK_CACHE"
#: free bytes the archive's directory needs before a driver writes one there
SPACE_NEEDED = 1 << 30
#: seconds after which a temporary archive is left over from a driver that never finished it
STALE_SECONDS = 3600
#: how long a finishing driver waits for its JVM to write the archive
WRITE_TIMEOUT = 600
#: the JVM reports nothing about the archive (a mismatched one is ignored quietly)
QUIET = "-Xlog:cds=off,cds+dynamic=off"


@dataclasses.dataclass(frozen=True)
class ClassArchive:
    """One archive path: mapped when it exists, else written by the driver that starts now."""

    path: Path

    @property
    def pending(self) -> Path:
        """Return the temporary file this process's driver writes the archive to."""
        return self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")

    def java_options(self) -> tuple[str, ...]:
        """Return the driver JVM's options: map the archive, or write it at exit."""
        if self.path.is_file():
            return (f"-XX:SharedArchiveFile={self.path}", QUIET)
        return (f"-XX:ArchiveClassesAtExit={self.pending}", QUIET)


def cache_directory() -> Path | None:
    """Return the directory of the archive (module docstring), or None when it is turned off."""
    setting = os.environ.get(CACHE_ENV, "").strip()
    if setting.lower() == "off":
        return None
    if setting:
        return Path(setting).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory to be found
            return None
    return Path(base) / "zaqar-lite"


def java_executable() -> Path | None:
    """Return the ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).is_file() else None


def spark_jars() -> Path:
    """Return the directory of Spark's jars: ``$SPARK_HOME/jars``, else PySpark's own."""
    import pyspark

    home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).resolve().parent)
    return Path(home) / "jars"


def archive_name(java: Path, jars: Path) -> str:
    """Return the archive's file name: a digest of the Java installation and of Spark's jars."""
    digest = hashlib.sha256(str(java).encode())
    # the JDK's runtime image changes with every Java update
    for path in (java, java.parent.parent / "lib" / "modules"):
        if path.exists():
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    for jar in sorted(jars.glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return f"spark-classes-{digest.hexdigest()[:16]}.jsa"


def class_archive() -> ClassArchive | None:
    """Return the archive a driver started here maps or writes, or None (off, no Java found, no room).

    None also when there is no archive yet and its directory cannot take
    one (not writable, or less than :data:`SPACE_NEEDED` free).
    """
    directory = cache_directory()
    java = java_executable()
    jars = spark_jars()
    if directory is None or java is None or not jars.is_dir():
        return None
    archive = ClassArchive(directory / archive_name(java, jars))
    if archive.path.is_file():
        return archive
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK) or shutil.disk_usage(directory).free < SPACE_NEEDED:
            return None
    except OSError:
        return None
    for stale in directory.glob("spark-classes-*.tmp"):  # drivers that were killed before finishing
        try:
            if time.time() - stale.stat().st_mtime > STALE_SECONDS:
                stale.unlink()
        except OSError:
            pass
    return archive


def _driver_process(spark: Any) -> subprocess.Popen[bytes] | None:
    """Return the driver JVM's process when this Python started it (PySpark keeps it on the gateway)."""
    return getattr(spark.sparkContext._gateway, "proc", None)


def mapped(pid: int, archive: ClassArchive) -> bool | None:
    """Return whether the JVM of ``pid`` maps the archive (Linux ``/proc``), None when unknown."""
    try:
        with open(f"/proc/{pid}/maps") as maps:
            return any(line.rstrip().endswith(str(archive.path)) for line in maps)
    except OSError:
        return None


def describe(spark: Any, archive: ClassArchive | None) -> str:
    """Return what the ``spark:`` progress line says of the archive: mapped, to be written, or nothing."""
    process = _driver_process(spark)
    if archive is None or process is None:
        return ""
    if mapped(process.pid, archive):
        return ", Spark's classes from the class-data archive"
    return "" if archive.path.is_file() else ", Spark's classes archived when the report ends"


def finish(spark: Any, archive: ClassArchive, progress: Callable[[str], None]) -> None:
    """When this driver writes the archive: stop the session, wait for its JVM to exit, put the file in place.

    The JVM writes at exit: closing the gateway's standard input ends it
    (PySpark's gateway server exits on end of input).
    """
    process = _driver_process(spark)
    if process is None or archive.path.is_file():
        return  # nothing to write: the JVM ends with this process, as always
    spark.stop()
    started = time.monotonic()
    progress(f"class-data archive: writing Spark's classes to {archive.path}, once (about 20 s)")
    if process.stdin:
        process.stdin.close()
    try:
        code = process.wait(timeout=WRITE_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
    pending = archive.pending
    if code == 0 and pending.is_file():
        pending.replace(archive.path)
        size = archive.path.stat().st_size / 1e6
        progress(f"class-data archive: {size:.0f} MB written in {time.monotonic() - started:.1f} s")
    else:
        pending.unlink(missing_ok=True)
        progress(f"class-data archive: not written (the driver's JVM exited with {code})")
