"""The built-in ``web_fetch`` tool: HTTP GET a page or document and return its text.

Every URL it requests, the model's and each redirect's, first passes the worker's egress
guard (:mod:`orga.tools._egress`): only public addresses, unless ``ORGA_EGRESS_ALLOW`` opens an
exception. The tool then connects to an address the guard checked (the request goes to the IP,
with the original ``Host`` header and, for https, the original name as TLS server name, so
certificates are verified as usual), never to a second lookup of the name. It follows
redirects itself, one at a time and at most :data:`MAX_REDIRECTS`, checking each. Each call
uses a client of its own that keeps no cookies and no connections, reads no proxy or
``.netrc`` settings from the environment and retries nothing (Temporal owns retries).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Sequence
from html.parser import HTMLParser
from http.cookiejar import CookieJar, DefaultCookiePolicy
from urllib.parse import urldefrag, urljoin

import httpx

from orga.contracts.errors import ToolFailed
from orga.core.text import cut
from orga.runtime.tls import tls as shared_tls
from orga.tools._egress import Destination, EgressGuard
from orga.tools.sdk import Tool, tool

__all__ = ["MAX_REDIRECTS", "html_to_text", "web_fetch_client", "web_fetch_tool"]

MAX_REDIRECTS = 5
"""How many redirects one call follows before it gives up."""

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "noscript", "template"):
            self._hidden += 1
        elif tag in ("p", "br", "div", "li", "tr", "h1", "h2", "h3", "h4", "section"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript", "template") and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Visible text of an HTML page, without scripts and styles, whitespace folded."""
    parser = _TextExtractor()
    parser.feed(html)
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def web_fetch_client(timeout: float, tls: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """A client for one ``web_fetch`` call: no cookies kept, no connection reused, nothing
    read from the environment (proxies, ``.netrc``), no redirects followed, no retries.

    Args:
        timeout: seconds for each of connect, read, write and pool.
        tls: the TLS context that verifies servers (the process's shared one when ``None``).
    """
    return httpx.AsyncClient(
        verify=tls if tls is not None else shared_tls(),
        trust_env=False,
        follow_redirects=False,
        timeout=timeout,
        cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
        limits=httpx.Limits(max_keepalive_connections=0),
    )


def web_fetch_tool(
    http: httpx.AsyncClient | None, max_bytes: int, timeout: float, allow: Sequence[str] = ()
) -> Tool:
    """The ``web_fetch`` tool.

    Args:
        http: the client to send requests with; ``None`` (what workers use) gives each call a
            fresh :func:`web_fetch_client`. A client passed here is used as it is: it should
            keep no cookies.
        max_bytes: read at most this many bytes of a body.
        timeout: seconds a whole call may take, redirects included (and each network step).
        allow: hosts and networks the egress guard lets through although they are not
            public (``ORGA_EGRESS_ALLOW``), e.g. ``["127.0.0.1", "10.0.0.0/8"]``.

    Raises:
        InvalidConfig: an entry of ``allow`` is neither a host name nor a network.
    """
    guard = EgressGuard(allow, tool="web_fetch")

    async def open_reply(session: httpx.AsyncClient, destination: Destination) -> httpx.Response:
        """Send the GET to the first checked address that accepts a connection."""
        extensions = {"sni_hostname": sni} if (sni := destination.sni_hostname) else None
        failure: httpx.TransportError | None = None
        for address in destination.addresses:
            request = session.build_request(
                "GET",
                destination.url_for(address),
                headers={"Host": destination.host_header},
                timeout=timeout,
                extensions=extensions,
            )
            try:
                return await session.send(request, stream=True, follow_redirects=False)
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                failure = error
        assert failure is not None  # the guard returns at least one address
        raise failure

    async def fetch(url: str) -> tuple[str, httpx.Response, bytes, bool]:
        """GET ``url``, following redirects; the final URL, reply, body and whether it was cut."""
        hops = [url]
        async with contextlib.AsyncExitStack() as stack:
            session = http or await stack.enter_async_context(web_fetch_client(timeout))
            for _ in range(MAX_REDIRECTS + 1):
                destination = await guard.check(hops[-1], via=hops[-2] if len(hops) > 1 else None)
                reply = await open_reply(session, destination)
                try:
                    location = reply.headers.get("location")
                    if reply.status_code in _REDIRECTS and location:
                        hops.append(urldefrag(urljoin(hops[-1], location.strip())).url)
                        continue
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in reply.aiter_bytes():
                        chunks.append(chunk)
                        size += len(chunk)
                        if size > max_bytes:
                            break
                    return hops[-1], reply, b"".join(chunks)[:max_bytes], size > max_bytes
                finally:
                    await reply.aclose()
        raise ToolFailed(
            f"GET {url} stopped after {MAX_REDIRECTS} redirects: {' → '.join(hops)} (the last "
            "not followed); the page redirects in a loop or too far; if the last URL is the one "
            "you want, fetch it",
            non_retryable=True,
        )

    @tool(name="web_fetch", timeout=timeout + 5)
    async def web_fetch(url: str, max_chars: int = 20_000) -> str:
        """Fetch a web page or document with HTTP GET and return its text.

        Args:
            url: an http:// or https:// URL.
            max_chars: return at most this many characters.
        """
        try:
            async with asyncio.timeout(timeout):
                final, reply, data, longer = await fetch(url)
        except TimeoutError:
            raise ToolFailed(
                f"GET {url} took longer than {timeout:g} s, web_fetch's limit for a whole call "
                "(redirects included)"
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise ToolFailed(f"GET {url} failed: {type(error).__name__}: {error}") from error
        label = url if final == url else f"{url} (redirected to {final})"
        body = data.decode(reply.encoding or "utf-8", errors="replace")
        status = reply.status_code
        if status >= 400:
            transient = status >= 500 or status in (408, 429)
            raise ToolFailed(
                f"GET {label} answered HTTP {status}: {body[:300]}", non_retryable=not transient
            )
        text = html_to_text(body) if "html" in reply.headers.get("content-type", "") else body
        if longer:
            text += f"\n[… response longer than {max_bytes} bytes; the rest is left out]"
        return cut(text, max_chars, "page")

    return web_fetch
