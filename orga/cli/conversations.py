"""``orga say``, ``orga close``, ``orga fork`` and ``orga cancel``: a person steering, answering,
closing, forking or stopping a loop.

``orga fork ID --at N [--say …]`` starts a new loop from loop ID's state after turn N (``orga
journal``'s ``it N``), the source untouched and nothing it ran run again. It says what became
of the fork, as its workflow decided: its answer, a thread's first answer, or — a thread that
says nothing — that it waits for its next message; or that it failed, and why (exit 1).

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

import asyncio
import sys
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError

from orga.cli.common import (
    CliError,
    Json,
    Model,
    Provider,
    client_for,
    console,
    execute,
    print_json,
    settings,
    with_workflow_id,
)
from orga.cli.run import failure_text, print_thread_hint
from orga.cli.views import render_result
from orga.cli.waiting import ensure_worker, reporting
from orga.client import ThreadHandle, start_fork
from orga.contracts.errors import describe_validation_error
from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.vocabulary import PolicyMode
from orga.desk.approvals import who_decides
from orga.desk.facts import DeskError, describe, read_state
from orga.desk.sender import cancel as cancel_workflow
from orga.desk.sender import close_thread, send_message, wait_for_turn
from orga.runtime.forks import ForkPointError
from orga.runtime.safe_text import one_line

__all__ = ["register"]

_T = TypeVar("_T")
_LOOK = 0.2
"""Seconds between two looks at a forked thread's state, until it waits for a message."""


def register(app: typer.Typer) -> None:
    """Add ``orga say`` and ``orga cancel`` to ``app``."""
    app.command(
        "say", epilog="Example: orga say loop-3f2a9c1b7d4e 'only refund the lamp, not the cable'"
    )(say)
    app.command(
        "cancel", epilog="Example: orga cancel loop-3f2a9c1b7d4e --reason 'wrong customer'"
    )(cancel)
    app.command("close", epilog="Example: orga close thread-3f2a9c1b7d4e --reason 'done'")(close)
    app.command(
        "fork", epilog="Example: orga fork loop-3f2a9c1b7d4e --at 2 --say 'use the other card'"
    )(fork)


def cancel(
    workflow_id: Annotated[str, typer.Argument(help="The loop's or task's workflow id.")],
    reason: Annotated[str, typer.Option(help="Why (journaled).")] = "cancelled by a person",
    wait: Annotated[
        float,
        typer.Option(
            help="Seconds to wait for it to close (a loop waits for a running call of a tool "
            "with effects; any other call is told to stop, not waited for).",
            min=0.0,
        ),
    ] = 30.0,
    as_json: Json = False,
) -> None:
    """Cancel a running loop or task: its running tool is stopped, a task compensates."""

    async def body() -> int:
        client = await client_for(settings())
        facts = await cancel_workflow(client, workflow_id, reason=reason, wait=wait)
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
        who = who_decides(sender)
        client = await client_for(settings())
        taken = await send_message(client, workflow_id, text, sender=who, wait=wait)
        if taken.turn is not None and answer:  # a thread: the turn's answer
            handle = client.get_workflow_handle(workflow_id)
            queue = (await handle.describe()).task_queue
            async with reporting(client, handle, queue, quiet=as_json):  # what it waits for
                turn = await wait_for_turn(client, workflow_id, taken.turn)
            if as_json:
                print_json(with_workflow_id(workflow_id, turn))
            else:
                console().print(turn.said, markup=False, highlight=False)
            return 0
        if as_json:
            print_json(with_workflow_id(workflow_id, taken))
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
        who = who_decides(sender)
        closed = await close_thread(client, workflow_id, reason=reason, sender=who)
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


