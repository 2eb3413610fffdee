"""``orga run``, ``state``, ``journal`` and ``list``: start reasoning loops and watch them.

Over 400 lines: the four everyday verbs (``run``, ``state``, ``journal``, ``list``), which
share one client, the stream printer and the fallback to what Temporal records.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import Awaitable
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Annotated, Any, Literal

import typer
from opentelemetry.trace import Span, SpanKind
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from orga.cli.common import (
    CliError,
    Json,
    Model,
    Provider,
    Tools,
    client_for,
    console,
    execute,
    loop_input,
    print_json,
    print_table,
    settings,
    start_workflow,
    with_workflow_id,
)
from orga.cli.safe_text import json_text, one_line, printable
from orga.cli.views import (
    WorkflowRow,
    render_entry,
    render_result,
    render_state,
    rows_table,
    shorten,
)
from orga.cli.waiting import ensure_answering, ensure_tools, ensure_worker, reporting
from orga.contracts import search_attributes as sa
from orga.contracts.config import LoopConfig
from orga.contracts.inference import STREAM_TOPIC, StreamedText
from orga.contracts.journal import Journal
from orga.contracts.messages import JOURNAL_QUERY
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.threads import THREAD_MEMO, ThreadConfig
from orga.contracts.vocabulary import PolicyMode
from orga.core.genai import invocation_attributes
from orga.desk.inbox import KINDS, LOOP, TASK, DeskError, of_kind, read_state, wait_for_turn
from orga.runtime.tracing import tracer

__all__ = [
    "TextPrinter",
    "failure_text",
    "list_workflows",
    "print_thread_hint",
    "register",
]

Status = Literal[
    "running",
    "awaiting_approval",
    "awaiting_review",
    "awaiting_message",
    "awaiting_worker",
    "completed",
    "failed",
    "cancelled",
]


def register(app: typer.Typer) -> None:
    """Add the loop verbs to ``app``."""
    app.command(
        "run",
        epilog="Example: orga run 'What is 2+3?' --tool add --provider scripted",
    )(run)
    app.command(
        "state", epilog="Example: orga state loop-3f2a9c1b7d4e   (a task: orga task state ID)"
    )(state)
    app.command("journal", epilog="Example: orga journal loop-3f2a9c1b7d4e --follow")(journal)
    app.command("list", epilog="Example: orga list --kind task --status failed --agent shop")(
        list_command
    )


# ---- run ---------------------------------------------------------------------------------


def run(
    prompt: Annotated[str, typer.Argument(help="The task, as the user's first message.")],
    tool: Tools = None,
    provider: Provider = None,
    model: Model = None,
    agent_id: Annotated[
        str | None,
        typer.Option(
            "--agent", "--agent-id", help="Who the loop acts as (config.agent_id, the principal)."
        ),
    ] = None,
    policy: Annotated[
        PolicyMode | None, typer.Option(help="The gate: default (fail closed), cedar, opa, …")
    ] = None,
    system_prompt: Annotated[
        str | None, typer.Option(help="Prepended as a system message.")
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(help="Sampling temperature, 0 to 2; default: the provider's.", min=0, max=2),
    ] = None,
    max_iterations: Annotated[int | None, typer.Option(help="Hard cap on model calls.")] = None,
    max_total_tokens: Annotated[int | None, typer.Option(help="Hard cap on tokens.")] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Hard cap on working time, in seconds.")
    ] = None,
    workflow_id: Annotated[
        str | None, typer.Option("--id", help="Workflow id; default: a new one.")
    ] = None,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Print the workflow id and return at once.")
    ] = False,
    stream: Annotated[
        bool, typer.Option("--stream", help="Print the model's text while it arrives.")
    ] = False,
    thread: Annotated[
        bool,
        typer.Option(
            "--thread",
            help="Start a thread: after its answer it waits for the next message "
            "(orga say ID '…', orga chat ID, orga close ID).",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Start a reasoning loop on the worker's task queue and print its answer."""

    async def body() -> int:
        request = loop_input(
            prompt,
            tools=tool or [],
            stream=stream or None,
            provider=provider,
            model=model,
            agent_id=agent_id,
            policy=policy,
            system_prompt=system_prompt,
            temperature=temperature,
            max_iterations=max_iterations,
            max_total_tokens=max_total_tokens,
            timeout=timedelta(seconds=timeout) if timeout is not None else None,
            thread=ThreadConfig() if thread else None,
        )
        kind = "thread" if thread else "loop"
        chosen_id = workflow_id or f"{kind}-{uuid.uuid4().hex[:12]}"
        found = settings()
        with _invoking(request.config, chosen_id) as span:
            client = await client_for(found)
            await ensure_worker(client, found.task_queue, wait=not no_wait, what="loop")
            with found.store() as store:
                await ensure_tools(client, found.task_queue, list(request.config.tools), store)
            handle = await start_workflow(
                found,
                LOOP,
                request,
                workflow_id=chosen_id,
                result_type=LoopResult,
                summary=f"{request.config.agent_id}: {shorten(prompt, 120)}",
                client=client,
            )
            if no_wait:
                if as_json:
                    print_json({"workflow_id": chosen_id, "run_id": handle.result_run_id})
                return 0
            if thread:
                return await _first_turn(client, chosen_id, stream=stream, as_json=as_json)
            shown = ""
            if stream and not as_json:
                shown = await print_stream(handle.id, handle.result())
            try:
                async with reporting(
                    client, handle, found.task_queue, quiet=as_json or bool(shown)
                ):
                    result = await handle.result()
            except WorkflowFailureError as error:
                raise CliError(f"the loop failed: {failure_text(error)}") from error
            except asyncio.CancelledError:  # Ctrl-C: this command stops, the loop does not
                shown_id = one_line(chosen_id)  # an --id is the user's text
                print(
                    printable(
                        f"orga: the loop goes on without this command. Follow it: orga journal "
                        f"{shown_id} --follow; stop it: orga cancel {shown_id} --reason '…'"
                    ),
                    file=sys.stderr,
                    flush=True,
                )
                raise
            if not result.usage.estimated:
                span.set_attributes(
                    {
                        "gen_ai.usage.input_tokens": result.usage.input_tokens,
                        "gen_ai.usage.output_tokens": result.usage.output_tokens,
                    }
                )
        if as_json:
            print_json(result)
        elif shown.strip() and shown.strip() == result.output.strip():
            console().print(render_result(result).removeprefix(result.output).strip(), markup=False)
        else:
            console().print(render_result(result), markup=False)
        return 0

    execute(body, as_json=as_json, traced=True)


