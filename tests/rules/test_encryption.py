"""The codec of bodies encrypted at rest, with literal cases.

The expected envelope below was computed apart from zaqar_lite, with
``cryptography``'s ``AESGCM(key).encrypt(nonce, plaintext, aad)`` over the
texts written here: key ``k2`` (bytes 32..63), nonce bytes 100..111, plaintext
``{"event":"paid","amount":12}`` and associated data
``zaqar-lite message body v1\\nproject-a\\nm-1``.
"""

from __future__ import annotations

import pytest

from zaqar_lite.config import ConfigError, load_settings
from zaqar_lite.errors import InvalidBody
from zaqar_lite.rules import encryption
from zaqar_lite.rules.encryption import Keyring, Unopenable

K1 = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="  # bytes 0..31
K2 = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="  # bytes 32..63
BODY = {"event": "paid", "amount": 12}
SEALED_BY_K2 = {"zaqar_lite:encrypted": {
    "v": 1, "alg": "A256GCM", "kid": "k2", "nonce": "ZGVmZ2hpamtsbW5v",
    "data": "zk/rpbrfgO/mdq+543O8QevjiBFLpBpv+XFcArQI0BP9O+/p07SPxzTlpzY="}}


def fixed_nonce(size: int) -> bytes:
    return bytes(range(100, 100 + size))


def with_data(data: str, kid: str = "k2") -> dict[str, object]:
    return {"zaqar_lite:encrypted": {**SEALED_BY_K2["zaqar_lite:encrypted"], "data": data, "kid": kid}}


def test_the_first_key_seals_into_the_documented_envelope():
    keyring = Keyring.from_setting((K2, K1))
    assert encryption.seal(BODY, keyring, "project-a", "m-1", fixed_nonce) == SEALED_BY_K2


def test_every_key_opens_what_it_sealed_so_rotation_needs_no_downtime():
    after_rotation = Keyring.from_setting((K1, K2))  # k1 now seals; k2 still opens
    assert encryption.open_body(SEALED_BY_K2, after_rotation, "project-a", "m-1") == BODY
    resealed = encryption.seal(BODY, after_rotation, "project-a", "m-1", fixed_nonce)
    assert resealed["zaqar_lite:encrypted"]["kid"] == "k1"
    assert encryption.open_body(resealed, after_rotation, "project-a", "m-1") == BODY


@pytest.mark.parametrize("body", ["text", 0, None, [1, "two"], {"nested": {"deep": [True]}}, "ünïcødé ✓"])
def test_any_json_body_comes_back_as_it_was_posted(body):
    keyring = Keyring.from_setting((K1,))
    sealed = encryption.seal(body, keyring, "p", "m")
    assert encryption.open_body(sealed, keyring, "p", "m") == body


def test_a_fresh_nonce_makes_two_seals_of_one_body_differ():
    keyring = Keyring.from_setting((K1,))
    assert encryption.seal(BODY, keyring, "p", "m") != encryption.seal(BODY, keyring, "p", "m")


def test_a_body_that_is_no_envelope_is_opened_as_it_is():
    assert encryption.open_body({"event": "paid"}, Keyring(), "p", "m") == {"event": "paid"}
    assert encryption.open_body("zaqar_lite:encrypted", Keyring(), "p", "m") == "zaqar_lite:encrypted"


def test_a_missing_key_is_named():
    with pytest.raises(Unopenable) as raised:
        encryption.open_body(SEALED_BY_K2, Keyring.from_setting((K1,)), "project-a", "m-1")
    assert str(raised.value) == "it was encrypted with key k2, which [encryption] keys does not hold"


def test_an_altered_ciphertext_does_not_open():
    altered = "zk/spbrfgO/mdq+543O8QevjiBFLpBpv+XFcArQI0BP9O+/p07SPxzTlpzY="  # one ciphertext bit changed
    with pytest.raises(Unopenable) as raised:
        encryption.open_body(with_data(altered), Keyring.from_setting((K2,)), "project-a", "m-1")
    assert str(raised.value) == (
        "its ciphertext does not authenticate under key k2 (altered in the store, moved to another message, "
        "or another key under that id)")


@pytest.mark.parametrize(("project", "message_id"), [("project-b", "m-1"), ("project-a", "m-2")])
def test_a_ciphertext_copied_onto_another_message_does_not_open(project, message_id):
    with pytest.raises(Unopenable, match="does not authenticate under key k2"):
        encryption.open_body(SEALED_BY_K2, Keyring.from_setting((K2,)), project, message_id)


def test_another_key_under_the_same_id_does_not_open():
    impostor = "k2:" + K1.partition(":")[2]
    with pytest.raises(Unopenable, match="does not authenticate under key k2"):
        encryption.open_body(SEALED_BY_K2, Keyring.from_setting((impostor,)), "project-a", "m-1")


NOT_OURS = "its envelope is not one this server writes (version 1, A256GCM, a key id)"


