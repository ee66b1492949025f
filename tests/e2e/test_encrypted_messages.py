"""Encrypted messages through the unmodified python-zaqarclient against real servers with keys.

A server whose ``[encryption] keys`` are k2 then k1 serves a queue created with
``_enable_encrypt_messages``; the store, read by a bare driver, holds only
envelopes; a second server on the same store with k1 alone answers 503
naming the key for the body k2 sealed, and its claim takes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from zaqarclient.queues import client as zaqar
from zaqarclient.queues.v2 import core
from zaqarclient.transport import errors as zaqar_errors

from tests.conftest import STORE_KIND
from tests.e2e.harness import RunningServer, Store, start_server, stop_server
from zaqar_lite.storage import open_storage

# encryption sits above the store, but a claim's undo is each store's own (SQLite's transaction, Redis's
# script); every store, without HTTP: tests/storage/conformance/test_encryption_at_rest.py
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(STORE_KIND not in ("sqlite", "redis"), reason="see the comment above")]

K1 = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
K2 = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
SECRET = {"card": "4111-1111-1111-1111"}


def keyed_server(store: Store, data_dir: Path, keys: str, name: str) -> RunningServer:
    """Start a server on the store of ``data_dir`` with these ``[encryption] keys``."""
    config = data_dir / f"{name}.conf"
    config.write_text(f"[encryption]\nkeys = {keys}\n")
    return start_server(store.uri(data_dir), data_dir, workers=1, extra_args=["--config", str(config)])


@pytest.fixture
def servers(store: Store, tmp_path: Path) -> Iterator[tuple[RunningServer, RunningServer]]:
    """A server with keys k2 (sealing) and k1, and one with k1 alone, on one store."""
    both = keyed_server(store, tmp_path, f"{K2}, {K1}", "both")
    try:
        only_k1 = keyed_server(store, tmp_path, K1, "only-k1")
        try:
            yield both, only_k1
        finally:
            stop_server(only_k1)
    finally:
        stop_server(both)


def client_of(server: RunningServer) -> Any:
    return zaqar.Client(server.url, version=2,
                        conf={"auth_opts": {"backend": "noauth", "options": {"os_project_id": "vault-e2e"}}})


def test_zaqarclient_reads_plaintext_while_the_store_holds_only_envelopes(servers, store, tmp_path):
    both, only_k1 = servers
    client = client_of(both)
    request, transport = client._request_and_transport()
    core.queue_create(transport, request, "vault", metadata={"_enable_encrypt_messages": True})
    queue = client.queue("vault", auto_create=False)
    assert queue.metadata(force_reload=True)["_enable_encrypt_messages"] is True
    ids = [href.rsplit("/", 1)[1] for href in queue.post([{"body": SECRET}, {"body": "two"}])["resources"]]

    assert [m.body for m in queue.messages(echo=True)] == [SECRET, "two"]
    assert queue.message(ids[0]).body == SECRET
    claimed = queue.claim(ttl=120, grace=60, limit=1)
    assert [m.body for m in claimed] == [SECRET]
    claimed.delete()  # released: the message is claimable again
    driver = open_storage(store.uri(tmp_path))
    try:
        stored = driver.get_messages("vault-e2e", "vault", ids, now=0.0)
    finally:
        driver.close()
    assert sorted(m.body["zaqar_lite:encrypted"]["kid"] for m in stored) == ["k2", "k2"]
    assert "4111" not in repr([m.body for m in stored])

    keyless = client_of(only_k1).queue("vault", auto_create=False)
    for attempt in (lambda: keyless.message(ids[0]), lambda: keyless.claim(ttl=120, grace=60, limit=2),
                    lambda: keyless.pop(count=2)):
        with pytest.raises(zaqar_errors.ServiceUnavailableError) as raised:
            attempt()
        assert "it was encrypted with key k2, which [encryption] keys does not hold" in str(raised.value)
    assert queue.stats["messages"]["claimed"] == 0  # the claim that could not be opened took nothing
    assert [m.body for m in queue.claim(ttl=120, grace=60, limit=2)] == [SECRET, "two"]
