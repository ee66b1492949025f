"""What a subscription may make this server send: to which addresses, with which headers and mail fields.

A subscription is a request this server makes on a tenant's behalf, from
inside the operator's network. These rules keep it a notification and not a
tool against that network:

* **Target addresses** (:class:`TargetRule`): a webhook goes only to a public
  address unless the operator allows more. Loopback, link-local, private,
  shared (100.64.0.0/10), unspecified, reserved, documentation and multicast
  addresses are refused by default; ``[notifier] allowed_targets`` lists
  networks allowed all the same (a test's 127.0.0.1, an intranet's receivers)
  and ``[notifier] denied_targets`` networks refused whatever else says. An IPv6
  address that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, NAT64
  ``64:ff9b::/96``, 6to4 ``2002::/16``) is judged by the IPv4 address too.
* **Webhook headers** (:func:`header_refusal`): ``post_headers`` may not set
  the headers that frame the request or steer its hop (``Host``,
  ``Content-Length``, ``Transfer-Encoding``, ``Connection``, ...), nor hold a
  control character. ``Authorization`` stays allowed: a webhook receiver
  commonly wants a bearer token, the value is masked on reads, and it reaches
  only a target the address rule allows.
* **Mail header text** (:func:`mail_text_refusal`): one line, with no control
  character and no character that some reader takes for a line break
  (U+0085, U+2028, U+2029, VT, FF, ...).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
import unicodedata
from collections.abc import Iterable

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: NAT64's well-known prefix (RFC 6052): the last 32 bits are an IPv4 address
NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
#: names that always mean this machine (RFC 6761 reserves ``localhost`` and its subdomains)
LOCAL_NAMES = ("localhost", "localhost.")

#: headers ``post_headers`` may not set, in lower case: the request's framing and routing
#: (RFC 9110 and RFC 9112: a sender may not send both Content-Length and
#: Transfer-Encoding, and hop-by-hop fields belong to the connection, not to the tenant)
FORBIDDEN_HEADERS = frozenset({
    "host", "content-length", "transfer-encoding", "te", "trailer", "connection", "keep-alive",
    "proxy-connection", "proxy-authorization", "proxy-authenticate", "upgrade", "expect",
})


@dataclasses.dataclass(frozen=True)
class TargetRule:
    """Which addresses webhooks may be sent to: public ones, plus ``allowed``, minus ``denied``."""

    allowed: tuple[Network, ...] = ()
    denied: tuple[Network, ...] = ()

    @classmethod
    def from_settings(cls, allowed: Iterable[str], denied: Iterable[str]) -> TargetRule:
        """Return the rule of the ``[notifier] allowed_targets`` and ``denied_targets`` entries."""
        return cls(tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in allowed),
                   tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in denied))

    def allows(self, address: Address) -> bool:
        """Return whether a webhook may be sent to this address.

        The operator's denied networks win, then the allowed ones; any other
        address must be public (as must the IPv4 address an IPv6 one carries).
        """
        judged = [_plain(address), *_embedded(address)]
        if any(candidate in network for candidate in judged for network in self.denied):
            return False
        if any(candidate in network for candidate in judged for network in self.allowed):
            return True
        return all(_public(candidate) for candidate in judged)

    def allows_host(self, host: str) -> bool:
        """Return whether a URL's host may be a webhook target, judged without any lookup.

        An address literal (IPv4 in any form ``inet_aton`` reads, e.g. ``127.1`` or
        ``2130706433``; IPv6 with or without its zone) is judged by :meth:`allows`;
        ``localhost`` and its subdomains as loopback. Any other name is judged at
        delivery, on the addresses it resolves to then.
        """
        literal = host_address(host)
        if literal is not None:
            return self.allows(literal)
        name = host.lower()
        if name in LOCAL_NAMES or name.rstrip(".").endswith(".localhost"):
            return any(self.allows(ipaddress.ip_address(loopback)) for loopback in ("127.0.0.1", "::1"))
        return True


def host_address(host: str) -> Address | None:
    """Return the address a URL host names literally (a final dot allowed), or None for a name."""
    text = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        pass
    if text and all(c in "0123456789abcdefxABCDEFX." for c in text) and text[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def _plain(address: Address) -> Address:
    return address.ipv4_mapped or address if isinstance(address, ipaddress.IPv6Address) else address


def _embedded(address: Address) -> list[Address]:
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found: list[Address] = []
    if address in NAT64_PREFIX:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    return found


def _public(address: Address) -> bool:
    return address.is_global and not address.is_multicast


TARGET_REFUSED = ("the subscriber's address is not one this server delivers to (loopback, link-local, "
                  "private and other non-public addresses are refused unless the operator allows them "
                  "in [notifier] allowed_targets)")


def header_refusal(name: str, value: str) -> str | None:
    """Return why a ``post_headers`` entry may not be sent, or None when it may."""
    if name.lower() in FORBIDDEN_HEADERS:
        return (f"{name} is set by the server for each request and may not be given "
                f"(refused: {', '.join(sorted(FORBIDDEN_HEADERS))})")
    bad = next((c for c in value if not _header_character(c)), None)
    if bad is not None:
        return (f"the value of {name} holds the character U+{ord(bad):04X}; a header value is one line "
                "of visible Latin-1 characters, spaces and tabs")
    return None


def _header_character(c: str) -> bool:
    """RFC 9110 field-value characters that can be sent as one byte each (Latin-1)."""
    code = ord(c)
    return c == "\t" or 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF


def mail_text_refusal(value: str) -> str | None:
    """Return why a text may not be a mail header (subject, display name), or None when it may."""
    bad = next((c for c in value if _breaks_or_controls(c)), None)
    if bad is None:
        return None
    return (f"it holds the character U+{ord(bad):04X} ({unicodedata.name(bad, 'a control character')}); "
            "a mail header is one line without control characters")


def _breaks_or_controls(c: str) -> bool:
    # Cc: C0 and C1 controls (NUL, VT, FF, CR, LF, U+0085 ...); Zl/Zp: U+2028 and U+2029.
    return unicodedata.category(c) in ("Cc", "Zl", "Zp") and c != "\t"


def sender_allowed(address: str, allowed: Iterable[str]) -> bool:
    """Return whether a ``From`` address is one of ``allowed``: an address, or a domain (``example.com``).

    An empty ``allowed`` allows every address. Letter case does not matter.
    """
    entries = [entry.strip().lower() for entry in allowed if entry.strip()]
    if not entries:
        return True
    address = address.lower()
    domain = address.rpartition("@")[2]
    return any(domain == entry.lstrip("@") if "@" not in entry.lstrip("@") else address == entry
               for entry in entries)
