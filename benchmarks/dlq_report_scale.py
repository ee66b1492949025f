"""How the DLQ report's time grows with the number of dead letters, read from the store and from Parquet.

For each size, a fresh SQLite store gets that many dead letters of the
synthetic model (``spark_jobs.synthetic.seed_store``: written straight
through the storage contract, as the API would leave them). Then, in one
Spark session on ``local[2]`` (by default):

* ``read``: the ``zaqar_dlq`` data source reading every row (a count);
* ``report``: the whole job, read to ``report.html``;
* the same two on a Parquet export of the same messages, the ceiling of the
  read path (Spark's own columnar reader, no store in between).

A warm-up report on a small store runs first and is not counted (the JVM
compiles as it goes). Run from the repository root::

    .venv/bin/python benchmarks/dlq_report_scale.py                       # 2000 4000 8000
    .venv/bin/python benchmarks/dlq_report_scale.py --sizes 10000 100000 1000000
    .venv/bin/python benchmarks/dlq_report_scale.py --json > figures.json

Figures depend on the machine and on what else runs on it; compare the rows
of one run with each other.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spark_jobs import dlq_report, synthetic  # noqa: E402
from spark_jobs.export import export  # noqa: E402
from spark_jobs.sources import read_export, read_store  # noqa: E402
from spark_jobs.sources.rows import COLUMNS  # noqa: E402


def timed(action: Any) -> tuple[float, Any]:
    """Return the seconds an action took and what it returned."""
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def read_all(df: Any) -> int:
    """Read every column of every row (a plain count lets Parquet answer from its footers)."""
    from pyspark.sql import functions as F

    return int(df.select(F.count(F.lit(1)), F.sum(F.hash(*COLUMNS))).collect()[0][0])


def measure(spark: Any, size: int, directory: Path, partitions: int | None,
            parquet_report: bool = True) -> dict[str, Any]:
    """Seed a store with ``size`` dead letters; time reading and reporting it, from the store and Parquet.

    ``parquet_report`` False leaves out the whole report on the Parquet file
    (the read path's ceiling is the Parquet read; the report on it costs as
    much as the report on the store, which large sizes need not pay twice).
    """
    uri = f"sqlite:///{directory}/zaqar-{size}.db?synchronous=normal"
    seed_s, written = timed(lambda: synthetic.seed_store(uri, size))
    stages: list[str] = []
    read_s, count = timed(lambda: read_all(read_store(spark, uri, partitions=partitions)))
    options = dlq_report.Options(storage=uri, out=directory / f"report-{size}", partitions=partitions)
    report_s, report = timed(lambda: dlq_report.run(spark, options, stages.append))
    parquet = directory / f"dlq-{size}.parquet"
    export_s, _ = timed(lambda: export(uri, str(parquet)))
    parquet_read_s, parquet_count = timed(lambda: read_all(read_export(spark, str(parquet))))
    parquet_options = dlq_report.Options(storage=str(parquet), out=directory / f"report-{size}-parquet")
    parquet_report_s = (timed(lambda: dlq_report.run(spark, parquet_options, lambda line: None))[0]
                        if parquet_report else None)
    assert count == parquet_count == written == report["summary"]["dead_letters"], (
        count,
        parquet_count,
        written,
    )
    size = written
    return {
        "dead_letters": size,
        "seed_s": seed_s,
        "read_s": read_s,
        "report_s": report_s,
        "export_parquet_s": export_s,
        "parquet_read_s": parquet_read_s,
        "parquet_report_s": parquet_report_s,
        "read_per_s": size / read_s,
        "report_per_s": size / report_s,
        "parquet_read_per_s": size / parquet_read_s,
        "parquet_report_per_s": size / parquet_report_s if parquet_report_s else None,
        "signatures": len(report["signatures"]),
        "rules": len(report["rules"]),
        "stages": stages,
    }


def main() -> int:
    """Run the benchmark and print its figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000, 8000], help="dead letters per run")
    p.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    p.add_argument("--partitions", type=int, help="read partitions (default 2 x default parallelism)")
    p.add_argument("--parquet-report-max", type=int, default=200_000,
                   help="largest size whose Parquet export is also reported on, not only read (200000)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="dlq-scale-") as tmp:
        directory = Path(tmp)
        spark = dlq_report.spark_session(dlq_report.Options(storage="", master=args.master))
        warm = directory / "warm"
        warm.mkdir()
        measure(spark, 500, warm, args.partitions)
        rows = []
        for size in args.sizes:
            rows.append(measure(spark, size, directory, args.partitions, size <= args.parquet_report_max))
            print(f"measured {size} dead letters: report {rows[-1]['report_s']:.1f} s", file=sys.stderr)
        spark.stop()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    base = rows[0]
    print(
        f"{'dead letters':>12} {'read s':>8} {'read/s':>8} {'report s':>9} {'report/s':>9} {'x time':>7} "
        f"{'x size':>7} {'parquet read s':>15} {'parquet report s':>17} {'seed s':>7}"
    )
    for row in rows:
        print(
            f"{row['dead_letters']:>12} {row['read_s']:>8.1f} {row['read_per_s']:>8.0f} "
            f"{row['report_s']:>9.1f} "
            f"{row['report_per_s']:>9.0f} {row['report_s'] / base['report_s']:>7.2f} "
            f"{row['dead_letters'] / base['dead_letters']:>7.1f} {row['parquet_read_s']:>15.1f} "
            f"{'-' if row['parquet_report_s'] is None else format(row['parquet_report_s'], '.1f'):>17} "
            f"{row['seed_s']:>7.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
