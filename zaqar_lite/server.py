"""Running the WSGI app under gunicorn, programmatically."""

from __future__ import annotations

import logging
from typing import Any

import falcon
from gunicorn.app.base import BaseApplication

from zaqar_lite.api.app import make_app
from zaqar_lite.claims.service import Messaging
from zaqar_lite.config import Settings
from zaqar_lite.storage import open_storage
from zaqar_lite.sweeper import SweeperThread, lock_path

LOG = logging.getLogger(__name__)


def worker_app(settings: Settings, with_sweeper: bool = True) -> falcon.App:
    """Build one worker's app (its own store connection) and start its sweeper thread."""
    messaging = Messaging(open_storage(settings.storage_uri), settings)
    if with_sweeper:
        SweeperThread(messaging, settings.sweep_interval, lock_path(settings.storage_uri)).start()
    return make_app(messaging)


class Server(BaseApplication):  # type: ignore[misc]
    """gunicorn application whose workers each build their own app after the fork."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        super().__init__()

    def load_config(self) -> None:
        """Hand our settings to gunicorn."""
        options: dict[str, Any] = {
            "bind": self.settings.bind,
            "workers": self.settings.workers,
            "preload_app": False,
            "loglevel": self.settings.log_level.lower(),
            "accesslog": None,
            "graceful_timeout": 10,
            "proc_name": "zaqar-lite",
        }
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> falcon.App:
        """Build the app inside a worker."""
        return worker_app(self.settings)


def run(settings: Settings) -> None:
    """Check the store, say where the data lives, and serve until stopped."""
    storage = open_storage(settings.storage_uri)
    LOG.info("zaqar-lite on http://%s with %d workers; storage %s (%s)", settings.bind,
             settings.workers, storage.name, storage.describe())
    storage.close()
    Server(settings).run()
