#!/usr/bin/env bash
# Run every suite. The real servers (redis-server, SecantusDB, Swift, zaqar-lite
# itself) are started by the suites' session fixtures on free 127.0.0.1 ports and
# stopped by PID when the session ends, whatever its outcome.
#
# 1. everything but the storage suites, with the API and end-to-end suites on
#    SQLite; then the storage suites (the conformance suite on every driver);
# 2. the API and end-to-end suites again on Redis, MongoDB, Swift and a Redis Cluster,
#    skipping what would only repeat the SQLite pass (tests marked store_independent and
#    tests that reach no store: tests/conftest.py, docs/architecture.rst "Tests");
# 3. Zaqar's own API suite (zaqar-tempest-plugin v2 tests, tests/tempest/run.py)
#    against a real server with token auth. It runs beside step 1: most of its
#    2.5 minutes is one test's own two time.sleep(70) calls, so it costs little CPU.
#    Beside it too, Zaqar 23's own black-box wsgi v2 unit tests over HTTP
#    (tests/zaqar_unit/run.py: 96 tests on one server, a few seconds).
# Usage: TEMPEST_VENV=.venv-tempest ZAQAR_UNIT_VENV=.venv-zaqar-unit tests/run_all.sh VENV_BIN [pytest args...]
set -uo pipefail
BIN=${1:-.venv/bin}
shift || true
status=0
tempest_log=$(mktemp)
"$BIN/python" -m tests.tempest.run --venv "${TEMPEST_VENV:-.venv-tempest}" >"$tempest_log" 2>&1 &
tempest_pid=$!
zaqar_unit_log=$(mktemp)
"$BIN/python" -m tests.zaqar_unit.run --venv "${ZAQAR_UNIT_VENV:-.venv-zaqar-unit}" >"$zaqar_unit_log" 2>&1 &
zaqar_unit_pid=$!
# (this step includes tests/test_openapi_fuzz.py: schemathesis over docs/openapi.yaml against a real server)
# Two pytest-xdist processes: a module's tests stay in one process, the Spark suite's on its
# local Spark session too, and the slowest groups (the Spark suite with its standalone
# cluster, the schemathesis run, spark-submit) start first, beside the rest
# (tests/conftest.py, process_group; docs/architecture.rst "Tests").
"$BIN/python" -m pytest -p no:cacheprovider -n 2 --dist loadscope --no-loadscope-reorder \
    --ignore=tests/storage "$@" || status=1
echo "== Zaqar's API suite (zaqar-tempest-plugin v2) on sqlite with token auth =="
wait "$tempest_pid" || status=1
cat "$tempest_log"
rm -f "$tempest_log"
echo "== Zaqar 23's own wsgi v2 unit tests (black-box classes) over HTTP on sqlite =="
wait "$zaqar_unit_pid" || status=1
cat "$zaqar_unit_log"
rm -f "$zaqar_unit_log"
# The storage suites (the conformance suite on every driver) wait on Swift's settle
# time most of their run: four processes, each with servers of its own.
echo "== storage suites on every driver (4 processes) =="
"$BIN/python" -m pytest -p no:cacheprovider -n 4 tests/storage "$@" || status=1
# The store passes run in pytest-xdist processes, each with a server of its own. On Redis
# two processes keep both cores busy; SecantusDB spends most of a request in its own
# (Python) server and Swift in its settle wait (a second per claim and per queue creation in
# the suites: tests/servers/swift.py, TEST_SETTLE), so there the processes' waits overlap
# (Swift: under 3 minutes instead of a quarter of an hour).
echo "== API and end-to-end suites on redis (2 processes) =="
ZAQAR_LITE_TEST_STORE=redis "$BIN/python" -m pytest -p no:cacheprovider -n 2 tests/api tests/e2e "$@" || status=1
echo "== API and end-to-end suites on mongodb (2 processes) =="
ZAQAR_LITE_TEST_STORE=mongodb "$BIN/python" -m pytest -p no:cacheprovider -n 2 tests/api tests/e2e "$@" || status=1
echo "== API and end-to-end suites on swift (4 processes) =="
ZAQAR_LITE_TEST_STORE=swift "$BIN/python" -m pytest -p no:cacheprovider -n 4 tests/api tests/e2e "$@" || status=1
# Not beside Swift's run: a starved proxy's memcache lookups time out, and tempauth then
# answers 401 to valid tokens.
echo "== API and end-to-end suites on a redis cluster (3 primaries, 3 replicas; 2 processes) =="
ZAQAR_LITE_TEST_STORE=redis_cluster "$BIN/python" -m pytest -p no:cacheprovider -n 2 tests/api tests/e2e "$@" || status=1
exit $status
