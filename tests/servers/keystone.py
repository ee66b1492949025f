"""Keystone for the suites: a real Keystone from PyPI on 127.0.0.1, started once per session.

Keystone (SQLite database, fernet tokens) lives in a virtualenv of its own
(``.venv-keystone``, ``make keystone-venv``; ``KEYSTONE_VENV`` names another)
and is served by that virtualenv's gunicorn. The harness bootstraps it
(``keystone-manage db_sync``, ``fernet_setup``, ``credential_setup``,
``bootstrap``), then makes two projects and their users through the identity
API: ``alpha`` with a member and an admin, ``beta`` with a member. Provides
``keystone_server`` (session). A missing virtualenv skips the tests that need
it, or fails them under CI (``make test`` builds it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, missing_server

VENV = Path(os.environ.get("KEYSTONE_VENV", Path(__file__).resolve().parents[2] / ".venv-keystone"))
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
#: the bootstrap administrator, also the service user keystonemiddleware validates tokens as
ADMIN_PASSWORD = "keystone-admin-password"
USER_PASSWORD = "keystone-user-password"
#: user name -> (project name, role) made after the bootstrap
USERS = {"alpha-member": ("alpha", "member"), "alpha-admin": ("alpha", "admin"),
         "beta-member": ("beta", "member")}

#: keystone parses the command line with oslo.config when it loads: gunicorn's own
#: arguments must not reach it
APP_MODULE = """import sys
sys.argv = sys.argv[:1]
from keystone.wsgi.api import application  # noqa: E402,F401
"""


def loopback_session() -> requests.Session:
    """Return a session that ignores proxies from the environment, so nothing leaves loopback."""
    session = requests.Session()
    session.trust_env = False
    return session


@dataclass
class KeystoneServer:
    """One Keystone whose database, keys and logs live in ``directory``."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    #: project name -> id, filled by :meth:`populate`
    projects: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The identity API's v3 root."""
        return f"http://127.0.0.1:{self.port}/v3"

    @property
    def conf(self) -> Path:
        return self.directory / "keystone.conf"

    def write_conf(self) -> None:
        """Write keystone.conf: SQLite database, fernet tokens and credential keys under ``directory``."""
        d = self.directory
        for keys in ("fernet-keys", "credential-keys"):
            (d / keys).mkdir(mode=0o700, exist_ok=True)
        self.conf.write_text(
            f"[DEFAULT]\nlog_file = {d / 'keystone.log'}\n"
            f"[database]\nconnection = sqlite:///{d / 'keystone.db'}\n"
            "[token]\nprovider = fernet\n"
            f"[fernet_tokens]\nkey_repository = {d / 'fernet-keys'}\n"
            f"[fernet_receipts]\nkey_repository = {d / 'fernet-keys'}\n"
            f"[credential]\nkey_repository = {d / 'credential-keys'}\n")
        (d / "keystone_app.py").write_text(APP_MODULE)

    def manage(self, *args: str) -> subprocess.Popen[bytes]:
        """Start one ``keystone-manage`` command on this Keystone's configuration."""
        with open(self.directory / "keystone-manage.log", "ab") as log:
            return subprocess.Popen([str(VENV / "bin" / "keystone-manage"), "--config-file", str(self.conf),
                                     *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=self.directory)

    def bootstrap(self) -> None:
        """Make the database and keys (in parallel: each command is mostly start-up), then the admin."""
        owner = ("--keystone-user", str(os.getuid()), "--keystone-group", str(os.getgid()))
        steps = [self.manage("db_sync"), self.manage("fernet_setup", *owner),
                 self.manage("credential_setup", *owner)]
        self.wait_all(steps)
        self.wait_all([self.manage("bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
                                   "--bootstrap-public-url", self.url, "--bootstrap-region-id", "RegionOne")])

    def wait_all(self, steps: list[subprocess.Popen[bytes]]) -> None:
        """Wait for ``keystone-manage`` commands; raise with the log if one failed."""
        for step in steps:
            if step.wait(START_TIMEOUT) != 0:
                log = (self.directory / "keystone-manage.log").read_text(errors="replace")
                raise RuntimeError(f"keystone-manage {step.args[3:]} failed:\n{log[-3000:]}")

    def start(self) -> None:
        """Serve Keystone with gunicorn and wait until it answers."""
        env = {**os.environ, "OS_KEYSTONE_CONFIG_FILES": str(self.conf)}
        with open(self.directory / "gunicorn.log", "ab") as log:
            self.process = subprocess.Popen(
                [str(VENV / "bin" / "gunicorn"), "--chdir", str(self.directory), "--bind",
                 f"127.0.0.1:{self.port}", "--workers", "1", "--no-control-socket",
                 "keystone_app:application"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"keystone exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if loopback_session().get(self.url, timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"keystone did not answer within {START_TIMEOUT:.0f} s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return (self.directory / "gunicorn.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        """Stop gunicorn (SIGTERM, then SIGKILL of its process group)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def token(self, user: str, password: str = USER_PASSWORD, project: str | None = None) -> str:
        """Return a project-scoped token of ``user`` (its own project unless ``project`` is named)."""
        project = project or ("admin" if user == "admin" else USERS[user][0])
        body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"id": "default"}, "password": password}}},
            "scope": {"project": {"name": project, "domain": {"id": "default"}}}}}
        response = loopback_session().post(f"{self.url}/auth/tokens", json=body, timeout=30)
        response.raise_for_status()
        return response.headers["X-Subject-Token"]

    def revoke(self, token: str) -> None:
        """Revoke a token (as the admin)."""
        response = loopback_session().delete(f"{self.url}/auth/tokens", timeout=30, headers={
            "X-Auth-Token": self.token("admin", ADMIN_PASSWORD), "X-Subject-Token": token})
        response.raise_for_status()

    def populate(self) -> None:
        """Make the projects of :data:`USERS`, their users and their role assignments."""
        session = loopback_session()
        session.headers["X-Auth-Token"] = self.token("admin", ADMIN_PASSWORD)
        listed = session.get(f"{self.url}/roles", timeout=30).json()["roles"]
        roles = {role["name"]: role["id"] for role in listed}
        for user, (project, role) in USERS.items():
            if project not in self.projects:
                created = session.post(f"{self.url}/projects", timeout=30, json={
                    "project": {"name": project, "domain_id": "default"}})
                created.raise_for_status()
                self.projects[project] = created.json()["project"]["id"]
            made = session.post(f"{self.url}/users", timeout=30, json={
                "user": {"name": user, "domain_id": "default", "password": USER_PASSWORD}})
            made.raise_for_status()
            user_id = made.json()["user"]["id"]
            session.put(f"{self.url}/projects/{self.projects[project]}/users/{user_id}/roles/{roles[role]}",
                        timeout=30).raise_for_status()

    def authtoken_section(self) -> str:
        """Return the ``[keystone_authtoken]`` section of a zaqar-lite using this Keystone."""
        return ("[keystone_authtoken]\n"
                f"www_authenticate_uri = {self.url}\nauth_url = {self.url}\nauth_type = password\n"
                f"username = admin\npassword = {ADMIN_PASSWORD}\nproject_name = admin\n"
                "user_domain_id = default\nproject_domain_id = default\ninterface = public\n")


@pytest.fixture(scope="session", name="keystone_server")
def keystone_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeystoneServer]:
    """A bootstrapped Keystone with the projects and users of :data:`USERS`, for the session."""
    if not (VENV / "bin" / "keystone-manage").exists():
        missing_server(f"Keystone (the virtualenv {VENV}; make keystone-venv)")
    server = KeystoneServer(tmp_path_factory.mktemp("keystone"))
    server.write_conf()
    server.bootstrap()
    try:
        server.start()
        server.populate()
        yield server
    finally:
        server.stop()
