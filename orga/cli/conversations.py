"""``orga say``, ``orga close`` and ``orga cancel``: a person steering, answering, closing or
stopping a running loop.

To a thread (``config.thread``), ``orga say ID "…"`` is the next message: it prints the answer
of the turn the message joins, once the turn has one. ``orga close ID`` ends a thread (now, or
after its running turn; its last answer is the result).

``orga cancel ID --reason …`` cancels a loop or a task through Temporal: the reason is
journaled (``Terminated``, status ``cancelled``), a running tool is told through its heartbeats
(``ctx.cancelled``), and a task compensates the steps that ran.

The message joins the loop's conversation at its next Observe — never in the middle of a tool
or a model call — and the model reads it before its next call (steering). It is journaled
(``MessageReceived``) under ``--sender`` (else ``ORGA_APPROVER``, else the operating-system
user: a name the loop records, as an unsigned decision's, not a proof).
"""

from __future__ import annotations

from typing import Annotated

import typer

from orga.cli.common import Json, client_for, console, execute, print_json, settings
from orga.desk import inbox as desk

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``orga say`` and ``orga cancel`` to ``app``."""
    app.command(
        "say", epilog="Example: orga say loop-3f2a9c1b7d4e 'only refund the lamp, not the cable'"
    )(say)
    app.command(
        "cancel", epilog="Example: orga cancel loop-3f2a9c1b7d4e --reason 'wrong customer'"
    )(cancel)
    app.command("close", epilog="Example: orga close thread-3f2a9c1b7d4e --reason 'done'")(close)


def cancel(
    workflow_id: Annotated[str, typer.Argument(help="The loop's or task's workflow id.")],
    reason: Annotated[str, typer.Option(help="Why (journaled).")] = "cancelled by a person",
    wait: Annotated[float, typer.Option(help="Seconds to wait for it to stop.", min=0.0)] = 30.0,
    as_json: Json = False,
) -> None:
    """Cancel a running loop or task: its running tool is stopped, a task compensates."""

    async def body() -> int:
        client = await client_for(settings())
        facts = await desk.cancel(client, workflow_id, reason=reason, wait=wait)
        if as_json:
            print_json(facts)
        elif facts.status == "running":
            console().print(
                f"cancel requested for {workflow_id}; it is still stopping (a task compensates "
                f"what ran): `orga state {workflow_id}` shows when it has",
                markup=False,
            )
        else:
            ended = "cancelled" if facts.status == "canceled" else facts.status  # orga's word
            console().print(f"{workflow_id} {ended}: {reason}", markup=False)
        return 0

    execute(body, as_json=as_json)


def say(
    workflow_id: Annotated[str, typer.Argument(help="The loop's workflow id.")],
    text: Annotated[str, typer.Argument(help="The message (the model reads it).")],
    sender: Annotated[
        str | None,
        typer.Option(help="Who says it; default: ORGA_APPROVER, else the operating-system user."),
    ] = None,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for the loop to take the message.", min=1.0)
    ] = 30.0,
    answer: Annotated[
        bool,
        typer.Option(
            "--answer/--no-answer",
            help="To a thread: wait for the turn's answer and print it (default).",
        ),
    ] = True,
    as_json: Json = False,
) -> None:
    """Send a loop a message: the model reads it before its next call; a thread answers it."""

    async def body() -> int:
        who = desk.who_decides(sender)
        client = await client_for(settings())
        taken = await desk.send_message(client, workflow_id, text, sender=who, wait=wait)
        if taken.turn is not None and answer:  # a thread: the turn's answer
            turn = await desk.wait_for_turn(client, workflow_id, taken.turn)
            if as_json:
                print_json(turn)
            else:
                console().print(turn.output, markup=False, highlight=False)
            return 0
        if as_json:
            print_json(taken)
        else:
            console().print(
                f"message {taken.seq} taken by {workflow_id} at {taken.at.isoformat()}: the "
                "model reads it before its next call",
                markup=False,
            )
        return 0

    execute(body, as_json=as_json)


def close(
    workflow_id: Annotated[str, typer.Argument(help="The thread's workflow id.")],
    reason: Annotated[str, typer.Option(help="Why (journaled).")] = "closed",
    sender: Annotated[
        str | None,
        typer.Option(help="Who closes it; default: ORGA_APPROVER, else the operating-system user."),
    ] = None,
    as_json: Json = False,
) -> None:
    """Close a thread: it ends now (its last answer is the result), or after its running turn."""

    async def body() -> int:
        client = await client_for(settings())
        who = desk.who_decides(sender)
        closed = await desk.close_thread(client, workflow_id, reason=reason, sender=who)
        if as_json:
            print_json(closed)
        elif closed.after_turn:
            console().print(
                f"{workflow_id} closes once its running turn is answered ({closed.turns} turn(s) "
                "answered so far)",
                markup=False,
            )
        else:
            console().print(f"{workflow_id} closed after {closed.turns} turn(s)", markup=False)
        return 0

    execute(body, as_json=as_json)
