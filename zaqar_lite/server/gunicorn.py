"""Running the WSGI app under gunicorn, programmatically.

The gunicorn master imports this module only: the application, the store
drivers and their client libraries (requests, redis-py, pymongo, ...) are
imported in each worker after its fork, once the gevent worker has patched the
standard library they bind to (``socket``, ``ssl``, ``threading``).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import inspect
import logging
import math
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, cast

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter
from gunicorn.glogging import Logger

from zaqar_lite.api import PROJECT_ENVIRON
from zaqar_lite.config import WORKER_CLASSES, Settings
from zaqar_lite.server.balance import AcceptBalance

if TYPE_CHECKING:
    from zaqar_lite.api.keystone import WsgiCallable
    from zaqar_lite.storage.base import Storage

LOG = logging.getLogger(__name__)


#: gunicorn's access log line: client, request line, status, milliseconds from the request's
#: arrival to the end of the answer, and the project the API checked ("-": none, e.g. a 400
#: for a missing X-Project-ID)
ACCESS_LOG_FORMAT = f'%(h)s "%(r)s" %(s)s %(M)s ms project=%({{{PROJECT_ENVIRON}}}e)s'


def _quoted(value: str) -> str:
    """Escape double quotes as gunicorn escapes every value of an access log line."""
    return value.replace('"', '\\"')


class AccessLogger(Logger):  # type: ignore[misc]
    """gunicorn's logger, whose access line is written from the five values it shows.

    gunicorn's own builds every atom of its format language (the time, each
    request and response header, every environ variable, quoted) for each
    request before it formats the line; the line of :data:`ACCESS_LOG_FORMAT`
    is the same made from its own values. Any other format is gunicorn's.
    """

    #: the access log's one handler when it is a plain one gunicorn set up (a stream or file
    #: handler writing the message as it is, no filter, no level above INFO): the line is
    #: written to its stream and flushed, as its ``emit`` would, without a LogRecord
    _plain_handler: logging.StreamHandler[Any] | None = None

    def setup(self, cfg: Any) -> None:
        """Set up as gunicorn's, then note whether the access log's handler is a plain one."""
        super().setup(cfg)
        self._plain_handler = None
        handlers = self.access_log.handlers
        if len(handlers) != 1:
            return
        handler = handlers[0]
        formatter = handler.formatter
        if (getattr(handler, "_gunicorn", False)
                and type(handler) in (logging.StreamHandler, logging.FileHandler)
                and not handler.filters and handler.level <= logging.INFO
                and type(formatter) is logging.Formatter and formatter._fmt == self.access_fmt):
            self._plain_handler = handler

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        """Log one request's line (nothing when the access log is off)."""
        if not self.access_log_enabled:
            return
        if self.cfg.access_log_format != ACCESS_LOG_FORMAT:
            super().access(resp, req, environ, request_time)
            return
        status = resp.status
        if isinstance(status, str):
            status = status.split(None, 1)[0]
        request = f"{environ['REQUEST_METHOD']} {environ['RAW_URI']} {environ['SERVER_PROTOCOL']}"
        took = request_time.seconds * 1000 + int(request_time.microseconds / 1000)
        project = environ.get(PROJECT_ENVIRON)
        line = (f'{_quoted(environ.get("REMOTE_ADDR", "-"))} "{_quoted(request)}" '
                f'{_quoted(status) if isinstance(status, str) else status} {took} ms '
                f'project={"-" if project is None else _quoted(str(project))}')
        log = self.access_log
        if not log.isEnabledFor(logging.INFO):
            return
        handler = self._plain_handler
        if handler is not None and log.handlers == [handler] and not log.filters:
            stream = handler.stream
            if stream is not None:
                try:
                    with handler.lock:  # type: ignore[union-attr]
                        stream.write(line + handler.terminator)
                        stream.flush()
                except Exception:  # noqa: BLE001 - as below
                    self.exception("access log line not written")
                return
        try:
            # the record info() would make, less the look up the stack for the caller's line,
            # which no access format shows
            log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, line, None, None))
        except Exception:  # noqa: BLE001 - as gunicorn's: a line that cannot be written is an error logged
            self.exception("access log line not written")


class StorageCheckFailed(Exception):
    """The store cannot be opened; the message says why."""


class CannotListen(Exception):
    """The address to listen on is taken or not ours; the message says which."""


