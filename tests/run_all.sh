#!/usr/bin/env bash
# Run every suite. The real servers (redis-server, SecantusDB, Swift, zaqar-lite
# itself) are started by the suites' session fixtures on free 127.0.0.1 ports and
# stopped by PID when the session ends, whatever its outcome.
#
# 1. everything (the storage conformance suite runs on every driver; the API and
#    end-to-end suites on SQLite);
# 2. the API and end-to-end suites again on Redis and MongoDB, and the end-to-end
#    and dead-letter suites on Swift.
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
# A single-node Swift takes half a second per claim (its settle wait), so the
# 470 request-level API tests would take a quarter of an hour: on Swift the
# end-to-end suites and the dead-letter/delay API tests run.
echo "== end-to-end and dead-letter API suites on swift =="
ZAQAR_LITE_TEST_STORE=swift "$BIN/python" -m pytest -p no:cacheprovider tests/e2e \
    tests/api/test_dead_letters_and_delays.py "$@" || status=1
exit $status
