"""The counters under gevent: a thread of gevent's pool and the hub's greenlets count at once.

Under the gevent worker on SQLite the service runs in threads of gevent's pool
(``zaqar_lite.server.gunicorn.OffTheHub``), each with a hub of its own, while the
request greenlets count on the main hub. A gevent lock shared by such a thread
and the hub's greenlets loses wake-ups: a greenlet waiting on it was never
woken again, and its request never answered (the sweeper counted once per queue,
20,000 times a second). Each case runs in a fresh, monkey-patched interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: a pool thread with a hub of its own counts in a loop while greenlets count and sleep
SCRIPT = r"""
from gevent import monkey
monkey.patch_all()
import json, sys, time
import gevent
from zaqar_lite import metrics

stop = False
def pool_thread_counts():
    gevent.get_hub()  # what gevent's pool does when the service there calls the store through it
    while not stop:
        metrics.MESSAGES_DISCARDED.inc(0)

counted = []
def greenlet_counts():
    while not stop:
        metrics.MESSAGES_DISCARDED.inc()  # the same counter, so the same lock in either mode
        counted.append(1)
        gevent.sleep(0.001)

gevent.get_hub().threadpool.spawn(pool_thread_counts)
greenlets = [gevent.spawn(greenlet_counts) for _ in range(20)]
gevent.sleep(float(sys.argv[1]))
stop = True
gevent.joinall(greenlets, timeout=5)
print(json.dumps({"stuck": sum(not g.dead for g in greenlets), "counted": len(counted)}))
"""


@pytest.mark.parametrize("multiprocess", [True, False], ids=["multiprocess", "single-process"])
def test_greenlets_counting_beside_a_pool_thread_all_finish(tmp_path, multiprocess):
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = str(ROOT)
    if multiprocess:
        env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", SCRIPT, "2"], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["stuck"] == 0
    # 20 greenlets counting every millisecond or so for 2 s: far more than one count each
    assert result["counted"] > 20 * 10
