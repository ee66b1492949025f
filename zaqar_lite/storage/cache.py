"""The one bounded cache of the storage drivers: what a driver remembers per queue.

A driver may keep something per queue in memory (Redis: the queue's key names
and its metadata text) only in an :class:`LRUCache` of ``[storage]
queue_cache_size`` entries, so that a tenant touching queue after queue costs the
server a fixed amount of memory, not an amount that grows with every queue ever
touched. A forgotten entry is read again from the store on its next use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """A mapping of at most ``size`` entries that forgets the least recently used first.

    Safe to share between threads: every change holds one lock for a few
    dictionary operations; a read takes none (see :meth:`get`). Keys are tuples
    of strings. A ``size`` of 0 remembers nothing.
    """

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"a cache size cannot be negative, got {size}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        """Return the entry of ``key`` (now the most recently used), or None.

        Without the lock: a read and a move of the ordered dictionary are each
        one step no other thread interrupts (C code under the interpreter's
        lock, keys of strings), and an entry forgotten between the two was
        still the key's value when read. Every post and claim reads here.
        """
        entries = self._entries
        value = entries.get(key)
        if value is not None:
            try:
                entries.move_to_end(key)
            except KeyError:  # forgotten by another thread meanwhile
                pass
        return value

    def put(self, key: K, value: V) -> None:
        """Remember ``value`` under ``key``, forgetting the least recently used entry if full."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
            elif len(self._entries) >= self.size:  # make room first: never more than size entries
                if not self._entries:
                    return
                self._entries.popitem(last=False)
            self._entries[key] = value

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """Return the entry of ``key``, first making and remembering it if there is none.

        ``make`` runs outside the lock: two threads missing the same key at once
        may both make it, and the second result is kept.
        """
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def pop(self, key: K) -> None:
        """Forget the entry of ``key``, if any."""
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
