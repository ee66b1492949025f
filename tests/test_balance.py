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
