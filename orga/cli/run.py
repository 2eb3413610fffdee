"""``orga run``: start a reasoning loop (or a thread) and print its answer as it comes.

The verb waits for a worker, checks that its tools are served, starts the workflow, and prints
the answer — streamed, a thread's first turn, or the result — or why it failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import Awaitable
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from opentelemetry.trace import Span, SpanKind
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError

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
    principal_of,
    print_json,
    settings,
    start_workflow,
    with_workflow_id,
)
from orga.cli.views import render_result, shorten
from orga.cli.waiting import ensure_tools, ensure_worker, reporting
from orga.contracts.config import LoopConfig
from orga.contracts.inference import STREAM_TOPIC, StreamedText
from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.state import LoopResult
from orga.contracts.threads import ThreadConfig
from orga.contracts.vocabulary import PolicyMode
from orga.core.genai import invocation_attributes
from orga.desk.sender import wait_for_turn
from orga.runtime.safe_text import one_line, printable
from orga.runtime.tracing import tracer

__all__ = ["TextPrinter", "failure_text", "print_stream", "print_thread_hint", "register"]


def register(app: typer.Typer) -> None:
    """Add ``orga run`` to ``app``."""
    app.command(
        "run",
        epilog="Example: orga run 'What is 2+3?' --tool add --provider scripted",
    )(run)


AgentId = Annotated[
    str | None,
    typer.Option("--agent", "--agent-id", help="Who the loop acts as (config.agent_id)."),
]
Policy = Annotated[
    PolicyMode | None, typer.Option(help="The gate: default (fail closed), cedar, opa, …")
]
SystemPrompt = Annotated[str | None, typer.Option(help="Prepended as a system message.")]
Temperature = Annotated[
    float | None,
    typer.Option(help="Sampling temperature, 0 to 2; default: the provider's.", min=0, max=2),
]
MaxIterations = Annotated[int | None, typer.Option(help="Hard cap on model calls.")]
MaxTotalTokens = Annotated[int | None, typer.Option(help="Hard cap on tokens.")]
MaxCost = Annotated[
    float | None,
    typer.Option(
        help="Hard cap on what the model calls cost, in USD (priced by the worker).", min=0
    ),
]
Timeout = Annotated[float | None, typer.Option(help="Hard cap on working time, in seconds.")]
MaxOutputTokens = Annotated[
    int | None, typer.Option(help="Cap on one model answer's tokens; default: the provider's.")
]
MaxConcurrentTools = Annotated[int | None, typer.Option(help="Tool calls run at once, at most.")]
ContextTokenBudget = Annotated[
    int | None, typer.Option(help="Tokens of conversation one model call may carry (32000).")
]
MaxDelegationDepth = Annotated[
    int | None, typer.Option(help="How deep delegations may nest (within the agent's).")
]
Principal = Annotated[
    str | None,
    typer.Option(
        "--principal",
        help="Whom the loop runs for (a user): its model calls are charged to that user's "
        "spend ledger. Signed when ORGA_ISSUER and ORGA_ISSUER_KEY are set, else a claim.",
    ),
]
Tenant = Annotated[
    str | None,
    typer.Option(help="The principal's tenant, where the worker's operator does not map it."),
]
OutputSchema = Annotated[
    Path | None,
    typer.Option(
        help="A JSON Schema file: the answer must be JSON that matches it (a typed answer; its "
        "value is the result's value).",
        dir_okay=False,
    ),
]
WorkflowId = Annotated[str | None, typer.Option("--id", help="Workflow id; default: a new one.")]
NoWait = Annotated[
    bool, typer.Option("--no-wait", help="Print the workflow id and return at once.")
]
Stream = Annotated[bool, typer.Option("--stream", help="Print the model's text while it arrives.")]
AThread = Annotated[
    bool,
    typer.Option(
        "--thread",
        help="Start a thread: after its answer it waits for the next message "
        "(orga say ID '…', orga chat ID, orga close ID).",
    ),
]


def run(
    prompt: Annotated[str, typer.Argument(help="The task, as the user's first message.")],
    tool: Tools = None,
    provider: Provider = None,
    model: Model = None,
    agent_id: AgentId = None,
    policy: Policy = None,
    system_prompt: SystemPrompt = None,
    temperature: Temperature = None,
    max_iterations: MaxIterations = None,
    max_total_tokens: MaxTotalTokens = None,
    max_cost: MaxCost = None,
    timeout: Timeout = None,
    max_output_tokens: MaxOutputTokens = None,
    max_concurrent_tools: MaxConcurrentTools = None,
    context_token_budget: ContextTokenBudget = None,
    max_delegation_depth: MaxDelegationDepth = None,
    principal: Principal = None,
    tenant: Tenant = None,
    output_schema: OutputSchema = None,
    workflow_id: WorkflowId = None,
    no_wait: NoWait = False,
    stream: Stream = False,
    thread: AThread = False,
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
            max_cost=max_cost,
            timeout=timedelta(seconds=timeout) if timeout is not None else None,
            max_output_tokens=max_output_tokens,
            max_concurrent_tools=max_concurrent_tools,
            context_token_budget=context_token_budget,
            max_delegation_depth=max_delegation_depth,
            output_schema=_schema_of(output_schema) if output_schema is not None else None,
            thread=ThreadConfig() if thread else None,
        )
        kind = "thread" if thread else "loop"
        chosen_id = workflow_id or f"{kind}-{uuid.uuid4().hex[:12]}"
        found = settings()
        if principal is not None or tenant is not None:
            request = request.model_copy(
                update={"principal": principal_of(principal, tenant, chosen_id, found)}
            )
        with _invoking(request.config, chosen_id) as span:
            client = await client_for(found)
            await ensure_worker(client, found.task_queue, wait=not no_wait, what="loop")
            with found.store() as store:
                await ensure_tools(client, found.task_queue, list(request.config.tools), store)
            handle = await start_workflow(
                found,
                LOOP_WORKFLOW,
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
            shown = await print_stream(handle.id, handle.result()) if stream and not as_json else ""
            result = await _answer(client, handle, found.task_queue, quiet=as_json or bool(shown))
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


def _schema_of(path: Path) -> dict[str, Any]:
    """The JSON Schema in the file at ``path``.

    Raises:
        CliError: it cannot be read, or is not a JSON object (exit code 2).
    """
    try:
        schema: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CliError(
            f"--output-schema {str(path)!r}: cannot read it as JSON ({error})", 2
        ) from error
    if not isinstance(schema, dict):
        raise CliError(f"--output-schema {str(path)!r}: a JSON Schema is a JSON object", 2)
    return cast(dict[str, Any], schema)


async def _answer(
    client: Client, handle: WorkflowHandle[Any, LoopResult], task_queue: str, *, quiet: bool
) -> LoopResult:
    """The loop's result, saying what it waits for meanwhile (unless ``quiet``).

    Raises:
        CliError: the loop failed.
        asyncio.CancelledError: Ctrl-C (this command stops; the loop does not, as it says).
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # started where Ctrl-C is ignored
        shown_id = one_line(handle.id)
        print(
            printable(
                "orga: Ctrl-C does not reach this command (its SIGINT is ignored: started in "
                "the background or under nohup); it waits for the answer. Stop waiting: kill "
                f"{os.getpid()}; the loop goes on. Stop the loop: orga cancel {shown_id} "
                "--reason '…'"
            ),
            file=sys.stderr,
            flush=True,
        )
    try:
        async with reporting(client, handle, task_queue, quiet=quiet):
            return await handle.result()
    except WorkflowFailureError as error:
        raise CliError(f"the loop failed: {failure_text(error)}") from error
    except asyncio.CancelledError:  # Ctrl-C: this command stops, the loop does not
        shown_id = one_line(handle.id)  # an --id is the user's text
        print(
            printable(
                f"orga: the loop goes on without this command. Follow it: orga journal "
                f"{shown_id} --follow; stop it: orga cancel {shown_id} --reason '…'"
            ),
            file=sys.stderr,
            flush=True,
        )
        raise


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
