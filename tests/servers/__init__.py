"""Real storage servers for the suites, one module per kind, each a pytest plugin.

A module ``tests/servers/<kind>.py`` starts its server once per session on a
free 127.0.0.1 port and provides a function-scoped ``<kind>_store_uri``
fixture naming an empty store. The storage ``driver`` fixture runs the
conformance suite on every kind that has a module here.

Each module also provides ``<kind>_restartable_store``: a store whose server
the test may kill and start again (:class:`RestartableStore`), for the outage
tests of ``tests/storage/test_processes_and_outages.py``.
"""

from __future__ import annotations

import importlib.util
from typing import Protocol

KINDS = ("redis", "redis_cluster", "mongodb", "swift")


def available_kinds() -> list[str]:
    """Return the server kinds that have a plugin module."""
    return [k for k in KINDS if importlib.util.find_spec(f"tests.servers.{k}") is not None]


class RestartableStore(Protocol):
    """A store on a server of the test's own that can be killed and started again with its data."""

    #: the store URI; it names the same store before and after a restart
    uri: str

    def stop(self) -> None:
        """Kill the server at once (SIGKILL), as a crash or a power cut would, and wait until it is gone."""

    def start(self) -> None:
        """Start the server again on the same port with the same files, and wait until it answers."""