async def _first_turn(client: Client, thread_id: str, *, stream: bool, as_json: bool) -> int:
    """``orga run --thread``: the first turn's answer, then how to go on."""
    shown = ""
    if stream and not as_json:
        shown = await print_stream(thread_id, wait_for_turn(client, thread_id, 1))
    turn = await wait_for_turn(client, thread_id, 1)
    if as_json:
        print_json(with_workflow_id(thread_id, turn))
        return 0
    if shown.strip() != turn.output.strip():
        console().print(turn.output, markup=False, highlight=False)
    print_thread_hint(thread_id)
    return 0


def print_thread_hint(thread_id: str) -> None:
    """How to go on with a thread that waits for its next message (on stderr)."""
    print(
        "thread {0} waits for your next message: orga say {0} '…' (or orga chat {0}); "
        "orga close {0} ends it".format(one_line(thread_id)),
        file=sys.stderr,
    )


def _invoking(config: LoopConfig, workflow_id: str) -> AbstractContextManager[Span]:
    """The span ``orga run`` starts its loop in (the GenAI agent-invocation client span): the
    parent of the loop's whole trace when traces are on, a no-op otherwise."""
    return tracer().start_as_current_span(
        f"invoke_agent {config.agent_id}",
        kind=SpanKind.CLIENT,
        attributes=invocation_attributes(config, workflow_id),
    )


def failure_text(error: WorkflowFailureError) -> str:
    """How a workflow failed, in one line: the failure's type and message."""
    cause = error.cause
    if isinstance(cause, ApplicationError):
        return f"{cause.type}: {cause.message}"
    return str(cause)


async def print_stream(workflow_id: str, ended: Awaitable[Any]) -> str:
    """Print a streaming loop's text (``config.stream``) while it arrives, until ``ended``
    and the stream is drained; returns the text of the last model call shown."""
    client = await client_for(settings())
    printer = TextPrinter()
    reading = asyncio.ensure_future(printer.read(client, workflow_id))
    finished = asyncio.ensure_future(ended)
    try:
        await asyncio.wait([reading, finished], return_when=asyncio.FIRST_COMPLETED)
        with contextlib.suppress(TimeoutError):  # the loop ended: what is left of the stream
            await asyncio.wait_for(asyncio.shield(reading), 10)
    finally:
        for task in (reading, finished):
            task.cancel()
        await asyncio.gather(reading, finished, return_exceptions=True)
    return printer.last


