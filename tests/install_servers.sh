#!/usr/bin/env bash
# Install the real servers the test suites start, from Debian packages, when missing.
# Idempotent: a server already on PATH is left alone. Uses sudo only when not root.
# Usage: tests/install_servers.sh
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
UPDATED=""

# need COMMAND PACKAGE...: install PACKAGE... unless COMMAND is already on PATH
need() {
    local command=$1
    shift
    if command -v "$command" >/dev/null 2>&1; then
        return 0
    fi
    if [ -z "$UPDATED" ]; then
        $SUDO apt-get update
        UPDATED=yes
    fi
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}

need redis-server redis-server
# OpenStack Swift (account/container/object/proxy servers) and the memcached tempauth needs.
need swift-proxy-server swift swift-proxy swift-account swift-container swift-object memcached
need memcached memcached
# Headless Chromium: the DLQ report test renders report.html and takes a screenshot, and the
# console's end-to-end test drives it with Playwright (tests/e2e/test_console_browser.py).
need chromium chromium
# Java for PySpark (the DLQ report and its tests).
need java openjdk-17-jre-headless
# Prometheus and promtool: the /metrics end-to-end test scrapes a real server; promtool checks
# and unit-tests the example alert rules of etc/prometheus (about 19 MB to download, 96 MB installed).
need prometheus prometheus
# The fault harness (tests/faults): network namespaces and TAP devices (iproute2), and SQLite on a
# small ext4 image it fills up (e2fsprogs).
need ip iproute2
need mkfs.ext4 e2fsprogs