def check_address(bind: str) -> None:
    """Bind the server's address once and let it go, to say plainly that it is taken.

    gunicorn would log "Connection in use" and retry for five seconds before
    giving up; this says it at once, in one line. The socket is bound as
    gunicorn binds its own (``SO_REUSEADDR``), so a port whose last connections
    are only in TIME_WAIT is not reported busy. A ``unix:`` address is left to
    gunicorn.

    Raises:
        CannotListen: another socket listens there, or the address is not this machine's.
    """
    if bind.startswith("unix:"):
        return
    host, _, port = bind.rpartition(":")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), int(port),
                                                             type=socket.SOCK_STREAM)[0]
    except (OSError, ValueError) as exc:
        raise CannotListen(f"cannot listen on {bind}: {exc}") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CannotListen(f"{bind} is already in use (another program listens there; "
                                   "choose another address with --bind or [server] bind)") from None
            raise CannotListen(f"cannot listen on {bind}: {exc.strerror}") from None


#: stores whose calls never yield to gevent: SQLite's are C calls on a file (a commit's
#: fsync, a wait of up to 30 s for another process's write lock), with no Python socket
#: gevent could switch on. Under the gevent worker each is opened and used on gevent's
#: thread pool; every other store is used on the event loop, by the greenlets, as its
#: client expects (a Redis client's pool of connections belongs to the loop).
BLOCKING_STORES = frozenset({"sqlite"})


class OffTheHub:
    """An object whose every method runs on a thread of gevent's pool, not on the event loop.

    The calling greenlet waits for the answer while the worker's other greenlets
    (other clients, the read deadlines) go on. Only the object's own methods are
    handed over (``clock``, a plain function attribute, stays a direct call); a
    call made from a pool thread runs at once on that thread (gevent's rule), so
    the service wrapped around a wrapped store costs one hand-over per request.
    A method that returns a generator (``all_queues``) has each of its steps
    handed over, so the store is never read on the loop. An attribute set on the
    proxy is set on the object. Each pool thread keeps its own SQLite connection for
    reads, reused from one request to the next; the writes of the pool's threads run
    on the process's write connection, and those that come together share one commit.
    A method's hand-over is made once and kept on the proxy (until an attribute of
    that name is set through it): a request looks it up as a plain attribute.
    """

    def __init__(self, target: Any) -> None:
        import gevent

        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_pool", gevent.get_hub().threadpool)

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__.pop(name, None)  # a method's kept hand-over, if any
        setattr(self._target, name, value)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not inspect.ismethod(attribute):
            return attribute
        pool = self._pool

        def off_the_hub(*args: Any, **kwargs: Any) -> Any:
            # an error comes back as a value and is raised here: gevent's pool would print
            # the traceback of every error a task raises, domain errors (4xx) included
            outcome = _on_the_pool(pool, attribute, *args, **kwargs)
            if inspect.isgenerator(outcome):
                return _steps_on_the_pool(pool, outcome)
            return outcome
        self.__dict__[name] = off_the_hub  # found before __getattr__ from now on
        return off_the_hub


#: the end of a generator run step by step
_DONE = object()


