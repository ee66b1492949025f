#!/usr/bin/env bash
# Run every suite. The real servers (redis-server, SecantusDB, Swift, zaqar-lite
# itself) are started by the suites' session fixtures on free 127.0.0.1 ports and
# stopped by PID when the session ends, whatever its outcome.
#
# 1. everything (the storage conformance suite runs on every driver; the API and
#    end-to-end suites on SQLite);
# 2. the API and end-to-end suites again on each networked store.
# Usage: tests/run_all.sh VENV_BIN [pytest args...]
set -uo pipefail
BIN=${1:-.venv/bin}
shift || true
status=0
"$BIN/python" -m pytest -p no:cacheprovider "$@" || status=1
for kind in redis mongodb swift; do
    echo "== API and end-to-end suites on $kind =="
    ZAQAR_LITE_TEST_STORE=$kind "$BIN/python" -m pytest -p no:cacheprovider tests/api tests/e2e "$@" || status=1
done
exit $status
