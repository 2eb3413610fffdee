"""``orga say``: a person's message to a running loop.

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
    """Add ``orga say`` to ``app``."""
    app.command(
        "say", epilog="Example: orga say loop-3f2a9c1b7d4e 'only refund the lamp, not the cable'"
    )(say)


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
    as_json: Json = False,
) -> None:
    """Send a running loop a message: the model reads it before its next call."""

    async def body() -> int:
        who = desk.who_decides(sender)
        client = await client_for(settings())
        taken = await desk.send_message(client, workflow_id, text, sender=who, wait=wait)
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
