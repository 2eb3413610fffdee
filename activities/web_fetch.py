"""The built-in ``web_fetch`` tool: HTTP GET a page or document and return its text."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

import httpx

from orga.contracts.errors import ToolFailed, ToolInputError
from orga.core.text import cut
from orga.runtime.tools import Tool, tool

__all__ = ["html_to_text", "web_fetch_tool"]


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


def web_fetch_tool(http: httpx.AsyncClient, max_bytes: int, timeout: float) -> Tool:
    @tool(name="web_fetch", timeout=timeout + 5)
    async def web_fetch(url: str, max_chars: int = 20_000) -> str:
        """Fetch a web page or document with HTTP GET and return its text.

        Args:
            url: an http:// or https:// URL.
            max_chars: return at most this many characters.
        """
        if urlsplit(url).scheme not in ("http", "https"):
            raise ToolInputError(f"url {url!r} is not an http(s) URL")
        try:
            async with http.stream("GET", url, timeout=timeout, follow_redirects=True) as reply:
                chunks: list[bytes] = []
                size = 0
                async for chunk in reply.aiter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > max_bytes:
                        break
                status = reply.status_code
                kind = reply.headers.get("content-type", "")
                encoding = reply.encoding or "utf-8"
        except httpx.HTTPError as error:
            raise ToolFailed(f"GET {url} failed: {type(error).__name__}: {error}") from error
        body = b"".join(chunks)[:max_bytes].decode(encoding, errors="replace")
        if status >= 400:
            transient = status >= 500 or status in (408, 429)
            raise ToolFailed(
                f"GET {url} answered HTTP {status}: {body[:300]}", non_retryable=not transient
            )
        text = html_to_text(body) if "html" in kind else body
        if size > max_bytes:
            text += f"\n[… response longer than {max_bytes} bytes; the rest is left out]"
        return cut(text, max_chars, "page")

    return web_fetch
