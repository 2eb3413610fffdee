"""Docs that name a tool, a verb or an option say what the code has: each list a page gives is
checked against the code that serves it (the MCP tools first)."""

from __future__ import annotations

import re
from pathlib import Path

from orga.cli.mcp import build_server
from orga.runtime.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def _sentence(page: str, opening: str) -> str:
    """The text of ``page`` from ``opening`` to the end of its sentence."""
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    start = text.index(opening)
    return text[start : text.index(". ", start)]


async def test_the_mcp_tools_the_guide_lists_are_the_ones_orga_mcp_serves() -> None:
    listed = _sentence("docs/guides/tools-and-mcp.md", "Its tools:")
    always = set(re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", listed)))  # no asides
    decided = set(
        re.findall(r"`([a-z_]+)`", _sentence("docs/guides/tools-and-mcp.md", "With `--decisions`"))
    ) - {"decisions"}
    settings = Settings.from_env({})
    served = {t.name for t in await build_server(settings, "me").list_tools()}
    deciding = {t.name for t in await build_server(settings, "me", decisions=True).list_tools()}
    assert always == served
    assert decided == deciding - served == {"approve", "deny"}
