"""Where a webhook may be sent: the URL's rules, and the one address a delivery connects to.

A hook's URL is checked when it is made (the refusal names the field ``url``) and again at
every delivery, since what a name resolves to may change. The host is resolved once, every
address it resolves to is checked, and the delivery connects to the checked address itself
(``hooks.transport``): a name that answers a public address to the check and a private one
to the connection (DNS rebinding) cannot slip past.

Refused unless WEBHOOK_ALLOWED_NETWORKS holds the address: loopback, link-local (the cloud
metadata service, 169.254.169.254), private, shared (100.64/10), reserved, multicast and
unspecified addresses, in IPv4 and IPv6 (an IPv4-mapped IPv6 address is read as its IPv4
one). Only ``https``, unless WEBHOOK_ALLOW_HTTP.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext as _

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UrlRefused(ValueError):
    """A URL Caldera will not send to, and why (a sentence for the field ``url``)."""


@dataclass(frozen=True)
class Destination:
    """A checked URL: what to connect to (``addresses``, each checked, tried in the order
    the resolver gave) and what to call it (``host``, for TLS and the Host header)."""

    scheme: str
    host: str
    port: int
    target: str  # path and query, what the request line asks for
    addresses: tuple[str, ...]


def _allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in settings.WEBHOOK_ALLOWED_NETWORKS]


def _plain(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address (::ffff:10.0.0.1) as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _public(address: IPAddress) -> bool:
    return not (
        address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
        or not address.is_global
    )


def address_refusal(address: IPAddress) -> str | None:
    """Why a delivery may not connect to ``address``; None when it may."""
    if any(address in network for network in _allowed_networks()):
        return None
    if _public(address):
        return None
    return _(
        "%(address)s is a private, loopback, link-local or reserved address "
        "(WEBHOOK_ALLOWED_NETWORKS does not allow it)"
    ) % {"address": address}


def url_parts(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, target) of a URL Caldera may send to, before any lookup."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    allowed = ("https", "http") if settings.WEBHOOK_ALLOW_HTTP else ("https",)
    if scheme not in allowed:
        raise UrlRefused(
            _("only https URLs are allowed")
            if scheme == "http"
            else _("the URL must start with https://")
            if allowed == ("https",)
            else _("the URL must start with https:// or http://")
        )
    if parts.username is not None or parts.password is not None:
        raise UrlRefused(_("the URL may not carry a user name or password"))
    host = parts.hostname
    if not host:
        raise UrlRefused(_("the URL names no host"))
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise UrlRefused(_("the URL's port is not a number from 1 to 65535")) from None
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return scheme, host, port, target


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to now (an address is itself)."""
    try:
        return [_plain(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise UrlRefused(
            _("%(host)s does not resolve: %(error)s") % {"host": host, "error": error}
        ) from None
    # getaddrinfo's IPv6 answers may carry a zone (fe80::1%eth0); the zone is not the address.
    return list(
        dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found)
    )


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def destination(url: str) -> Destination:
    """Check ``url`` and resolve its host once: the addresses to connect to. Raises
    UrlRefused if the URL or any address it resolves to is refused (one bad address among
    good ones would let a resolver's order, or a failed connection, pick the bad one)."""
    scheme, host, port, target = url_parts(url)
    addresses = resolve(host, port)
    addresses_check(host, addresses)
    return Destination(scheme, host, port, target, tuple(str(a) for a in addresses))


def addresses_check(host: str, addresses: list[IPAddress]) -> None:
    """UrlRefused naming the first of the addresses ``host`` resolved to that a delivery
    may not connect to; nothing when it may connect to every one."""
    if not addresses:
        raise UrlRefused(_("%(host)s does not resolve") % {"host": host})
    literal = _literal(host)
    for address in addresses:
        refusal = address_refusal(address)
        if refusal is not None:
            raise UrlRefused(
                refusal
                if literal
                else _("%(host)s resolves to %(refusal)s") % {"host": host, "refusal": refusal}
            )
