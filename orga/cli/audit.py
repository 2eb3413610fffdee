"""``orga audit``: a loop's or task's governance records as a hash chain, checked against history.

The chain lives in the workflow's state (the ``audit`` query, one per run: continue-as-new
starts each run from the previous run's head). ``--verify`` does not trust that state: it
replays every run of the workflow from the history Temporal recorded, with the worker's own
workflow code, reads the chain the replay rebuilt, and compares the chain being checked (the
workflow's, or an ``--export`` file given with ``--chain``) entry by entry. The first entry whose
link, hash or content departs from the history is reported, and the exit code is 1.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import TypeAdapter, ValidationError
from temporalio import workflow
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from orga.cli.common import CliError, Json, client_for, console, execute, print_json, settings
from orga.cli.views import render_entry
from orga.contracts.audit import AuditChain, AuditEntry
from orga.contracts.journal import JournalEntry
from orga.core.audit import first_broken_link, first_difference

__all__ = ["chain_from_history", "read_chain", "register", "run_ids"]

_ENTRY: TypeAdapter[JournalEntry] = TypeAdapter(JournalEntry)


def register(app: typer.Typer) -> None:
    """Add ``orga audit`` to ``app``."""
    app.command(
        "audit",
        epilog="Example: orga audit loop-3f2a9c1b7d4e --export audit.jsonl && "
        "orga audit loop-3f2a9c1b7d4e --verify --chain audit.jsonl",
    )(audit)


def audit(
    workflow_id: Annotated[str, typer.Argument(help="The loop's or task's workflow id.")],
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Rebuild the chain from the workflow's history (replaying it) and report the "
            "first entry that does not match; exit 1 if one does not.",
        ),
    ] = False,
    chain: Annotated[
        Path | None,
        typer.Option(
            help="With --verify: check this exported chain (JSON lines) instead of the one the "
            "workflow holds.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option(help="Write the chain to this file, one JSON entry per line."),
    ] = None,
    as_json: Json = False,
) -> None:
    """A workflow's audit chain: every policy decision, approval, review, escalation
    resolution, delegation and compensation, each entry holding the SHA-256 of the one before."""

    async def body() -> int:
        if chain is not None and not verify:
            raise CliError("--chain names a chain to verify: add --verify", code=2)
        client = await client_for(settings())
        if verify:
            return await _verify(client, workflow_id, chain, as_json)
        entries = await held_chain(client, workflow_id)
        if export is not None:
            export.write_text("".join(entry.model_dump_json() + "\n" for entry in entries))
        if as_json:
            print_json([entry.model_dump(mode="json") for entry in entries])
        elif export is not None:
            console().print(f"wrote {len(entries)} entries to {export}", markup=False)
        else:
            _print(entries)
        return 0

    execute(body, as_json=as_json)


async def _verify(client: Client, workflow_id: str, chain: Path | None, as_json: bool) -> int:
    rebuilt = await chain_from_history(client, workflow_id)
    claimed = read_chain(chain) if chain is not None else await held_chain(client, workflow_id)
    problem = (
        first_broken_link(rebuilt)
        or first_broken_link(claimed)
        or first_difference(rebuilt, claimed)
    )
    head = rebuilt[-1].hash if rebuilt else None
    checked = str(chain) if chain is not None else "the workflow's chain"
    if as_json:
        print_json(
            {"verified": problem is None, "problem": problem, "entries": len(rebuilt), "head": head}
        )
    elif problem is None:
        console().print(
            f"verified: {checked} matches the history ({len(rebuilt)} entries, head {head})",
            markup=False,
        )
    else:
        console().print(f"NOT verified: {checked}: {problem}", markup=False)
    return 0 if problem is None else 1


def _print(entries: list[AuditEntry]) -> None:
    out = console()
    if not entries:
        out.print("no governance records yet")
        return
    for entry in entries:
        try:
            line = render_entry(_ENTRY.validate_python(entry.record))
        except ValidationError:
            line = f"{entry.kind} {json.dumps(entry.record, sort_keys=True)}"
        out.print(f"{entry.index:>4}  {entry.hash[:12]}  {line}", markup=False)


def read_chain(path: Path) -> list[AuditEntry]:
    """An exported chain (``--export``): one ``AuditEntry`` per line.

    Raises:
        CliError: a line is not an entry (exit 2).
    """
    entries: list[AuditEntry] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append(AuditEntry.model_validate_json(line))
        except ValidationError as error:
            raise CliError(f"{path}:{number} is not an audit entry ({error})", code=2) from error
    return entries


async def run_ids(client: Client, workflow_id: str) -> list[str]:
    """The workflow's runs, oldest first, following continue-as-new back from the newest.

    Raises:
        CliError: there is no such workflow.
    """
    try:
        newest = (await client.get_workflow_handle(workflow_id).describe()).run_id
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise CliError(f"there is no workflow {workflow_id!r}") from error
        raise
    runs = [newest]
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=runs[-1])
        async for event in handle.fetch_history_events():
            started = event.workflow_execution_started_event_attributes
            break
        else:  # pragma: no cover - a run always begins with its started event
            break
        if not started.continued_execution_run_id:
            break
        runs.append(started.continued_execution_run_id)
    return runs[::-1]


async def held_chain(client: Client, workflow_id: str) -> list[AuditEntry]:
    """The chain the workflow holds in its state: the ``audit`` query of every run.

    Raises:
        CliError: no worker answers (the chain can still be rebuilt: ``--verify``).
    """
    entries: list[AuditEntry] = []
    for run_id in await run_ids(client, workflow_id):
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        try:
            part = await handle.query(
                "audit", result_type=AuditChain, rpc_timeout=timedelta(seconds=10)
            )
        except RPCError as error:
            raise CliError(
                f"no worker answers for {workflow_id!r} ({error.message}); the chain lives in "
                "the workflow's state: start a worker on its task queue, or check an export "
                "against the history with --verify --chain FILE"
            ) from error
        entries.extend(part.entries)
    return entries


async def chain_from_history(client: Client, workflow_id: str) -> list[AuditEntry]:
    """The chain rebuilt by replaying every run of the workflow from its recorded history with
    the worker's workflow code (no worker and no query involved).

    Raises:
        CliError: the history does not replay with this code (it is not orga's, or the code
            changed in a way the history cannot follow).
    """
    from worker import replayer  # the workflow code, loaded only when a chain is rebuilt

    instances: list[Any] = []
    capture = _Capture(instances)
    replaying = replayer(settings().store(), interceptors=[capture])
    entries: list[AuditEntry] = []
    for run_id in await run_ids(client, workflow_id):
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        instances.clear()
        try:
            await replaying.replay_workflow(history)
        except Exception as error:
            raise CliError(
                f"run {run_id} of {workflow_id!r} does not replay with this code: {error}"
            ) from error
        if not instances or not hasattr(instances[-1], "audit"):
            raise CliError(f"{workflow_id!r} is not an orga loop or task: it keeps no audit chain")
        entries.extend(instances[-1].audit().entries)
    return entries


class _Capture(Interceptor):
    """Hands out the workflow instance a replay builds, to read its state afterwards."""

    def __init__(self, instances: list[Any]) -> None:
        self.instances = instances

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        instances = self.instances

        class Inbound(WorkflowInboundInterceptor):
            async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
                instances.append(workflow.instance())
                return await super().execute_workflow(input)

        return Inbound
