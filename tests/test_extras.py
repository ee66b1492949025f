"""The base install is the server on SQLite: a command that needs an extra names it when it is missing.

Each command runs in its own process where the extra's library cannot be
imported (``sys.modules[name] = None`` makes its import fail, as in an
install without the extra).
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent
WITHOUT = "import sys; sys.modules[{module!r}] = None; from zaqar_lite.cli import main; main()"


def run_without(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``zaqar-lite ARGS`` in a process where ``module`` cannot be imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZAQAR_LITE_")}
    return subprocess.run([sys.executable, "-c", WITHOUT.format(module=module), *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)


@pytest.mark.parametrize(("module", "uri", "shown", "extra"), [
    ("redis", "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0", "redis"),
    ("pymongo", "mongodb://127.0.0.1:27017/zaqar_lite", "mongodb://127.0.0.1:27017/zaqar_lite", "mongodb"),
    ("swiftclient", "swift://test%3Atester:testing@127.0.0.1:8080/auth/v1.0",
     "swift://test%3Atester:****@127.0.0.1:8080/auth/v1.0", "swift"),
])
def test_serve_on_a_store_whose_extra_is_missing_names_the_extra_and_masks_the_password(
        tmp_path, module, uri, shown, extra):
    bind = f"127.0.0.1:{free_port()}"
    result = run_without(module, "serve", "--bind", bind, "--storage", uri, cwd=tmp_path)

    assert result.returncode == 1
    scheme = uri.partition(":")[0]
    assert result.stderr.startswith(f"Error: cannot open storage {shown}: the {scheme} driver needs an extra "
                                    f"dependency: pip install 'zaqar-lite[{extra}]' (")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("args", "what"), [
    (["dlq-report", "--out", "report"], "the DLQ report needs PySpark"),
    (["export", "--dlq", "--out", "dead.jsonl", "--storage", "sqlite:///zaqar.db"], "export needs PySpark"),
])
def test_a_spark_command_without_pyspark_names_the_spark_extra(tmp_path, args, what):
    result = run_without("pyspark", *args, cwd=tmp_path)

    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: {what}: pip install 'zaqar-lite[spark]' (")
    assert "Traceback" not in result.stderr


def test_the_dlq_report_help_needs_no_spark(tmp_path):
    result = run_without("pyspark", "dlq-report", "--help", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: zaqar-lite dlq-report ")
    assert "--storage STORAGE" in result.stdout
    assert result.stderr == ""


def test_the_base_install_is_the_server_on_sqlite_and_the_rest_are_extras():
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    base = {line.split(">")[0].split("[")[0].strip() for line in setup["options"]["install_requires"].split()
            if line and line[0].isalpha()}
    extras = setup["options.extras_require"]

    assert not base & {"redis", "pymongo", "python-swiftclient", "pyspark", "pandas"}
    assert "pyspark[sql]>=4.0" in extras["spark"].split()
    assert "redis[hiredis]>=5" in extras["redis"].split()


def test_make_serve_installs_the_base_without_extras():
    makefile = (ROOT / "Makefile").read_text()
    plan = subprocess.run(["make", "-n", "-C", str(ROOT), "serve", "VENV=/nonexistent/venv"],
                          capture_output=True, text=True, timeout=30, check=True).stdout

    assert ("/nonexistent/venv/bin/pip install --quiet -c constraints/base.txt "
            "--build-constraint constraints/base.txt -e .\n") in plan
    assert "'.[" not in plan
    assert "serve: $(BASE_STAMP)" in makefile


def locked(path: Path) -> dict[str, set[str]]:
    """Return a lock's pins: name -> every version it lists (one per Python or platform at most)."""
    pins: dict[str, set[str]] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            name, _, version = line.partition(" ;")[0].partition("==")
            pins.setdefault(name, set()).add(version)
    return pins


def test_the_base_and_every_extra_have_a_lock_within_the_lock_of_them_all():
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    everything = locked(ROOT / "constraints" / "all.txt")
    locks = {path.stem: locked(path) for path in (ROOT / "constraints").glob("*.txt")}

    assert set(locks) == {"all", "base", *setup["options.extras_require"]}
    for name, pins in locks.items():
        assert all(everything[package] >= versions for package, versions in pins.items()), name
    # the installer and the build backend are locked too, and the dependency gunicorn's gevent worker needs
    assert {"pip", "setuptools", "gunicorn", "gevent", "packaging"} <= set(locks["base"])
    assert not set(locks["base"]) & {"redis", "pymongo", "python-swiftclient", "pyspark", "pytest"}


def test_a_mistake_in_the_file_stops_the_dlq_report_in_one_line(tmp_path):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[storage]\nuri = sqlite:///zaqar.db\nurl = sqlite:///other.db\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZAQAR_LITE_")}

    result = subprocess.run([sys.executable, "-m", "zaqar_lite", "dlq-report", "--config", str(conf)],
                            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr == (f"zaqar-lite dlq-report: error: {conf}: unknown key url in [storage] "
                             "(did you mean uri?); its keys are uri, queue_cache_size\n")


def test_serve_with_keystone_auth_without_its_extra_names_the_extra(tmp_path):
    conf = tmp_path / "keystone.conf"
    conf.write_text("[auth]\nstrategy = keystone\n")
    bind = f"127.0.0.1:{free_port()}"
    result = run_without("keystonemiddleware", "serve", "--bind", bind, "--config", str(conf),
                         "--storage", f"sqlite:///{tmp_path}/zaqar.db", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stderr == ("Error: [auth] strategy = keystone needs keystonemiddleware: "
                             "pip install 'zaqar-lite[keystone]'\n")


def test_serve_with_encryption_keys_without_cryptography_names_the_extra(tmp_path):
    conf = tmp_path / "keys.conf"
    conf.write_text("[encryption]\nkeys = k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")
    bind = f"127.0.0.1:{free_port()}"
    result = run_without("cryptography", "serve", "--bind", bind, "--config", str(conf),
                         "--storage", f"sqlite:///{tmp_path}/zaqar.db", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stderr == (f"Error: {conf}: [encryption] keys need the cryptography "
                             "library: pip install 'zaqar-lite[encryption]'\n")


def test_serve_with_sqs_credentials_under_token_auth_without_botocore_names_the_extra(tmp_path):
    conf = tmp_path / "sqs.conf"
    conf.write_text("[auth]\nstrategy = token\n[sqs]\ncredentials = AKID:secret:shop\n")
    bind = f"127.0.0.1:{free_port()}"
    result = run_without("botocore", "serve", "--bind", bind, "--config", str(conf),
                         "--storage", f"sqlite:///{tmp_path}/zaqar.db", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stderr == (f"Error: {conf}: [sqs] credentials under token or keystone auth need botocore "
                             "to check signatures: pip install 'zaqar-lite[sqs]'\n")
