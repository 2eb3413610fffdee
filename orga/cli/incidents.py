"""``orga pause --tool`` / ``orga resume --tool``: stop one misbehaving tool across every loop.

A paused tool's calls do not run: each waits in its loop, durably — approvals already granted
are kept — with its loop ``paused`` (``orga list --status paused``, ``orga pending``), and runs
once after ``orga resume``, the waiting calls released spread over ``config.pause_recheck``.
The pause lives in the store every worker shares (``orga.runtime.pauses``). ``orga pause``
with no option lists the pauses.
"""

from __future__ import annotations

import re
from typing import Annotated

import typer

from orga.cli.common import Approver, CliError, console, execute, settings
from orga.desk.approvals import who_decides
from orga.desk.facts import DeskError
from orga.runtime.pauses import PauseBook
from orga.runtime.safe_text import one_line

__all__ = ["register"]

_TOOL = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")

ToolName = Annotated[str | None, typer.Option("--tool", help="The tool to pause or resume.")]


def register(app: typer.Typer) -> None:
    """Add ``pause`` and ``resume`` to ``app``."""
    app.command(
        "pause", epilog="Example: orga pause --tool issue_refund --reason 'refunds double-paid'"
    )(pause)
    app.command("resume", epilog="Example: orga resume --tool issue_refund")(resume)


def _tool(name: str | None) -> str:
    if name is None or not _TOOL.match(name):
        raise CliError("give --tool NAME (a tool's name: letters, digits, '_' or '-')", 2)
    return name


def pause(
    tool: ToolName = None,
    reason: Annotated[str | None, typer.Option(help="Why (shown on the desk, journaled).")] = None,
    approver: Approver = None,
) -> None:
    """Pause a tool across every loop (its calls wait, not run); without --tool, list pauses."""

    async def body() -> int:
        book = PauseBook(settings().store())
        out = console()
        if tool is None:
            found = book.all()
            for held in found:
                out.print(one_line(held.describe()), markup=False, highlight=False)
            if not found:
                out.print("no tool is paused", markup=False)
            return 0
        if not reason or not reason.strip():
            raise CliError("say why with --reason: it is shown with every call that waits", 2)
        try:
            who = who_decides(approver)
        except DeskError as error:
            raise CliError(str(error), 2) from error
        held = book.pause(_tool(tool), who, reason.strip())
        out.print(
            one_line(f"{held.describe()} — its calls wait until `orga resume --tool {tool}`"),
            markup=False,
            highlight=False,
        )
        return 0

    execute(body)


def resume(tool: ToolName = None) -> None:
    """End a tool's pause: the calls that wait for it run, each once, spread out."""

    async def body() -> int:
        ended = PauseBook(settings().store()).resume(_tool(tool))
        if ended is None:
            raise CliError(f"tool {tool!r} is not paused")
        console().print(
            one_line(f"resumed tool {tool!r} (paused by {ended.by}: {ended.reason})"),
            markup=False,
            highlight=False,
        )
        return 0

    execute(body)
