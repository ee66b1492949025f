"""The DLQ report's Spark session: a driver that starts fast and quietly, or spark-submit's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from spark_jobs.class_archive import ClassArchive
from spark_jobs.options import Options

APP_NAME = "zaqar-lite-dlq-report"


def _is_local(master: str) -> bool:
    return master.startswith("local")


#: Spark's log configuration of a driver started here: warnings and errors, no routine notices
LOG_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"
#: the JVM of a driver started here for a small report: the client compiler only (the optimising one
#: spent as much CPU compiling as the whole report on 10^4 dead letters), one garbage-collector
#: thread, on 2 cores, and no bytecode verification of the installation's own jars (loading Spark's
#: classes is a tenth of the CPU of a report on 10^4 dead letters, their verification much of that)
DRIVER_JAVA_OPTIONS = (
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:-BytecodeVerificationRemote",
)
#: the same for a large report: both compilers (the optimising one pays for itself on the hot loops,
#: masking and JSON parsing, once they run for minutes) and the parallel garbage collector
LARGE_DRIVER_JAVA_OPTIONS = (
    "-XX:+UseParallelGC",
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:-BytecodeVerificationRemote",
)
#: dead letters from which a report is large (:data:`LARGE_DRIVER_JAVA_OPTIONS`)
LARGE_REPORT_ROWS = 250_000
#: dead letters per shuffle partition to aim for (see :func:`shuffle_partitions`)
ROWS_PER_SHUFFLE_PARTITION = 250_000


def shuffle_partitions(rows: int, parallelism: int) -> int:
    """Return spark.sql.shuffle.partitions for a number of dead letters: a wave of tasks, more for more."""
    waves = max(1, min(4, -(-rows // (ROWS_PER_SHUFFLE_PARTITION * max(1, parallelism)))))
    return max(1, parallelism) * waves


def driver_java_options(rows: int | None) -> tuple[str, ...]:
    """Return the JVM options of a driver started here for about ``rows`` dead letters (None: unknown)."""
    return LARGE_DRIVER_JAVA_OPTIONS if (rows or 0) >= LARGE_REPORT_ROWS else DRIVER_JAVA_OPTIONS


def is_submitted() -> bool:
    """Return whether this process runs under spark-submit (which started the driver's JVM already)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ and SparkSession.getActiveSession() is None


def spark_session(
    options: Options, rows: int | None = None, archive: ClassArchive | None = None
) -> SparkSession:
    """Return the session: ``--master``, else spark-submit's, else ``local[*]``.

    A driver started here starts fast and quietly: no web UI, no Hive
    catalog, Spark's log at WARN from the first line (:data:`LOG_CONFIG`, so
    no banner and no native-Hadoop notice), its JVM tuned for a short job
    (:func:`driver_java_options` of ``rows``, the dead letters expected,
    when known before Spark starts), mapping Spark's classes from
    ``archive`` or writing them there at exit (:mod:`spark_jobs.class_archive`);
    on a local master it binds to
    loopback and runs its Python workers with this interpreter. Shuffle
    partitions are sized to the data once it is read (:func:`run`). On a
    cluster, the job's own code (this package and ``zaqar_lite``) is shipped
    to the executors; their Python needs the client library of the store
    read (redis, pymongo, python-swiftclient).
    """
    submitted = is_submitted()
    master = options.master or (None if submitted else "local[*]")
    builder = SparkSession.builder.appName(APP_NAME)
    for key, value in {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.adaptive.enabled": "true",
    }.items():
        builder = builder.config(key, value)
    if not submitted:
        builder = builder.config(
            "spark.driver.extraJavaOptions",
            " ".join((
                f"-Dlog4j2.configurationFile={LOG_CONFIG}",
                *driver_java_options(rows),
                *(archive.java_options() if archive else ()),
            )),
        )
    if master:
        builder = builder.master(master)
    if master and (_is_local(master) or master.startswith("spark://127.0.0.1")):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.driver.host", "127.0.0.1")
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
    if master and _is_local(master):
        builder = builder.config(
            "spark.driver.memory", os.environ.get("ZAQAR_LITE_SPARK_DRIVER_MEMORY", "2g")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not _is_local(spark.sparkContext.master or "local"):
        _ship_code(spark)
    return spark


def _ship_code(spark: SparkSession) -> None:
    """Send ``spark_jobs`` and ``zaqar_lite`` to the executors as one zip."""
    import tempfile
    import zipfile

    import zaqar_lite

    roots = [Path(__file__).resolve().parent, Path(zaqar_lite.__file__).resolve().parent]
    archive = Path(tempfile.mkdtemp(prefix="zaqar-lite-")) / "zaqar_lite_jobs.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for root in roots:
            for path in root.rglob("*"):
                if path.is_file() and "__pycache__" not in path.parts:
                    zipped.write(path, path.relative_to(root.parent))
    spark.sparkContext.addPyFile(str(archive))
