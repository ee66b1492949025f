"""Real storage servers for the suites, one module per kind, each a pytest plugin.

A module ``tests/servers/<kind>.py`` starts its server once per session on a
free 127.0.0.1 port and provides a function-scoped ``<kind>_store_uri``
fixture naming an empty store. The storage ``driver`` fixture runs the
conformance suite on every kind that has a module here.
"""

from __future__ import annotations

import importlib.util

KINDS = ("redis", "mongodb", "swift")


def available_kinds() -> list[str]:
    """Return the server kinds that have a plugin module."""
    return [k for k in KINDS if importlib.util.find_spec(f"tests.servers.{k}") is not None]
