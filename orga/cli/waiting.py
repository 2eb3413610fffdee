"""Waiting on a worker without hanging in silence.

A verb that starts a workflow and waits for it (``orga run``, ``orga task start``) first asks
the server whether any worker serves the task queue (``orga.runtime.presence``): with none, it
refuses in one line naming the command that starts one (``--no-wait`` starts the workflow
anyway and says it will wait). While it waits, it says what for: on a terminal a status line
on stderr (the workflow's status, phase and iteration, from its ``state`` query); elsewhere (a
pipe, a log) one line when the worker goes away, and one for each call that begins to wait for
a person or is held by a pause; nothing extra with ``--json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import sys
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console
from rich.status import Status
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from orga.cli.common import CliError
from orga.contracts.messages import STATE_QUERY
from orga.runtime.presence import presence, registries, seen, start_hint
from orga.runtime.safe_text import one_line

if TYPE_CHECKING:
    from orga.runtime.store import Store

__all__ = ["ensure_answering", "ensure_worker", "reporting"]


POLL_SECONDS = 2.0
"""How often the status line asks the workflow and the server (a query and two cheap calls)."""
FIRST_POLL = 2.0
"""How long a verb that finds no worker looks again, for one that started a moment ago: a
worker's first poll reaches the server a moment after the worker starts."""


async def _served(client: Client, task_queue: str) -> bool:
    """Whether a worker serves ``task_queue``, or starts to within ``FIRST_POLL`` (the server's
    errors are raised by the first ask, not taken for "no worker")."""
    if await presence(client, task_queue):
        return True
    return await seen(client, task_queue, within=FIRST_POLL)


async def ensure_worker(client: Client, task_queue: str, *, wait: bool, what: str) -> None:
    """Refuse to start ``what`` that would wait for a worker when none serves ``task_queue``
    (``wait``), or say on stderr that it will wait for one.

    Raises:
        CliError: no worker serves the queue and the caller would wait for the result.
    """
    if await _served(client, task_queue):
        return
    if wait:
        raise CliError(
            f"no worker is polling task queue {task_queue!r}, so the {what} would wait for one: "
            f"start one ({start_hint(task_queue)}), or pass --no-wait to leave it for a worker "
            "that starts later. Nothing was started."
        )
    sys.stderr.write(
        one_line(
            f"orga: no worker is polling task queue {task_queue!r} yet: the {what} waits for "
            f"one ({start_hint(task_queue)})"
        )
        + "\n"
    )


async def ensure_answering(
    client: Client, workflow_id: str, task_queue: str, *, held: str, otherwise: str = ""
) -> None:
    """Refuse at once when no worker polls ``task_queue``: a query of ``workflow_id``'s state
    (where ``held`` lives) would wait for one until its timeout, then fail.

    Raises:
        CliError: no worker polls the task queue (``otherwise``: another way, said after).
    """
    if not await _served(client, task_queue):
        raise CliError(
            f"no worker is polling task queue {task_queue!r} to answer for {workflow_id!r}: "
            f"{held} lives in the workflow's state, which a worker reads (a finished one's "
            f"too); start one there ({start_hint(task_queue)}){otherwise}"
        )


async def ensure_tools(client: Client, task_queue: str, tools: list[str], store: Store) -> None:
    """Refuse a loop that names a tool no worker of ``task_queue`` registers, with the names
    it may have meant (workers say what they register in their identity, by a digest of a
    list ``store`` holds; where none says, or the server cannot list them, nothing is checked
    here and the loop's setup does it).

    Raises:
        CliError: (exit 2) a tool no live worker registers. Nothing is started.
    """
    try:
        found = await registries(client, task_queue, store)
        listed = [t for t in found.values() if t is not None]
    except RPCError:  # the server could not say: the loop's setup checks the tools
        return
    if not listed:
        return
    known = sorted({name for registry in listed for name in registry})
    for tool in tools:
        if any(tool in registry for registry in listed):
            continue
        close = difflib.get_close_matches(tool, known, n=3, cutoff=0.5)
        meant = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise CliError(
            f"no worker of task queue {task_queue!r} registers a tool {tool!r}{meant} "
            f"(registered: {', '.join(known)}). Nothing was started; a tool of your own needs "
            "its module on the worker (ORGA_TOOL_MODULES).",
            code=2,
        )


