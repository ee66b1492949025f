"""The accept delay of a gevent worker, from the connections every worker holds (literal cases)."""

from __future__ import annotations

import pytest

from zaqar_lite.server.balance import AcceptBalance


@pytest.mark.parametrize(("counts", "delay"), [
    ([0, 0], 0.0),
    ([1, 0], 0.02),        # one ahead of an idle worker: it gets the next connection
    ([4, 0], 0.08),
    ([9, 0], 0.1),         # never longer than the longest delay
    ([0, 3], 0.0),         # the least loaded accepts at once
    ([8, 7], 0.02),        # few connections: no slack
    ([520, 480], 0.0),     # within a tenth of the least loaded: a burst is accepted at full speed
    ([528, 480], 0.0),
    ([529, 480], 0.02),
    ([700, 480], 0.1),
])
def test_a_worker_accepts_later_only_beyond_a_tenth_more_than_the_least_loaded(counts, delay):
    balance = AcceptBalance(len(counts))
    balance.counts[:] = counts
    assert balance.delay(0) == pytest.approx(delay)


def test_a_delaying_worker_accepts_once_the_counts_no_longer_put_it_off():
    """Short connections close while a worker waits: it looks again and accepts, not at the delay's end."""
    import socket
    import time

    import gevent
    from gevent.server import StreamServer

    from zaqar_lite.server.balance import ACCEPT_DELAY_MAX, ACCEPT_RELOOK
    from zaqar_lite.server.gevent_worker import BalancedStreamServer

    balance = AcceptBalance(2)
    balance.counts[:] = [9, 0]  # far ahead of the other worker: put off by the longest delay
    accepted: list[float] = []
    listener = gevent.socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    server = BalancedStreamServer(listener, handle=lambda client, address: accepted.append(time.monotonic()),
                                  balance=balance, slot=0)
    server.max_accept = 1
    assert isinstance(server, StreamServer)
    server.start()
    try:
        client = socket.create_connection(listener.getsockname())
        started = time.monotonic()
        gevent.sleep(ACCEPT_RELOOK * 5)
        assert accepted == []  # put off while the counts say so
        balance.counts[:] = [9, 9]  # the other worker's connections opened: no longer ahead
        while not accepted and time.monotonic() - started < 1:
            gevent.sleep(0.001)
        assert accepted, "never accepted"
        assert accepted[0] - started < ACCEPT_DELAY_MAX * 0.8  # before the delay it was first given ended
        client.close()
    finally:
        server.close()