class TextPrinter:
    """Writes a loop's streamed text to stdout as it arrives (``prefix`` before each call)."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.call: list[str] = []
        self.last = ""

    async def read(self, client: Client, workflow_id: str) -> None:
        await self.follow(WorkflowStreamClient.create(client, workflow_id))

    async def follow(self, reader: WorkflowStreamClient, from_offset: int = 0) -> None:
        """Print the stream ``reader`` reads, from ``from_offset``, until it ends."""
        try:
            await self._print(reader, from_offset)
        finally:
            if self.call:  # the stream ended mid-answer
                sys.stdout.write("\n")
                self.call.clear()

    async def _print(self, reader: WorkflowStreamClient, from_offset: int) -> None:
        out = sys.stdout
        topics = [STREAM_TOPIC]
        async for item in reader.subscribe(topics, from_offset, result_type=StreamedText):
            piece = item.data
            if piece.restart:
                out.write("\n[the model call was retried; its answer again:]\n")
                self.call.clear()
            elif piece.done:
                if self.call:
                    out.write("\n")
                    self.last = "".join(self.call)
                self.call.clear()
            elif piece.text:
                if not self.call:
                    out.write(self.prefix)
                self.call.append(piece.text)
                out.write(printable(piece.text))
            out.flush()


# ---- state -------------------------------------------------------------------------------


def state(
    workflow_id: Annotated[str, typer.Argument(help="The loop's workflow id.")],
    as_json: Json = False,
) -> None:
    """A loop's state: status, model, budgets spent, what it waits for, how it ended."""

    async def body() -> int:
        client = await client_for(settings())
        await of_kind(client, workflow_id, "loop")
        try:
            loop = await read_state(client, workflow_id, LoopState, LOOP)
        except DeskError as error:
            return await _state_without_worker(
                client.get_workflow_handle(workflow_id, result_type=LoopResult), as_json, error
            )
        if as_json:
            print_json(loop)
        else:
            console().print(render_state(loop), markup=False)
        return 0

    execute(body, as_json=as_json)


async def _state_without_worker(
    handle: WorkflowHandle[Any, LoopResult], as_json: bool, error: DeskError
) -> int:
    """No worker can answer the query: show what Temporal itself records of the loop (a
    finished one's result or failure from its history, which needs no worker)."""
    description = await handle.describe()
    attributes = description.typed_search_attributes
    facts: dict[str, Any] = {
        "workflow_id": description.id,
        "status": attributes.get(sa.STATUS)
        or (description.status.name.lower() if description.status else "unknown"),
        "agent_id": attributes.get(sa.AGENT_ID),
        "iteration": attributes.get(sa.ITERATION),
        "total_tokens": attributes.get(sa.TOTAL_TOKENS),
        "task_queue": description.task_queue,
        "started": description.start_time,
        "closed": description.close_time,
    }
    if description.status == WorkflowExecutionStatus.COMPLETED:
        result = await handle.result()
        facts["output"] = result.output
        facts["termination_reason"] = result.termination_reason
    elif description.status not in (None, WorkflowExecutionStatus.RUNNING):
        try:  # failed, cancelled, terminated, timed out: the result is how it ended
            await handle.result()
        except WorkflowFailureError as failure:
            facts["failure"] = failure_text(failure)
    if as_json:
        print_json(facts)
        return 0
    out = console()
    out.print(f"({error}; showing what Temporal records — start a worker there for the full state)")
    for key, value in facts.items():
        out.print(f"{key:<20}{value if value is not None else '-'}", markup=False)
    return 0


# ---- journal -----------------------------------------------------------------------------


