"""The notifier: finds subscriptions, shares them out among notifiers, and delivers.

Any number of notifier processes, on any number of machines, share one store.
Each one, every ``poll_interval`` seconds:

* writes its heartbeat (a ``notifier`` record with an expiry) and reads the
  others' (once a third of ``lease_seconds`` has passed since it last did), so
  every notifier knows the live ones;
* reads every subscription and delivery record, removes expired subscriptions,
  and picks the subscriptions it should serve: those whose lease it holds, and
  free ones that rendezvous hashing over the live notifiers assigns to it (or
  that nobody took for a whole lease period, whatever the hashing says);
* hands each of them to a thread of its pool, which takes or renews the lease
  (:mod:`zaqar_lite.notify.lease`) and delivers (:mod:`zaqar_lite.notify.delivery`).

Hashing only spreads the work; the lease alone guarantees that a subscription
is served by one notifier at a time. A notifier that dies stops renewing: its
heartbeat and leases expire and the others take its subscriptions over from
their stored cursors. One that stops cleanly releases its leases at once.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import os
import socket
import threading
import uuid

from zaqar_lite import errors, metrics
from zaqar_lite.clock import Clock, wall_clock
from zaqar_lite.config import Settings
from zaqar_lite.models import Record
from zaqar_lite.notify import state, webhook
from zaqar_lite.notify.delivery import Courier, Pause
from zaqar_lite.notify.lease import Lease, LeaseLost
from zaqar_lite.notify.records import project_subscriptions, remove_subscription
from zaqar_lite.notify.state import Delivery, Subscription
from zaqar_lite.notify.transports import Transports
from zaqar_lite.rules import egress
from zaqar_lite.rules.encryption import Keyring
from zaqar_lite.storage.base import Storage
from zaqar_lite.storage.encrypted import encrypted

LOG = logging.getLogger(__name__)

#: a delivery record without its subscription this old is left over from a crash
ORPHAN_SECONDS = 300.0
PAGE = 1000


def new_notifier_id() -> str:
    """Return a notifier id that says where it runs: ``host-pid-random``."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def preferred_notifier(record_key: str, live: list[str]) -> str:
    """Return the live notifier that rendezvous hashing assigns a subscription to."""
    return max(live, key=lambda notifier: hashlib.sha1(f"{notifier}|{record_key}".encode()).digest())


