"""Built-in tools: file_read stays inside its root; web_fetch over real HTTP on 127.0.0.1
(which the worker's egress rules refuse unless ``egress_allow`` lets it through: see
``tests/test_egress.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orga.contracts.errors import ToolFailed, ToolInputError
from orga.runtime.settings import Settings
from orga.tools._builtin import builtin_tools
from orga.tools._web_fetch import html_to_text
from orga.tools.sdk import Tool, ToolContext
from tests.local_http import Reply, serve

CTX = ToolContext(call_id="c", workflow_id="w", idempotency_key="w/c")


PAGES: dict[str, tuple[int, str, str]] = {
    "/page": (200, "text/html", "<html><script>x()</script><p>Hello <b>world</b></p></html>"),
    "/big": (200, "text/plain", "y" * 5000),
    "/missing": (404, "text/plain", "nope"),
}


def pages(method: str, path: str, body: bytes) -> Reply:
    status, kind, text = PAGES.get(path, (500, "text/plain", "?"))
    return status, kind, text.encode()


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serve(pages) as url:
        yield url


def tools(root: Path, max_bytes: int = 1000) -> dict[str, Tool]:
    settings = Settings(
        file_root=root.resolve(), web_fetch_max_bytes=max_bytes, egress_allow=["127.0.0.1"]
    )
    return {t.name: t for t in builtin_tools(settings)}


async def test_web_fetch(site: str, tmp_path: Path) -> None:
    fetch = tools(tmp_path, max_bytes=1000)["web_fetch"]
    assert await fetch.invoke({"url": f"{site}/page", "max_chars": 500}, CTX) == "Hello world"
    big = await fetch.invoke({"url": f"{site}/big", "max_chars": 5000}, CTX)
    assert big.startswith("y" * 1000) and "longer than 1000 bytes" in big
    with pytest.raises(ToolFailed, match="HTTP 404") as caught:
        await fetch.invoke({"url": f"{site}/missing", "max_chars": 500}, CTX)
    assert caught.value.non_retryable
    with pytest.raises(ToolInputError, match="not an http"):
        await fetch.invoke({"url": "file:///etc/passwd", "max_chars": 500}, CTX)


def test_html_to_text() -> None:
    assert html_to_text("<style>a{}</style><h1>T</h1><div>x  y</div>") == "T\nx y"