def fork(
    workflow_id: Annotated[str, typer.Argument(help="The loop to fork (it may have ended).")],
    at: Annotated[int, typer.Option(help="The turn after which to fork (orga journal: it N).")],
    say: Annotated[str | None, typer.Option(help="A user message added after that turn.")] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="--say replaces the last user message instead.")
    ] = False,
    model: Model = None,
    provider: Provider = None,
    policy: Annotated[PolicyMode | None, typer.Option(help="Another gate for the fork.")] = None,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Print the fork's id and return at once.")
    ] = False,
    fork_id: Annotated[
        str | None, typer.Option("--id", help="The fork's workflow id; default: a new one.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Start a new loop from a loop's state after turn N, optionally saying something else."""

    async def body() -> int:
        found = settings()
        client = await client_for(found)
        named: dict[str, str | None] = {"model": model, "provider": provider, "policy": policy}
        overrides: dict[str, Any] = {k: v for k, v in named.items() if v}
        try:
            handle = await start_fork(
                client, workflow_id, at, say=say, replace=replace, workflow_id=fork_id, **overrides
            )
        except ForkPointError as error:
            raise DeskError(str(error)) from error
        except ValidationError as error:
            raise CliError(f"invalid override: {describe_validation_error(error)}", 2) from error
        print(
            f"forked {one_line(workflow_id)} after turn {at} as {one_line(handle.id)}",
            file=sys.stderr,
        )
        if no_wait:
            if as_json:
                print_json({"workflow_id": handle.id})
            return 0
        task_queue = (await describe(client, handle.id)).task_queue
        await ensure_worker(client, task_queue, wait=False, what="fork")
        if isinstance(handle, ThreadHandle):
            if say is not None:
                turn = await _or_its_failure(client, handle.id, wait_for_turn(client, handle.id, 1))
                if as_json:
                    print_json(with_workflow_id(handle.id, turn))
                else:
                    console().print(turn.said, markup=False, highlight=False)
            else:  # it starts from an answer: once set up, it waits for the next message
                await _or_its_failure(client, handle.id, _waits_for_a_message(client, handle.id))
                if as_json:
                    print_json({"workflow_id": handle.id, "status": "awaiting_message"})
            if not as_json:
                print_thread_hint(handle.id)
            return 0
        try:
            result = await handle.result()
        except WorkflowFailureError as error:
            raise CliError(f"the fork failed: {failure_text(error)}") from error
        if as_json:
            print_json(result)
        else:
            console().print(render_result(result), markup=False)
        return 0

    execute(body, as_json=as_json)


async def _waits_for_a_message(client: Client, thread_id: str) -> None:
    """Until the forked thread ``thread_id`` has set up and waits for its next message."""
    while True:
        state = await read_state(client, thread_id, LoopState, LOOP_WORKFLOW)
        if state.status == "awaiting_message":
            return
        await asyncio.sleep(_LOOK)


async def _or_its_failure(client: Client, fork_id: str, waiting: Awaitable[_T]) -> _T:
    """What ``waiting`` gives, unless the fork ``fork_id`` ends first (a fork is checked as it
    starts, in its workflow: a refusal there fails it).

    Raises:
        CliError: the fork failed (or ended) before ``waiting`` was done; what failed it.
    """
    handle = client.get_workflow_handle(fork_id, result_type=LoopResult)
    ended = asyncio.ensure_future(handle.result())
    job = asyncio.ensure_future(waiting)
    try:
        await asyncio.wait({ended, job}, return_when=asyncio.FIRST_COMPLETED)
        if job.done() and job.exception() is None:
            return job.result()
        if not ended.done() and (await describe(client, fork_id)).status == "running":
            return job.result()  # it runs on: what went wrong is the waiting's (raised here)
        try:
            result = await ended
        except WorkflowFailureError as error:
            raise CliError(f"the fork failed: {failure_text(error)}") from error
        raise CliError(f"the fork ended before it was ready ({result.termination_reason})")
    finally:
        for task in (ended, job):
            task.cancel()
        await asyncio.gather(ended, job, return_exceptions=True)
