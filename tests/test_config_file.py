"""etc/zaqar-lite.conf documents every setting with its real default."""

from __future__ import annotations

import configparser
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zaqar_lite.config import (
    KEYS,
    PLACES,
    ConfigError,
    Limits,
    MetricsSettings,
    Settings,
    SmtpSettings,
    load_settings,
)
from zaqar_lite.models import QueueTemplate

CONF = Path(__file__).resolve().parent.parent / "etc" / "zaqar-lite.conf"

#: Settings field -> (section, key) it is read from in the ini file (a sample, written out)
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
    "access_log": ("server", "access_log"),
    "client_id_uuid_safe": ("transport", "client_id_uuid_safe"),
    "min_length_client_id": ("transport", "min_length_client_id"),
    "max_length_client_id": ("transport", "max_length_client_id"),
    "message_delete_with_claim_id": ("transport", "message_delete_with_claim_id"),
    "include_dead_letter": ("transport", "include_dead_letter"),
    "auth_strategy": ("auth", "strategy"),
    "token_file": ("auth", "token_file"),
    "noauth_admin_routes": ("auth", "noauth_admin_routes"),
    "default_dead_letter_queue": ("queues", "default_dead_letter_queue"),
    "console_enabled": ("console", "enabled"),
    "claim_max_wait": ("claims", "max_wait"),
    "signed_url_secret_key": ("signed_urls", "secret_key"),
    "signed_url_max_lifetime": ("signed_urls", "max_lifetime"),
    "encryption_keys": ("encryption", "keys"),
}
#: a key line of the file, commented out or not
KEY_LINE = re.compile(r"^#? ?([a-z_]+) =", re.MULTILINE)


def section_text(section: str) -> str:
    """Return the text of one section of the shipped file, comments included."""
    text = CONF.read_text()
    start = re.search(rf"^\[{section}\]", text, re.MULTILINE).start()
    following = re.search(r"^\[", text[start + 1:], re.MULTILINE)
    return text[start:start + 1 + following.start()] if following else text[start:]


@pytest.fixture(autouse=True)
def no_environment_overrides(monkeypatch):
    """Keep ZAQAR_LITE_* variables of the caller's shell out of these tests."""
    for name in list(os.environ):
        if name.startswith("ZAQAR_LITE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def parsed() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    assert parser.read(CONF), f"{CONF} cannot be read"
    return parser


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
    with pytest.raises(ValueError) as raised:
        load_settings(conf)
    assert str(raised.value) == (f"{conf}: [storage] queue_cache_size must be a whole number of at least 0, "
                                 f"got {value!r}")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("worker_class", "sync", "[server] worker_class must be one of gevent, gthread, got 'sync'"),
    ("threads", "0", "[server] threads must be a whole number of at least 1, got '0'"),
    ("header_timeout", "-1", "[server] header_timeout must be a number above 0, got '-1'"),
    ("body_timeout", "soon", "[server] body_timeout must be a number above 0, got 'soon'"),
    ("body_timeout", "inf", "[server] body_timeout must be a number above 0, got 'inf'"),
    ("bind", "8888", "[server] bind must be HOST:PORT (a port from 0 to 65535) or unix:PATH, got '8888'"),
    ("bind", "127.0.0.1:99999",
     "[server] bind must be HOST:PORT (a port from 0 to 65535) or unix:PATH, got '127.0.0.1:99999'"),
    ("log_level", "LOUD",
     "[server] log_level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'LOUD'"),
    ("access_log", "yes", "[server] access_log must be true or false, got 'yes'"),
])
def test_a_bad_server_setting_is_refused_with_its_name(tmp_path, key, value, message):
    conf = tmp_path / "bad.conf"
    conf.write_text(f"[server]\n{key} = {value}\n")

    with pytest.raises(ValueError) as raised:
        load_settings(conf)

    assert str(raised.value) == f"{conf}: {message}"


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
    start = "^" + re.escape(f"{conf}: ") + r"\[queues\] default_dead_letter_queue must be a valid queue name "
    rule = r"\(letters, digits, _ \. -, 1 to 64 characters, not \. or \.\.\), got "
    with pytest.raises(ValueError, match=start + rule):
        load_settings(conf)


