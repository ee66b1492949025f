"""The gunicorn worker of ``zaqar-lite serve``: gevent, with read deadlines and balanced accepts.

Each connection is a greenlet, so a client that sends slowly, or not at all,
costs a little memory and no thread: the worker keeps answering everyone else
(a waiting long-poll claim is as cheap: it sleeps on its greenlet). On top of
gunicorn's gevent worker:

* **header deadline**: a connection has ``[server] header_timeout`` seconds,
  from its opening or from the end of the previous answer, to send a complete
  request line and headers; then it is closed. An idle kept-alive connection is
  closed after the same time.
* **body deadline**: a request's body must arrive within ``[server]
  body_timeout`` seconds of its headers; then the client is answered
  ``408 Request Timeout`` and the connection closed, whatever the application
  was doing with the body (it never sees the timeout as an error of its own).
* **balanced accepts**: every worker waits on the same listening socket, and the
  kernel wakes all of them for a new connection; the first to call ``accept()``
  gets it. A worker that is already running (it just accepted the previous
  connection of a burst) wins again and again, so a client opening a few
  kept-alive connections at once could find them all in one worker while the
  others idle. Here the workers publish how many connections each holds (in
  memory shared through the fork, see :class:`zaqar_lite.server.balance.AcceptBalance`), and a worker
  holding ``n`` more than the least loaded one (beyond a slack of a tenth of
  that one's, ``balance.ACCEPT_SLACK``, so that a burst is accepted at full speed) accepts only
  ``n * balance.ACCEPT_DELAY_STEP`` seconds after it was woken (at most
  ``balance.ACCEPT_DELAY_MAX``): the least loaded worker takes the connection at once,
  and a busy or stuck one is only passed over, never waited for. A delaying worker
  looks at the counts again every ``balance.ACCEPT_RELOOK`` seconds and accepts as
  soon as they no longer put it off (short connections close while it waits). A worker holds
  at most ``[server] worker_connections`` connections, and raises its open-file limit to match.
* **one write an answer**: gunicorn writes a response's head and its body
  with two ``sendall`` calls; over TCP each is a segment the client's side
  wakes up for. The head is held (:class:`HeldHead`) and goes out with the
  body's first bytes, or alone when the request ends without a body.
* **turns between connections**: a greenlet runs until it waits, and a
  kept-alive connection whose next request is already in its buffer, served
  by a store whose replies arrive as fast as they are asked for, may never
  wait: it would serve request after request while the connections whose
  store replies or requests arrived meanwhile wait for the event loop's next
  look at the sockets (measured: a request waiting behind 30 to 100 others of
  its worker, 20 to 80 ms). After each answer on a connection kept open, the
  worker lets every connection that is ready go first (``gevent.idle``: it
  resumes once the loop has no event pending), so a request waits at most for
  one request of each other connection of its worker.
* **less work a request**: what gunicorn would redo for every request is done
  once per process, connection or second: its settings are read as plain
  attributes (:func:`settle`), the ``Date`` header's text is made once a
  second (:class:`HttpDate`), a connection's head waits share one context
  (:class:`HeadWait`), the socket's send buffer size is asked once
  (:class:`CountingSocket`), and the access log line goes straight to the
  stream of the handler gunicorn set up (``server/gunicorn.py``'s ``AccessLogger``).
* **prompt stop**: a stopping worker closes its idle kept-alive connections at
  once (nothing of a request read, nothing unread in the kernel) and answers
  every request under way, a head half read included, with ``Connection:
  close`` before it exits.
* **quick stop**: on SIGINT (Ctrl-C reaches the master and its workers) or
  SIGQUIT (the master's quick stop) the worker stops accepting and exits at
  once, as gunicorn's does, its connections closing with it; it exits as from
  SIGTERM, without a traceback, however many of these signals arrive.
"""

from __future__ import annotations

import resource
import select
import time
from collections.abc import Callable, Iterator
from email.utils import formatdate
from socket import SO_SNDBUF, SOL_SOCKET
from typing import Any

