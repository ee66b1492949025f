#!/usr/bin/env bash
# Start the real servers the suites need, run every suite, stop the servers.
# Usage: tests/run_all.sh VENV_BIN
set -euo pipefail
BIN=${1:-.venv/bin}
exec "$BIN/python" -m pytest "${@:2}"
