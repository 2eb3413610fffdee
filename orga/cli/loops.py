"""``orga state``, ``journal`` and ``list``: watch reasoning loops (``orga run`` starts them:
``orga.cli.run``), from the loop's queries, or from what Temporal records when no worker
answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import Awaitable
from typing import Annotated, Any, Literal

import typer
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.service import RPCError, RPCStatusCode

from orga.cli.common import (
    CliError,
    Json,
    client_for,
    console,
    execute,
    print_json,
    print_table,
    settings,
)
from orga.cli.journal_text import render_entry
from orga.cli.run import TextPrinter, failure_text
from orga.cli.views import (
    WorkflowRow,
    render_state,
    rows_table,
)
from orga.cli.waiting import ensure_answering
from orga.contracts import search_attributes as sa
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import Journal
from orga.contracts.messages import JOURNAL_QUERY, LOOP_WORKFLOW, TASK_WORKFLOW
from orga.contracts.principals import NAME_PATTERN, Period, Principal, Scope, SpendLine
from orga.contracts.state import LoopResult, LoopState, LoopStatus
from orga.contracts.threads import THREAD_MEMO
from orga.desk.facts import KINDS, DeskError, of_kind, read_state
from orga.runtime.safe_text import json_text

__all__ = ["list_workflows", "register"]


def register(app: typer.Typer) -> None:
    """Add the loop verbs to ``app``."""
    app.command(
        "state", epilog="Example: orga state loop-3f2a9c1b7d4e   (a task: orga task state ID)"
    )(state)
    app.command("journal", epilog="Example: orga journal loop-3f2a9c1b7d4e --follow")(journal)
    app.command("list", epilog="Example: orga list --kind task --status failed --agent shop")(
        list_command
    )


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
            loop = await read_state(client, workflow_id, LoopState, LOOP_WORKFLOW)
        except DeskError as error:
            return await _state_without_worker(
                client.get_workflow_handle(workflow_id, result_type=LoopResult), as_json, error
            )
        if as_json:
            print_json(loop)
        else:
            left = _left(loop.principal) if loop.principal is not None else []
            console().print(render_state(loop, left), markup=False)
        return 0

    execute(body, as_json=as_json)


def _left(principal: Principal) -> list[SpendLine]:
    """What the principal's user and tenant have spent and may still spend, today and this
    month, as the ledger holds it (nothing when this machine's store cannot say)."""
    # The principals' limits and the store's ledger: imported only for a loop with a principal.
    from orga.runtime.spend import LedgerUnavailable, SpendLedger
    from orga.worker.principals import PrincipalRegistry

    found = settings()
    whose: list[tuple[Scope, str | None]] = [("user", principal.user), ("tenant", principal.tenant)]
    periods: list[Period] = ["day", "month"]
    try:
        registry = PrincipalRegistry.load(found)
        with found.store() as store:
            ledger = SpendLedger(store)
            return [
                line
                for period in periods
                for scope, name in whose
                if name is not None
                for line in ledger.lines(period, scope=scope, name=name, limits=registry.limits)
            ]
    except (InvalidConfig, LedgerUnavailable):
        return []


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
    status: Annotated[
        LoopStatus | None, typer.Option(help="Only workflows in this status.")
    ] = None,
    agent: Annotated[str | None, typer.Option(help="Only workflows of this agent.")] = None,
    principal: Annotated[
        str | None, typer.Option(help="Only loops that run for this user.")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Only loops of this tenant.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.")] = 20,
    as_json: Json = False,
) -> None:
    """Recent loops and tasks, from Temporal's visibility (no worker needed)."""
    execute(
        lambda: list_workflows(
            kind, status, agent, limit, as_json, principal=principal, tenant=tenant
        ),
        as_json=as_json,
    )


_EXECUTION_STATUS = {
    "running": "Running",
    "completed": "Completed",
    "failed": "Failed",
    "cancelled": "Canceled",
}
"""Temporal's execution status that stands for orga's, before a worker set ``OrgaStatus``."""


async def list_workflows(
    kind: Literal["loop", "task"] | None,
    status: LoopStatus | None,
    agent: str | None,
    limit: int,
    as_json: bool,
    *,
    principal: str | None = None,
    tenant: str | None = None,
) -> int:
    """The body of ``orga list`` and ``orga task list``.

    Raises:
        CliError: a principal or tenant that is not a plain name (exit code 2).
    """
    for name in (principal, tenant):
        if name is not None and not re.fullmatch(NAME_PATTERN, name):
            raise CliError(f"{name!r} is not a user's or tenant's name", 2)  # nothing to escape
    client = await client_for(settings())
    types = [KINDS[kind]] if kind else [LOOP_WORKFLOW, TASK_WORKFLOW]
    query = "WorkflowType IN (" + ", ".join(f"'{t}'" for t in types) + ")"
    if status:
        # A workflow no worker has picked up yet has no OrgaStatus: Temporal's own status
        # stands in (``orga list`` shows it as such).
        execution = _EXECUTION_STATUS.get(status)
        fallback = f" OR (OrgaStatus IS NULL AND ExecutionStatus = '{execution}')"
        query += f" AND (OrgaStatus = '{status}'{fallback if execution else ''})"
    if agent:
        query += " AND OrgaAgentId = '" + agent.replace("'", "\\'") + "'"
    for key, name in ((sa.PRINCIPAL, principal), (sa.TENANT, tenant)):
        if name is not None:
            query += f" AND {key.name} = '{name}'"
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
                    principal=_principal(attributes.get(sa.PRINCIPAL), attributes.get(sa.TENANT)),
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


def _principal(user: str | None, tenant: str | None) -> str:
    if user is None:
        return "-"
    return user if tenant is None else f"{user}@{tenant}"
