"""The SQLite connections of a driver: one per process and thread for reads, one per process for writes,
transactions committed in groups, the one error translation."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from zaqar_lite import errors
from zaqar_lite.storage.contexts import lean_contextmanager
from zaqar_lite.storage.sqlite.layout import parse_uri, prepare_schema

_UNAVAILABLE_HINTS = ("locked", "unable to open", "disk i/o", "readonly", "busy")


#: the most writes one COMMIT acknowledges: under steady load, a batch still ends this soon
BATCH_LIMIT = 32

#: the file beside a database whose ``flock`` the processes writing it take turns on
WRITE_TURN_SUFFIX = "-writeturn"

#: seconds a connection keeps asking for WAL mode while other openers hold the file's lock
WAL_PATIENCE = 30.0


def _enter_wal(conn: sqlite3.Connection) -> None:
    """Put the file in WAL mode, waiting while other processes hold its lock.

    Leaving rollback mode needs the file to itself, and SQLite answers
    "database is locked" at once, without its busy timeout, while another
    opener (a worker starting beside this one, one migrating an old file)
    holds a lock: ask again until it is free.
    """
    deadline = time.monotonic() + WAL_PATIENCE
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _os_lock_factory() -> Callable[[], Any]:
    """Return the operating system's lock type, even when gevent has patched ``threading``.

    The writers of a batch are threads of gevent's pool (or of gthread), never
    greenlets of one hub: they wait for each other on the system's locks.
    """
    if "gevent.monkey" in sys.modules:
        from gevent import monkey

        return monkey.get_original("_thread", "allocate_lock")  # type: ignore[no-any-return]
    return threading.Lock


class _Batch:
    """The writes of one transaction on the process's write connection, acknowledged by one COMMIT."""

    def __init__(self, make_lock: Callable[[], Any]) -> None:
        self._done = make_lock()
        self._done.acquire()  # released by the COMMIT's writer: the others wait on it
        #: what ended the batch without a COMMIT, or what the COMMIT raised (None: every write is durable)
        self.error: BaseException | None = None
        #: how many writes the batch holds
        self.writes = 0

    def end(self, error: BaseException | None) -> None:
        """Record how the batch ended and let every writer of it return."""
        self.error = error
        self._done.release()

    def wait(self) -> None:
        """Return once the batch is committed.

        Raises:
            StorageUnavailable: it was not; no write of it is stored.
        """
        self._done.acquire()
        self._done.release()  # the next writer waiting on it
        if self.error is not None:
            raise errors.StorageUnavailable(f"the transaction was not committed: {self.error}")


