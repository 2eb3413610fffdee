"""``orga chat [ID]``: talk with a thread in the terminal — answers streamed, approvals asked
inline, and nothing lost on the way out.

Without an id it starts a thread (``config.thread``, streaming on) on the worker's task queue;
with one it joins that thread. Each line typed is the next message (the ``message`` update);
the model's text prints while it arrives; a call that waits for approval is shown with its
arguments and asked ``approve? [y/N]`` (the decision is signed with ``ORGA_APPROVER_KEY`` when
set, as ``orga approve``'s). ``/help`` lists the slash commands; ``/close`` ends the thread;
Ctrl-D or Ctrl-C leaves it waiting, durably, for ``orga chat ID`` (or ``orga say ID``) to go on.

It joins any thread, whatever started it: a thread without a stream (``orga run --thread``,
``orga.start_thread`` without ``config.stream``) shows each answer when it arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import threading
import uuid
from datetime import timedelta
from typing import Annotated

import typer
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from orga.cli.common import (
    Model,
    Provider,
    Tools,
    client_for,
    console,
    execute,
    loop_input,
    settings,
    start_workflow,
)
from orga.cli.run import TextPrinter
from orga.cli.waiting import ensure_worker
from orga.contracts.approvals import PendingApproval
from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.threads import ThreadConfig, TurnResult
from orga.desk.approvals import approve, said, signing_key, who_decides
from orga.desk.facts import DeskError, read_state
from orga.desk.inbox_text import argument_lines
from orga.desk.sender import close_thread, send_message, wait_for_turn
from orga.runtime.safe_text import one_line, printable

__all__ = ["register"]

_LOOK = 0.3
"""Seconds between two looks at the thread's state while a turn runs (for approvals)."""

_COMMANDS = {
    "/help": "list these commands",
    "/close": "end the thread (its last answer is its result)",
}
"""The slash commands ``orga chat`` understands, with what each does (``/help`` lists them)."""
_COMMAND = re.compile(r"/[a-z][a-z-]*")
"""What a line's first word looks like when it is meant as a command (a path is a message)."""
_HINT = "type a message; /help lists the commands; Ctrl-D or Ctrl-C leaves the thread waiting"


def register(app: typer.Typer) -> None:
    """Add ``orga chat`` to ``app``."""
    app.command(
        "chat", epilog="Example: orga chat --tool add   (join one: orga chat thread-3f2a9c1b7d4e)"
    )(chat)


def chat(
    workflow_id: Annotated[
        str | None, typer.Argument(help="A thread to join; default: start a new one.")
    ] = None,
    tool: Tools = None,
    provider: Provider = None,
    model: Model = None,
    agent_id: Annotated[
        str | None, typer.Option("--agent", help="Who the thread acts as (config.agent_id).")
    ] = None,
    system_prompt: Annotated[str | None, typer.Option(help="The system message.")] = None,
    idle_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds the thread waits for a message before it ends (default: a week)."
        ),
    ] = None,
    sender: Annotated[
        str | None,
        typer.Option(help="Who speaks and decides; default: ORGA_APPROVER, else the OS user."),
    ] = None,
) -> None:
    """Talk with a thread: each line is a message, answers stream, approvals are asked here."""

    async def body() -> int:
        found = settings()
        client = await client_for(found)
        who = who_decides(sender)
        thread_id = workflow_id
        if thread_id is None:
            thread_id = await _start(
                client,
                tools=tool or [],
                provider=provider,
                model=model,
                agent_id=agent_id,
                system_prompt=system_prompt,
                idle_timeout=idle_timeout,
            )
        else:
            await _join(client, thread_id)
        lines = _Lines()
        say = console().print
        say(_HINT, markup=False)
        streams = _Streams()
        try:
            while True:
                line = await lines.next("you> ")
                if line is None:  # Ctrl-D
                    say(_left(thread_id), markup=False)
                    return 0
                text = line.strip()
                if not text:
                    continue
                if text == "/help":
                    say(_help(thread_id), markup=False)
                    continue
                if text == "/close":
                    await close_thread(client, thread_id, reason="closed in orga chat", sender=who)
                    result = await client.get_workflow_handle(
                        thread_id, result_type=LoopResult
                    ).result()
                    say(f"thread {thread_id} closed ({result.termination_reason})", markup=False)
                    return 0
                word = text.split()[0]
                if _COMMAND.fullmatch(word) and word not in _COMMANDS:  # not `/etc/hosts …`
                    say(f"no command {word!r}: {_help(thread_id)}", markup=False)
                    continue
                taken = await send_message(client, thread_id, text, sender=who)
                if taken.turn is None:
                    say("this loop is not a thread: the message steers it", markup=False)
                    continue
                await _turn(client, thread_id, taken.turn, lines, who, streams)
        except asyncio.CancelledError:  # Ctrl-C: this command stops, the thread waits on
            print(printable(_left(thread_id)), file=sys.stderr, flush=True)
            raise

    execute(body)


def _help(thread_id: str) -> str:
    shown = one_line(thread_id)
    listed = "; ".join(f"{name}: {what}" for name, what in _COMMANDS.items())
    return (
        f"{listed}. Any other line is your next message to thread {shown}; Ctrl-D or Ctrl-C "
        f"leaves it waiting for you (orga chat {shown} goes on)"
    )


