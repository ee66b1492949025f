"""The MongoDB connection of a driver: one client per process, indexes, and the one error translation."""

from __future__ import annotations

import functools
import logging
import os
import urllib.parse
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import pymongo
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import ConnectionFailure, OperationFailure, PyMongoError

from zaqar_lite import errors
from zaqar_lite.storage.base import each_operation_within
from zaqar_lite.storage.mongodb.layout import (
    DEFAULT_DATABASE,
    INDEXES,
    Document,
    client_options,
    operation_timeout,
)

LOG = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound="MongoConnected")


def translated(method: Callable[Concatenate[C, P], R]) -> Callable[Concatenate[C, P], R]:
    """Make an unreachable MongoDB a ``StorageUnavailable``, and re-create dropped indexes.

    Every method that talks to the server wears it. Queries name their index
    (``hint``); one naming an index that is gone fails with BadValue: the
    indexes are then made again and the call repeated once.
    """
    def wrapper(self: C, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            self._ensure_indexes()
            try:
                return method(self, *args, **kwargs)
            except OperationFailure as exc:
                if exc.code != 2 or "hint" not in str(exc):  # BadValue: the hinted index is gone
                    raise
                self._indexed = False
                self._ensure_indexes()
                return method(self, *args, **kwargs)
        except ConnectionFailure as exc:
            raise errors.StorageUnavailable(f"MongoDB is unreachable: {exc}") from exc
        except PyMongoError as exc:
            if not exc.timeout:
                raise
            raise errors.StorageUnavailable(f"MongoDB did not answer in the operation's time: {exc}") from exc
    functools.update_wrapper(wrapper, method)
    return wrapper


#: run each public method of a driver class within one time budget (``operation_timeout``):
#: pymongo's own client-side operation timeout (``pymongo.timeout``), which bounds every server
#: selection, connection, read, write and retry made inside it, and hands an expired one to
#: ``translated`` as a timeout
bounded = each_operation_within(lambda driver: pymongo.timeout(driver.operation_timeout))


class MongoConnected:
    """A client of the URI's database, opened anew in each process (a forked worker opens its own)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._options = client_options(uri)
        #: the seconds a whole operation may take (None: unbounded)
        self.operation_timeout = operation_timeout(uri)
        self._pid = -1
        self._indexed = False
        try:
            self._ensure_indexes()
        except ConnectionFailure as exc:
            LOG.warning("MongoDB is unreachable at startup; indexes will be created later: %s", exc)

    def describe(self) -> str:
        """Return the hosts and the database, without credentials."""
        hosts = urllib.parse.urlsplit(self.uri).netloc.rpartition("@")[2]
        return f"MongoDB database {self._database().name} on {hosts}"

    def close(self) -> None:
        """Close this process's client."""
        if self._pid == os.getpid():
            self._client.close()

    def _database(self) -> Database[Document]:
        if self._pid != os.getpid():
            self._client: pymongo.MongoClient[Document] = pymongo.MongoClient(self.uri, **self._options)
            self._db = self._client.get_default_database(DEFAULT_DATABASE)
            self._pid = os.getpid()
        return self._db

    @property
    def _messages(self) -> Collection[Document]:
        return self._database().messages

    @property
    def _claims(self) -> Collection[Document]:
        return self._database().claims

    def _ensure_indexes(self) -> None:
        if not self._indexed:
            for collection, indexes in INDEXES.items():
                self._database()[collection].create_indexes(indexes)
            # queues stored before due times: due at once, the first sweep sets their next one
            self._database().queues.update_many({"due": {"$exists": False}}, {"$set": {"due": 0.0}})
            self._indexed = True

    def _transactions(self) -> bool:
        kind = self._client.topology_description.topology_type_name
        return kind in ("ReplicaSetWithPrimary", "Sharded", "LoadBalanced")

    def _find(self, query: Document, index: str, limit: int = 0,
              projection: Document | None = None) -> list[Document]:
        return list(self._messages.find(query, projection).sort("marker").limit(limit).hint(index))

    def ping(self) -> bool:
        """Return True when the server answers."""
        try:
            self._database().client.admin.command("ping")
            return True
        except pymongo.errors.PyMongoError:
            return False


