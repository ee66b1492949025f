"""Wake-up channels: local datagram sockets between two listeners, and which channel a store gets."""

from __future__ import annotations

import contextlib
import os
import threading
import time

import pytest

from zaqar_lite.service.waiting.channels import (
    LocalChannel,
    RedisChannel,
    channel_for,
    decode,
    plain_redis_url,
)
from zaqar_lite.service.waiting.room import WaitingRoom, Woken


def test_a_wake_up_published_on_the_local_channel_reaches_the_waiting_claim_of_another_listener(tmp_path):
    directory = str(tmp_path / "wake")
    listening, publishing = LocalChannel(directory, sees_every_write=True), LocalChannel(
        directory, sees_every_write=True)
    publishing.path = os.path.join(directory, "publisher.sock")  # two processes' sockets, in one test
    room = WaitingRoom()
    listening.listen(room)
    try:
        with room.place("p", "orders") as place:
            seen = place.generation
            publishing.publish("p", "orders")
            started = time.monotonic()
            assert place.sleep(seen, time.monotonic() + 5) is Woken.WAKE_UP
            assert time.monotonic() - started < 2
    finally:
        listening.close()
        publishing.close()


def test_a_socket_and_marker_left_by_an_ended_process_are_removed_by_the_next_publish(tmp_path):
    directory = tmp_path / "wake"
    directory.mkdir()
    import socket

    gone = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    gone.bind(str(directory / "12345.sock"))
    gone.close()  # its file stays, nobody reads it
    channel = LocalChannel(str(directory), sees_every_write=True)
    markers = channel.markers("p", "q")
    os.makedirs(markers)
    open(os.path.join(markers, "12345.sock"), "w").close()  # it waited on the queue when it ended
    channel.publish("p", "q")
    channel.close()
    assert os.listdir(markers) == []
    assert sorted(os.listdir(directory)) == ["waiting"]


