"""Every store that wraps another passes on every method of the storage contract, on real stores.

A wrapper (encryption at rest, the pools' router) derives from
``storage/forwarding.py``'s ``ForwardingStorage`` and overrides only what it
changes. Each test here calls one method of the contract through a wrapper
around real SQLite stores (files in a temporary directory), each of whose
contract methods notes its name before it runs, and checks that the call
reached a store below: the same method first, of the queue's store for a call
on one queue and of the wrapped store otherwise, unless the wrapper changes it.
A method added to the contract fails :func:`test_every_method_of_the_contract_has_a_call_here`
until it has a call below, and is then held to the same rule.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from zaqar_lite.models import ClaimRequest, DeadLetterPolicy, Message, Move, Pool
from zaqar_lite.rules.encryption import Keyring
from zaqar_lite.storage import open_storage
from zaqar_lite.storage.base import Storage
from zaqar_lite.storage.encrypted import EncryptedStorage
from zaqar_lite.storage.forwarding import ForwardingStorage
from zaqar_lite.storage.pools.catalog import Catalog
from zaqar_lite.storage.pools.router import PooledStorage

P, Q, DLQ = "project-a", "orders", "orders-dlq"
T0 = 4_102_444_800.0
NOW = T0 + 1
FIRST, SECOND, DELAYED, NEW = (f"{n}{n}{n}{n}{n}{n}{n}{n}-0000-4000-8000-000000000000" for n in range(1, 5))

#: every public method of the contract, abstract or with a default
CONTRACT = sorted(name for name, _ in inspect.getmembers(Storage, inspect.isfunction)
                  if not name.startswith("_"))


def message(message_id: str, delay_until: float = 0.0) -> Message:
    return Message(id=message_id, body={"n": message_id}, created=T0, expires=T0 + 3600,
                   delay_until=delay_until)


@dataclasses.dataclass
class Ready:
    """A wrapper over spied real stores, with a queue holding a claimed, a free and a delayed message."""

    store: Storage
    calls: list[tuple[str, str]]
    second: Message


#: one call per method of the contract, on the queue :func:`ready` makes
CALLS: dict[str, Callable[[Ready], Any]] = {
    "create_queue": lambda r: r.store.create_queue(P, "orders-new", {}, NOW),
    "get_queue_metadata": lambda r: r.store.get_queue_metadata(P, Q),
    "set_queue_metadata": lambda r: r.store.set_queue_metadata(P, Q, {"colour": "blue"}),
    "delete_queue": lambda r: r.store.delete_queue(P, Q),
    "list_queues": lambda r: r.store.list_queues(P, marker=None, limit=10),
    "count_queues": lambda r: r.store.count_queues(P),
    "all_queues": lambda r: list(r.store.all_queues()),
    "post_messages": lambda r: r.store.post_messages(P, Q, [message(NEW)], NOW),
    "post_planned": lambda r: r.store.post_planned(P, Q, lambda metadata: [message(NEW)], NOW),
    "list_messages": lambda r: r.store.list_messages(P, Q, now=NOW, marker=None, limit=10,
                                                     include_claimed=True, include_delayed=True,
                                                     exclude_client_id=None),
    "get_messages": lambda r: r.store.get_messages(P, Q, [FIRST, SECOND], NOW),
    "delete_message": lambda r: r.store.delete_message(P, Q, SECOND, None, NOW),
    "delete_messages": lambda r: r.store.delete_messages(P, Q, [SECOND], None, NOW),
    "edit_delayed_message": lambda r: r.store.edit_delayed_message(P, Q, DELAYED, {"body": "edited"}, NOW),
    "pop_messages": lambda r: r.store.pop_messages(P, Q, 1, NOW),
    "purge_messages": lambda r: r.store.purge_messages(P, Q),
    "queue_stats": lambda r: r.store.queue_stats(P, Q, NOW),
    "claim_messages": lambda r: r.store.claim_messages(P, Q, ClaimRequest("claim-2", NOW, 60, 60, 1)),
    "claim_planned": lambda r: r.store.claim_planned(
        P, Q, lambda metadata: ClaimRequest("claim-2", NOW, 60, 60, 1)),
    "next_visible_at": lambda r: r.store.next_visible_at(P, Q, NOW),
    "get_claim": lambda r: r.store.get_claim(P, Q, "claim-1", NOW),
    "renew_claim": lambda r: r.store.renew_claim(P, Q, "claim-1", NOW, 60, 60),
    "release_claim": lambda r: r.store.release_claim(P, Q, "claim-1", NOW),
    "release_message": lambda r: r.store.release_message(P, Q, FIRST, "claim-1", NOW, {"error": "boom"}, 5),
    "move_messages": lambda r: r.store.move_messages(P, Q, [Move(r.second, r.second)], DLQ, NOW),
    "check_same_pool": lambda r: r.store.check_same_pool(P, Q, "orders-linked", "a test's link"),
    "due_queues": lambda r: list(r.store.due_queues(NOW)),
    "sweep_queue": lambda r: r.store.sweep_queue(P, Q, NOW, DeadLetterPolicy()),
    "get_record": lambda r: r.store.get_record(P, "note", "a"),
    "put_record": lambda r: r.store.put_record(P, "note", "b", {"n": 1}, None),
    "delete_record": lambda r: r.store.delete_record(P, "note", "a"),
    "list_records": lambda r: r.store.list_records(P, "note"),
    "record_projects": lambda r: r.store.record_projects("note"),
    "ping": lambda r: r.store.ping(),
    "describe": lambda r: r.store.describe(),
    "close": lambda r: r.store.close(),
}


def spied(store: Storage, label: str, calls: list[tuple[str, str]]) -> Storage:
    """Return the real store itself, each contract method noting ``(label, its name)`` in ``calls`` first."""
    for name in CONTRACT:
        method = getattr(store, name)

        def noted(*args: Any, _name: str = name, _method: Callable[..., Any] = method, **kwargs: Any) -> Any:
            calls.append((label, _name))
            return _method(*args, **kwargs)
        setattr(store, name, noted)
    return store


def encrypted(directory: Path, calls: list[tuple[str, str]]) -> Storage:
    return EncryptedStorage(spied(open_storage(f"sqlite:///{directory}/inner.db"), "inner", calls), Keyring())


def pooled(directory: Path, calls: list[tuple[str, str]]) -> Storage:
    """A deployment whose default store keeps the catalog, and whose one pool, lite, takes every new queue."""
    default = spied(open_storage(f"sqlite:///{directory}/default.db"), "default", calls)
    catalog = Catalog(default)
    catalog.put_pool(Pool("lite", f"sqlite:///{directory}/lite.db", 1), None)
    return PooledStorage(default, catalog, lambda uri: spied(open_storage(uri), "lite", calls),
                         queue_cache_size=100, refresh_interval=3600)


#: each wrapper, with the label of the store it wraps and that of the store of :data:`Q`
WRAPPERS: dict[str, tuple[Callable[[Path, list[tuple[str, str]]], Storage], str, str]] = {
    "encrypted": (encrypted, "inner", "inner"),
    "pools": (pooled, "default", "lite"),
}


def on_one_queue(method: str) -> bool:
    """Return whether a method of the contract is a call on one queue (arguments ``project, queue, ...``)."""
    return list(inspect.signature(getattr(Storage, method)).parameters)[1:3] == ["project", "queue"]


def ready(store: Storage, calls: list[tuple[str, str]]) -> Ready:
    store.create_queue(P, Q, {}, T0)
    store.create_queue(P, DLQ, {}, T0)
    store.post_messages(P, Q, [message(FIRST), message(SECOND), message(DELAYED, delay_until=T0 + 100)], T0)
    claimed = store.claim_messages(P, Q, ClaimRequest("claim-1", T0, 60, 60, 1)).claimed
    assert [m.id for m in claimed] == [FIRST]
    second = store.get_messages(P, Q, [SECOND], T0)[0]
    store.put_record(P, "note", "a", {"n": 0}, None)
    calls.clear()
    return Ready(store, calls, second)


def test_every_method_of_the_contract_has_a_call_here():
    assert sorted(CALLS) == CONTRACT


def test_the_forwarding_base_passes_on_every_method_of_the_contract_itself():
    assert [name for name in CONTRACT if name not in vars(ForwardingStorage)] == []
    assert ForwardingStorage.__abstractmethods__ == frozenset()
    assert set(Storage.__abstractmethods__) <= set(CONTRACT)


@pytest.mark.parametrize("wrapper", [EncryptedStorage, PooledStorage], ids=lambda c: c.__name__)
def test_every_wrapper_derives_from_the_forwarding_base(wrapper):
    assert issubclass(wrapper, ForwardingStorage)


@pytest.mark.parametrize("method", CONTRACT)
@pytest.mark.parametrize("kind", sorted(WRAPPERS))
def test_a_call_through_a_wrapper_reaches_the_real_store_below(kind, method, tmp_path):
    calls: list[tuple[str, str]] = []
    make, wrapped, queues_store = WRAPPERS[kind]
    store = make(tmp_path, calls)
    try:
        CALLS[method](ready(store, calls))
    finally:
        store.close()
    changed_by = next(c for c in type(store).__mro__ if method in vars(c))
    if changed_by is ForwardingStorage:
        expected = (queues_store if on_one_queue(method) else wrapped, method)
        assert calls[:1] == [expected], f"{kind}.{method} reached {calls}"
    else:
        assert calls != [], f"{kind}.{method} ({changed_by.__name__}'s) reached no store"
