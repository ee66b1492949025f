"""The SQLite connection of a driver: one per process and thread, transactions, the one error translation."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from zaqar_lite import errors
from zaqar_lite.storage.sqlite.layout import parse_uri, prepare_schema

_UNAVAILABLE_HINTS = ("locked", "unable to open", "disk i/o", "readonly", "busy")


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
        with self.transaction() as db:
            prepare_schema(db, path)

    def describe(self) -> str:
        """Return the absolute path of the database file."""
        return f"sqlite file {os.path.abspath(self.path)}"

    def _connection(self) -> sqlite3.Connection:
        """Return this thread's connection (opened anew after a fork), the one its transaction uses."""
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            try:
                conn = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                       check_same_thread=False)
                conn.row_factory = sqlite3.Row
                _enter_wal(conn)
                conn.execute(f"PRAGMA synchronous={self._synchronous}")
            except sqlite3.Error as exc:
                raise errors.StorageUnavailable(str(exc)) from exc
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextlib.contextmanager
    def _translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            if any(hint in str(exc).lower() for hint in _UNAVAILABLE_HINTS):
                raise errors.StorageUnavailable(str(exc)) from exc
            raise

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a block in one ``BEGIN IMMEDIATE`` transaction, rolled back on any exception."""
        with self._translate_errors():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextlib.contextmanager
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