def _on_the_pool(pool: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``function`` on a thread of ``pool``; return its result or raise its error here."""
    failed, outcome = pool.apply(_outcome, (function, args, kwargs))
    if failed:
        raise outcome
    return outcome


def _steps_on_the_pool(pool: Any, steps: Iterator[Any]) -> Iterator[Any]:
    """Yield what a generator yields, each step run on a thread of ``pool``."""
    while (item := _on_the_pool(pool, next, steps, _DONE)) is not _DONE:
        yield item


def _outcome(function: Callable[..., Any], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """Call ``function``; return (False, its result) or (True, the exception it raised)."""
    try:
        return False, function(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - handed to the calling greenlet, which raises it
        return True, exc


def open_store_off_the_hub(uri: str, queue_cache_size: int) -> Storage:
    """Open a store for the gevent worker: one of :data:`BLOCKING_STORES` on the thread pool, behind
    :class:`OffTheHub`; any other as it is, for the greenlets."""
    import gevent

    from zaqar_lite.storage import open_storage, scheme_of

    if scheme_of(uri) not in BLOCKING_STORES:
        return open_storage(uri, queue_cache_size)
    opened = _on_the_pool(gevent.get_hub().threadpool, open_storage, uri, queue_cache_size)
    return cast("Storage", OffTheHub(opened))


def worker_app(settings: Settings, with_sweeper: bool = True,
               off_the_hub: bool = True) -> WsgiCallable:
    """Build one worker's app (its own store connection) and start its sweeper and redrive runner threads.

    The worker builds what differs from :func:`~zaqar_lite.api.app.create_app`'s
    defaults (the store, the messaging service with its queue templates, long
    polling woken across workers) and hands them to ``create_app``, which
    builds the other services and wires every resource.

    Under the gevent worker every store of :data:`BLOCKING_STORES` is opened
    and used through :class:`OffTheHub` (:func:`open_store_off_the_hub`), each
    pool's too; with one such store and no pools, the service around it is too,
    so a request costs one hand-over (unless ``off_the_hub`` is false: a
    benchmark's comparison). Pools (``storage/pools/``) run on the event loop
    and hand over only their blocking stores' calls: a store is used only from
    the side it was opened for. Under ``[auth] strategy = keystone`` the app is
    wrapped in keystonemiddleware's ``auth_token`` (``api/keystone.py``).
    """
    from zaqar_lite.api import keystone
    from zaqar_lite.api.app import create_app
    from zaqar_lite.server.redrive_runner import RedriveRunnerThread
    from zaqar_lite.server.sweeper import SweeperThread, lock_path
    from zaqar_lite.service import Messaging
    from zaqar_lite.service.templates import QueueTemplates
    from zaqar_lite.service.waiting.channels import channel_for
    from zaqar_lite.service.waiting.long_poll import LongPoll
    from zaqar_lite.service.waiting.room import WaitingRoom
    from zaqar_lite.storage import open_deployment, open_storage

    off_the_hub = off_the_hub and settings.worker_class == "gevent"
    storage: Any = open_deployment(settings, open_store_off_the_hub if off_the_hub else open_storage)
    channel = channel_for(storage.name, settings.storage_uri)
    templates: Any = QueueTemplates(storage, settings)
    messaging: Any = Messaging(storage, settings, templates=templates)
    messaging.wake_ups_through(channel)  # set on the service itself, before any wrapping
    if off_the_hub and storage.name in BLOCKING_STORES:  # its store is behind OffTheHub already
        # the template routes call the templates directly: one hand-over per request, as the service
        messaging, templates = OffTheHub(messaging), OffTheHub(templates)
    room = WaitingRoom()
    channel.listen(room)
    atexit.register(channel.close)  # a worker's socket goes with it
    if with_sweeper:
        SweeperThread(messaging, settings.sweep_interval, lock_path(settings.storage_uri)).start()
        RedriveRunnerThread(messaging, settings.sweep_interval,
                            lock_path(settings.storage_uri, "redrive")).start()
    app = create_app(settings, storage, messaging=messaging, templates=templates,
                     long_poll=LongPoll(messaging, room, sees_every_write=channel.sees_every_write))
    if settings.auth_strategy == "keystone":
        return keystone.wrap(app, settings.keystone_authtoken)
    return app


def _open_and_describe(settings: Settings, answer: Connection) -> None:
    from zaqar_lite.errors import StorageUnavailable
    from zaqar_lite.storage import open_deployment

    try:
        storage = open_deployment(settings)
        try:
            answer.send((True, f"{storage.name} ({storage.describe()})"))
        finally:
            storage.close()
    except (ValueError, OSError, StorageUnavailable) as exc:
        answer.send((False, str(exc)))


def check_storage(settings: Settings) -> str:
    """Open the store once in a child process and return where its data lives.

    The master never opens the store itself: a driver leaves things behind in
    the process that opened it (pymongo's monitor threads outlive
    ``close()`` for a moment, and a fork copies them half-dead, which stops
    gevent's monkey-patching in the workers), and its library would be imported
    in the master before the workers patch the standard library (whose ``ssl``
    and ``socket`` it would then have bound unpatched).

    Raises:
        StorageCheckFailed: the store cannot be opened (unknown scheme, missing
            client library, unreachable server, unwritable file).
    """
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_open_and_describe, args=(settings, send), name="zaqar-lite-check")
    child.start()
    send.close()
    try:
        ok, text = receive.recv()
    except EOFError:  # the child died; its traceback is on stderr
        ok, text = False, "the check of the store failed (see above)"
    finally:
        receive.close()
        child.join()
    if not ok:
        raise StorageCheckFailed(text)
    return str(text)


#: prometheus-client's multiprocess directory (zaqar_lite.metrics.MULTIPROC_ENV; the master
#: does not import that module: its workers must import prometheus-client after this is set)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


@contextlib.contextmanager
def metrics_directory(settings: Settings) -> Iterator[str | None]:
    """Give the processes this server starts a fresh, empty directory for their metric files.

    Set before the workers fork (and before a notifier beside the server
    starts), so every process counts into it and a scrape of any worker adds
    them all up; removed when the server stops, so a restart starts from zero
    (as Prometheus expects of a restarted target). Yields None when metrics are off.

    Only the process that made the directory removes it: a gunicorn worker is a fork
    of the master inside this block, and its exit (a SystemExit) unwinds through it
    too, while the other workers, some perhaps still booting, count into it.
    """
    if not settings.metrics.enabled:
        yield None
        return
    previous = os.environ.get(MULTIPROC_ENV)
    owner = os.getpid()
    path = tempfile.mkdtemp(prefix="zaqar-lite-metrics-")
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        if os.getpid() == owner:
            shutil.rmtree(path, ignore_errors=True)
            if previous is None:
                os.environ.pop(MULTIPROC_ENV, None)
            else:
                os.environ[MULTIPROC_ENV] = previous


def mark_worker_dead(arbiter: Any, worker: Any) -> None:
    """gunicorn hook (master): drop a dead worker's live gauge files, keep its counts."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


class StopMarkingArbiter(Arbiter):  # type: ignore[misc]
    """gunicorn's master, which marks its stop in memory shared with the workers before signalling them.

    A worker forked a moment before the stop (a replacement) holds the master's
    signal handlers until gunicorn sets its own: the SIGTERM it gets then is
    lost, and it would boot, serve, and be killed at the end of the graceful
    timeout. Each worker reads the mark once its handlers are set
    (:meth:`Server.heed_an_earlier_stop`).
    """

    def stop(self, graceful: bool = True) -> None:
        """Mark the stop, then stop as gunicorn does."""
        self.app.stopping.value = 1
        super().stop(graceful)


class Server(BaseApplication):  # type: ignore[misc]
    """gunicorn application whose workers each build their own app after the fork."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        #: connections per worker, shared by the gevent workers to balance their accepts
        self.balance = AcceptBalance(settings.workers)
        #: 1 once the master is stopping (:class:`StopMarkingArbiter`), shared with the workers
        self.stopping = multiprocessing.RawValue("b", 0)
        super().__init__()

    def load_config(self) -> None:
        """Hand our settings to gunicorn."""
        settings = self.settings
        options: dict[str, Any] = {
            "bind": settings.bind,
            "workers": settings.workers,
            "worker_class": WORKER_CLASSES[settings.worker_class],
            "threads": settings.threads,
            "worker_connections": settings.worker_connections,
            # gunicorn keeps an idle connection this long; the gevent worker also gives a
            # request's head no longer (gevent_worker.Worker.timeout_ctx)
            "keepalive": max(1, math.ceil(settings.header_timeout)),
            "preload_app": False,
            "loglevel": settings.log_level.lower(),
            "accesslog": "-" if settings.access_log else None,
            "access_log_format": ACCESS_LOG_FORMAT,
            "logger_class": AccessLogger,
            "graceful_timeout": 10,
            "proc_name": "zaqar-lite",
        }
        options["child_exit"] = mark_worker_dead
        options["post_worker_init"] = self.heed_an_earlier_stop
        if settings.worker_class == "gevent":
            options["pre_fork"] = self.balance.pre_fork
            options["child_exit"] = self._gevent_child_exit
        # gunicorn >= 25 opens a control socket at one fixed per-user path, so a second
        # server on the machine would take it over and the first to stop would delete it.
        if "control_socket_disable" in self.cfg.settings:
            options["control_socket_disable"] = True
        for key, value in options.items():
            self.cfg.set(key, value)

    def heed_an_earlier_stop(self, worker: Any) -> None:
        """gunicorn hook (worker, its signal handlers set): stop at once if the master stopped meanwhile."""
        if self.stopping.value:
            worker.alive = False

    def run(self) -> None:
        """Run the master until stopped (as gunicorn's own ``run``, with :class:`StopMarkingArbiter`)."""
        try:
            StopMarkingArbiter(self).run()
        except RuntimeError as exc:
            print(f"\nError: {exc}\n", file=sys.stderr, flush=True)
            sys.exit(1)

    def _gevent_child_exit(self, arbiter: Any, worker: Any) -> None:
        self.balance.child_exit(arbiter, worker)
        mark_worker_dead(arbiter, worker)

    def load(self) -> WsgiCallable:
        """Build the app inside a worker."""
        return worker_app(self.settings)


def run(settings: Settings, where: str | None = None) -> None:
    """Say where the data lives and serve until stopped.

    Args:
        settings: the loaded settings.
        where: the store's description from :func:`check_storage`, when the
            caller has checked it already.

    Raises:
        StorageCheckFailed: the store cannot be opened.
    """
    if where is None:
        where = check_storage(settings)
    LOG.info("zaqar-lite on http://%s with %d workers (%s); storage %s", settings.bind,
             settings.workers, settings.worker_class, where)
    Server(settings).run()
