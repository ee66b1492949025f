"""Message bodies encrypted at rest (AES-256-GCM): the stored envelope, sealing and opening.

A pure codec: values in, values out, no I/O (the random nonce comes from the
caller or ``os.urandom``). A queue whose metadata sets
``_enable_encrypt_messages`` has each body stored as an *envelope*, a JSON
object whose only key is :data:`ENVELOPE`::

    {"zaqar_lite:encrypted": {"v": 1, "alg": "A256GCM", "kid": "k2", "nonce": "<base64, 12 bytes>",
                              "data": "<base64: the ciphertext, then the 16-byte tag>"}}

The plaintext is the body's compact JSON text in UTF-8. The associated data
binds the ciphertext to its message (:func:`associated_data`: the project and
the message id, both kept by every move between queues), so a ciphertext
copied onto another message does not open. ``kid`` names the key: the
:class:`Keyring` holds every key of ``[encryption] keys``, seals with the first
and opens with whichever one an envelope names, so a new key is put first and
an old one removed once no stored message names it (no downtime).

A subscription's ``trust+`` token is sealed the same way when keys are
configured (:func:`seal_token`), bound to its project, queue and subscription
id (:func:`token_associated_data`).

Only an envelope is ever opened; any other body is a plaintext body. A client
may not post a body of the envelope's shape (:func:`check_not_envelope`), so
a body that looks sealed was sealed here.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import os
from collections.abc import Callable
from typing import Any

from zaqar_lite.config import encryption_key
from zaqar_lite.errors import InvalidBody

#: the only key of a sealed body
ENVELOPE = "zaqar_lite:encrypted"
#: a regular expression (RE2 and Java alike) matching exactly the JSON text of an envelope, in any
#: spacing: its one key, then an object without nested braces (a client's body of that shape is refused)
ENVELOPE_TEXT = r'^\s*\{\s*"zaqar_lite:encrypted"\s*:\s*\{[^{}]*\}\s*\}\s*$'
#: how a text sealed at rest starts (a failure reason of an encrypted queue):
#: ``zaqar_lite:encrypted:v1:<kid>:<nonce>:<data>``, one string where a string is stored
SEALED_TEXT = "zaqar_lite:encrypted:"
#: the envelope's version and algorithm
VERSION = 1
ALGORITHM = "A256GCM"
NONCE_BYTES = 12
TAG_BYTES = 16


class Unopenable(Exception):
    """An envelope cannot be opened; ``str()`` says why, naming the key id."""


@dataclasses.dataclass(frozen=True)
class Keyring:
    """The keys of ``[encryption] keys``, in order: ``(id, 32-byte key)``; the first seals."""

    keys: tuple[tuple[str, bytes], ...] = ()

    @classmethod
    def from_setting(cls, entries: tuple[str, ...]) -> Keyring:
        """Build the keyring of ``Settings.encryption_keys`` (checked when the settings were loaded)."""
        return cls(tuple(encryption_key(entry) for entry in entries))

    @property
    def can_seal(self) -> bool:
        """Return whether there is a key to seal with."""
        return bool(self.keys)

    def key(self, key_id: str) -> bytes | None:
        """Return the key of this id, or None when the keyring does not hold it."""
        return next((key for kid, key in self.keys if kid == key_id), None)


def is_envelope(body: Any) -> bool:
    """Return whether a stored body is a sealed one."""
    return isinstance(body, dict) and len(body) == 1 and ENVELOPE in body


def check_not_envelope(body: Any, field: str) -> None:
    """Refuse a client's body of the envelope's shape, which would read as a sealed body."""
    if is_envelope(body):
        raise InvalidBody(
            f"{field} may not be an object whose only key is {ENVELOPE!r}: that shape marks a body "
            "encrypted at rest.")


def associated_data(project: str, message_id: str) -> bytes:
    """Return what a message's ciphertext is bound to: its project and its id."""
    return f"zaqar-lite message body v{VERSION}\n{project}\n{message_id}".encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def token_associated_data(project: str, queue: str, subscription_id: str) -> bytes:
    """Return what a subscription's sealed token is bound to: its project, queue and id."""
    return f"zaqar-lite subscription token v{VERSION}\n{project}\n{queue}\n{subscription_id}".encode()


def reason_associated_data(project: str, message_id: str) -> bytes:
    """Return what a message's sealed failure reasons are bound to: its project and its id."""
    return f"zaqar-lite failure reason v{VERSION}\n{project}\n{message_id}".encode()


def is_sealed_text(value: Any) -> bool:
    """Return whether a stored text is a sealed one (:data:`SEALED_TEXT`)."""
    return isinstance(value, str) and value.startswith(SEALED_TEXT)


def check_not_sealed_text(value: Any, field: str) -> None:
    """Refuse a client's text that starts as a sealed text does, which would read as one."""
    if is_sealed_text(value):
        raise InvalidBody(f"{field} may not start with {SEALED_TEXT!r}: that prefix marks a text encrypted "
                          "at rest.")