class SqliteConnected:
    """The file of a ``sqlite://`` URI, brought to the current layout when opened."""

    def __init__(self, uri: str) -> None:
        path, options = parse_uri(uri)
        self.path = path
        self._synchronous = options.get("synchronous", "full").upper()
        if self._synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError("sqlite synchronous must be full, normal or extra")
        if path != ":memory:":
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        make_lock = _os_lock_factory()
        self._make_lock = make_lock
        #: held by the thread whose write runs on the write connection, or commits its batch
        self._writer_lock = make_lock()
        #: guards ``_waiting``: how many threads wait for the writer lock
        self._waiting_lock = make_lock()
        self._waiting = 0
        #: (pid, connection, lock file): the one connection of this process that writes, and its
        #: descriptor of the file the processes of this database take turns writing on
        self._writer: tuple[int, sqlite3.Connection, IO[bytes] | None] | None = None
        #: whether this process holds the write turn (from its batch's BEGIN to its COMMIT)
        self._turn_held = False
        #: the open transaction on the write connection, whose COMMIT is still to come
        self._batch: _Batch | None = None
        with self.transaction() as db:
            prepare_schema(db, path)

    def describe(self) -> str:
        """Return the absolute path of the database file."""
        return f"sqlite file {os.path.abspath(self.path)}"

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            _enter_wal(conn)
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
        except sqlite3.Error as exc:
            raise errors.StorageUnavailable(str(exc)) from exc
        return conn

    def _connection(self) -> sqlite3.Connection:
        """Return the connection of this thread's reads (opened anew after a fork), or inside a
        :meth:`transaction` the process's write connection, the one the transaction runs on."""
        writing: sqlite3.Connection | None = getattr(self._local, "writing", None)
        if writing is not None:
            return writing
        if self.path == ":memory:":  # a database of one connection: the one that writes
            return self._write_connection()
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = self._open()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _write_connection(self) -> sqlite3.Connection:
        """Return the process's write connection (opened anew after a fork); the writer lock is held."""
        if self._writer is None or self._writer[0] != os.getpid():
            # a child's lock state and open batch are its parent's: start afresh (a descriptor of
            # its own: a lock taken through the parent's would be the parent's)
            self._batch = None
            self._turn_held = False
            self._writer = os.getpid(), self._open(), self._open_write_turns()
        return self._writer[1]

    def _open_write_turns(self) -> IO[bytes] | None:
        """Open the file the writing processes take turns on (closed with this object); None for a
        database in memory, or where the file cannot be made (SQLite's own wait then serves)."""
        if self.path == ":memory:":
            return None
        try:
            return open(f"{self.path}{WRITE_TURN_SUFFIX}", "ab")  # noqa: SIM115 - kept with the connection
        except OSError:
            return None

    def _take_write_turn(self) -> None:
        """Wait, without polling, until no other process writes this database; the writer lock is held.

        SQLite's own wait for another process's write lock (its busy handler)
        sleeps 1, 2, 5, 10, 15, 20, 25 ms... between tries, so two workers that
        write the same file keep sleeping past each other's COMMITs: under load
        a write waited up to a hundred milliseconds for a lock held a fraction
        of one. The processes of a database first take turns on an exclusive
        ``flock`` of the file beside it (``<file>-writeturn``), which the kernel
        hands to the next waiter the moment it is released, or its holder
        ends; SQLite's busy wait is then left for a writer that does not take
        turns (the ``sqlite3`` shell, an older zaqar-lite).
        """
        turns = None if self._writer is None else self._writer[2]
        if turns is not None and not self._turn_held:
            fcntl.flock(turns, fcntl.LOCK_EX)
            self._turn_held = True

    def _give_write_turn(self) -> None:
        """Let the next process write, once this one's batch is committed or undone."""
        if self._turn_held and self._batch is None and self._writer is not None:
            self._turn_held = False
            turns = self._writer[2]
            if turns is not None:
                fcntl.flock(turns, fcntl.LOCK_UN)

    @lean_contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            if any(hint in str(exc).lower() for hint in _UNAVAILABLE_HINTS):
                raise errors.StorageUnavailable(str(exc)) from exc
            raise

    @lean_contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a block atomically in a ``BEGIN IMMEDIATE`` transaction: undone on any exception,
        durable (committed) once this returns.

        Group commit: the writes of one process run one at a time on its write
        connection in the open transaction (each after its first in a savepoint). The writer
        that finds no other waiting (or the :data:`BATCH_LIMIT`-th) commits it
        for every write in it with one COMMIT, one sync of the file; each
        writer returns only once that COMMIT succeeded, and if it fails each
        raises StorageUnavailable. Alone, a write is its own transaction; under
        concurrent requests one sync acknowledges every write that came meanwhile.
        A transaction opened inside another is part of it: an error leaving it undoes both.
        """
        outer: sqlite3.Connection | None = getattr(self._local, "writing", None)
        if outer is not None:
            yield outer
            return
        with self._translate_errors():
            with self._waiting_lock:
                self._waiting += 1
            self._writer_lock.acquire()
            with self._waiting_lock:
                self._waiting -= 1
            batch: _Batch | None = None
            try:
                conn = self._write_connection()
                if self._batch is None:
                    self._take_write_turn()
                    conn.execute("BEGIN IMMEDIATE")
                    self._batch = _Batch(self._make_lock)
                batch = self._batch
                # the first write of a batch is undone with the transaction, the others by a savepoint
                alone = batch.writes == 0
                if not alone:
                    conn.execute("SAVEPOINT write")
                batch.writes += 1
                self._local.writing = conn
                try:
                    yield conn
                    if not alone:
                        conn.execute("RELEASE write")
                except BaseException as exc:
                    self._undo_write(conn, exc, alone)
                    raise
                finally:
                    self._local.writing = None
            except BaseException:
                self._leave_batch()
                raise
            self._leave_batch()
            batch.wait()

    def _undo_write(self, conn: sqlite3.Connection, error: BaseException, alone: bool) -> None:
        """Undo the failed write of this writer alone; if that cannot be, the whole open batch.

        ``alone``: the write is the batch's first, undone with the transaction (no other write is in it).
        """
        if conn.in_transaction and not alone:
            try:
                conn.execute("ROLLBACK TO write")
                conn.execute("RELEASE write")
                return
            except sqlite3.Error:
                pass
        # the batch's first write, or SQLite rolled the transaction back by itself, or the
        # savepoint cannot be undone: the batch's other writes (if any) are lost with it, and
        # their writers are told so
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        if self._batch is not None:
            self._batch.end(None if alone else error)
            self._batch = None

    def _leave_batch(self) -> None:
        """Release the writer lock; first commit the open batch unless another writer is waiting for it."""
        try:
            batch = self._batch
            if batch is None:
                return
            with self._waiting_lock:
                waiting = self._waiting
            if waiting and batch.writes < BATCH_LIMIT:
                return  # the batch's last writer commits it, this one's write with the others
            self._batch = None
            conn = self._write_connection()
            try:
                conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                batch.end(exc)
            else:
                batch.end(None)
        finally:
            self._give_write_turn()
            self._writer_lock.release()

    @lean_contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """Run reads in one deferred transaction so they see one consistent state."""
        with self._translate_errors():
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def ping(self) -> bool:
        """Return True when the file answers."""
        try:
            with self._translate_errors():
                self._connection().execute("SELECT 1").fetchone()
            return True
        except errors.StorageUnavailable:
            return False
