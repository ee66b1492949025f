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

#: request threads per worker process. A sync worker is blocked for gunicorn's whole
#: timeout by one client that stops sending mid-body, and is then killed; with
#: threads such a client holds one thread and the worker keeps serving.
THREADS_PER_WORKER = 8
#: seconds an idle connection is kept open for the client's next request (python-zaqarclient
#: and most HTTP clients reuse connections). A body the app refused without reading it all is
#: drained by gunicorn (>= 27) before the connection is reused, so a client still sending it
#: reads its 4xx (tests/e2e/test_malformed_requests.py); an idle connection holds no thread.
KEEPALIVE = 5


def worker_app(settings: Settings, with_sweeper: bool = True) -> falcon.App:
    """Build one worker's app (its own store connection) and start its sweeper thread."""
    messaging = Messaging(open_storage(settings.storage_uri, settings.queue_cache_size), settings)
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
            "worker_class": "gthread",
            "threads": THREADS_PER_WORKER,
            "keepalive": KEEPALIVE,
            "preload_app": False,
            "loglevel": self.settings.log_level.lower(),
            "accesslog": None,
            "graceful_timeout": 10,
            "proc_name": "zaqar-lite",
        }
        # gunicorn >= 25 opens a control socket at one fixed per-user path, so a second
        # server on the machine would take it over and the first to stop would delete it.
        if "control_socket_disable" in self.cfg.settings:
            options["control_socket_disable"] = True
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> falcon.App:
        """Build the app inside a worker."""
        return worker_app(self.settings)


def run(settings: Settings) -> None:
    """Check the store, say where the data lives, and serve until stopped."""
    storage = open_storage(settings.storage_uri, settings.queue_cache_size)
    LOG.info("zaqar-lite on http://%s with %d workers; storage %s (%s)", settings.bind,
             settings.workers, storage.name, storage.describe())
    storage.close()
    Server(settings).run()
