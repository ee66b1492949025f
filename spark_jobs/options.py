"""The DLQ report's options: its command line, or the server's configuration for the store to read."""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from zaqar_lite.config import load_settings

if TYPE_CHECKING:
    from spark_jobs.sources.plan import PausedSource

#: how the report names the ``[storage] uri`` store of a deployment with pools
DEFAULT_STORE = "[storage] uri"


@dataclasses.dataclass(frozen=True)
class Options:
    """Everything a report run is told (the command-line options of :func:`parse_args`)."""

    storage: str
    out: Path = Path("dlq-report")
    projects: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    since: float | None = None
    master: str | None = None
    fields: tuple[str, ...] | None = None
    max_field_values: int = 12
    min_support: float = 0.02
    min_confidence: float = 0.8
    min_rule_messages: int = 3
    max_rule_items: int = 2
    partitions: int | None = None
    shuffle_partitions: int | None = None
    #: ``(name, uri)`` of a deployment's pools, read beside ``storage`` (its ``[storage] uri`` store)
    pools: tuple[tuple[str, str], ...] = ()
    #: ``(project, queue, pool)`` of each dead-letter queue read (filled by :func:`run` with pools)
    dlq_pools: tuple[tuple[str, str, str], ...] = ()
    #: the paused source queues of the DLQs read, with why (filled by :func:`run` from the queues' metadata)
    paused: tuple[PausedSource, ...] = ()

    def stores(self) -> list[tuple[str, str]]:
        """Return ``(name, uri)`` of every store to read: the ``storage`` store, then the pools."""
        return [(DEFAULT_STORE if self.pools else "", self.storage), *self.pools]

def _time(text: str) -> float:
    """Read ``--since``: ISO-8601 (UTC unless it says otherwise), POSIX seconds, or an age like ``24h``."""
    text = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text[-1:] in units and text[:-1].replace(".", "", 1).isdigit():
        return time.time() - float(text[:-1]) * units[text[-1]]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (ISO-8601, POSIX seconds or 24h/7d)") from exc
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def parser() -> argparse.ArgumentParser:
    """Return the command-line parser of the report."""
    p = argparse.ArgumentParser(
        prog="zaqar-lite dlq-report",
        description="Mine dead-letter queues for failure patterns; write report.json, report.html and "
        "per-signature message-id lists.",
    )
    p.add_argument(
        "--storage",
        help="storage URI (sqlite:////abs/zaqar.db, redis://..., mongodb://..., swift://...) or an "
        "export file (.jsonl or .parquet) from 'zaqar-lite export --dlq'; default: the store the "
        "server is configured with (--config, $ZAQAR_LITE_CONFIG, $ZAQAR_LITE_STORAGE_URI, else the "
        "SQLite file 'zaqar-lite serve' uses)",
    )
    p.add_argument("--config", help="the server's configuration file, to find its store")
    p.add_argument(
        "--out", type=Path, default=Path("dlq-report"), help="output directory (default dlq-report)"
    )
    p.add_argument("--project", action="append", default=[], help="only this project (repeatable)")
    p.add_argument(
        "--queue",
        action="append",
        default=[],
        help="only this DLQ (repeatable); default: every queue that is some queue's DLQ",
    )
    p.add_argument(
        "--since", type=_time, help="only messages dead-lettered since: ISO time, POSIX seconds, or 24h"
    )
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument(
        "--field",
        action="append",
        dest="fields",
        help="body path (currency, card.network, items[].sku) whose values feed pattern mining "
        "(repeatable); default: every scalar path of the bodies with few distinct values",
    )
    p.add_argument(
        "--max-field-values",
        type=int,
        default=12,
        help="most distinct values a body path may have to be chosen by default (12)",
    )
    p.add_argument("--min-support", type=float, default=0.02, help="FP-Growth minimum support (0.02)")
    p.add_argument("--min-confidence", type=float, default=0.8, help="minimum rule confidence (0.8)")
    p.add_argument(
        "--min-rule-messages",
        type=int,
        default=3,
        help="fewest dead letters a rule must cover, whatever the support (3)",
    )
    p.add_argument("--max-rule-items", type=int, default=2, help="most items on the left side of a rule (2)")
    p.add_argument(
        "--partitions",
        type=int,
        help="read partitions to aim for (default: a multiple of the default parallelism, two waves "
        "at least, no partition over 50,000 dead letters)",
    )
    p.add_argument(
        "--shuffle-partitions",
        type=int,
        help="spark.sql.shuffle.partitions (default: sized to the dead letters, from the default "
        "parallelism up to four times it)",
    )
    return p


def parse_args(argv: Sequence[str] | None) -> Options:
    """Return the options of a command line."""
    command = parser()
    args = command.parse_args(argv)
    pools: tuple[tuple[str, str], ...] = ()
    try:
        storage = args.storage
        if storage is None:
            settings = load_settings(args.config)
            storage = settings.storage_uri
            if settings.pools.enabled:  # every pool of the catalog, beside the [storage] uri store
                # imported here: the parser (--help) must load without PySpark (zaqar_lite/cli.py)
                from spark_jobs.sources.plan import catalog_pools

                pools = tuple(catalog_pools(settings.pools.catalog or storage))
    except ValueError as exc:  # a configuration mistake: one line, as the server says it
        command.exit(2, f"{command.prog}: error: {exc}\n")
    return Options(
        pools=pools,
        storage=storage,
        out=args.out,
        projects=tuple(args.project),
        queues=tuple(args.queue),
        since=args.since,
        master=args.master,
        fields=tuple(args.fields) if args.fields else None,
        max_field_values=args.max_field_values,
        min_support=args.min_support,
        min_confidence=args.min_confidence,
        min_rule_messages=args.min_rule_messages,
        max_rule_items=args.max_rule_items,
        partitions=args.partitions,
        shuffle_partitions=args.shuffle_partitions,
    )
