"""Wake-up channels: local datagram sockets between two listeners, and which channel a store gets."""

from __future__ import annotations

import os
import time

import pytest

from zaqar_lite.service.waiting.channels import LocalChannel, RedisChannel, channel_for, plain_redis_url
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


def test_a_socket_left_by_an_ended_process_is_removed_by_the_next_publish(tmp_path):
    directory = tmp_path / "wake"
    directory.mkdir()
    import socket

    gone = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    gone.bind(str(directory / "12345.sock"))
    gone.close()  # its file stays, nobody reads it
    channel = LocalChannel(str(directory), sees_every_write=True)
    channel.publish("p", "q")
    channel.close()
    assert os.listdir(directory) == []


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
