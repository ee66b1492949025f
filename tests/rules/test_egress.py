"""What a subscription may make this server send, with literal cases: targets, headers, mail text."""

from __future__ import annotations

import ipaddress

import pytest

from zaqar_lite.rules.egress import (
    TargetRule,
    header_refusal,
    host_address,
    mail_text_refusal,
    sender_allowed,
)

DEFAULT = TargetRule()


def address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


# -- target addresses ---------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
    "169.254.169.254", "100.64.0.1", "0.0.0.0", "255.255.255.255", "224.0.0.1", "192.0.2.10", "240.0.0.1",
    "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "2001:db8::1",
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "2002:a00:1::1",
])
def test_a_non_public_address_is_refused_by_default(text):
    assert not DEFAULT.allows(address(text))


@pytest.mark.parametrize("text", ["8.8.8.8", "93.184.216.34", "1.1.1.1", "2606:4700:4700::1111",
                                  "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])
def test_a_public_address_is_allowed_by_default(text):
    assert DEFAULT.allows(address(text))


def test_the_operators_allowed_networks_open_non_public_addresses_and_only_those():
    rule = TargetRule.from_settings(["127.0.0.0/8", "::1", " 10.20.0.0/16 "], [])
    assert rule.allows(address("127.0.0.1"))
    assert rule.allows(address("::1"))
    assert rule.allows(address("::ffff:127.0.0.1"))
    assert rule.allows(address("10.20.3.4"))
    assert not rule.allows(address("10.21.0.1"))
    assert not rule.allows(address("169.254.169.254"))
    assert not rule.allows(address("192.168.0.1"))


def test_the_operators_denied_networks_win_over_public_and_allowed():
    rule = TargetRule.from_settings(["10.0.0.0/8"], ["10.9.0.0/16", "8.8.8.0/24", "2606:4700::/32"])
    assert not rule.allows(address("10.9.1.1"))
    assert rule.allows(address("10.8.1.1"))
    assert not rule.allows(address("8.8.8.8"))
    assert not rule.allows(address("::ffff:8.8.8.8"))
    assert not rule.allows(address("2606:4700:4700::1111"))
    assert rule.allows(address("8.8.4.4"))


@pytest.mark.parametrize(("host", "expected"), [
    ("127.0.0.1", "127.0.0.1"), ("127.1", "127.0.0.1"), ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1"), ("127.0.0.1.", "127.0.0.1"),
    ("::1", "::1"), ("[::1]", "::1"),
    ("fe80::1%eth0", "fe80::1"), ("example.com", None), ("10.example.com", None), ("1e100.net", None),
])
def test_a_host_is_an_address_literal_in_every_form_a_resolver_reads(host, expected):
    found = host_address(host)
    assert (str(found) if found is not None else None) == expected


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "2130706433", "0x7f.1", "localhost", "LOCALHOST",
                                  "localhost.", "api.localhost", "::1", "169.254.169.254", "10.0.0.1",
                                  "::ffff:7f00:1"])
def test_a_host_that_is_plainly_internal_is_refused_without_any_lookup(host):
    assert not DEFAULT.allows_host(host)


@pytest.mark.parametrize("host", ["example.com", "hooks.example.org", "8.8.8.8", "localhost.example.com"])
def test_a_public_address_or_any_other_name_passes_until_delivery(host):
    assert DEFAULT.allows_host(host)


def test_localhost_passes_when_the_operator_allows_loopback():
    assert TargetRule.from_settings(["127.0.0.0/8"], []).allows_host("localhost")


# -- webhook headers -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Host", "host", "Content-Length", "Transfer-Encoding", "TE", "Trailer",
                                  "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
                                  "Upgrade", "Expect"])
def test_a_header_that_frames_or_routes_the_request_is_refused(name):
    refusal = header_refusal(name, "x")
    assert refusal is not None and refusal.startswith(f"{name} is set by the server for each request")


@pytest.mark.parametrize("name", ["Authorization", "X-Api-Key", "Content-Type", "X-Trace", "User-Agent"])
def test_authorization_and_other_end_to_end_headers_are_allowed(name):
    assert header_refusal(name, "Bearer abc.def") is None


@pytest.mark.parametrize(("value", "code"), [
    ("a\x00b", "U+0000"), ("a\x0bb", "U+000B"), ("a\x0cb", "U+000C"), ("a\x7fb", "U+007F"),
    ("a\x85b", "U+0085"), ("a\u2028b", "U+2028"), ("a\x1bb", "U+001B"), ("caf\u20ac", "U+20AC"),
])
def test_a_header_value_with_a_control_or_unsendable_character_is_refused(value, code):
    assert header_refusal("X-Trace", value) == (
        f"the value of X-Trace holds the character {code}; a header value is one line of visible Latin-1 "
        "characters, spaces and tabs")


@pytest.mark.parametrize("value", ["", "plain", "with\ttab and spaces", "caf\xe9", "!#$%&'*+-.^_`|~"])
def test_a_header_value_of_visible_latin_1_characters_is_allowed(value):
    assert header_refusal("X-Trace", value) is None


# -- mail text and senders -------------------------------------------------------------------


@pytest.mark.parametrize(("value", "code"), [
    ("a\u2028b", "U+2028"), ("a\u2029b", "U+2029"), ("a\x85b", "U+0085"), ("a\x0bb", "U+000B"),
    ("a\x0cb", "U+000C"), ("a\x00b", "U+0000"), ("a\x1cb", "U+001C"), ("a\x1eb", "U+001E"),
    ("a\x7fb", "U+007F"),
])
def test_a_mail_text_with_a_line_break_or_control_character_is_refused(value, code):
    refusal = mail_text_refusal(value)
    assert refusal is not None and refusal.startswith(f"it holds the character {code} (")


@pytest.mark.parametrize("value", ["", "Orders", "Commandes \xe9t\xe9 \u2603", "tab\there"])
def test_a_mail_text_of_one_clean_line_is_allowed(value):
    assert mail_text_refusal(value) is None


@pytest.mark.parametrize(("address", "allowed", "expected"), [
    ("ops@example.com", [], True),
    ("ops@example.com", [""], True),
    ("ops@example.com", ["example.com"], True),
    ("OPS@Example.COM", ["example.com"], True),
    ("ops@example.com", ["@example.com"], True),
    ("ops@mail.example.com", ["example.com"], False),
    ("ops@example.com.evil.org", ["example.com"], False),
    ("ops@example.com", ["ops@example.com"], True),
    ("dev@example.com", ["ops@example.com"], False),
    ("ops@evil.org", ["example.com", "ops@example.org"], False),
])
def test_a_sender_must_be_an_allowed_address_or_of_an_allowed_domain(address, allowed, expected):
    assert sender_allowed(address, allowed) is expected
