"""How the DLQ report's time grows with the number of dead letters, from the store and from Parquet.

For each size, a fresh SQLite store gets that many dead letters of the
synthetic model (``spark_jobs.synthetic.seed_store``: written straight
through the storage contract, as the API would leave them), and a Parquet
export of the same messages is written (``zaqar-lite export --dlq``). Then,
each in a fresh process as a user runs it (``python -m spark_jobs.dlq_report
--master local[2]``), so Spark's own start is counted:

* ``store s``: the whole report read from the store, start to ``done``;
* ``parquet s``: the same report on the Parquet export, the ceiling of the
  read path (Spark's own columnar reader, no store in between);
* ``store/parquet``: their ratio, comparable across machines and loads;
* ``store cpu`` and ``parquet cpu``: the CPU seconds of each run's process
  tree (the report's Python, Spark's JVM, its Python workers), read from
  ``/proc`` while it runs: what the report costs whatever else the machine
  runs, where wall time depends on the load.

Before the first size, one report on that size's export writes the driver
JVM's class-data archive of Spark's classes into a cache of the
benchmark's own (``spark_jobs/class_archive.py``; what the first report on
a machine does): its seconds are printed as ``archive s``, and every timed
report maps the archive, as every report after the first on a machine
does. ``--no-class-archive`` times the reports without it.

The stage lines of each run (rows and seconds per stage) are kept in the
``--json`` output. The machine's load average is printed with every row:
figures depend on what else runs; compare the rows of one run with each
other. Run from the repository root::

    .venv/bin/python benchmarks/dlq_report_scale.py                       # 10000 100000
    .venv/bin/python benchmarks/dlq_report_scale.py --sizes 10000 1000000
    .venv/bin/python benchmarks/dlq_report_scale.py --json > figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spark_jobs import class_archive, synthetic  # noqa: E402
from spark_jobs.export import export  # noqa: E402


def load_average() -> float:
    """Return the machine's one-minute load average."""
    return os.getloadavg()[0]


def timed(action: Any) -> tuple[float, Any]:
    """Return the seconds an action took and what it returned."""
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def _tree_cpu(root: int, seen: dict[int, float]) -> None:
    """Record the CPU seconds so far of ``root`` and every process below it (Linux ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # the command may hold spaces: fields after it
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    tree, grown = {root}, True
    while grown:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grown = bool(below)
    for pid in tree & cpu.keys():
        seen[pid] = cpu[pid]


def report(storage: str, out: Path, master: str) -> tuple[float, float, list[str]]:
    """Run the report in a fresh process; return its wall and CPU seconds (process tree) and progress lines.

    The CPU time is sampled every 0.1 s: what a process spends after the last
    sample before it ends is not counted (a fraction of a second).
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    seen: dict[int, float] = {}
    with tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "spark_jobs.dlq_report", "--master", master, "--storage", storage,
             "--out", str(out)],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
        )
        while process.poll() is None:
            _tree_cpu(process.pid, seen)
            time.sleep(0.1)
        seconds = time.perf_counter() - started
        stderr.seek(0)
        text = stderr.read()
    if process.returncode != 0:
        raise RuntimeError(f"the report failed on {storage}:\n{text[-4000:]}")
    lines = [line for line in text.splitlines() if line.startswith("dlq-report: ")]
    noise = [line for line in text.splitlines() if line and not line.startswith("dlq-report: ")]
    return seconds, sum(seen.values()), lines + [f"(other stderr lines: {len(noise)})"]


def measure(size: int, directory: Path, master: str, warm_up: bool) -> dict[str, Any]:
    """Seed a store with ``size`` dead letters, export it, and time the report on both.

    With ``warm_up``, a first report on the export writes the class-data archive (``archive_s``).
    """
    uri = f"sqlite:///{directory}/zaqar-{size}.db?synchronous=normal"
    seed_s, written = timed(lambda: synthetic.seed_store(uri, size))
    parquet = directory / f"dlq-{size}.parquet"
    export_s, _ = timed(lambda: export(uri, str(parquet)))
    archive_s = report(str(parquet), directory / f"report-{size}-archive", master)[0] if warm_up else None
    load_before = load_average()
    store_s, store_cpu, store_lines = report(uri, directory / f"report-{size}", master)
    parquet_s, parquet_cpu, parquet_lines = report(str(parquet), directory / f"report-{size}-parquet", master)
    store_doc = json.loads((directory / f"report-{size}" / "report.json").read_text())
    parquet_doc = json.loads((directory / f"report-{size}-parquet" / "report.json").read_text())
    assert store_doc["summary"]["dead_letters"] == parquet_doc["summary"]["dead_letters"] == written
    assert store_doc["rules"] == parquet_doc["rules"], "the same dead letters give the same rules"
    return {
        "dead_letters": written,
        "seed_s": seed_s,
        "export_parquet_s": export_s,
        "archive_s": archive_s,
        "class_archive": all("class-data archive" in line for line in (store_lines[1], parquet_lines[1])),
        "store_s": store_s,
        "parquet_s": parquet_s,
        "store_per_parquet": store_s / parquet_s,
        "store_cpu_s": store_cpu,
        "parquet_cpu_s": parquet_cpu,
        "load_before": load_before,
        "load_after": load_average(),
        "signatures": store_doc["summary"]["signatures"],
        "rules": len(store_doc["rules"]),
        "store_stages": store_lines,
        "parquet_stages": parquet_lines,
    }


def main() -> int:
    """Run the benchmark and print its figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="dead letters per run")
    p.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--no-class-archive", action="store_true",
                   help="time the reports without the driver's class-data archive")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dlq-scale-") as tmp:
        cache = Path(tmp) / "spark-cache"
        os.environ[class_archive.CACHE_ENV] = "off" if args.no_class_archive else str(cache)
        for size in args.sizes:
            warm_up = not args.no_class_archive and not any(cache.glob("*.jsa"))
            rows.append(measure(size, Path(tmp), args.master, warm_up))
            row = rows[-1]
            print(f"measured {size} dead letters: "
                  f"store {row['store_s']:.1f} s ({row['store_cpu_s']:.1f} s CPU), "
                  f"parquet {row['parquet_s']:.1f} s ({row['parquet_cpu_s']:.1f} s CPU) "
                  f"(load {row['load_before']:.1f}-{row['load_after']:.1f})",
                  file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'dead letters':>12} {'store s':>8} {'parquet s':>9} {'store/parquet':>13} {'store cpu':>9} "
          f"{'parquet cpu':>11} {'per s':>8} {'signatures':>10} {'rules':>5} {'seed s':>7} {'archive s':>9} "
          f"{'load':>9}")
    for row in rows:
        print(
            f"{row['dead_letters']:>12} {row['store_s']:>8.1f} {row['parquet_s']:>9.1f} "
            f"{row['store_per_parquet']:>13.2f} {row['store_cpu_s']:>9.1f} {row['parquet_cpu_s']:>11.1f} "
            f"{row['dead_letters'] / row['store_s']:>8.0f} "
            f"{row['signatures']:>10} {row['rules']:>5} {row['seed_s']:>7.1f} "
            f"{'-' if row['archive_s'] is None else format(row['archive_s'], '.1f'):>9} "
            f"{row['load_before']:>4.1f}-{row['load_after']:<4.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