# -- refusing mistakes -----------------------------------------------------------------


def test_every_key_in_the_shipped_file_is_a_known_setting(parsed):
    known = {place.section: set(keys) for place in PLACES for keys in [KEYS[place.section]]}
    for section in parsed.sections():
        if section in ("tokens", "keystone_authtoken"):
            continue
        written = set(KEY_LINE.findall(section_text(section)))
        assert written - known[section] == set(), f"[{section}] names unknown keys"


@pytest.mark.parametrize("place", PLACES, ids=lambda place: f"{place.section}.{place.key}")
def test_every_setting_appears_in_its_section_of_the_shipped_file(place):
    assert place.key in KEY_LINE.findall(section_text(place.section))


def test_every_settings_field_has_a_place_in_the_file():
    fields = {f.name for f in dataclasses.fields(Settings)}
    free = {"tokens", "queue_templates", "keystone_authtoken"}
    placed = {place.group or place.field for place in PLACES} | free
    assert fields == placed
    assert "[tokens]" in CONF.read_text()


@pytest.mark.parametrize("field", sorted(SETTINGS_KEYS))
def test_each_flat_setting_is_read_from_its_section_and_key(field):
    place = next(p for p in PLACES if p.group is None and p.field == field)
    assert (place.section, place.key) == SETTINGS_KEYS[field]


