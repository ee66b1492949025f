"""Running the WSGI app under gunicorn, programmatically."""

from __future__ import annotations

import logging
import math
from typing import Any

import falcon
from gunicorn.app.base import BaseApplication

from zaqar_lite.api.app import make_app
from zaqar_lite.config import Settings
from zaqar_lite.gevent_worker import AcceptBalance
from zaqar_lite.service import Messaging
from zaqar_lite.storage import open_storage
from zaqar_lite.sweeper import SweeperThread, lock_path

LOG = logging.getLogger(__name__)

#: the gunicorn worker class behind each ``[server] worker_class``. gevent serves each
#: connection on a greenlet, so slow or idle clients hold no thread and many waiting
#: requests stay cheap; gthread serves ``[server] threads`` requests at a time per worker
#: and has no read deadline (a client that stops sending mid-request holds a thread).
#: See zaqar_lite/gevent_worker.py and benchmarks/slowloris.py for the comparison.
WORKER_CLASSES = {"gevent": "zaqar_lite.gevent_worker.Worker", "gthread": "gthread"}


def worker_app(settings: Settings, with_sweeper: bool = True) -> falcon.App[falcon.Request, falcon.Response]:
    """Build one worker's app (its own store connection) and start its sweeper thread."""
    messaging = Messaging(open_storage(settings.storage_uri, settings.queue_cache_size), settings)
    if with_sweeper:
        SweeperThread(messaging, settings.sweep_interval, lock_path(settings.storage_uri)).start()
    return make_app(messaging)


class Server(BaseApplication):  # type: ignore[misc]
    """gunicorn application whose workers each build their own app after the fork."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        #: connections per worker, shared by the gevent workers to balance their accepts
        self.balance = AcceptBalance(settings.workers)
        super().__init__()

    def load_config(self) -> None:
        """Hand our settings to gunicorn."""
        settings = self.settings
        options: dict[str, Any] = {
            "bind": settings.bind,
            "workers": settings.workers,
            "worker_class": WORKER_CLASSES[settings.worker_class],
            "threads": settings.threads,
            # gunicorn keeps an idle connection this long; the gevent worker also gives a
            # request's head no longer (gevent_worker.Worker.timeout_ctx)
            "keepalive": max(1, math.ceil(settings.header_timeout)),
            "preload_app": False,
            "loglevel": settings.log_level.lower(),
            "accesslog": None,
            "graceful_timeout": 10,
            "proc_name": "zaqar-lite",
        }
        if settings.worker_class == "gevent":
            options["pre_fork"] = self.balance.pre_fork
            options["child_exit"] = self.balance.child_exit
        # gunicorn >= 25 opens a control socket at one fixed per-user path, so a second
        # server on the machine would take it over and the first to stop would delete it.
        if "control_socket_disable" in self.cfg.settings:
            options["control_socket_disable"] = True
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> falcon.App[falcon.Request, falcon.Response]:
        """Build the app inside a worker."""
        return worker_app(self.settings)


def run(settings: Settings) -> None:
    """Check the store, say where the data lives, and serve until stopped."""
    storage = open_storage(settings.storage_uri, settings.queue_cache_size)
    LOG.info("zaqar-lite on http://%s with %d workers; storage %s (%s)", settings.bind,
             settings.workers, storage.name, storage.describe())
    storage.close()
    Server(settings).run()
