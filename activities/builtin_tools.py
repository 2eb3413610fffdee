"""Tools every worker registers: ``web_fetch``, ``file_read`` and ``add`` (a demo tool)."""

from __future__ import annotations

import httpx

from activities.file_read import file_read_tool
from activities.web_fetch import web_fetch_tool
from orga.runtime.settings import Settings
from orga.runtime.tools import Tool, tool

__all__ = ["add", "builtin_tools"]


@tool
def add(a: float, b: float) -> int | float:
    """Add two numbers and return the sum.

    Args:
        a: the first number.
        b: the second number.
    """
    total = a + b
    return int(total) if total.is_integer() else total  # 2 + 3 is 5, not 5.0


def builtin_tools(settings: Settings, http: httpx.AsyncClient) -> list[Tool]:
    """The built-in tools, configured from the worker's settings."""
    return [
        web_fetch_tool(http, settings.web_fetch_max_bytes, settings.web_fetch_timeout),
        file_read_tool(settings.file_root, max_bytes=settings.web_fetch_max_bytes),
        add,
    ]
