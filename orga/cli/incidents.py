"""``orga pause`` / ``orga resume``: stop a misbehaving tool across every loop and task, every
loop and task of an agent, or one loop or task — and let them go.

A paused tool's calls do not run: each waits in its loop (or task), durably — approvals already
granted are kept — with its loop ``paused`` (``orga list --status paused``, ``orga pending``),
and runs once after ``orga resume`` — which tells the loops and tasks it held
(``orga.desk.releases``) — the waiting calls released spread over ``config.pause_recheck``. A
paused loop (or agent) holds its tool calls the same way, approved ones included, and makes no
model call: it waits before its next one (a call already running finishes); a paused task
holds its steps' calls. The pause lives in the store every worker shares
(``orga.runtime.pauses``). ``orga pause`` with nothing named lists the pauses.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from temporalio.service import RPCError

from orga.cli.common import Approver, CliError, client_for, console, execute, settings
from orga.desk.approvals import who_decides
from orga.desk.facts import DeskError
from orga.desk.releases import release_held
from orga.runtime.pauses import HELD_WITHIN, PAUSE_NAME, PauseBook
from orga.runtime.safe_text import one_line

__all__ = ["register"]

LoopId = Annotated[
    str | None, typer.Argument(help="A loop's or a task's workflow id (pause that one).")
]
ToolName = Annotated[str | None, typer.Option("--tool", help="A tool, across every loop.")]
AgentName = Annotated[str | None, typer.Option("--agent", help="Every loop and task of an agent.")]


def register(app: typer.Typer) -> None:
    """Add ``pause`` and ``resume`` to ``app``."""
    app.command(
        "pause", epilog="Example: orga pause --tool issue_refund --reason 'refunds double-paid'"
    )(pause)
    app.command("resume", epilog="Example: orga resume --tool issue_refund")(resume)


def _target(loop: str | None, tool: str | None, agent: str | None) -> str | None:
    """The pause's key (``loop:ID``, ``tool:NAME``, ``agent:NAME``); None when none is named."""
    named = [(kind, v) for kind, v in (("loop", loop), ("tool", tool), ("agent", agent)) if v]
    if not named:
        return None
    if len(named) > 1:
        raise CliError("name one thing: a loop's id, --tool NAME or --agent NAME", 2)
    [(kind, value)] = named
    if not PAUSE_NAME.fullmatch(value):
        raise CliError(f"{value!r} is not a {kind} name or id", 2)
    return f"{kind}:{value}"


def pause(
    loop: LoopId = None,
    tool: ToolName = None,
    agent: AgentName = None,
    reason: Annotated[str | None, typer.Option(help="Why (shown on the desk, journaled).")] = None,
    approver: Approver = None,
) -> None:
    """Pause a tool (its calls wait, unrun), an agent's loops and tasks or one of them (their
    tool calls wait, approved ones included, and a loop waits before its next model call); with
    nothing named, list the pauses."""

    async def body() -> int:
        book = PauseBook(settings().store())
        out = console()
        target = _target(loop, tool, agent)
        if target is None:
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
        held = book.pause(target, who, reason.strip())
        # Every worker reads the pauses again within HELD_WITHIN: once it has passed, no call
        # the pause names begins (one already running finishes).
        await asyncio.sleep(HELD_WITHIN)
        out.print(
            one_line(
                f"{held.describe()} — no call it names begins from now (one already running "
                "finishes) until `orga resume` names it"
            ),
            markup=False,
            highlight=False,
        )
        return 0

    execute(body)


def resume(loop: LoopId = None, tool: ToolName = None, agent: AgentName = None) -> None:
    """End a pause: what waits for it goes on, each call once, spread out."""

    async def body() -> int:
        target = _target(loop, tool, agent)
        if target is None:
            raise CliError("name what to resume: a loop's id, --tool NAME or --agent NAME", 2)
        config = settings()
        ended = PauseBook(config.store()).resume(target)
        kind, _, name = target.partition(":")
        if ended is None:
            raise CliError(f"{kind} {name!r} is not paused")
        out = console()
        out.print(
            one_line(f"resumed {kind} {name!r} (paused by {ended.by}: {ended.reason})"),
            markup=False,
            highlight=False,
        )
        try:
            told = await release_held(await client_for(config), target)
        except (CliError, RPCError) as error:
            out.print(
                one_line(
                    f"the loops it held go on within an hour: they could not be told now ({error})"
                ),
                markup=False,
                highlight=False,
            )
            return 0
        if told:
            out.print(
                f"told {told} held loop(s) or task(s) to go on", markup=False, highlight=False
            )
        return 0

    execute(body)