@pytest.mark.parametrize(("text", "message"), [
    ("[sever]\nbind = 127.0.0.1:8000\n",
     "unknown section [sever] (did you mean server?); the sections are auth, claims, console, encryption, "
     "keystone_authtoken, limits, metrics, notifier, pools, queue_template:NAME, queues, server, "
     "signed_urls, smtp, sqs, storage, tokens, transport"),
    ("[DEFAULT]\nworkers = 2\n",
     "unknown section [DEFAULT]; the sections are auth, claims, console, encryption, "
     "keystone_authtoken, limits, metrics, notifier, pools, queue_template:NAME, queues, server, "
     "signed_urls, smtp, sqs, storage, tokens, transport"),
    ("[storage]\nurl = sqlite:///x.db\n",
     "unknown key url in [storage] (did you mean uri?); its keys are uri, queue_cache_size"),
    ("[limits]\nmax_message_ttl = 600\nmax_messages_per_post = 5\n",
     "unknown key max_messages_per_post in [limits] (did you mean max_messages_per_page?); its keys are "
     "max_queues_per_page, max_queues_per_project, max_messages_per_page, max_messages_per_claim_or_pop, "
     "max_subscriptions_per_page, "
     "default_page_size, max_queue_name_length, max_project_id_length, min_message_ttl, max_message_ttl, "
     "default_message_ttl, min_claim_ttl, max_claim_ttl, default_claim_ttl, min_claim_grace, "
     "max_claim_grace, default_claim_grace, max_message_delay, max_messages_post_size, max_queue_metadata, "
     "min_subscription_ttl, default_subscription_ttl, max_subscriptions_per_queue, failure_history_length, "
     "max_redrive_messages, max_redrive_ids, max_redrive_seconds, max_redrive_rate, redrive_tasks_kept, "
     "max_redrive_tasks_per_page"),
    ("[server]\nWorkers = 4\n",
     "unknown key Workers in [server] (did you mean workers?); its keys are bind, workers, log_level, "
     "sweep_interval, worker_class, threads, header_timeout, body_timeout, worker_connections, access_log, "
     "redrive_task_lease"),
    ("[limits]\nmax_message_ttl = two weeks\n",
     "[limits] max_message_ttl must be a whole number of at least 1, got 'two weeks'"),
    ("[limits]\nmax_message_delay = -5\n",
     "[limits] max_message_delay must be a whole number from 0 to 604800, got '-5'"),
    ("[limits]\nmax_message_delay = 604801\n",
     "[limits] max_message_delay must be a whole number from 0 to 604800, got '604801'"),
    ("[limits]\nmin_claim_ttl = 600\nmax_claim_ttl = 300\n",
     "[limits] min_claim_ttl may not exceed max_claim_ttl"),
    ("[notifier]\npoll_interval = 0\n", "[notifier] poll_interval must be a number above 0, got '0'"),
    ("[notifier]\nsubscriber_schemes = https, ftp\n",
     "[notifier] subscriber_schemes must be some of http, https, mailto, trust+http, trust+https, "
     "separated by commas, got 'https, ftp'"),
    ("[smtp]\nport = 70000\n", "[smtp] port must be a whole number from 1 to 65535, got '70000'"),
    ("[pools]\nallowed_hosts = redis.internal:6379, mongo.internal\n",
     "[pools] allowed_hosts must be HOST:PORT entries separated by commas, got "
     "'redis.internal:6379, mongo.internal'"),
    ("[pools]\nsqlite_dir = pools\n",
     "[pools] sqlite_dir must be an absolute directory path, or nothing (no SQLite pool), got 'pools'"),
    ("[auth]\nnoauth_admin_routes = maybe\n",
     "[auth] noauth_admin_routes must be true or false, got 'maybe'"),
    ("[storage]\nuri =\n",
     "[storage] uri must be a storage URI (sqlite://, redis://, rediss://, mongodb://, swift://), got ''"),
    ("[server]\nworkers = 2\nworkers = 3\n",
     "not an ini file zaqar-lite can read: While reading from '{conf}' [line 3]: option 'workers' in section "
     "'server' already exists"),
    ("workers = 2\n",
     "not an ini file zaqar-lite can read: File contains no section headers. file: '{conf}', line: 1 "
     "'workers = 2\\n'"),
])
def test_a_mistake_in_the_file_is_refused_in_one_line_naming_file_section_and_key(tmp_path, text, message):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text(text)

    with pytest.raises(ConfigError) as raised:
        load_settings(conf)

    assert str(raised.value) == f"{conf}: " + message.replace("{conf}", str(conf))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("ZAQAR_LITE_SERVER_WORKERS", "many",
     "environment variable ZAQAR_LITE_SERVER_WORKERS: [server] workers must be a whole number of at least 1, "
     "got 'many'"),
    ("ZAQAR_LITE_LIMITS_MAX_MESSAGE_DELAY", "1.5",
     "environment variable ZAQAR_LITE_LIMITS_MAX_MESSAGE_DELAY: [limits] max_message_delay must be a whole "
     "number from 0 to 604800, got '1.5'"),
    ("ZAQAR_LITE_TRANSPORT_INCLUDE_DEAD_LETTER", "1",
     "environment variable ZAQAR_LITE_TRANSPORT_INCLUDE_DEAD_LETTER: [transport] include_dead_letter must be "
     "true or false, got '1'"),
    ("ZAQAR_LITE_SERVER_WORKER", "4",
     "environment variable ZAQAR_LITE_SERVER_WORKER names no setting "
     "(did you mean ZAQAR_LITE_SERVER_WORKERS?); the variables of [server] are ZAQAR_LITE_SERVER_BIND, "
     "ZAQAR_LITE_SERVER_WORKERS, "
     "ZAQAR_LITE_SERVER_LOG_LEVEL, ZAQAR_LITE_SERVER_SWEEP_INTERVAL, ZAQAR_LITE_SERVER_WORKER_CLASS, "
     "ZAQAR_LITE_SERVER_THREADS, ZAQAR_LITE_SERVER_HEADER_TIMEOUT, ZAQAR_LITE_SERVER_BODY_TIMEOUT, "
     "ZAQAR_LITE_SERVER_WORKER_CONNECTIONS, ZAQAR_LITE_SERVER_ACCESS_LOG, "
     "ZAQAR_LITE_SERVER_REDRIVE_TASK_LEASE"),
    ("ZAQAR_LITE_TOKENS_ABC", "ops:admin",
     "environment variable ZAQAR_LITE_TOKENS_ABC names no setting; [tokens] is read from the configuration "
     "file only"),
])
def test_a_mistake_in_the_environment_is_refused_naming_the_variable(tmp_path, monkeypatch, variable, value,
                                                                     message):
    monkeypatch.setenv(variable, value)

    with pytest.raises(ConfigError) as raised:
        load_settings(CONF)

    assert str(raised.value) == message


def test_variables_of_no_section_are_left_to_whoever_reads_them(monkeypatch):
    monkeypatch.setenv("ZAQAR_LITE_TEST_STORE", "redis")
    monkeypatch.setenv("ZAQAR_LITE_SPARK_DRIVER_MEMORY", "1g")
    assert load_settings(CONF) == Settings()


