"""The egress guard of the worker's network tools: only public addresses, unless allowed.

A tool that fetches a URL the model chose runs inside the worker's network, so without a
guard the model (or a page it read, or a server that redirects) can make the worker reach
what only the worker can reach: its own loopback services, the private network around it, a
cloud metadata service on ``169.254.169.254`` that hands out credentials. The guard answers,
for one URL, whether the worker may connect, and to which addresses:

1. The URL must be ``http`` or ``https`` and name a host.
2. The host is resolved (with ``loop.getaddrinfo``, off the event loop's thread). IP literals
   are resolved too, so odd spellings the C resolver accepts (``2130706433``, ``0x7f000001``,
   ``0177.0.0.1``, ``127.1``) are judged by the address they mean, never by their spelling.
3. Every resolved address must be public. One that is not refuses the whole URL, so a name
   that resolves to a public and a private address cannot pick the private one later. Not
   public is: unspecified, loopback, multicast, link-local, unique-local (``fc00::/7``),
   site-local, shared (CGNAT, ``100.64.0.0/10``), reserved, private, or anything else that
   ``ipaddress`` does not call globally routable. An IPv6 address that embeds an IPv4 one
   (IPv4-mapped ``::ffff:0:0/96``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo
   ``2001::/32``) is judged by the IPv4 address it leads to.
4. The allow-list (``ORGA_EGRESS_ALLOW``: host names and networks, e.g. ``127.0.0.1``,
   ``10.0.0.0/8``, ``intranet.example``) opens exceptions: a host whose name is listed
   (case-insensitive, exact) may resolve to anything; an address inside a listed network is
   allowed whatever its host is called.

The guard returns the addresses it checked (a :class:`Destination`), and the tool must
connect to one of those, not look the name up again: a second lookup could answer otherwise
(DNS rebinding). A refusal is a :class:`~orga.contracts.errors.ToolPermissionError`, never
retried; its message names the URL, the host, the address and the rule.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from orga.contracts.errors import InvalidConfig, ToolFailed, ToolInputError, ToolPermissionError

__all__ = [
    "ALLOW_VARIABLE",
    "Address",
    "Destination",
    "EgressGuard",
    "not_public",
]

ALLOW_VARIABLE = "ORGA_EGRESS_ALLOW"
"""The worker setting that lists the hosts and networks the guard lets through."""

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")
_PRIVATE = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)
_UNIQUE_LOCAL = ipaddress.IPv6Network("fc00::/7")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_HOST_NAME = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)(\.(?!-)[a-z0-9_-]{1,63}(?<!-))*$")


def _embedded(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 address leads to, with the name of the mechanism."""
    if address.ipv4_mapped is not None:
        return "an IPv4-mapped address", address.ipv4_mapped
    if address in _NAT64:
        return "a NAT64 address", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return "a 6to4 address", address.sixtofour
    if address.teredo is not None:
        # Traffic lands at the client, relayed by the server: judge the worse of the two.
        server, client = address.teredo
        return "a Teredo address", server if not_public(server) else client
    return None


def not_public(address: Address) -> str | None:
    """Why ``address`` is not a public address, or ``None`` when it is.

    Args:
        address: an IPv4 or IPv6 address.

    Returns:
        The rule it breaks, as a phrase (``"a loopback address"``), or ``None``.
    """
    if isinstance(address, ipaddress.IPv6Address) and (found := _embedded(address)):
        mechanism, inner = found
        reason = not_public(inner)
        return f"{mechanism} of {inner}, {reason}" if reason else None
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_link_local:
        if address == ipaddress.IPv4Address("169.254.169.254"):
            return "a link-local address (the cloud metadata service)"
        return "a link-local address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "a shared address (CGNAT, 100.64.0.0/10)"
    if isinstance(address, ipaddress.IPv6Address) and address in _UNIQUE_LOCAL:
        return "a unique-local address (fc00::/7)"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "a site-local address (fec0::/10)"
    if address.is_reserved:
        return "a reserved address"
    if isinstance(address, ipaddress.IPv4Address) and any(address in n for n in _PRIVATE):
        return "a private address"
    if address.is_private or not address.is_global:
        return "a special-purpose address that is not globally routable"
    return None


def _parse_allow(entries: Sequence[str]) -> tuple[frozenset[str], tuple[Network, ...]]:
    names: set[str] = set()
    networks: list[Network] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]")))
            continue
        except ValueError as error:
            if "/" in entry or ":" in entry:
                raise InvalidConfig(
                    f"{ALLOW_VARIABLE} entry {entry!r} is not a network: {error}; write an "
                    "address or a CIDR whose host bits are zero, e.g. '10.0.0.0/8' or '::1'"
                ) from None
        name = entry.lower().rstrip(".")
        if not _HOST_NAME.match(name) or re.fullmatch(r"[0-9]+|0x[0-9a-f]*", name.split(".")[-1]):
            raise InvalidConfig(
                f"{ALLOW_VARIABLE} entry {entry!r} is neither a host name nor an IP address or "
                "network; write a name ('intranet.example'), an address in its usual form "
                "('127.0.0.1') or a CIDR ('10.0.0.0/8')"
            )
        names.add(name)
    return frozenset(names), tuple(networks)


