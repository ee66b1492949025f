"""A notifier's heartbeat (its record among the live notifiers) survives a write whose answer was lost."""

from __future__ import annotations

import concurrent.futures

import pytest

from zaqar_lite.config import NotifierSettings, load_settings
from zaqar_lite.notify import state
from zaqar_lite.notify.worker import Notifier
from zaqar_lite.storage import open_storage

pytestmark = pytest.mark.store_independent


def test_a_heartbeat_whose_version_went_stale_is_written_again(tmp_path, clock):
    """A heartbeat applied whose answer was lost (a store killed or cut off after the write) leaves
    the notifier one version behind its own record: the next heartbeat still lands, and scheduling
    goes on, rather than failing on every tick until the notifier is restarted."""
    settings = load_settings(None, storage_uri=f"sqlite:///{tmp_path}/beat.db").replace(
        notifier=NotifierSettings(lease_seconds=6.0, request_timeout=2.0))
    storage = open_storage(settings.storage_uri)
    notifier = Notifier(storage, settings, clock=clock, notifier_id="n1")
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            notifier.tick(pool)
            first = storage.get_record(state.NOTIFIER_PROJECT, state.NOTIFIER, "n1")
            assert first is not None
            # the write the notifier never heard back from
            storage.put_record(state.NOTIFIER_PROJECT, state.NOTIFIER, "n1", first.value, first.version)
            clock.advance(3)
            notifier.tick(pool)
        beat = storage.get_record(state.NOTIFIER_PROJECT, state.NOTIFIER, "n1")
        assert beat is not None and beat.value["expires"] == clock() + 6.0
    finally:
        storage.close()