@contextlib.asynccontextmanager
async def reporting(
    client: Client, handle: WorkflowHandle[Any, Any], task_queue: str, *, quiet: bool
) -> AsyncGenerator[None]:
    """While the body waits for ``handle``'s result: say what it waits for (see the module);
    ``quiet`` (``--json``) says nothing."""
    if quiet:
        yield
        return
    terminal = sys.stderr.isatty()
    out = Console(file=sys.stderr, highlight=False, soft_wrap=not terminal)  # a log: whole lines
    status = out.status("waiting for the workflow", spinner="dots") if terminal else None
    watching = asyncio.create_task(_watch(client, handle, task_queue, status, out))
    try:
        if status is not None:
            with status:
                yield
        else:
            yield
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)


async def _watch(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    task_queue: str,
    status: Status | None,
    out: Console,
) -> None:
    said_gone = False
    told: set[str] = set()
    """Calls already said to wait for a person (not on a terminal: each once)."""
    while True:
        await asyncio.sleep(POLL_SECONDS)
        if not await presence(client, task_queue):
            line = (
                f"no worker is polling task queue {task_queue!r}: waiting for one "
                f"({start_hint(task_queue)})"
            )
            if status is not None:
                status.update(line)
            elif not said_gone:
                out.print(f"orga: {line}", markup=False, highlight=False)
                said_gone = True
            continue
        said_gone = False
        with contextlib.suppress(Exception):  # a state that cannot be read: keep the last line
            state = await handle.query(
                STATE_QUERY, result_type=dict[str, Any], rpc_timeout=timedelta(seconds=POLL_SECONDS)
            )
            if status is not None:
                status.update(one_line(_describe(state)))
                continue
            for line in _newly_waiting(state, handle.id, told):  # piped: each wait said once
                out.print(f"orga: {one_line(line)}", markup=False, highlight=False)


def _newly_waiting(state: dict[str, Any], workflow_id: str, told: set[str]) -> list[str]:
    """What the loop now waits for that was not said yet (``told`` is updated): each call
    waiting for a person's decision, and each call a pause holds."""
    lines: list[str] = []
    waiting: object = state.get("pending_approvals")
    for item in cast(list[object], waiting) if isinstance(waiting, list) else []:
        if not isinstance(item, dict):
            continue
        call = cast(dict[str, object], item)
        call_id, tool = str(call.get("call_id", "")), str(call.get("tool", ""))
        if call_id and f"approval:{call_id}" not in told:
            told.add(f"approval:{call_id}")
            lines.append(
                f"call {call_id} ({tool}) waits for a person's decision: orga pending; orga "
                f"approve {workflow_id} {call_id} --reason '…' (or orga deny)"
            )
    paused: object = state.get("paused_calls")
    held = cast(dict[str, object], paused) if isinstance(paused, dict) else {}
    for call_id, why in held.items():
        if f"paused:{call_id}" not in told:
            told.add(f"paused:{call_id}")
            lines.append(f"call {call_id} is held by a pause ({why}): orga resume … lets it go")
    return lines


def _describe(state: dict[str, Any]) -> str:
    parts = [str(state.get("status") or "running")]
    if state.get("phase"):
        parts.append(str(state["phase"]))
    if state.get("iteration"):
        parts.append(f"iteration {state['iteration']}")
    usage: object = state.get("usage")
    tokens = cast(dict[str, object], usage).get("total_tokens") if isinstance(usage, dict) else 0
    if tokens:
        parts.append(f"{tokens} tokens")
    waiting: object = state.get("pending_approvals")
    if isinstance(waiting, list) and waiting:
        parts.append(f"{len(cast(list[object], waiting))} approval(s) waiting: orga pending")
    paused: object = state.get("paused_calls")
    if isinstance(paused, dict) and paused:
        parts.append(f"{len(cast(dict[str, object], paused))} call(s) held by a pause: orga resume")
    return "waiting for the workflow · " + " · ".join(parts)
