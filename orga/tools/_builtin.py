"""Tools every worker registers: ``web_fetch``, ``add`` (a demo tool), ``delegate`` (run by the
loop as a child workflow, never here), and ``file_read`` when the operator names its root
(``ORGA_FILE_ROOT``)."""

from __future__ import annotations

from pathlib import Path

from orga.contracts.delegation import DELEGATE_TOOL
from orga.contracts.errors import ToolInputError
from orga.runtime.settings import Settings
from orga.tools._file_read import file_read_tool
from orga.tools._run_python import run_python_tool
from orga.tools._sandbox import Sandbox
from orga.tools._web_fetch import web_fetch_tool
from orga.tools.sdk import Tool, tool

__all__ = ["add", "builtin_tools", "delegate"]


@tool
async def add(a: float, b: float) -> int | float:
    """Add two numbers and return the sum.

    Args:
        a: the first number.
        b: the second number.
    """
    # Async: it blocks on nothing, so it runs on the worker's event loop instead of taking a
    # thread for a sum (a sync tool runs in one).
    total = a + b
    return int(total) if total.is_integer() else total  # 2 + 3 is 5, not 5.0


@tool(name=DELEGATE_TOOL)
def delegate(
    agent: str,
    task: str,
    max_tokens: int | None = None,
    max_iterations: int | None = None,
    tools: list[str] | None = None,
) -> str:
    """Hand a task to another agent and get its answer back. It works on its own (with its own
    tools) on part of your remaining budget; give it everything it needs in the task.

    Args:
        agent: the agent to hand it to (one of those you were told you may delegate to).
        task: what it should do, self-contained.
        max_tokens: the most tokens it may spend (default: what you have left).
        max_iterations: the most model calls it may make (default: what you have left).
        tools: only these of its tools (default: all the tools you were told it has).
    """
    raise ToolInputError(
        f"{DELEGATE_TOOL} runs as a child loop of a loop whose agent may delegate (its "
        "'delegates' in the agents file); it cannot run as a plain tool"
    )


def builtin_tools(settings: Settings) -> list[Tool]:
    """The built-in tools, configured from the worker's settings (``web_fetch`` makes its own
    HTTP client per call, bound by the egress rules)."""
    found = [
        web_fetch_tool(
            None, settings.web_fetch_max_bytes, settings.web_fetch_timeout, settings.egress_allow
        ),
        add,
        delegate,
    ]
    if settings.run_python:  # the walls raised once here: a worker without them does not start
        walls = Sandbox([Path(p) for p in settings.run_python_view])
        walls.check()
        found.append(run_python_tool(walls))
    if settings.file_root is not None:  # no default root: the operator names the readable one
        found.append(
            file_read_tool(
                settings.file_root,
                max_bytes=settings.web_fetch_max_bytes,
                allow_hidden=settings.file_read_hidden,
            )
        )
    return found
