"""Who may talk to an HTTP server the CLI runs: the names it answers to, and its token.

A server on 127.0.0.1 is reachable by every local process and, through DNS rebinding, by any web
page a browser on the machine opens (``evil.example`` resolving to 127.0.0.1). So every request
must bear the server's bearer token, and its ``Host`` (and ``Origin``, when a browser sends one)
must name this server: a name is judged by what it is, not by how the bind address was spelled
(``127.1``, ``0:0:0:0:0:0:0:1`` and ``[::1]`` are addresses like any other). Accepted names:

- an address literal equal to the bind address (any loopback address when bound to loopback;
  any address when bound to all of them: a literal cannot be rebound);
- ``localhost`` when bound to loopback or to all addresses; this machine's host name when bound
  to all addresses; the name the server was bound to, when it was given a name.

Anything else is refused with 403; a request without the token with 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Address", "address", "guarded", "is_loopback", "url_host"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_App = Callable[[_Scope, _Receive, _Send], Awaitable[None]]


def address(host: str) -> Address | None:
    """``host`` as an address when it is one in any spelling the system accepts (``127.1``,
    ``[::1]``, ``0:0:0:0:0:0:0:1``); ``None`` for a name."""
    literal = host.strip()
    if literal.startswith("[") and literal.endswith("]"):
        literal = literal[1:-1]
    try:
        found = socket.getaddrinfo(literal, None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    text = str(found[0][4][0]).split("%", 1)[0]
    parsed = ipaddress.ip_address(text)
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


def url_host(host: str) -> str:
    """How ``host`` is written in a URL: an address in its usual form (IPv6 in brackets), a
    name as it is."""
    found = address(host)
    if found is None:
        return host
    return f"[{found.compressed}]" if found.version == 6 else found.compressed


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address in any spelling) is this machine only."""
    found = address(host)
    return host.lower() == "localhost" if found is None else found.is_loopback


def _accepts(bound: str) -> Callable[[str], bool]:
    """Whether a host name (from ``Host`` or ``Origin``) names a server bound to ``bound``."""
    bound_address = address(bound)
    everywhere = bound_address is not None and bound_address.is_unspecified
    loopback = is_loopback(bound)
    names = {bound.lower()} if bound_address is None else set[str]()
    if loopback or everywhere:
        names.add("localhost")
    if everywhere:
        names.update(n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n)

    def accepts(name: str) -> bool:
        found = address(name)
        if found is None:
            return name.lower() in names
        if everywhere:
            return True
        return found.is_loopback if loopback else found == bound_address

    return accepts


def _host_name(netloc: str) -> str | None:
    """The host of ``Host``/``Origin``'s ``netloc`` (``[::1]:8766`` → ``::1``); ``None`` when
    it is malformed."""
    try:
        return urlsplit(f"//{netloc}").hostname
    except ValueError:
        return None


def _refusal(
    headers: dict[bytes, bytes], accepts: Callable[[str], bool], token: bytes
) -> tuple[int, str] | None:
    host = headers.get(b"host", b"").decode("latin-1")
    name = _host_name(host)
    if not name or not accepts(name):
        return 403, f"host {host!r} is not served here"
    origin = headers.get(b"origin")
    if origin is not None:
        text = origin.decode("latin-1")
        scheme, _, netloc = text.partition("://")
        name = _host_name(netloc)
        if scheme not in ("http", "https") or not name or not accepts(name):
            return 403, f"origin {text!r} is not served here"
    given = headers.get(b"authorization", b"")
    if not hmac.compare_digest(given, b"Bearer " + token):
        return 401, "a bearer token is required (Authorization: Bearer <token>)"
    return None


def guarded(app: _App, *, host: str, token: str) -> _App:
    """``app``, answering only HTTP requests that name ``host`` (the bind address) and bear
    ``token``."""
    accepts = _accepts(host)
    secret = token.encode()

    async def guard(scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "http":
            refused = _refusal(dict(scope["headers"]), accepts, secret)
            if refused is not None:
                status, text = refused
                headers = [(b"content-type", b"text/plain; charset=utf-8")]
                if status == 401:
                    headers.append((b"www-authenticate", b"Bearer"))
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": text.encode()})
                return
        await app(scope, receive, send)

    return guard