@dataclass(frozen=True)
class Destination:
    """A URL the guard let through, and the addresses the tool may connect to."""

    url: str
    """The URL as given."""
    scheme: str
    """``http`` or ``https``."""
    host: str
    """The host as named in the URL, lower case, in its ASCII (IDNA) form."""
    port: int
    """The port to connect to (the scheme's default when the URL names none)."""
    explicit_port: bool
    """Whether the URL names its port."""
    userinfo: str
    """``user:password`` from the URL, or empty."""
    target: str
    """Path and query, as sent in the request line (``/`` at least)."""
    addresses: tuple[Address, ...]
    """Every address the host resolved to, checked, in the resolver's order."""

    @property
    def host_header(self) -> str:
        """The ``Host`` header of a request for this URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}" if self.explicit_port else host

    @property
    def sni_hostname(self) -> str | None:
        """The TLS server name to send and verify the certificate against (``None`` for an
        IP literal, which is verified as an address)."""
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            return self.host if self.scheme == "https" else None
        return None

    def url_for(self, address: Address) -> str:
        """This URL with ``address`` in place of the host name: what to connect to."""
        host = f"[{address}]" if address.version == 6 else str(address)
        userinfo = f"{self.userinfo}@" if self.userinfo else ""
        return f"{self.scheme}://{userinfo}{host.replace('%', '%25')}:{self.port}{self.target}"


class EgressGuard:
    """Checks URLs against the worker's egress rules (see the module docstring).

    Args:
        allow: host names and IP networks (``"10.0.0.0/8"``, ``"127.0.0.1"``) that are let
            through although they are not public. Parsed once, here.
        tool: the name of the tool the guard serves, for messages.

    Raises:
        InvalidConfig: an entry of ``allow`` is neither a host name nor a network.
    """

    def __init__(self, allow: Sequence[str] = (), *, tool: str = "web_fetch") -> None:
        self.allowed_names, self.allowed_networks = _parse_allow(allow)
        self.tool = tool

    def refuses(self, host: str, address: Address) -> str | None:
        """Why the guard refuses ``address`` as an address of ``host``, or ``None`` when the
        address is public, inside an allowed network, or ``host`` is an allowed name."""
        if host.rstrip(".") in self.allowed_names:
            return None
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        for candidate in (address, mapped):
            if candidate is not None and any(
                candidate.version == net.version and candidate in net
                for net in self.allowed_networks
            ):
                return None
        return not_public(address)

    async def check(self, url: str, *, via: str | None = None) -> Destination:
        """Parse and resolve ``url`` and check every address it resolves to.

        Args:
            url: the URL to fetch.
            via: the URL whose redirect led here, if any (named in messages).

        Returns:
            The destination, with the checked addresses to connect to.

        Raises:
            ToolInputError: the model's URL is not an http(s) URL with a host.
            ToolPermissionError: a redirect leads to a URL that is not http(s), or an address
                of the host is not public and not allowed.
            ToolFailed: the host name does not resolve.
        """
        parts = self._parse(url, via)
        scheme = parts.scheme.lower()
        host = parts.hostname or ""
        try:
            ascii_host = host.encode("idna").decode("ascii").lower()
            port = parts.port
        except (UnicodeError, ValueError) as error:
            raise self._bad_url(url, via, f"its host or port is not valid ({error})") from None
        explicit = port is not None
        port = port if port is not None else _DEFAULT_PORTS[scheme]
        addresses = await self._resolve(url, ascii_host, port)
        for address in addresses:
            reason = self.refuses(ascii_host, address)
            if reason is not None:
                where = (
                    f"{host} is"
                    if _spells(ascii_host, address)
                    else f"{host} resolves to {address},"
                )
                raise ToolPermissionError(
                    f"{self.tool} refused {url}{_redirected(via)}: {where} {reason}; the "
                    "worker's egress rules allow only public addresses "
                    f"({ALLOW_VARIABLE} opens exceptions)"
                )
        return Destination(
            url=url,
            scheme=scheme,
            host=ascii_host,
            port=port,
            explicit_port=explicit,
            userinfo=parts.netloc.rpartition("@")[0],
            target=(parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
            addresses=addresses,
        )

    def _parse(self, url: str, via: str | None) -> SplitResult:
        try:
            parts = urlsplit(url.strip())
        except ValueError as error:
            raise self._bad_url(url, via, f"it does not parse ({error})") from None
        if parts.scheme.lower() not in _DEFAULT_PORTS:
            raise self._bad_url(url, via, "it is not an http:// or https:// URL")
        if not parts.hostname:
            raise self._bad_url(url, via, "it names no host")
        return parts

    def _bad_url(self, url: str, via: str | None, why: str) -> ToolInputError | ToolPermissionError:
        if via is None:
            return ToolInputError(
                f"{self.tool} cannot fetch url {url!r}: {why}; give an http:// or https:// URL "
                "with a host"
            )
        return ToolPermissionError(
            f"{self.tool} refused {url}{_redirected(via)}: {why}; {self.tool} follows redirects "
            "only to http(s) URLs with a host"
        )

    async def _resolve(self, url: str, host: str, port: int) -> tuple[Address, ...]:
        try:
            return (ipaddress.ip_address(host),)  # an IP literal in its usual form
        except ValueError:
            pass
        loop = asyncio.get_running_loop()
        try:
            found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as error:
            raise ToolFailed(
                f"{self.tool} could not resolve the host {host!r} of {url}: {error}; check the "
                "host name"
            ) from error
        addresses: dict[Address, None] = {}
        for *_, sockaddr in found:
            addresses[ipaddress.ip_address(sockaddr[0])] = None
        if not addresses:
            raise ToolFailed(f"{self.tool} could not resolve the host {host!r} of {url}")
        return tuple(addresses)


def _spells(host: str, address: Address) -> bool:
    """Whether ``host`` is ``address`` written in its usual form."""
    try:
        return ipaddress.ip_address(host) == address
    except ValueError:
        return False


def _redirected(via: str | None) -> str:
    return f" (redirected from {via})" if via else ""
