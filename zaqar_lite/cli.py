"""The ``zaqar-lite`` command: ``serve``, ``sweep`` and friends."""

from __future__ import annotations

import logging
from typing import Any

import click

from zaqar_lite import __version__
from zaqar_lite.config import Settings, load_settings
from zaqar_lite.rules.pools import masked_uri

LOG = logging.getLogger("zaqar_lite")


def _settings(config: str | None, **overrides: Any) -> Settings:
    from zaqar_lite.rules.templates import configured

    try:
        settings = load_settings(config, **overrides)
        configured(settings)
        return settings
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def _check_storage(settings: Settings) -> None:
    """Refuse to start on a store that cannot be opened, saying why without a traceback."""
    from zaqar_lite.errors import StorageUnavailable
    from zaqar_lite.storage import open_deployment

    try:
        open_deployment(settings).close()
    except (ValueError, OSError, StorageUnavailable) as exc:
        raise click.ClickException(f"cannot open storage {masked_uri(settings.storage_uri)}: {exc}") from None


def _needing_extra(module: str, name: str, what: str, extra: str) -> Any:
    """Return ``module.name``, or stop saying which extra to install when its library is missing.

    The base install is the server on SQLite; the Spark jobs and the other
    stores' client libraries are extras (setup.cfg), imported only by the
    commands that use them.
    """
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise click.ClickException(f"{what}: pip install 'zaqar-lite[{extra}]' ({exc})") from None


def _installed(module: str) -> bool:
    """Return whether a library can be imported, without importing it (the master stays bare)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module made unimportable (sys.modules[name] = None)
        return False


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")


@click.group()
@click.version_option(__version__)
def main() -> None:
    """zaqar-lite: a Zaqar v2 compatible message queue with dead-letter queues and delays."""


config_option = click.option("--config", "config", type=click.Path(dir_okay=False),
                             help="ini file (default: $ZAQAR_LITE_CONFIG).")
storage_option = click.option("--storage", "storage_uri",
                              help="storage URI, e.g. sqlite:///zaqar.db or redis://127.0.0.1:6379/0.")


@main.command()
@config_option
@storage_option
@click.option("--bind", help="HOST:PORT to listen on (default 127.0.0.1:8888).")
@click.option("--workers", type=click.IntRange(min=1), help="gunicorn worker processes (default 2).")
@click.option("--with-notifier", is_flag=True,
              help="also run one notifier process (subscription delivery), stopped with the server.")
def serve(config: str | None, storage_uri: str | None, bind: str | None, workers: int | None,
          with_notifier: bool) -> None:
    """Run the API under gunicorn, with the sweeper in one worker (and a notifier beside it)."""
    from zaqar_lite.server.gunicorn import (
        CannotListen,
        StorageCheckFailed,
        check_address,
        check_storage,
        metrics_directory,
        run,
    )

    settings = _settings(config, storage_uri=storage_uri, bind=bind, workers=workers)
    _logging(settings.log_level)
    if settings.auth_strategy == "keystone" and not _installed("keystonemiddleware"):
        raise click.ClickException("[auth] strategy = keystone needs keystonemiddleware: "
                                   "pip install 'zaqar-lite[keystone]'")
    try:
        check_address(settings.bind)
    except CannotListen as exc:
        raise click.ClickException(str(exc)) from None
    try:  # in a child process: the master, whose workers fork from it, never opens the store
        where = check_storage(settings)
    except StorageCheckFailed as exc:
        raise click.ClickException(f"cannot open storage {masked_uri(settings.storage_uri)}: {exc}") from None
    with metrics_directory(settings):
        if not with_notifier:
            run(settings, where)
            return
        from zaqar_lite.notify.process import NotifierPool

        notifiers = NotifierPool(settings, 1)
        notifiers.start()
        try:
            run(settings, where)
        finally:
            notifiers.stop()


@main.command()
@config_option
@storage_option
@click.option("--loop", is_flag=True, help="keep sweeping every sweep_interval seconds.")
def sweep(config: str | None, storage_uri: str | None, loop: bool) -> None:
    """Apply the expiry and dead-letter rules to every queue (once, or forever with --loop)."""
    import time

    from zaqar_lite.server.sweeper import sweep_once
    from zaqar_lite.service import Messaging
    from zaqar_lite.storage import open_deployment

    settings = _settings(config, storage_uri=storage_uri)
    _logging(settings.log_level)
    _check_storage(settings)
    messaging = Messaging(open_deployment(settings), settings)
    while True:
        sweep_once(messaging)
        if not loop:
            return
        time.sleep(settings.sweep_interval)


@main.command()
@config_option
@storage_option
@click.option("--workers", type=click.IntRange(min=1),
              help="notifier processes (default: [notifier] workers, 1).")
def notifier(config: str | None, storage_uri: str | None, workers: int | None) -> None:
    """Deliver subscribed queues' messages to their webhooks and mail addresses, until SIGTERM or Ctrl-C.

    Any number of notifiers, here and on other machines, share the work through
    leases in the store.
    """
    from zaqar_lite.notify.process import run_pool

    settings = _settings(config, storage_uri=storage_uri)
    _logging(settings.log_level)
    _check_storage(settings)
    run_pool(settings, workers or settings.notifier.workers)


_FORWARD = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@main.command("dlq-report", context_settings=_FORWARD, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def dlq_report(args: tuple[str, ...]) -> None:
    """Mine dead-letter queues with Spark: report.json, report.html, id lists (--help for options).

    The same job runs on a cluster as ``spark-submit spark_jobs/dlq_report.py``.
    Needs the spark extra: pip install 'zaqar-lite[spark]'.
    """
    from spark_jobs.options import parser

    parser().parse_args(args)  # --help, or a mistaken option, is answered without the spark extra
    report_main = _needing_extra("spark_jobs.dlq_report", "main", "the DLQ report needs PySpark", "spark")
    raise SystemExit(report_main(list(args)))


@main.command("dlq-generate", context_settings=_FORWARD, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def dlq_generate(args: tuple[str, ...]) -> None:
    """Post synthetic traffic with planted failure causes until some of it is dead-lettered (--help)."""
    from spark_jobs.synthetic import main as generate_main

    raise SystemExit(generate_main(list(args)))


@main.command("export")
@storage_option
@click.option("--dlq", is_flag=True, required=True,
              help="export dead-lettered messages (the only kind for now).")
@click.option("--out", "out", required=True,
              help="file to write: JSON lines, or Parquet when it ends in .parquet; - for stdout.")
@click.option("--project", "projects", multiple=True, help="only this project (repeatable).")
@click.option("--queue", "queues", multiple=True,
              help="only this DLQ (repeatable); default: every queue that is some queue's DLQ.")
@config_option
def export(storage_uri: str | None, dlq: bool, out: str, projects: tuple[str, ...], queues: tuple[str, ...],
           config: str | None) -> None:
    """Write dead-lettered messages with their provenance to a file, for offline analysis."""
    export_dead_letters = _needing_extra("spark_jobs.export", "export", "export needs PySpark", "spark")
    settings = _settings(config, storage_uri=storage_uri)
    _check_storage(settings)
    count, targets, encrypted = export_dead_letters(settings.storage_uri, out, projects, queues)
    click.echo(f"exported {count} dead letters from {len(targets)} DLQs to {out}", err=True)
    if encrypted:
        click.echo(f"{encrypted} of them have bodies encrypted at rest: written as stored, not decrypted "
                   "(\"body_encrypted\": true in JSON lines)", err=True)