def journal(
    workflow_id: Annotated[str, typer.Argument(help="The loop's (or task's) workflow id.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new entries until it ends.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per entry, one per line.")
    ] = False,
) -> None:
    """The typed journal: every model call, decision, tool run, approval and recovery."""

    async def body() -> int:
        client = await client_for(settings())
        handle = client.get_workflow_handle(workflow_id)
        text: asyncio.Task[None] | None = None
        printer = TextPrinter("      … ")
        if follow and not as_json:  # a loop with config.stream: its model's text as it comes
            text = asyncio.create_task(_quietly(printer.read(client, workflow_id)))
        ended = False
        try:
            code = await entries(client, handle, printer)
            ended = True
            return code
        finally:
            if text is not None:
                if ended:
                    with contextlib.suppress(TimeoutError):  # the last pieces, once it ended
                        await asyncio.wait_for(asyncio.shield(text), 5)
                text.cancel()
                await asyncio.gather(text, return_exceptions=True)

    async def entries(
        client: Client, handle: WorkflowHandle[Any, Any], printer: TextPrinter
    ) -> int:
        out = console()
        shown = 0
        asked = False
        while True:
            try:
                description = await handle.describe()
                if not asked:  # said at once, rather than after the query's timeout
                    await ensure_answering(
                        client, workflow_id, description.task_queue, held="the journal"
                    )
                    asked = True
                entries = await handle.query(JOURNAL_QUERY, result_type=Journal)
            except RPCError as error:
                if error.status == RPCStatusCode.NOT_FOUND:
                    raise CliError(f"there is no workflow {workflow_id!r}") from error
                raise CliError(
                    f"no worker answers for {workflow_id!r} ({error.message}); the journal "
                    "lives in the workflow's state: start a worker on its task queue to read it"
                ) from error
            running = description.status == WorkflowExecutionStatus.RUNNING
            fresh = [e for e in entries.entries if e.seq > shown]
            for _ in range(600):  # a line of streamed text is being written: entries after it
                if not printer.call:
                    break
                await asyncio.sleep(0.05)
            if entries.dropped and not shown and not as_json:
                out.print(f"({entries.dropped} older entries dropped to keep the journal bounded)")
            if fresh:
                shown = fresh[-1].seq
            for entry in fresh:
                if as_json:
                    sys.stdout.write(json_text(entry.model_dump_json()) + "\n")
                else:
                    out.print(render_entry(entry))
            sys.stdout.flush()
            if not follow or not running:
                return 0
            await asyncio.sleep(0.5)

    execute(body, as_json=as_json)


async def _quietly(reading: Awaitable[None]) -> None:
    """A loop without a stream refuses the reader: then there is simply no text to show."""
    with contextlib.suppress(Exception):
        await reading


# ---- list --------------------------------------------------------------------------------


def list_command(
    kind: Annotated[
        Literal["loop", "task"] | None, typer.Option(help="Only loops, or only tasks.")
    ] = None,
    status: Annotated[Status | None, typer.Option(help="Only workflows in this status.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only workflows of this agent.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.")] = 20,
    as_json: Json = False,
) -> None:
    """Recent loops and tasks, from Temporal's visibility (no worker needed)."""
    execute(lambda: list_workflows(kind, status, agent, limit, as_json), as_json=as_json)


_EXECUTION_STATUS = {
    "running": "Running",
    "completed": "Completed",
    "failed": "Failed",
    "cancelled": "Canceled",
}
"""Temporal's execution status that stands for orga's, before a worker set ``OrgaStatus``."""


async def list_workflows(
    kind: Literal["loop", "task"] | None,
    status: Status | None,
    agent: str | None,
    limit: int,
    as_json: bool,
) -> int:
    """The body of ``orga list`` and ``orga task list``."""
    client = await client_for(settings())
    types = [KINDS[kind]] if kind else [LOOP, TASK]
    query = "WorkflowType IN (" + ", ".join(f"'{t}'" for t in types) + ")"
    if status:
        # A workflow no worker has picked up yet has no OrgaStatus: Temporal's own status
        # stands in (``orga list`` shows it as such).
        execution = _EXECUTION_STATUS.get(status)
        fallback = f" OR (OrgaStatus IS NULL AND ExecutionStatus = '{execution}')"
        query += f" AND (OrgaStatus = '{status}'{fallback if execution else ''})"
    if agent:
        query += " AND OrgaAgentId = '" + agent.replace("'", "\\'") + "'"
    names = {value: name for name, value in KINDS.items()}
    rows: list[WorkflowRow] = []
    try:
        async for execution in client.list_workflows(query, limit=limit):
            attributes = execution.typed_search_attributes
            fallback = execution.status.name.lower() if execution.status else "?"
            shown = names.get(execution.workflow_type) or execution.workflow_type
            if shown == "loop" and THREAD_MEMO in execution.raw_info.memo.fields:
                shown = "thread"
            rows.append(
                WorkflowRow(
                    workflow_id=execution.id,
                    kind=shown,
                    status=attributes.get(sa.STATUS) or fallback,
                    agent_id=attributes.get(sa.AGENT_ID) or "-",
                    iteration=attributes.get(sa.ITERATION) or 0,
                    tokens=attributes.get(sa.TOTAL_TOKENS) or 0,
                    started=execution.start_time,
                )
            )
    except RPCError as error:
        raise CliError(f"listing workflows failed: {error.message}") from error
    if as_json:
        print_json([row.__dict__ for row in rows])
    elif rows:
        print_table(rows_table(rows))
    else:
        console().print("(nothing matches)")
    return 0
