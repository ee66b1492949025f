"""A real Prometheus server on loopback, scraping a zaqar-lite server, and queries of its HTTP API.

``prometheus`` comes from the Debian package (``tests/install_servers.sh``);
it is missing locally -> the test is skipped, under CI -> it fails.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import requests

from tests.conftest import free_port, missing_server

HOST = "127.0.0.1"
#: seconds between two scrapes (and two rule evaluations)
SCRAPE_INTERVAL = "1s"
STARTUP_TIMEOUT = 30.0
RULES = Path(__file__).resolve().parents[2] / "etc" / "prometheus" / "zaqar-lite-rules.yml"


@dataclasses.dataclass
class Prometheus:
    """A running ``prometheus`` process and the address of its HTTP API."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def get(self, path: str, **params: str) -> Any:
        """GET an API path and return its ``data`` (the answer must be a success)."""
        answer = requests.get(self.url + path, params=params, timeout=10,
                              proxies={"http": "", "https": ""})
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expression: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Run an instant query; return {sorted labels (without __name__): value} of its vector."""
        data = self.get("/api/v1/query", query=expression)
        return {tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(r["value"][1])
                for r in data["result"]}

    def log_tail(self, lines: int = 50) -> str:
        """Return the last lines of Prometheus's log."""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Stop Prometheus (SIGTERM, then SIGKILL) and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_prometheus(target: str, workdir: Path, metrics_path: str = "/metrics",
                     token: str | None = None) -> Prometheus:
    """Start Prometheus on a free loopback port, scraping ``target`` (host:port) every second.

    It also loads the example alert rules, so a test can see them evaluate on real series.
    With ``token``, each scrape sends it as ``Authorization: Bearer`` (a server under token auth).
    """
    binary = shutil.which("prometheus")
    if binary is None:
        missing_server("prometheus (Debian package prometheus)")
    config = workdir / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE_INTERVAL}\n  evaluation_interval: {SCRAPE_INTERVAL}\n"
        f"rule_files:\n  - {RULES}\n"
        f"scrape_configs:\n  - job_name: zaqar-lite\n    metrics_path: {metrics_path}\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
        + (f"    authorization:\n      credentials: '{token}'\n" if token else ""))
    port = free_port()
    log_path = workdir / "prometheus.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [str(binary), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address={HOST}:{port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir)
    server = Prometheus(url=f"http://{HOST}:{port}", process=process, log_path=log_path)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"prometheus exited with {process.returncode}:\n{server.log_tail()}")
        try:
            if requests.get(server.url + "/-/ready", timeout=2, proxies={"http": "", "https": ""}).ok:
                return server
        except requests.RequestException:
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"prometheus was not ready within {STARTUP_TIMEOUT:.0f} s:\n{server.log_tail()}")