def test_the_environment_wins_over_the_file_and_is_parsed_like_it(tmp_path, monkeypatch):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[server]\nlog_level = debug\naccess_log = false\n"
                    "[notifier]\nsubscriber_schemes = HTTPS\n")
    monkeypatch.setenv("ZAQAR_LITE_SERVER_ACCESS_LOG", "TRUE")

    settings = load_settings(conf)

    assert (settings.log_level, settings.access_log, settings.notifier.subscriber_schemes) == (
        "DEBUG", True, ("https",))


def test_a_command_line_value_follows_the_same_rule():
    with pytest.raises(ConfigError) as raised:
        load_settings(CONF, bind="localhost")
    assert str(raised.value) == ("command line: [server] bind must be HOST:PORT (a port from 0 to 65535) "
                                 "or unix:PATH, got 'localhost'")


@pytest.mark.parametrize("command", [["serve"], ["sweep"], ["notifier"], ["export", "--dlq", "--out", "-"]])
def test_every_command_that_reads_the_file_stops_on_a_mistake_with_one_line(tmp_path, command):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[server]\nworkers = 2\nthreds = 4\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZAQAR_LITE_")}

    result = subprocess.run([sys.executable, "-m", "zaqar_lite", *command, "--config", str(conf)],
                            capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)

    assert result.returncode == 1
    assert result.stderr == (f"Error: {conf}: unknown key threds in [server] (did you mean threads?); "
                             "its keys are bind, workers, log_level, sweep_interval, worker_class, threads, "
                             "header_timeout, body_timeout, worker_connections, access_log, "
                             "redrive_task_lease\n")
    assert result.stdout == ""


def test_a_setting_that_may_be_none_reads_an_empty_value_as_none():
    from zaqar_lite.config import Rule, table

    rule = Rule(minimum=1)
    place = table._place("metrics", "max_queues", "max_queues", "metrics", int | None, rule)

    assert table._value(place, "", "f.conf: ") is None
    assert table._value(place, " 25 ", "f.conf: ") == 25
    with pytest.raises(ConfigError) as raised:
        table._value(place, "0", "f.conf: ")
    assert str(raised.value) == ("f.conf: [metrics] max_queues must be a whole number of at least 1, "
                                 "or empty for none, got '0'")


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(MetricsSettings)])
def test_each_metrics_setting_is_in_the_metrics_section_with_its_default(parsed, field):
    default = getattr(MetricsSettings(), field)
    written = str(default).lower() if isinstance(default, bool) else str(default)
    assert parsed.get("metrics", field) == written


def test_the_metrics_settings_come_from_the_file_or_the_environment(tmp_path, monkeypatch):
    conf = tmp_path / "z.conf"
    conf.write_text("[metrics]\nenabled = false\nrequire_token = true\nmax_labelled_queues = 20\n")
    assert load_settings(conf).metrics == MetricsSettings(enabled=False, require_token=True,
                                                          max_labelled_queues=20)
    monkeypatch.setenv("ZAQAR_LITE_METRICS_MAX_LABELLED_QUEUES", "0")
    assert load_settings(conf).metrics.max_labelled_queues == 0


@pytest.mark.parametrize("key, value, message", [
    ("enabled", "yes", "[metrics] enabled must be true or false, got 'yes'"),
    ("require_token", "1", "[metrics] require_token must be true or false, got '1'"),
    ("max_labelled_queues", "-1",
     "[metrics] max_labelled_queues must be a whole number of at least 0, got '-1'"),
    ("max_labelled_queues", "many",
     "[metrics] max_labelled_queues must be a whole number of at least 0, got 'many'"),
])
def test_a_bad_metrics_setting_is_refused_naming_it(tmp_path, key, value, message):
    conf = tmp_path / "z.conf"
    conf.write_text(f"[metrics]\n{key} = {value}\n")
    with pytest.raises(ValueError) as refused:
        load_settings(conf)
    assert str(refused.value) == f"{conf}: {message}"


