#!/usr/bin/env bash
# Run every suite. The real servers (redis-server, SecantusDB, Swift, zaqar-lite
# itself) are started by the suites' session fixtures on free 127.0.0.1 ports and
# stopped by PID when the session ends, whatever its outcome.
#
# 1. everything (the storage conformance suite runs on every driver; the API and
#    end-to-end suites on SQLite);
# 2. the API and end-to-end suites again on Redis, MongoDB and Swift.
# Usage: tests/run_all.sh VENV_BIN [pytest args...]
set -uo pipefail
BIN=${1:-.venv/bin}
shift || true
status=0
"$BIN/python" -m pytest -p no:cacheprovider "$@" || status=1
for kind in redis mongodb; do
    echo "== API and end-to-end suites on $kind =="
    ZAQAR_LITE_TEST_STORE=$kind "$BIN/python" -m pytest -p no:cacheprovider tests/api tests/e2e "$@" || status=1
done
# A single-node Swift takes half a second per claim and per queue creation (its
# settle wait: see zaqar_lite/storage/swift.py), so on Swift the request-level API
# suite runs in four pytest-xdist processes, each with a Swift of its own (the
# waits overlap; the suite takes about 100 s instead of a quarter of an hour),
# and the end-to-end suite, which starts servers of its own, runs alone after it.
echo "== API suite on swift (4 processes) =="
ZAQAR_LITE_TEST_STORE=swift "$BIN/python" -m pytest -p no:cacheprovider -n 4 tests/api "$@" || status=1
echo "== end-to-end suite on swift =="
ZAQAR_LITE_TEST_STORE=swift "$BIN/python" -m pytest -p no:cacheprovider tests/e2e "$@" || status=1
exit $status
