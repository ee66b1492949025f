"""etc/zaqar-lite.conf documents every setting with its real default."""

from __future__ import annotations

import configparser
import dataclasses
import re
from pathlib import Path

import pytest

from zaqar_lite.config import Limits, Settings, SmtpSettings, load_settings
from zaqar_lite.models import QueueTemplate

CONF = Path(__file__).resolve().parent.parent / "etc" / "zaqar-lite.conf"

#: Settings field -> (section, key) it is read from in the ini file
SETTINGS_KEYS = {
    "storage_uri": ("storage", "uri"),
    "queue_cache_size": ("storage", "queue_cache_size"),
    "bind": ("server", "bind"),
    "workers": ("server", "workers"),
    "log_level": ("server", "log_level"),
    "sweep_interval": ("server", "sweep_interval"),
    "worker_class": ("server", "worker_class"),
    "threads": ("server", "threads"),
    "header_timeout": ("server", "header_timeout"),
    "body_timeout": ("server", "body_timeout"),
    "redrive_task_lease": ("server", "redrive_task_lease"),
    "client_id_uuid_safe": ("transport", "client_id_uuid_safe"),
    "min_length_client_id": ("transport", "min_length_client_id"),
    "max_length_client_id": ("transport", "max_length_client_id"),
    "message_delete_with_claim_id": ("transport", "message_delete_with_claim_id"),
    "include_dead_letter": ("transport", "include_dead_letter"),
    "auth_strategy": ("auth", "strategy"),
    "default_dead_letter_queue": ("queues", "default_dead_letter_queue"),
    "console_enabled": ("console", "enabled"),
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
    known = set(SETTINGS_KEYS) | {"tokens", "limits", "notifier", "smtp", "queue_templates",
                                  "keystone_authtoken"}
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


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(SmtpSettings)])
def test_each_smtp_setting_is_in_the_smtp_section_with_its_default(parsed, field):
    default = getattr(SmtpSettings(), field)
    text = default if isinstance(default, str) else str(default).lower()
    assert parsed.get("smtp", field) == text


def test_the_token_file_setting_is_documented():
    assert re.search(r"^#? ?token_file = ", CONF.read_text(), re.MULTILINE)


def test_the_file_as_shipped_loads_to_the_defaults():
    assert load_settings(CONF) == Settings()
    assert load_settings(CONF).tokens == {}


@pytest.mark.parametrize("key, value", [
    ("client_id_uuid_safe", "loose"), ("min_length_client_id", "0"), ("max_length_client_id", "x"),
    ("message_delete_with_claim_id", "maybe"), ("include_dead_letter", "1"),
])
def test_a_bad_transport_setting_is_refused_naming_it(tmp_path, key, value):
    conf = tmp_path / "bad.conf"
    conf.write_text(f"[transport]\n{key} = {value}\n")
    with pytest.raises(ValueError, match=key):
        load_settings(conf)


