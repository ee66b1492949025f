"""The ``zaqar-lite`` command: ``serve``, ``sweep`` and friends."""

from __future__ import annotations

import logging
from typing import Any

import click

from zaqar_lite import __version__
from zaqar_lite.config import Settings, load_settings

LOG = logging.getLogger("zaqar_lite")


def _settings(config: str | None, **overrides: Any) -> Settings:
    try:
        return load_settings(config, **overrides)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


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
def serve(config: str | None, storage_uri: str | None, bind: str | None, workers: int | None) -> None:
    """Run the API under gunicorn, with the sweeper in one worker."""
    from zaqar_lite.server import run

    settings = _settings(config, storage_uri=storage_uri, bind=bind, workers=workers)
    _logging(settings.log_level)
    run(settings)


@main.command()
@config_option
@storage_option
@click.option("--loop", is_flag=True, help="keep sweeping every sweep_interval seconds.")
def sweep(config: str | None, storage_uri: str | None, loop: bool) -> None:
    """Apply the expiry and dead-letter rules to every queue (once, or forever with --loop)."""
    import time

    from zaqar_lite.claims.service import Messaging
    from zaqar_lite.storage import open_storage
    from zaqar_lite.sweeper import sweep_once

    settings = _settings(config, storage_uri=storage_uri)
    _logging(settings.log_level)
    messaging = Messaging(open_storage(settings.storage_uri), settings)
    while True:
        sweep_once(messaging)
        if not loop:
            return
        time.sleep(settings.sweep_interval)