def seal_reason(reason: str, keyring: Keyring, project: str, message_id: str,
                nonce: Callable[[int], bytes] = os.urandom) -> str:
    """Return a failure reason sealed with the keyring's first key, as one string (:data:`SEALED_TEXT`).

    Raises:
        ValueError: the keyring is empty.
    """
    sealed = _sealed(reason.encode(), keyring, reason_associated_data(project, message_id), nonce)[ENVELOPE]
    return f"{SEALED_TEXT}v{VERSION}:{sealed['kid']}:{sealed['nonce']}:{sealed['data']}"


def open_reason(text: str, keyring: Keyring, project: str, message_id: str) -> str:
    """Return the failure reason a sealed text holds (:func:`is_sealed_text` holds for it).

    Raises:
        Unopenable: as :func:`open_body`.
    """
    parts = text[len(SEALED_TEXT):].split(":")
    if len(parts) != 4 or parts[0] != f"v{VERSION}":
        raise Unopenable("its sealed text is not one this server writes (v1:<key id>:<nonce>:<data>)")
    envelope = {ENVELOPE: {"v": VERSION, "alg": ALGORITHM, "kid": parts[1], "nonce": parts[2],
                           "data": parts[3]}}
    return _opened(envelope, keyring, reason_associated_data(project, message_id)).decode()


def _sealed(plaintext: bytes, keyring: Keyring, bound_to: bytes,
            nonce: Callable[[int], bytes]) -> dict[str, Any]:
    """Return the envelope of some bytes, sealed with the keyring's first key and bound to ``bound_to``."""
    if not keyring.can_seal:
        raise ValueError("no key to encrypt with")
    key_id, key = keyring.keys[0]
    fresh = nonce(NONCE_BYTES)
    sealed = _cipher(key).encrypt(fresh, plaintext, bound_to)
    return {ENVELOPE: {"v": VERSION, "alg": ALGORITHM, "kid": key_id, "nonce": _b64(fresh),
                       "data": _b64(sealed)}}


def _opened(body: Any, keyring: Keyring, bound_to: bytes) -> bytes:
    """Return the plaintext of an envelope (:func:`is_envelope` holds for it).

    Raises:
        Unopenable: as :func:`open_body`.
    """
    sealed = body[ENVELOPE]
    if not isinstance(sealed, dict) or sealed.get("v") != VERSION or sealed.get("alg") != ALGORITHM \
            or not isinstance(sealed.get("kid"), str):
        raise Unopenable("its envelope is not one this server writes (version 1, A256GCM, a key id)")
    key_id = sealed["kid"]
    key = keyring.key(key_id)
    if key is None:
        raise Unopenable(f"it was encrypted with key {key_id}, which [encryption] keys does not hold")
    try:
        fresh = base64.b64decode(sealed.get("nonce", ""), validate=True)
        data = base64.b64decode(sealed.get("data", ""), validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise Unopenable(f"its envelope (key {key_id}) does not hold base64 nonce and data") from None
    if len(fresh) != NONCE_BYTES or len(data) < TAG_BYTES:
        raise Unopenable(f"its envelope (key {key_id}) holds a nonce or data of the wrong length")
    from cryptography.exceptions import InvalidTag

    try:
        plaintext: bytes = _cipher(key).decrypt(fresh, data, bound_to)
    except InvalidTag:
        raise Unopenable(f"its ciphertext does not authenticate under key {key_id} (altered in the "
                         "store, moved to another message, or another key under that id)") from None
    return plaintext


def seal(body: Any, keyring: Keyring, project: str, message_id: str,
         nonce: Callable[[int], bytes] = os.urandom) -> dict[str, Any]:
    """Return the envelope of a body, sealed with the keyring's first key.

    Args:
        nonce: returns that many fresh random bytes (a fixed one only in tests).

    Raises:
        ValueError: the keyring is empty (the caller refuses the write before).
    """
    plaintext = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return _sealed(plaintext, keyring, associated_data(project, message_id), nonce)


def open_body(body: Any, keyring: Keyring, project: str, message_id: str) -> Any:
    """Return a stored body as the client posted it: an envelope opened, any other body as it is.

    Raises:
        Unopenable: the envelope names a key the keyring does not hold, does
            not authenticate (altered, or another key under that id), or is
            malformed.
    """
    if not is_envelope(body):
        return body
    return json.loads(_opened(body, keyring, associated_data(project, message_id)))


def seal_token(token: str, keyring: Keyring, project: str, queue: str, subscription_id: str,
               nonce: Callable[[int], bytes] = os.urandom) -> dict[str, Any]:
    """Return the envelope of a subscription's token (its UTF-8 text), sealed with the first key.

    Raises:
        ValueError: the keyring is empty (the caller keeps the token as it is then).
    """
    return _sealed(token.encode(), keyring, token_associated_data(project, queue, subscription_id), nonce)


def open_token(sealed: Any, keyring: Keyring, project: str, queue: str, subscription_id: str) -> str:
    """Return the token a subscription's envelope holds.

    Raises:
        Unopenable: as :func:`open_body`, or the value is no envelope.
    """
    if not is_envelope(sealed):
        raise Unopenable("the stored token is not an envelope")
    return _opened(sealed, keyring, token_associated_data(project, queue, subscription_id)).decode()


@functools.lru_cache(maxsize=64)
def _cipher(key: bytes) -> Any:
    """Return the AES-256-GCM cipher of a key, made once (``cryptography`` is imported only once used).

    The cipher holds only its key, so one serves every thread.
    """
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)