class Counting:
    """A socket that counts the wake-ups sent to it instead of sending them."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def sendto(self, payload: bytes, path: str) -> None:
        self.sent.append(os.path.basename(path))

    def close(self) -> None:
        pass


def test_a_write_to_a_queue_nobody_waits_on_sends_nothing_and_one_waited_on_sends_to_its_listener(tmp_path):
    directory = str(tmp_path / "wake")
    listening, publishing = LocalChannel(directory, sees_every_write=True), LocalChannel(
        directory, sees_every_write=True)
    publishing.path = os.path.join(directory, "publisher.sock")
    counting = Counting()
    publishing._sender = counting  # type: ignore[assignment]
    room = WaitingRoom()
    listening.listen(room)
    try:
        publishing.publish("p", "orders")
        assert counting.sent == []  # nobody waits: no datagram
        with room.place("p", "orders"), room.place("p", "orders"):
            publishing.publish("p", "orders")
            publishing.publish("p", "other")
            assert counting.sent == [os.path.basename(listening.path)]
        publishing.publish("p", "orders")  # the last waiting claim left
        assert counting.sent == [os.path.basename(listening.path)]
        assert not os.path.exists(publishing.markers("p", "orders"))
    finally:
        listening.close()
        publishing.close()


def test_a_claim_that_starts_waiting_as_a_post_lands_sees_the_message_or_its_wake_up(tmp_path):
    """The race of the module's argument, run many times with real threads and sockets.

    A "store" (a list) is written, then the wake-up published, by one thread
    while another takes a place and makes its first attempt (a read of the
    list); whatever the interleaving, the attempt sees the message or the
    line counts a wake-up after the attempt began.
    """
    directory = str(tmp_path / "wake")
    listening, publishing = LocalChannel(directory, sees_every_write=True), LocalChannel(
        directory, sees_every_write=True)
    publishing.path = os.path.join(directory, "publisher.sock")
    room = WaitingRoom()
    listening.listen(room)
    try:
        for n in range(200):
            queue = f"q{n}"
            store: list[str] = []
            start = threading.Barrier(2)

            def post(store: list[str] = store, queue: str = queue, start: threading.Barrier = start) -> None:
                start.wait()
                store.append("message")
                publishing.publish("p", queue)

            poster = threading.Thread(target=post)
            poster.start()
            with room.place("p", queue) as place:
                start.wait()
                seen = place.generation
                found = list(store)  # the first attempt after taking the place reads the store
                if not found:
                    assert place.sleep(seen, time.monotonic() + 5) is Woken.WAKE_UP
            poster.join()
    finally:
        listening.close()
        publishing.close()


def test_only_the_options_redis_py_knows_are_kept_for_the_subscriber():
    assert (plain_redis_url("redis://:pw@127.0.0.1:6390/3?socket_timeout=2&wait_replicas=1")
            == "redis://:pw@127.0.0.1:6390/3?socket_timeout=2")


def test_a_cluster_uri_is_no_uri_of_one_redis_server():
    with pytest.raises(ValueError, match="redis:// or rediss://"):
        plain_redis_url("redis+cluster://127.0.0.1:7000,127.0.0.1:7001")


def test_each_store_gets_its_channel(tmp_path):
    pytest.importorskip("redis")
    assert isinstance(channel_for("redis", "redis://127.0.0.1:6390/0"), RedisChannel)
    cluster = channel_for("redis", "redis+cluster://127.0.0.1:7000")
    sqlite = channel_for("sqlite", f"sqlite:///{tmp_path}/z.db")
    mongodb = channel_for("mongodb", "mongodb://127.0.0.1:27017/z")
    assert [(type(c).__name__, c.sees_every_write) for c in (cluster, sqlite, mongodb)] == [
        ("LocalChannel", False), ("LocalChannel", True), ("LocalChannel", False)]
    for channel in (cluster, sqlite, mongodb):
        channel.close()


def test_a_redis_write_to_a_queue_nobody_waits_on_reaches_no_subscriber_and_one_waited_on_wakes(
        redis_store_uri):
    import redis

    channel = RedisChannel(redis_store_uri)
    watcher = redis.Redis.from_url(redis_store_uri)
    heard = watcher.pubsub(ignore_subscribe_messages=True)
    heard.psubscribe(RedisChannel.PATTERN)
    heard.get_message(timeout=1)  # the subscription's confirmation
    room = WaitingRoom()
    channel.listen(room)
    try:
        channel.publish("p", "orders")
        assert heard.get_message(timeout=0.5) is None  # nobody waits: nothing published
        with room.place("p", "orders", 5) as place:
            seen = place.generation
            channel.publish("p", "orders")
            channel.publish("p", "other")
            assert heard.get_message(timeout=2)["channel"] == RedisChannel.channel("p", "orders").encode()
            assert heard.get_message(timeout=0.5) is None
            assert place.sleep(seen, time.monotonic() + 5) is Woken.WAKE_UP
        ttl = watcher.pttl(RedisChannel.waiting("p", "orders"))
        assert 0 < ttl <= 35_000  # the entry outlives the claim's wait by the margin, then goes
    finally:
        channel.close()
        heard.close()
        watcher.close()


def test_a_redis_claim_entered_for_a_shorter_wait_keeps_a_longer_one_published_for(redis_store_uri):
    import redis

    channel = RedisChannel(redis_store_uri)
    watcher = redis.Redis.from_url(redis_store_uri)
    try:
        channel.enter("p", "orders", 60)
        channel.enter("p", "orders", 0)
        key = RedisChannel.waiting("p", "orders")
        assert watcher.pttl(key) > 60_000
        assert watcher.zcard(key) == 2
    finally:
        channel.close()
        watcher.close()


def scripts_run(client) -> int:
    """Return how many scripts the Redis server ran so far (EVALSHA calls; none runs inside a script)."""
    return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


@contextlib.contextmanager
def redis_service(uri: str):
    """A messaging service on Redis woken through a listening RedisChannel, and a watcher of its channels."""
    import redis

    from zaqar_lite.config import load_settings
    from zaqar_lite.service import Messaging
    from zaqar_lite.storage import open_storage

    storage = open_storage(uri)
    messaging = Messaging(storage, load_settings(None, storage_uri=uri))
    channel = RedisChannel(uri)
    messaging.wake_ups_through(channel)
    watcher = redis.Redis.from_url(uri, decode_responses=True)
    heard = watcher.pubsub(ignore_subscribe_messages=True)
    heard.psubscribe(RedisChannel.PATTERN)
    heard.get_message(timeout=1)  # the subscription's confirmation
    room = WaitingRoom()
    channel.listen(room)
    try:
        yield messaging, watcher, heard, room
    finally:
        channel.close()
        heard.close()
        watcher.close()
        storage.close()


def test_a_redis_post_claim_and_release_are_one_round_trip_each_and_wake_a_claim_waiting_on_its_queue(
        redis_store_uri):
    message = [{"body": {"n": 1}, "ttl": None, "delay": None, "dlq_eligible": True}]
    with redis_service(redis_store_uri) as (messaging, watcher, heard, room):

        def round_trips(write) -> int:
            before = scripts_run(watcher)
            write()
            return scripts_run(watcher) - before

        def woken(write) -> None:
            """``write`` publishes the queue's wake-up and wakes the claim waiting there."""
            with room.place("p", "orders", 5) as place:
                seen = place.generation
                write()
                published = heard.get_message(timeout=2)
                assert (published["channel"], decode(published["data"])) == (
                    RedisChannel.channel("p", "orders"), ("p", "orders"))
                assert place.sleep(seen, time.monotonic() + 5) is Woken.WAKE_UP

        for _ in range(2):  # creates the queue, then the worker reads and remembers its metadata
            messaging.post("p", "orders", "client", message, 100)
        # every script once, so that none is loaded (NOSCRIPT, then again) while counted
        first_claim, taken, _ = messaging.claim("p", "orders", 10, 60, 60)
        messaging.release_message("p", "orders", taken[0].id, first_claim, None)
        messaging.release_claim("p", "orders", first_claim)
        assert heard.get_message(timeout=0.5) is None  # nobody waits: nothing published

        # one script each, and no publish script after the post and the releases
        assert round_trips(lambda: messaging.post("p", "orders", "client", message, 100)) == 1
        claimed: list = []
        assert round_trips(lambda: claimed.append(messaging.claim("p", "orders", 10, 60, 60))) == 1
        claim_id, messages, _ = claimed[0]
        assert len(messages) == 3
        assert round_trips(lambda: messaging.release_message("p", "orders", messages[0].id, claim_id,
                                                             None)) == 1
        assert round_trips(lambda: messaging.release_claim("p", "orders", claim_id)) == 1
        assert heard.get_message(timeout=0.5) is None  # nobody waited: nothing published

        woken(lambda: messaging.post("p", "orders", "client", message, 100))
        claim_id, messages, _ = messaging.claim("p", "orders", 10, 60, 60)
        woken(lambda: messaging.release_message("p", "orders", messages[0].id, claim_id, None))
        woken(lambda: messaging.release_claim("p", "orders", claim_id))
