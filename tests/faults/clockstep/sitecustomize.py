"""A wall clock a fault run can step: imported at startup by the Python of a server whose
``PYTHONPATH`` starts with this directory (``tests.faults.nemesis.SteppedClock``).

``time.time()`` returns the true time plus the seconds written in the file named by
``$ZLF_CLOCK_FILE`` (re-read when the file changes); the monotonic clock is left
true, as an NTP step leaves it. libfaketime would do the same for every clock call, but its
Debian build (0.9.10) fails Python's ``time.sleep`` with EINVAL when it leaves the monotonic clock
alone, and a monotonic clock that steps back is not a fault real machines have.
"""

import os
import time

_PATH = os.environ.get("ZLF_CLOCK_FILE")

if _PATH:
    _true_time = time.time
    _seen = [-1, 0.0]  # the file's mtime_ns, the offset it holds

    def _stepped_time() -> float:
        try:
            changed = os.stat(_PATH).st_mtime_ns
            if changed != _seen[0]:
                with open(_PATH) as file:
                    _seen[:] = [changed, float(file.read().strip() or 0)]
        except (OSError, ValueError):
            pass
        return _true_time() + _seen[1]

    time.time = _stepped_time