def test_the_egress_settings_come_from_the_file_or_the_environment(tmp_path, monkeypatch):
    conf = tmp_path / "z.conf"
    conf.write_text("[notifier]\nallowed_targets = 10.20.0.0/16, ::1\ndenied_targets = 10.20.9.0/24\n"
                    "[smtp]\nfixed_from = true\nallowed_from = example.com, ops@example.org\n"
                    "[signed_urls]\nmax_lifetime = 3600\n[limits]\nmax_subscriptions_per_queue = 5\n")
    settings = load_settings(conf)
    assert settings.notifier.allowed_targets == ("10.20.0.0/16", "::1")
    assert settings.notifier.denied_targets == ("10.20.9.0/24",)
    assert (settings.smtp.fixed_from, settings.smtp.allowed_from) == (True, "example.com, ops@example.org")
    assert settings.signed_url_max_lifetime == 3600
    assert settings.limits.max_subscriptions_per_queue == 5
    monkeypatch.setenv("ZAQAR_LITE_NOTIFIER_ALLOWED_TARGETS", "127.0.0.0/8")
    assert load_settings(conf).notifier.allowed_targets == ("127.0.0.0/8",)


@pytest.mark.parametrize("section, key, value, message", [
    ("notifier", "allowed_targets", "10.0.0.0/33",
     "[notifier] allowed_targets must be networks such as 10.1.0.0/16, 127.0.0.1 or fd00::/8, "
     "got '10.0.0.0/33'"),
    ("notifier", "denied_targets", "intranet",
     "[notifier] denied_targets must be networks such as 203.0.113.0/24 or 2001:db8::/32, got 'intranet'"),
    ("smtp", "allowed_from", "Ops <ops@example.com>",
     "[smtp] allowed_from must be mail addresses and domains separated by commas (ops@example.com, "
     "example.org), got 'Ops <ops@example.com>'"),
    ("signed_urls", "max_lifetime", "0",
     "[signed_urls] max_lifetime must be a whole number of at least 1, got '0'"),
    ("limits", "max_subscriptions_per_queue", "0",
     "[limits] max_subscriptions_per_queue must be a whole number of at least 1, got '0'"),
])
def test_a_bad_egress_setting_is_refused_naming_it(tmp_path, section, key, value, message):
    conf = tmp_path / "z.conf"
    conf.write_text(f"[{section}]\n{key} = {value}\n")
    with pytest.raises(ValueError) as refused:
        load_settings(conf)
    assert str(refused.value) == f"{conf}: {message}"


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
    assert re.search(r"^# +\[queue_template:\w+\]\n# +pattern = .+\n# +metadata = \{", CONF.read_text(),
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
    with pytest.raises(ValueError, match=r"\[console\] enabled must be true or false, got 'yes'$"):
        load_settings(conf)
def test_the_longest_claim_wait_is_read_from_the_claims_section(tmp_path):
    path = tmp_path / "z.conf"
    path.write_text("[claims]\nmax_wait = 5\n")
    assert load_settings(path).claim_max_wait == 5


@pytest.mark.parametrize("value", ["0", "-3", "2.5", "soon"])
def test_a_claim_max_wait_that_is_not_a_positive_whole_number_is_refused(tmp_path, value):
    path = tmp_path / "z.conf"
    path.write_text(f"[claims]\nmax_wait = {value}\n")
    rule = r"\[claims\] max_wait must be a whole number of at least 1"
    with pytest.raises(ValueError, match=rule):
        load_settings(path)


def test_the_signed_url_key_comes_from_the_file_or_the_environment(tmp_path, monkeypatch):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[signed_urls]\nsecret_key = from-the-file\n")
    assert load_settings(conf).signed_url_secret_key == "from-the-file"
    monkeypatch.setenv("ZAQAR_LITE_SIGNED_URLS_SECRET_KEY", "from-the-environment")
    assert load_settings(conf).signed_url_secret_key == "from-the-environment"


def test_the_signed_url_key_is_never_shown_in_the_settings_repr(tmp_path):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text("[signed_urls]\nsecret_key = do-not-print-me\n")
    assert "do-not-print-me" not in repr(load_settings(conf))


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
    rule = r"\[auth\] strategy must be one of noauth, token, keystone, got 'ldap'"
    with pytest.raises(ValueError, match=rule):
        load_settings(str(conf))
