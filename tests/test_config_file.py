"""etc/zaqar-lite.conf documents every setting with its real default."""

from __future__ import annotations

import configparser
import dataclasses
import re
from pathlib import Path

import pytest

from zaqar_lite.config import Limits, Settings, load_settings

CONF = Path(__file__).resolve().parent.parent / "etc" / "zaqar-lite.conf"

#: Settings field -> (section, key) it is read from in the ini file
SETTINGS_KEYS = {
    "storage_uri": ("storage", "uri"),
    "bind": ("server", "bind"),
    "workers": ("server", "workers"),
    "log_level": ("server", "log_level"),
    "sweep_interval": ("server", "sweep_interval"),
    "worker_class": ("server", "worker_class"),
    "threads": ("server", "threads"),
    "header_timeout": ("server", "header_timeout"),
    "body_timeout": ("server", "body_timeout"),
    "client_id_uuid_safe": ("transport", "client_id_uuid_safe"),
    "include_dead_letter": ("transport", "include_dead_letter"),
    "auth_strategy": ("auth", "strategy"),
}


@pytest.fixture(autouse=True)
def no_environment_overrides(monkeypatch):
    """Keep ZAQAR_LITE_* variables of the caller's shell out of these tests."""
    import os

    for name in list(os.environ):
        if name.startswith("ZAQAR_LITE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def parsed() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    assert parser.read(CONF), f"{CONF} cannot be read"
    return parser


def test_every_settings_field_is_known_to_this_test():
    known = set(SETTINGS_KEYS) | {"tokens", "limits", "notifier"}
    assert {f.name for f in dataclasses.fields(Settings)} == known


def test_every_limits_field_is_set_in_the_limits_section(parsed):
    missing = [f.name for f in dataclasses.fields(Limits) if not parsed.has_option("limits", f.name)]
    assert missing == []


def test_the_limits_section_names_no_unknown_key(parsed):
    known = {f.name for f in dataclasses.fields(Limits)}
    assert set(parsed.options("limits")) - known == set()


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Limits)])
def test_each_limit_in_the_file_equals_its_default(parsed, field):
    default = next(f.default for f in dataclasses.fields(Limits) if f.name == field)
    assert int(parsed.get("limits", field)) == default
    assert getattr(load_settings(CONF).limits, field) == default


@pytest.mark.parametrize("field", sorted(SETTINGS_KEYS))
def test_each_setting_the_file_names_equals_its_default(parsed, field):
    section, key = SETTINGS_KEYS[field]
    if parsed.has_option(section, key):
        assert getattr(load_settings(CONF), field) == getattr(Settings(), field)


@pytest.mark.parametrize("field", sorted(SETTINGS_KEYS))
def test_each_setting_is_documented_in_its_section(field):
    section, key = SETTINGS_KEYS[field]
    text = CONF.read_text()
    start = text.index(f"[{section}]")
    following = re.search(r"^\[", text[start + 1:], re.MULTILINE)
    body = text[start:start + 1 + following.start()] if following else text[start:]
    assert re.search(rf"^#? ?{key} = ", body, re.MULTILINE), f"[{section}] {key} is not in the file"


def test_the_token_file_setting_is_documented():
    assert re.search(r"^#? ?token_file = ", CONF.read_text(), re.MULTILINE)


def test_the_file_as_shipped_loads_to_the_defaults():
    assert load_settings(CONF) == Settings()
    assert load_settings(CONF).tokens == {}


@pytest.mark.parametrize(("key", "value", "message"), [
    ("worker_class", "sync", "[server] worker_class must be 'gevent' or 'gthread'"),
    ("threads", "0", "[server] threads must be positive, got 0"),
    ("header_timeout", "-1", "[server] header_timeout must be positive, got -1.0"),
    ("body_timeout", "soon", "[server] body_timeout must be a number, got 'soon'"),
])
def test_a_bad_server_setting_is_refused_with_its_name(tmp_path, key, value, message):
    conf = tmp_path / "bad.conf"
    conf.write_text(f"[server]\n{key} = {value}\n")

    with pytest.raises(ValueError) as raised:
        load_settings(conf)

    assert str(raised.value) == message


def test_the_server_settings_are_read_from_the_file(tmp_path):
    conf = tmp_path / "server.conf"
    conf.write_text("[server]\nworker_class = gthread\nthreads = 32\n"
                    "header_timeout = 2.5\nbody_timeout = 4\n")

    settings = load_settings(conf)

    assert (settings.worker_class, settings.threads, settings.header_timeout, settings.body_timeout) == (
        "gthread", 32, 2.5, 4.0)
