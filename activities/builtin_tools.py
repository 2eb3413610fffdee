"""Tools every worker registers: ``web_fetch``, ``add`` (a demo tool), and ``file_read`` when
the operator names its root (``ORGA_FILE_ROOT``)."""

from __future__ import annotations

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


def builtin_tools(settings: Settings) -> list[Tool]:
    """The built-in tools, configured from the worker's settings (``web_fetch`` makes its own
    HTTP client per call, bound by the egress rules)."""
    found = [
        web_fetch_tool(
            None, settings.web_fetch_max_bytes, settings.web_fetch_timeout, settings.egress_allow
        ),
        add,
    ]
    if settings.file_root is not None:  # no default root: the operator names the readable one
        found.append(
            file_read_tool(
                settings.file_root,
                max_bytes=settings.web_fetch_max_bytes,
                allow_hidden=settings.file_read_hidden,
            )
        )
    return found