def test_client_id_lengths_must_be_in_order(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("[transport]\nmin_length_client_id = 20\nmax_length_client_id = 12\n")
    with pytest.raises(ValueError, match="min_length_client_id"):
        load_settings(conf)


def test_the_queue_cache_size_comes_from_the_file_or_the_environment(tmp_path, monkeypatch):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[storage]\nqueue_cache_size = 250\n")
    assert load_settings(conf).queue_cache_size == 250
    monkeypatch.setenv("ZAQAR_LITE_STORAGE_QUEUE_CACHE_SIZE", "0")
    assert load_settings(conf).queue_cache_size == 0


@pytest.mark.parametrize("value", ["-1", "ten", "1_0", "１０", "2.5", ""])
def test_a_queue_cache_size_that_is_not_a_whole_number_is_refused(tmp_path, value):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text(f"[storage]\nqueue_cache_size = {value}\n")
    with pytest.raises(ValueError, match=r"\[storage\] queue_cache_size must be a whole number"):
        load_settings(conf)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("worker_class", "sync", "[server] worker_class must be 'gevent' or 'gthread'"),
    ("threads", "0", "[server] threads must be positive, got 0"),
    ("header_timeout", "-1", "[server] header_timeout must be positive, got -1.0"),
    ("body_timeout", "soon", "[server] body_timeout must be a number, got 'soon'"),
    ("redrive_task_lease", "0", "[server] redrive_task_lease must be positive, got 0.0"),
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


def test_the_default_dead_letter_queue_comes_from_the_file_or_the_environment(tmp_path, monkeypatch):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[queues]\ndefault_dead_letter_queue = dead-letters\n")
    assert load_settings(conf).default_dead_letter_queue == "dead-letters"
    monkeypatch.setenv("ZAQAR_LITE_QUEUES_DEFAULT_DEAD_LETTER_QUEUE", "DEAD_MSG_QUEUE")
    assert load_settings(conf).default_dead_letter_queue == "DEAD_MSG_QUEUE"
    monkeypatch.setenv("ZAQAR_LITE_QUEUES_DEFAULT_DEAD_LETTER_QUEUE", "")
    assert load_settings(conf).default_dead_letter_queue == ""


@pytest.mark.parametrize("value", ["#DEAD_MSG_QUEUE", "dead letters", "..", "x" * 65])
def test_a_default_dead_letter_queue_that_is_no_queue_name_is_refused_at_start_up(tmp_path, value):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text(f"[queues]\ndefault_dead_letter_queue = {value}\n")
    start = r"^\[queues\] default_dead_letter_queue must be a valid queue name "
    rule = r"\(letters, digits, _ \. -, 1 to 64 characters, not \. or \.\.\), got "
    with pytest.raises(ValueError, match=start + rule):
        load_settings(conf)


def test_queue_template_sections_are_read(tmp_path):
    conf = tmp_path / "templates.conf"
    conf.write_text("[queue_template:orders]\npattern = orders-*\n"
                    'metadata = {"_dead_letter_queue": "orders-dlq", "_max_claim_count": 5}\n')
    assert load_settings(conf).queue_templates == (QueueTemplate(
        name="orders", pattern="orders-*",
        metadata={"_dead_letter_queue": "orders-dlq", "_max_claim_count": 5}, source="config"),)


@pytest.mark.parametrize(("body", "message"), [
    ("pattern = a*\n", r"\[queue_template:t\] needs exactly the keys pattern and metadata, got pattern"),
    ("pattern = a*\nmetadata = {}\ncolor = red\n",
     r"\[queue_template:t\] needs exactly the keys pattern and metadata, got color, metadata, pattern"),
    ("pattern = a*\nmetadata = [1]\n", r"\[queue_template:t\] metadata must be a JSON object"),
    ("pattern = a*\nmetadata = {oops\n", r"\[queue_template:t\] metadata must be a JSON object"),
])
def test_a_malformed_queue_template_section_is_refused_naming_it(tmp_path, body, message):
    conf = tmp_path / "bad.conf"
    conf.write_text(f"[queue_template:t]\n{body}")
    with pytest.raises(ValueError, match=message):
        load_settings(conf)


def test_the_shipped_file_shows_a_queue_template_example():
    assert re.search(r"^# \[queue_template:\w+\]\n# pattern = .+\n# metadata = \{", CONF.read_text(),
                     re.MULTILINE)
def test_the_console_is_enabled_from_the_file_or_the_environment(tmp_path, monkeypatch):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[console]\nenabled = true\n")
    assert load_settings(conf).console_enabled is True
    monkeypatch.setenv("ZAQAR_LITE_CONSOLE_ENABLED", "false")
    assert load_settings(conf).console_enabled is False


def test_a_console_switch_that_is_not_true_or_false_is_refused(tmp_path):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[console]\nenabled = yes\n")
    with pytest.raises(ValueError, match=r"^\[console\] enabled must be true or false, got 'yes'$"):
        load_settings(conf)


def test_the_keystone_strategy_hands_its_section_to_keystonemiddleware_as_written(tmp_path):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[auth]\nstrategy = keystone\n[keystone_authtoken]\n"
                    "auth_url = http://127.0.0.1:5000/v3\nauth_type = password\nuser_domain_id = Default\n")
    settings = load_settings(str(conf))
    assert settings.auth_strategy == "keystone"
    assert dict(settings.keystone_authtoken) == {
        "auth_url": "http://127.0.0.1:5000/v3", "auth_type": "password", "user_domain_id": "Default"}


def test_an_unknown_auth_strategy_is_refused_naming_the_three(tmp_path):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[auth]\nstrategy = ldap\n")
    with pytest.raises(ValueError, match="strategy must be 'noauth', 'token' or 'keystone'"):
        load_settings(str(conf))