@pytest.mark.parametrize(("envelope", "why"), [
    ({"zaqar_lite:encrypted": "text"}, NOT_OURS),
    ({"zaqar_lite:encrypted": {**SEALED_BY_K2["zaqar_lite:encrypted"], "v": 2}}, NOT_OURS),
    (with_data("not base64!"), "its envelope (key k2) does not hold base64 nonce and data"),
    (with_data("AAAA"), "its envelope (key k2) holds a nonce or data of the wrong length"),
])
def test_a_malformed_envelope_says_what_is_wrong(envelope, why):
    with pytest.raises(Unopenable) as raised:
        encryption.open_body(envelope, Keyring.from_setting((K2,)), "project-a", "m-1")
    assert str(raised.value) == why


def test_a_client_body_of_the_envelope_shape_is_refused_and_others_pass():
    with pytest.raises(InvalidBody) as raised:
        encryption.check_not_envelope({"zaqar_lite:encrypted": {}}, "messages[0].body")
    assert str(raised.value) == (
        "messages[0].body may not be an object whose only key is 'zaqar_lite:encrypted': that shape marks a "
        "body encrypted at rest.")
    encryption.check_not_envelope({"zaqar_lite:encrypted": {}, "other": 1}, "body")
    encryption.check_not_envelope("zaqar_lite:encrypted", "body")


def test_an_empty_keyring_cannot_seal():
    assert Keyring().can_seal is False
    with pytest.raises(ValueError, match="no key to encrypt with"):
        encryption.seal(BODY, Keyring(), "p", "m")


# -- the setting ----------------------------------------------------------------------

def test_keys_are_read_in_order_from_the_file(tmp_path):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text(f"[encryption]\nkeys = {K2}, {K1}\n")
    settings = load_settings(conf)
    assert settings.encryption_keys == (K2, K1)
    assert [kid for kid, _ in Keyring.from_setting(settings.encryption_keys).keys] == ["k2", "k1"]
    assert "ICEiIyQl" not in repr(settings)


@pytest.mark.parametrize("value", [
    "k1",  # no key
    "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==",  # 31 bytes
    "k1:not-base64",
    "bad id:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
    f"{K1}, k1:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=",  # the same id twice
    f"{K1}, k3:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",  # the same key twice
])
def test_a_wrong_key_list_is_refused_without_repeating_it(tmp_path, value):
    conf = tmp_path / "zaqar-lite.conf"
    conf.write_text(f"[encryption]\nkeys = {value}\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(conf)
    assert str(raised.value) == (
        f"{conf}: [encryption] keys must be ID:BASE64 entries separated by commas: distinct IDs of 1 to 64 "
        "letters, digits, _ . or -, each with a distinct key of 32 bytes in base64, got a value not repeated "
        "here (it is secret)")


def test_a_subscription_token_opens_only_for_its_own_subscription_and_never_lies_in_the_envelope():
    keyring = Keyring.from_setting((K2, K1))
    sealed = encryption.seal_token("tok-secret", keyring, "p", "q", "s1")
    assert "tok-secret" not in repr(sealed)
    assert sealed["zaqar_lite:encrypted"]["kid"] == "k2"
    assert encryption.open_token(sealed, keyring, "p", "q", "s1") == "tok-secret"
    for elsewhere in (("p", "q", "s2"), ("p", "r", "s1"), ("o", "q", "s1")):
        with pytest.raises(Unopenable, match="does not authenticate under key k2"):
            encryption.open_token(sealed, keyring, *elsewhere)
    with pytest.raises(Unopenable, match="encrypted with key k2, which \\[encryption\\] keys does not hold"):
        encryption.open_token(sealed, Keyring.from_setting((K1,)), "p", "q", "s1")


def test_a_failure_reason_seals_into_one_string_bound_to_its_message():
    keyring = Keyring.from_setting((K2, K1))
    sealed = encryption.seal_reason("card 4111 declined", keyring, "p", "m1", nonce=fixed_nonce)
    assert sealed.startswith("zaqar_lite:encrypted:v1:k2:ZGVmZ2hpamtsbW5v:")
    assert "4111" not in sealed and encryption.is_sealed_text(sealed)
    assert encryption.open_reason(sealed, Keyring.from_setting((K2,)), "p", "m1") == "card 4111 declined"
    with pytest.raises(Unopenable, match="does not authenticate under key k2"):
        encryption.open_reason(sealed, keyring, "p", "m2")
    with pytest.raises(Unopenable, match="encrypted with key k2, which \\[encryption\\] keys does not hold"):
        encryption.open_reason(sealed, Keyring.from_setting((K1,)), "p", "m1")
    with pytest.raises(Unopenable, match="not one this server writes"):
        encryption.open_reason("zaqar_lite:encrypted:v9:k2:x:y", keyring, "p", "m1")


def test_a_client_reason_that_starts_as_a_sealed_one_is_refused_and_others_pass():
    with pytest.raises(InvalidBody, match="error may not start with 'zaqar_lite:encrypted:'"):
        encryption.check_not_sealed_text("zaqar_lite:encrypted:v1:k2:a:b", "error")
    for fine in ("declined", "see zaqar_lite:encrypted:", None, 3):
        encryption.check_not_sealed_text(fine, "error")
