"""``orga run``, ``state``, ``journal`` and ``list``: start a reasoning loop and watch it."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from orga.cli.common import (
    CliError,
    Verbs,
    client_for,
    not_found,
    print_json,
    start_workflow,
)
from orga.cli.views import LoopRow, render_entry, render_result, render_rows, render_state
from orga.contracts import search_attributes as sa
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.errors import describe_validation_error
from orga.contracts.journal import Journal
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.vocabulary import PROVIDERS
from orga.runtime.settings import Settings

__all__ = ["cmd_journal", "cmd_list", "cmd_run", "cmd_state", "loop_input", "register"]


def loop_input(args: argparse.Namespace) -> LoopInput:
    """The loop input the ``run`` flags describe, validated before anything starts."""
    config: dict[str, Any] = {"tools": args.tool or []}
    for flag in (
        "provider",
        "model",
        "agent_id",
        "policy",
        "max_iterations",
        "max_total_tokens",
        "system_prompt",
    ):
        value = getattr(args, flag)
        if value is not None:
            config[flag] = value
    if args.timeout is not None:
        config["timeout"] = timedelta(seconds=args.timeout)
    try:
        return LoopInput(
            messages=[Message(role="user", content=args.prompt)],
            config=LoopConfig.model_validate(config),
        )
    except ValidationError as error:
        raise CliError(f"invalid loop input: {describe_validation_error(error)}", 2) from error


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    request = loop_input(args)
    workflow_id = args.id or f"loop-{uuid.uuid4().hex[:12]}"
    prompt = args.prompt if len(args.prompt) <= 120 else args.prompt[:117] + "…"
    handle = await start_workflow(
        settings,
        "ReasoningLoop",
        request,
        workflow_id=workflow_id,
        result_type=LoopResult,
        summary=f"{request.config.agent_id}: {prompt}",
    )
    if args.no_wait:
        if args.json:
            print_json({"workflow_id": workflow_id, "run_id": handle.result_run_id})
        return 0
    try:
        result = await handle.result()
    except WorkflowFailureError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError):
            raise CliError(f"the loop failed: {cause.type}: {cause.message}") from error
        raise CliError(f"the loop failed: {cause}") from error
    if args.json:
        print_json(result)
    else:
        print(render_result(result))
    return 0


async def cmd_state(args: argparse.Namespace, settings: Settings) -> int:
    client = await client_for(settings)
    handle = client.get_workflow_handle(args.workflow_id, result_type=LoopResult)
    try:
        state = await handle.query("state", result_type=LoopState)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise not_found(error, args.workflow_id) from error
        return await _state_without_worker(handle, args, error)
    if args.json:
        print_json(state)
    else:
        print(render_state(state))
    return 0


async def _state_without_worker(handle: Any, args: argparse.Namespace, error: RPCError) -> int:
    """No worker can answer the query: show what Temporal itself records of the loop."""
    description = await handle.describe()
    attributes = description.typed_search_attributes
    facts: dict[str, Any] = {
        "workflow_id": description.id,
        "status": attributes.get(sa.STATUS) or description.status.name.lower(),
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
    if args.json:
        print_json(facts)
    else:
        print(f"(no worker answers on task queue {description.task_queue!r}: {error.message};")
        print(" showing what Temporal records — start a worker there for the full state)")
        for key, value in facts.items():
            print(f"{key:<20}{value if value is not None else '-'}")
    return 0


async def cmd_journal(args: argparse.Namespace, settings: Settings) -> int:
    client = await client_for(settings)
    handle = client.get_workflow_handle(args.workflow_id)
    shown = 0
    while True:
        try:
            description = await handle.describe()
            journal = await handle.query("journal", result_type=Journal)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise not_found(error, args.workflow_id) from error
            raise CliError(
                f"no worker answers for {args.workflow_id!r} ({error.message}); the journal "
                "lives in the loop's state: start a worker on its task queue to read it"
            ) from error
        running = description.status == WorkflowExecutionStatus.RUNNING
        fresh = [e for e in journal.entries if e.seq > shown]
        if fresh:
            shown = fresh[-1].seq
        if args.json:
            for entry in fresh:
                print(entry.model_dump_json())
        else:
            if journal.dropped and shown == (fresh[-1].seq if fresh else 0) and not args.follow:
                print(f"({journal.dropped} older entries dropped to keep the journal bounded)")
            for entry in fresh:
                print(render_entry(entry))
        sys.stdout.flush()
        if not args.follow or not running:
            return 0
        await asyncio.sleep(0.5)


async def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    client = await client_for(settings)
    query = "WorkflowType = 'ReasoningLoop'"
    if args.status:
        query += f" AND OrgaStatus = '{args.status}'"
    if args.agent:
        query += f" AND OrgaAgentId = '{args.agent}'"
    rows: list[LoopRow] = []
    try:
        async for execution in client.list_workflows(query, limit=args.limit):
            attributes = execution.typed_search_attributes
            fallback = execution.status.name.lower() if execution.status else "?"
            rows.append(
                LoopRow(
                    workflow_id=execution.id,
                    status=attributes.get(sa.STATUS) or fallback,
                    agent_id=attributes.get(sa.AGENT_ID) or "-",
                    iteration=attributes.get(sa.ITERATION) or 0,
                    tokens=attributes.get(sa.TOTAL_TOKENS) or 0,
                    started=execution.start_time,
                )
            )
    except RPCError as error:
        raise CliError(f"listing loops failed: {error.message}") from error
    if args.json:
        print_json([row.__dict__ for row in rows])
    else:
        print(render_rows(rows))
    return 0


def register(verbs: Verbs) -> None:
    """Add ``run``, ``state``, ``journal`` and ``list`` to the top parser's verbs."""
    run = verbs.add_parser("run", help="start a loop and print its answer")
    run.add_argument("prompt")
    run.add_argument("--tool", action="append", help="advertise a tool (repeatable)")
    run.add_argument("--provider", choices=PROVIDERS)
    run.add_argument("--model")
    run.add_argument("--agent-id")
    run.add_argument("--policy", choices=["permissive", "default", "cedar", "opa"])
    run.add_argument("--system-prompt")
    run.add_argument("--max-iterations", type=int)
    run.add_argument("--max-total-tokens", type=int)
    run.add_argument("--timeout", type=float, help="seconds")
    run.add_argument("--id", help="workflow id (default: a new one)")
    run.add_argument("--no-wait", action="store_true", help="print the id and return")
    run.add_argument("--json", action="store_true")
    run.set_defaults(handler=cmd_run)

    state = verbs.add_parser("state", help="a loop's state")
    state.add_argument("workflow_id")
    state.add_argument("--json", action="store_true")
    state.set_defaults(handler=cmd_state)

    journal = verbs.add_parser("journal", help="a loop's journal")
    journal.add_argument("workflow_id")
    journal.add_argument("--follow", "-f", action="store_true", help="keep printing until it ends")
    journal.add_argument("--json", action="store_true", help="one JSON object per line")
    journal.set_defaults(handler=cmd_journal)

    listing = verbs.add_parser("list", help="recent loops, from Temporal's visibility")
    listing.add_argument(
        "--status", choices=["running", "awaiting_approval", "completed", "failed"]
    )
    listing.add_argument("--agent")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_list)