class Notifier:
    """One notifier process's scheduler: call :meth:`run` and, from elsewhere, :meth:`stop`."""

    def __init__(self, storage: Storage, settings: Settings, clock: Clock = wall_clock,
                 notifier_id: str | None = None) -> None:
        self.storage = encrypted(storage, settings)  # deliveries carry bodies in plaintext
        self.keyring = Keyring.from_setting(settings.encryption_keys)  # and trust tokens
        self.settings = settings
        self.config = settings.notifier
        self.clock = clock
        self.id = notifier_id or new_notifier_id()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._busy: set[tuple[str, str]] = set()
        self._held: dict[tuple[str, str], Lease] = {}
        self._transports = threading.local()
        self._targets = egress.TargetRule.from_settings(self.config.allowed_targets,
                                                        self.config.denied_targets)
        self._heartbeat_version: int | None = None
        self._next_heartbeat = 0.0
        self._live: list[str] = [self.id]

    # -- life cycle -----------------------------------------------------------

    def run(self) -> None:
        """Schedule deliveries until :meth:`stop`; then release every lease held."""
        LOG.info("notifier %s started (%d threads, lease %g s)", self.id, self.config.threads,
                 self.config.lease_seconds)
        with concurrent.futures.ThreadPoolExecutor(self.config.threads, "zaqar-lite-notify") as pool:
            while not self.stopping.is_set():
                try:
                    self.tick(pool)
                except errors.StorageUnavailable as exc:
                    LOG.warning("notifier: storage unavailable: %s", exc)
                    metrics.STORAGE_ERRORS.labels(self.storage.name).inc()
                except Exception:  # noqa: BLE001 - the notifier must outlive any single failure
                    LOG.exception("notifier: scheduling failed")
                self.stopping.wait(self.config.poll_interval)
        self._release_all()
        LOG.info("notifier %s stopped", self.id)

    def stop(self) -> None:
        """Ask :meth:`run` to finish the attempts in flight and return."""
        self.stopping.set()

    def _release_all(self) -> None:
        for lease in list(self._held.values()):
            try:
                lease.release(to_anyone=True)
            except errors.ZaqarLiteError as exc:
                LOG.warning("notifier: could not release %s: %s", lease.key, exc)
        self._held.clear()
        try:
            self.storage.delete_record(state.NOTIFIER_PROJECT, state.NOTIFIER, self.id)
        except errors.ZaqarLiteError as exc:
            LOG.warning("notifier: could not remove its heartbeat: %s", exc)

    # -- scheduling -----------------------------------------------------------

    def tick(self, pool: concurrent.futures.Executor) -> int:
        """Look at every subscription once and start the deliveries due; return how many started."""
        now = self.clock()
        live = self._heartbeat(now)
        started = 0
        existing: set[tuple[str, str]] = set()
        for project in self.storage.record_projects(state.SUBSCRIPTION):
            deliveries = {r.key: r for r in self._records(project, state.DELIVERY)}
            seen: set[str] = set()
            for subscription in project_subscriptions(self.storage, project):
                seen.add(subscription.key)
                existing.add((project, subscription.key))
                if subscription.is_expired(now):
                    remove_subscription(self.storage, project, subscription)
                    continue
                record = deliveries.get(subscription.key)
                if record is None:
                    continue  # being created or deleted right now
                delivery = Delivery.from_record(record.value)
                preferred = preferred_notifier(subscription.key, live) == self.id
                if self._due(delivery, preferred, now) and self._mark_busy(project, subscription.key):
                    pool.submit(self._serve, project, subscription, preferred)
                    started += 1
            for record_key, record in deliveries.items():
                created = Delivery.from_record(record.value).created
                if record_key not in seen and created < now - ORPHAN_SECONDS:
                    self.storage.delete_record(project, state.DELIVERY, record_key, record.version)
        for slot in list(self._held):  # a snapshot: delivery threads change the dict meanwhile
            if slot not in existing:
                self._held.pop(slot, None)
        return started

    def _records(self, project: str, kind: str) -> list[Record]:
        found: list[Record] = []
        marker = None
        while True:
            batch = self.storage.list_records(project, kind, marker=marker, limit=PAGE)
            found.extend(batch)
            if len(batch) < PAGE:
                return found
            marker = batch[-1].key

    def _due(self, delivery: Delivery, preferred: bool, now: float) -> bool:
        if delivery.suspended:
            return False
        if delivery.owner == self.id:
            renew = delivery.lease_expires - now < self.config.lease_seconds / 2
            return delivery.retry_at <= now or renew
        if not delivery.lease_is_free(now):
            return False
        return preferred or now - delivery.lease_expires > self.config.lease_seconds

    def _mark_busy(self, project: str, record_key: str) -> bool:
        with self._lock:
            if (project, record_key) in self._busy:
                return False
            self._busy.add((project, record_key))
            return True

    def _heartbeat(self, now: float) -> list[str]:
        if now < self._next_heartbeat:
            return self._live
        value = {"expires": now + self.config.lease_seconds, "host": socket.gethostname(), "pid": os.getpid()}
        try:
            self._heartbeat_version = self.storage.put_record(
                state.NOTIFIER_PROJECT, state.NOTIFIER, self.id, value, self._heartbeat_version)
        except errors.Conflict:
            # gone (another notifier found it expired), or ahead of us: a write of ours applied
            # whose answer was lost; write over the version stored now
            current = self.storage.get_record(state.NOTIFIER_PROJECT, state.NOTIFIER, self.id)
            stored = None if current is None else current.version
            self._heartbeat_version = self.storage.put_record(
                state.NOTIFIER_PROJECT, state.NOTIFIER, self.id, value, stored)
        live = [self.id]
        for record in self._records(state.NOTIFIER_PROJECT, state.NOTIFIER):
            if record.key == self.id:
                continue
            if record.value.get("expires", 0) > now:
                live.append(record.key)
            else:
                self.storage.delete_record(state.NOTIFIER_PROJECT, state.NOTIFIER, record.key, record.version)
        self._live = sorted(live)
        self._next_heartbeat = now + self.config.lease_seconds / 3
        return self._live

    # -- one subscription -----------------------------------------------------

    def _thread_transports(self) -> Transports:
        """Return this thread's transports (each thread keeps its own HTTP connections)."""
        transports = getattr(self._transports, "transports", None)
        if transports is None:
            transports = Transports(self.settings, webhook.guarded_session(self._targets), self.clock)
            self._transports.transports = transports
        return transports

    def _serve(self, project: str, subscription: Subscription, preferred: bool) -> None:
        slot = (project, subscription.key)
        lease = Lease(self.storage, project, subscription.key, self.id, self.config.lease_seconds, self.clock)
        try:
            if not lease.acquire():
                self._held.pop(slot, None)
                return
            self._held[slot] = lease
            courier = Courier(self.storage, self._thread_transports(), self.clock, self.stopping,
                              keyring=self.keyring)
            pause = courier.run(project, subscription, lease)
            # Hand a subscription hashing gives to another notifier back after each slice,
            # so that notifiers started later (or seen late) get their share under load.
            if pause is Pause.SUSPENDED or (not preferred and pause is not Pause.STOPPING):
                lease.release()
                self._held.pop(slot, None)
        except LeaseLost as exc:
            LOG.info("notifier %s lost %s/%s: %s", self.id, project, subscription.key, exc)
            self._held.pop(slot, None)
        except errors.StorageUnavailable as exc:
            LOG.warning("notifier: storage unavailable while serving %s: %s", subscription.key, exc)
            metrics.STORAGE_ERRORS.labels(self.storage.name).inc()
        except Exception:  # noqa: BLE001 - one subscription's failure must not stop the others
            LOG.exception("notifier: delivery to %s/%s failed", project, subscription.key)
        finally:
            with self._lock:
                self._busy.discard(slot)