def _left(thread_id: str) -> str:
    shown = one_line(thread_id)
    return (
        f"thread {shown} waits for your next message: orga chat {shown} (or orga say {shown} '…')"
    )


async def _start(
    client: Client,
    *,
    tools: list[str],
    provider: str | None,
    model: str | None,
    agent_id: str | None,
    system_prompt: str | None,
    idle_timeout: float | None,
) -> str:
    thread = (
        ThreadConfig(idle_timeout=timedelta(seconds=idle_timeout))
        if idle_timeout
        else ThreadConfig()
    )
    request = loop_input(
        None,
        tools=tools,
        provider=provider,
        model=model,
        agent_id=agent_id,
        system_prompt=system_prompt,
        stream=True,
        thread=thread,
    )
    found = settings()
    await ensure_worker(client, found.task_queue, wait=True, what="thread")
    thread_id = f"thread-{uuid.uuid4().hex[:12]}"
    await start_workflow(
        found,
        LOOP_WORKFLOW,
        request,
        workflow_id=thread_id,
        result_type=LoopResult,
        summary=f"{request.config.agent_id}: a thread (orga chat)",
        client=client,
    )
    return thread_id


async def _join(client: Client, thread_id: str) -> None:
    state = await read_state(client, thread_id, LoopState, LOOP_WORKFLOW)
    thread = state.thread
    if thread is None:
        raise DeskError(f"{thread_id!r} is a loop, not a thread: `orga say` steers it")
    if thread.ended is not None:
        raise DeskError(f"thread {thread_id!r} has ended ({thread.ended})")
    last = thread.last_turn
    if last is not None:
        console().print(f"thread {thread_id}, turn {last.turn}: {last.said}", markup=False)


class _Streams:
    """Whether the thread streams its model's text (``config.stream``), learnt at the first
    turn: a thread without a stream has no offset to read (the query is unknown to it)."""

    def __init__(self) -> None:
        self.streaming: bool | None = None

    async def offset(self, reader: WorkflowStreamClient) -> int | None:
        """Where the next turn's text begins in the stream; None without a stream."""
        if self.streaming is False:
            return None
        try:
            found = await reader.get_offset()
        except WorkflowQueryFailedError:
            if self.streaming:  # it had one: a failure of its own
                raise
            self.streaming = False
            return None
        self.streaming = True
        return found


async def _turn(
    client: Client, thread_id: str, turn: int, lines: _Lines, who: str, streams: _Streams
) -> None:
    """Follow one turn: its text as it streams (a thread with a stream), its approvals asked,
    then its answer."""
    printer = TextPrinter(prefix="orga> ")
    reader = WorkflowStreamClient.create(client, thread_id)
    start = await streams.offset(reader)
    streaming = asyncio.ensure_future(
        printer.follow(reader, start) if start is not None else _nothing()
    )
    answer = asyncio.ensure_future(wait_for_turn(client, thread_id, turn))
    asked: set[str] = set()
    try:
        while not answer.done():
            await asyncio.wait({answer}, timeout=_LOOK)
            if answer.done():
                break
            state = await read_state(client, thread_id, LoopState, LOOP_WORKFLOW)
            for pending in state.pending_approvals:
                if pending.call_id not in asked:
                    asked.add(pending.call_id)
                    await _ask(client, thread_id, pending, lines, who)
        result: TurnResult = answer.result()
        with contextlib.suppress(TimeoutError):  # what is left of the stream
            await asyncio.wait_for(asyncio.shield(streaming), 2)
    finally:
        for task in (streaming, answer):
            task.cancel()
        await asyncio.gather(streaming, answer, return_exceptions=True)
    if printer.last.strip() != result.said.strip():
        console().print(f"orga> {result.said}", markup=False, highlight=False)


async def _nothing() -> None:
    """The stream of a thread that has none."""


async def _ask(
    client: Client, thread_id: str, pending: PendingApproval, lines: _Lines, who: str
) -> None:
    say = console().print
    say(f"approval needed: {pending.tool} ({pending.call_id}) — {pending.reason}", markup=False)
    shown, _ = argument_lines(pending.arguments, full=True)
    for line in shown:
        say(f"  {line}", markup=False)
    reply = (await lines.next("approve? [y/N, or a reason to deny] ") or "").strip()
    approved = reply.lower() in ("y", "yes")
    record = await approve(
        client,
        thread_id,
        pending.call_id,
        approved=approved,
        reason=None
        if approved
        else (reply if reply.lower() not in ("", "n", "no") else "denied in orga chat"),
        approver=who,
        key=signing_key(settings()),
    )
    say(said(record), markup=False)


class _Lines:
    """Lines typed on stdin, read by a daemon thread (a Ctrl-C never waits for it)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._asked = threading.Event()
        loop = asyncio.get_running_loop()

        def read() -> None:
            while True:
                self._asked.wait()
                self._asked.clear()
                line = sys.stdin.readline()
                loop.call_soon_threadsafe(self._queue.put_nowait, line or None)
                if not line:
                    return

        threading.Thread(target=read, name="orga-chat-stdin", daemon=True).start()

    async def next(self, prompt: str) -> str | None:
        """The next line typed after ``prompt`` (``None`` at the end of input)."""
        sys.stdout.write(prompt)
        sys.stdout.flush()
        self._asked.set()
        return await self._queue.get()
