"""The Swift driver's object primitives over python-swiftclient, with one error translation.

Connections are per process and per thread (python-swiftclient's are not
thread-safe); threads share the first token. Timeouts are short and retries
few, so an unreachable Swift answers :class:`~zaqar_lite.errors.StorageUnavailable`
within seconds, and the next call reconnects (and re-authenticates on a 401)
by itself.

Every store request and settle wait passes through :meth:`SwiftObjects.call`
and :meth:`SwiftObjects.settle`, and so does the time budget of a whole driver
operation (the URI's ``operation_timeout``): :data:`bounded` opens one
deadline per public driver method (a claim, a post of many, a delete of many,
a release...), the request in flight is cut to the time left (no retry unless
it fits), and once the budget is spent the operation makes no more requests
and raises :class:`~zaqar_lite.errors.StorageUnavailable` (503). What it wrote
before stays written: a claim stopped there leaves the messages it marked
claimed hidden until that claim's ttl lapses, as a write it gave up on.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import requests
import swiftclient
from swiftclient.exceptions import ClientException

from zaqar_lite import errors
from zaqar_lite.storage.base import each_operation_within
from zaqar_lite.storage.swift.layout import Hint, SwiftOptions, parse_hint

PAGE = 1000
PARALLEL = 8
# python-swiftclient logs every 4xx at INFO, and this driver expects many (404, 412).
if logging.getLogger("swiftclient").level == logging.NOTSET:
    logging.getLogger("swiftclient").setLevel(logging.WARNING)
T = TypeVar("T")
R = TypeVar("R")


class SwiftObjects:
    """Read, write, list and delete objects of one Swift account."""

    def __init__(self, options: SwiftOptions) -> None:
        self.options = options
        self._local = threading.local()
        self._auth: tuple[int, str, str] | None = None
        self._pool: tuple[int, concurrent.futures.ThreadPoolExecutor] | None = None

    @contextlib.contextmanager
    def translated(self) -> Iterator[None]:
        """Turn "Swift cannot answer" (no HTTP status, 5xx, connection errors) into StorageUnavailable.

        This is the one place the driver recognises an unreachable Swift.
        """
        try:
            yield
        except errors.StorageUnavailable:
            raise
        except ClientException as exc:
            if exc.http_status is not None and exc.http_status < 500:
                raise
            self._drop_http()
            raise errors.StorageUnavailable(f"Swift did not answer: {exc}") from exc
        except (requests.RequestException, OSError) as exc:
            self._drop_http()
            raise errors.StorageUnavailable(f"Swift cannot be reached: {exc}") from exc

    def _drop_http(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.http_conn = None

    @contextlib.contextmanager
    def operation(self) -> Iterator[None]:
        """Bound the store requests made inside to ``operation_timeout`` seconds (outermost wins)."""
        if getattr(self._local, "deadline", None) is not None:
            yield
            return
        self._local.deadline = time.monotonic() + self.options.operation_timeout
        try:
            yield
        finally:
            self._local.deadline = None

    def _left(self) -> float | None:
        """Return the seconds left of this thread's operation, or None outside one.

        Raises:
            StorageUnavailable: the operation's budget is spent.
        """
        deadline: float | None = getattr(self._local, "deadline", None)
        if deadline is None:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            raise errors.StorageUnavailable(
                f"Swift did not answer within the operation's {self.options.operation_timeout:g} s")
        return left

    def _fit(self, conn: swiftclient.Connection) -> None:
        """Cut this connection's timeout and retries to what is left of the operation."""
        left, o = self._left(), self.options
        timeout = o.timeout if left is None else min(o.timeout, left)
        conn.timeout = timeout
        conn.retries = o.retries if left is None or left >= (o.retries + 1) * o.timeout else 0
        if conn.http_conn is not None:
            conn.http_conn[1].requests_args["timeout"] = timeout

    def connection(self) -> swiftclient.Connection:
        """Return this thread's connection, authenticated, its timeout cut to the operation's budget."""
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            o, shared = self.options, self._auth if self._auth and self._auth[0] == os.getpid() else None
            conn = swiftclient.Connection(
                o.auth_url, o.user, o.key, retries=o.retries, starting_backoff=0.05, max_backoff=0.5,
                auth_version=o.auth_version, os_options=dict(o.os_options), timeout=o.timeout,
                preauthurl=shared[1] if shared else None, preauthtoken=shared[2] if shared else None)
            self._local.conn, self._local.pid = conn, os.getpid()
        self._fit(conn)
        if not conn.token:
            with self.translated():
                conn.get_auth()
            self._auth = (os.getpid(), conn.url, conn.token)
        return conn

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run one python-swiftclient ``Connection`` method."""
        with self.translated():
            return getattr(self.connection(), method)(*args, **kwargs)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Apply ``fn`` to items on a few threads (each with its own connection); keep their order."""
        items = list(items)
        if len(items) <= 1:
            return [fn(item) for item in items]
        if self._pool is None or self._pool[0] != os.getpid():
            self._pool = (os.getpid(), concurrent.futures.ThreadPoolExecutor(PARALLEL, "swift"))
        deadline = getattr(self._local, "deadline", None)

        def within(item: T) -> R:  # the worker thread keeps the caller's deadline
            self._local.deadline = deadline
            try:
                return fn(item)
            finally:
                self._local.deadline = None

        return list(self._pool[1].map(within, items))

    def read(self, container: str, name: str) -> tuple[bytes, str] | None:
        """Return an object's body and ETag, or None if it does not exist."""
        try:
            headers, body = self.call("get_object", container, name)
        except ClientException as exc:
            if exc.http_status == 404:
                return None
            raise
        return body, headers.get("etag", "")

    def read_json(self, container: str, name: str) -> dict[str, Any] | None:
        """Return an object's body read as JSON, or None if it does not exist."""
        got = self.read(container, name)
        return None if got is None else json.loads(got[0])

    def kept(self, container: str, name: str, writer: str, started: float, written: float) -> bool:
        """Settle, then tell whether the JSON object left is the one ``writer`` wrote.

        ``started``/``written`` bracket the write (from the read it was based
        on, if any): a write slower than ``settle`` is never kept, because a
        competitor's read-back may already have passed (see the driver's
        module docstring).
        """
        self.settle(written)
        record = self.read_json(container, name)
        fast = written - started <= self.options.settle
        return fast and record is not None and record.get("writer") == writer

    def write(self, container: str, name: str, body: bytes, content_type: str,
              headers: Mapping[str, str] | None = None) -> float:
        """PUT an object, creating its container when that is missing.

        Returns:
            The monotonic time the successful PUT was sent at.
        """
        # A str body (JSON is ASCII) lets python-swiftclient resend it on a retry.
        kwargs = {"contents": body.decode(), "content_type": content_type, "headers": dict(headers or {})}
        try:
            sent = time.monotonic()
            self.call("put_object", container, name, **kwargs)
        except ClientException as exc:
            if exc.http_status != 404:
                raise
            self.call("put_container", container)
            sent = time.monotonic()
            self.call("put_object", container, name, **kwargs)
        return sent

    def create(self, container: str, name: str, body: bytes, content_type: str,
               headers: Mapping[str, str] | None = None) -> float | None:
        """PUT with ``If-None-Match: *``; return None (412) if the object existed, else as :meth:`write`.

        Not atomic in Swift: concurrent creates can all succeed, the latest write winning.
        """
        try:
            return self.write(container, name, body, content_type, {**(headers or {}), "If-None-Match": "*"})
        except ClientException as exc:
            if exc.http_status == 412:
                return None
            raise

    def delete(self, container: str, name: str) -> bool:
        """DELETE an object; return whether it existed."""
        try:
            self.call("delete_object", container, name)
        except ClientException as exc:
            if exc.http_status != 404:
                raise
            return False
        return True

    def rows(self, container: str, prefix: str, marker: str | None = None,
             page_size: int = PAGE) -> Iterator[tuple[str, Hint]]:
        """Yield ``(name, hint)`` of every object under ``prefix`` after ``marker``, by name.

        The listing is read ``page_size`` objects at a time, as they are consumed.
        """
        while True:
            try:
                _, page = self.call("get_container", container, prefix=prefix, marker=marker,
                                    limit=page_size)
            except ClientException as exc:
                if exc.http_status == 404:
                    return
                raise
            for row in page:
                yield row["name"], parse_hint(row.get("content_type", ""))
            if len(page) < page_size:
                return
            marker = page[-1]["name"]

    def containers(self, prefix: str) -> list[str]:
        """Return the names of the account's containers that start with ``prefix``."""
        try:
            _, found = self.call("get_account", prefix=prefix, full_listing=True)
        except ClientException as exc:
            if exc.http_status == 404:
                return []
            raise
        return [entry["name"] for entry in found]

    def settle(self, since: float) -> None:
        """Sleep until ``settle`` seconds after the monotonic time ``since``.

        Raises:
            StorageUnavailable: the operation's budget ends before then (it does not sleep).
        """
        wait = max(0.0, since + self.options.settle - time.monotonic())
        left = self._left()
        if left is not None and wait >= left:
            raise errors.StorageUnavailable(
                f"Swift did not settle within the operation's {self.options.operation_timeout:g} s")
        time.sleep(wait)

    def close(self) -> None:
        """Close this thread's connection and stop the worker threads."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        if self._pool is not None and self._pool[0] == os.getpid():
            self._pool[1].shutdown(wait=False)
            self._pool = None


#: run each public method of a driver class inside ``self.objects.operation()``
bounded = each_operation_within(lambda driver: driver.objects.operation())
