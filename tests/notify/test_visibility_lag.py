"""A driver that declares a visibility lag gets its messages delivered only once they are that old."""

from __future__ import annotations

import threading
import time

from tests.notify.conftest import ALLOW_LOOPBACK, wait_until
from tests.notify.receiver import Receiver
from tests.notify.streams import number
from zaqar_lite.config import NotifierSettings, load_settings
from zaqar_lite.notify.worker import Notifier
from zaqar_lite.service import Messaging
from zaqar_lite.service.subscriptions import Subscriptions
from zaqar_lite.storage import open_storage


def test_messages_younger_than_the_lag_wait_and_then_go_in_order(tmp_path):
    settings = load_settings(None, storage_uri=f"sqlite:///{tmp_path}/lag.db").replace(
        notifier=NotifierSettings(lease_seconds=4.0, request_timeout=1.0, poll_interval=0.05, threads=1,
                                  allowed_targets=ALLOW_LOOPBACK))
    storage = open_storage(settings.storage_uri)
    storage.visibility_lag = 1.5  # type: ignore[attr-defined]
    notifier = Notifier(storage, settings)
    thread = threading.Thread(target=notifier.run, daemon=True)
    with Receiver() as receiver:
        Subscriptions(storage, settings).create("p", "q", {"subscriber": receiver.url("lag")})
        posted = time.monotonic()
        Messaging(storage, settings).post("p", "q", "client", [
            {"body": {"n": n}, "ttl": None, "delay": None, "dlq_eligible": True} for n in range(3)], 100)
        thread.start()
        try:
            wait_until(lambda: len(receiver.acknowledged("lag")) == 3, 15, "three deliveries")
        finally:
            notifier.stop()
            thread.join(10)
        deliveries = receiver.acknowledged("lag")
    assert [number(d) for d in deliveries] == [0, 1, 2]
    assert deliveries[0].started - posted >= 1.4