import gevent
from gevent import monkey
from gevent.pool import Pool
from gevent.server import StreamServer
from gevent.socket import socket as GeventSocket  # noqa: N812 - gevent's class, named as its module does
from gunicorn import util as gunicorn_util
from gunicorn.workers.ggevent import GeventWorker

from zaqar_lite.server.balance import ACCEPT_RELOOK, AcceptBalance

#: seconds between a running worker's looks at whether it was told to stop (SIGTERM only
#: clears ``alive``): a stop waits this long at most before the drain begins
STOP_CHECK_INTERVAL = 0.1
#: seconds between a stopping worker's looks at its connections (idle ones to close, and
#: whether any is left)
DRAIN_CHECK_INTERVAL = 0.05
#: poll(2) itself, not gevent's replacement: a look that never yields or waits
_plain_poll = monkey.get_original("select", "poll")
_TIMEOUT_BODY = (b'{"title": "Request timeout", '
                 b'"description": "The request body did not arrive in time."}')
#: what a client whose body stalled reads before the connection closes
REQUEST_TIMEOUT_ANSWER = (b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                          b"Content-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (len(_TIMEOUT_BODY), _TIMEOUT_BODY))


#: files a worker keeps open besides its connections (listening sockets, store, logs, metrics)
RESERVED_FILES = 256


def allow_open_files(wanted: int) -> None:
    """Raise the soft open-file limit to ``wanted`` (never above the hard limit, never lower it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    resource.setrlimit(resource.RLIMIT_NOFILE,
                       (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))


class HttpDate:
    """gunicorn's ``util.http_date``, whose text for the current time is made once a second.

    Every answer's ``Date`` header asks it (``Response.default_headers``), and
    formatting the date (``email.utils.formatdate``) is most of its cost; the
    header shows whole seconds, so the text of the current second is kept.
    A given timestamp is formatted as gunicorn does.
    """

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def __call__(self, timestamp: float | None = None) -> str:
        if timestamp is not None:
            return formatdate(timestamp, localtime=False, usegmt=True)
        second = int(time.time())
        if second != self._second:
            self._text = formatdate(second, localtime=False, usegmt=True)
            self._second = second
        return self._text


def settle(config: Any) -> None:
    """Make each of gunicorn's settings a plain attribute of its ``Config`` (in a worker's process).

    gunicorn's ``Config`` answers every read of a setting (tens a request:
    the parser, the response, the hooks, the logger) through ``__getattr__``
    and a look-up of the setting. A worker never changes its settings (a
    reload starts new workers from the master's), so each is read once and
    kept as an attribute, which Python finds before ``__getattr__``. A setting
    the class defines as a property stays the property.
    """
    kind = type(config)
    for name, setting in config.settings.items():
        if not hasattr(kind, name):
            object.__setattr__(config, name, setting.get())  # Config refuses a plain set


class BodyTimeout(BaseException):
    """The request body did not arrive in time.

    A BaseException, not an Exception: the application's catch-all error
    handler must not answer it with a 500; the worker answers 408.
    """


class DeadlineBody:
    """A request body (``wsgi.input``) whose reads all end by one deadline."""

    def __init__(self, body: Any, seconds: float) -> None:
        self._body = body
        self._deadline = time.monotonic() + seconds

    def _bounded(self, read: Callable[..., Any], *args: Any) -> Any:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise BodyTimeout
        with gevent.Timeout(remaining, BodyTimeout):
            return read(*args)

    def read(self, size: int | None = None) -> bytes:
        """Read up to ``size`` bytes (all when None)."""
        data: bytes = self._bounded(self._body.read, size)
        return data

    def readline(self, size: int | None = None) -> bytes:
        """Read one line."""
        data: bytes = self._bounded(self._body.readline, size)
        return data

    def readlines(self, size: int | None = None) -> list[bytes]:
        """Read every line."""
        lines: list[bytes] = self._bounded(self._body.readlines, size)
        return lines

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class CountingSocket(GeventSocket):  # type: ignore[misc]
    """A connection's socket that counts the bytes read from it (how a stopping worker tells an idle one).

    gevent's ``sendall`` asks the socket's send buffer size (``SO_SNDBUF``, a
    ``getsockopt`` system call) on every call, only to cut a large write into
    chunks of at least 1 MiB; here the size is asked once per connection (and
    again after any ``setsockopt``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bytes_read = 0
        self._send_buffer: int | None = None

    def getsockopt(self, level: int, option: int, *args: Any) -> Any:
        """Answer as the socket does; the send buffer's size is asked of the kernel once."""
        if option == SO_SNDBUF and level == SOL_SOCKET and not args:
            size = self._send_buffer
            if size is None:
                size = self._send_buffer = super().getsockopt(level, option)
            return size
        return super().getsockopt(level, option, *args)

    def setsockopt(self, *args: Any) -> None:
        """Set an option as the socket does (the send buffer's size is asked again)."""
        self._send_buffer = None
        super().setsockopt(*args)

    def recv(self, *args: Any) -> bytes:
        """Receive as a gevent socket does, and count what came."""
        data: bytes = super().recv(*args)
        self.bytes_read += len(data)
        return data


class HeldHead:
    """A socket as one response writes to it: the first ``sendall`` (the head) goes out with the second.

    gunicorn's response writes its head, then each body chunk, with
    ``sendall``; joined, a short answer is one segment and one wake-up of the
    client instead of two. Only the first write is held, so nothing is held
    longer than until the first body bytes exist (a streamed body's later
    chunks go out as they come); whatever else the response does with the
    socket (``send``, ``sendfile``, ``shutdown``...) first sends what is held,
    so the bytes keep gunicorn's order. :meth:`flush` ends the hold when the
    request ends without a second write.
    """

    __slots__ = ("_socket", "_held", "_holding")

    def __init__(self, socket: Any) -> None:
        self._socket = socket
        self._held = b""
        self._holding = True

    def sendall(self, data: bytes) -> None:
        """Hold the first write; send the second with it, and every later one at once."""
        if self._holding:
            if not self._held:
                self._held = bytes(data)
                return
            data = self._held + data
            self._held, self._holding = b"", False
        self._socket.sendall(data)

    def flush(self) -> None:
        """Send what is held and hold nothing more."""
        held = self._held
        self._held, self._holding = b"", False
        if held:
            self._socket.sendall(held)

    def __getattr__(self, name: str) -> Any:
        self.flush()
        return getattr(self._socket, name)


def has_input(connection: Any) -> bool:
    """Return whether the kernel holds unread bytes, or the end, of a connection (never waits)."""
    poller = _plain_poll()
    poller.register(connection.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class HeadWait:
    """A connection's waits for its request heads, one after another, each under its own deadline.

    gunicorn enters the worker's ``timeout_ctx()`` before each request head;
    this object is made once per connection and is that context itself (no
    generator-based context manager and no record per request). Each wait makes
    a fresh :class:`gevent.Timeout`: gevent's timers are not restarted, since a
    restarted one can fire before its time. When the deadline passes, or a
    stopping worker ends the wait with it, the wait ends quietly (gunicorn
    reads no request and closes the connection).
    """

    __slots__ = ("seconds", "deadline", "connection", "bytes_before", "_greenlet", "_waiting")

    def __init__(self, seconds: float, connection: CountingSocket | None,
                 greenlet: Any, waiting: dict[Any, HeadWait]) -> None:
        self.seconds = seconds
        #: the current wait's deadline
        self.deadline: Any = None
        self.connection = connection
        #: the connection's ``bytes_read`` when the current wait began
        self.bytes_before = 0
        self._greenlet = greenlet
        self._waiting = waiting

    def __enter__(self) -> HeadWait:
        connection = self.connection
        self.bytes_before = connection.bytes_read if connection is not None else 0
        deadline = self.deadline = gevent.Timeout(self.seconds, False)
        self._waiting[self._greenlet] = self
        deadline.start()
        return self

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> bool:
        deadline = self.deadline
        deadline.close()
        del self._waiting[self._greenlet]
        return error is deadline  # the deadline passed, or a stopping worker ended the wait

    def idle(self) -> bool:
        """Return whether nothing of a request has come: no byte read since the wait began, none unread."""
        if self.connection is None:
            return False
        return self.connection.bytes_read == self.bytes_before and not has_input(self.connection)


class BalancedStreamServer(StreamServer):  # type: ignore[misc]
    """A StreamServer that accepts later the more connections its worker holds than the others."""

    def __init__(self, *args: Any, balance: AcceptBalance, slot: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.balance = balance
        self.slot = slot
        #: when the accept now delayed was first put off
        self._delayed_since = 0.0

    def _do_read(self) -> None:
        delay = self.balance.delay(self.slot)
        if delay <= 0:
            super()._do_read()
            return
        self.stop_accepting()
        self._delayed_since = time.monotonic()
        self._accept_after(delay)

    def _accept_after(self, delay: float) -> None:
        """Look again after ``delay`` seconds, or sooner (``balance.ACCEPT_RELOOK``): the counts change."""
        self._timer = self.loop.timer(min(delay, ACCEPT_RELOOK))
        self._timer.start(self._accept_late)

    def do_handle(self, *args: Any) -> None:
        """Count the connection as the worker's from its accept on (its greenlet starts later)."""
        self.balance.counts[self.slot] += 1
        try:
            super().do_handle(*args)
        except BaseException:
            self.balance.counts[self.slot] -= 1
            raise

    def _accept_late(self) -> None:
        if self._timer is not None:
            self._timer.close()
            self._timer = None
        # the delay the counts give now, less the time waited already
        remaining = self.balance.delay(self.slot) - (time.monotonic() - self._delayed_since)
        if remaining > 0:
            self._accept_after(remaining)
            return
        super()._do_read()  # a connection another worker took meanwhile is EAGAIN, ignored
        self._start_accepting_if_started()

    def do_read(self) -> tuple[CountingSocket, Any] | None:
        """Accept a connection, as a socket that counts what it reads."""
        accepted = super().do_read()
        if accepted is None:  # another worker took it
            return None
        client, address = accepted
        return CountingSocket(client.family, client.type, client.proto, fileno=client.detach()), address


class Worker(GeventWorker):  # type: ignore[misc]
    """gunicorn's gevent worker with the deadlines and accept balance above."""

    def init_process(self) -> None:
        """Raise the open-file limit to the connections this worker may hold, then run as gunicorn's."""
        allow_open_files(self.worker_connections + RESERVED_FILES)
        # gunicorn's responses read the Date header's text from its util module: in this
        # worker's process it is made once a second
        gunicorn_util.http_date = HttpDate()
        settle(self.cfg)  # the master's Config as this process inherited it: the master's is untouched
        super().init_process()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = self.app.settings
        self.balance: AcceptBalance = self.app.balance
        self.header_timeout: float = settings.header_timeout
        self.body_timeout: float = settings.body_timeout
        #: connection greenlet -> its socket
        self.connections: dict[Any, CountingSocket] = {}
        #: connection greenlet -> its waits for request heads
        self.head_waits: dict[Any, HeadWait] = {}
        #: connection greenlet -> its wait for a request head, while it waits
        self.waiting_for_head: dict[Any, HeadWait] = {}
        #: set by SIGINT or SIGQUIT: exit at once instead of draining the connections
        self.quick_stop = False

    def timeout_ctx(self) -> HeadWait:
        """Bound the wait for, and the reading of, each request's head (the connection's :class:`HeadWait`).

        When the deadline passes the connection is closed quietly (gunicorn
        reads no request); a stopping worker ends the waits of idle connections early.
        """
        current = gevent.getcurrent()
        wait = self.head_waits.get(current)
        if wait is None:  # a connection not served through this worker's handler
            wait = HeadWait(self.header_timeout, None, current, self.waiting_for_head)
        return wait

    def _close_idle_connections(self) -> None:
        # A connection with part of a head read, or bytes the kernel holds, has a request
        # under way: it is answered (with "Connection: close") within its head deadline.
        for greenlet, wait in list(self.waiting_for_head.items()):
            if wait.idle():
                greenlet.kill(wait.deadline, block=False)

    def run(self) -> None:
        """Serve every listener with a balanced server until stopped, then drain as gunicorn does."""
        servers = []
        for listener in self.sockets:
            listener.setblocking(1)
            server = BalancedStreamServer(listener, handle=self._handler(listener),
                                          spawn=Pool(self.worker_connections),
                                          balance=self.balance, slot=self.balance_slot)
            if self.cfg.workers > 1:
                server.max_accept = 1
            server.start()
            servers.append(server)
        while self.alive:
            self.notify()
            gevent.sleep(STOP_CHECK_INTERVAL)
        for server in servers:
            server.close()
        started = time.monotonic()
        while time.monotonic() < started + self.cfg.graceful_timeout:
            if self.quick_stop:  # the requests under way end with the process, as in gunicorn's quick stop
                self.cfg.worker_int(self)
                return
            # Answers now close their connection (the worker is not alive), and an idle
            # kept-alive connection is closed at once, as nginx and Go's http.Server do:
            # a client sees the close before its next request (RFC 9112 section 9.6).
            self._close_idle_connections()
            if all(len(server.pool) == 0 for server in servers):
                return
            self.notify()
            gevent.sleep(DRAIN_CHECK_INTERVAL)
        self.log.warning("Worker graceful timeout (pid:%s)", self.pid)
        for server in servers:
            server.stop(timeout=1)

    def handle_quit(self, sig: int, frame: Any) -> None:
        """Stop at once on SIGINT or SIGQUIT: mark the stop, as SIGTERM does, and let :meth:`run` end.

        gunicorn's gevent worker exits from a greenlet it spawns for each such
        signal; with Ctrl-C the worker gets two (SIGINT from the terminal, then
        SIGQUIT from the master), and the second greenlet's exit lands in the
        interpreter's shutdown, which prints its traceback.
        """
        self.quick_stop = True
        self.alive = False

    def _handler(self, listener: Any) -> Callable[[Any, Any], None]:
        counts, slot = self.balance.counts, self.balance_slot

        def handle(client: Any, addr: Any) -> None:
            current = gevent.getcurrent()
            counted = client if isinstance(client, CountingSocket) else None  # else never taken for idle
            if counted is not None:
                self.connections[current] = counted
            self.head_waits[current] = HeadWait(self.header_timeout, counted, current,
                                                self.waiting_for_head)
            try:
                self.handle(listener, client, addr)
            finally:
                del self.head_waits[current]
                self.connections.pop(current, None)
                counts[slot] -= 1  # counted by BalancedStreamServer.do_handle
        return handle

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> bool:
        """Serve one request, its body bounded by the body deadline, its answer's head sent with its body."""
        body = req.body
        if body is not None:
            req.body = DeadlineBody(body, self.body_timeout)
        answer = HeldHead(sock)
        try:
            kept_open = bool(super().handle_request(listener_name, req, answer, addr))
        except BodyTimeout:
            self.log.info("closing a connection from %s: its request body did not arrive within "
                          "%g s", addr, self.body_timeout)
            try:
                sock.sendall(REQUEST_TIMEOUT_ANSWER)
            except OSError:
                pass
            raise StopIteration from None
        finally:
            answer.flush()
            req.body = body  # draining what is left counts against the next request's header deadline
        gevent.idle()  # the connections that are ready go first (module docstring: turns)
        return kept_open
