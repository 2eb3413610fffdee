"""Each run's audit chain, as ``orga audit`` reads it: held in the run's state (its ``audit``
query, which a worker answers), or rebuilt by replaying the run's recorded history with the
worker's own workflow code (no worker involved); and a chain exported to a file.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client
from temporalio.service import RPCError

from orga.cli.audit_runs import Execution, read_execution
from orga.cli.common import CliError, settings
from orga.cli.waiting import ensure_answering
from orga.contracts.audit import AuditChain, AuditEntry, ExportedEntry
from orga.contracts.messages import AUDIT_QUERY

__all__ = ["held_chains", "read_chain", "replayed_chains", "run_ids", "surviving_chain"]


def read_chain(path: Path) -> list[ExportedEntry]:
    """An exported chain (``--export``): one entry per line, with the run that holds it.

    Raises:
        CliError: a line is not an entry (exit 2).
    """
    entries: list[ExportedEntry] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append(ExportedEntry.model_validate_json(line))
        except ValidationError as error:
            raise CliError(f"{path}:{number} is not an audit entry ({error})", code=2) from error
    return entries


async def run_ids(client: Client, workflow_id: str) -> list[str]:
    """The runs of the workflow's surviving history, oldest first: the current run and those it
    continued from.

    Raises:
        CliError: there is no such workflow.
    """
    execution = await read_execution(client, workflow_id)
    return execution.surviving


async def held_chains(
    client: Client, execution: Execution, *, every_run: bool
) -> dict[str, list[AuditEntry]]:
    """The chain each run holds in its state (its ``audit`` query): the surviving runs', and
    with ``every_run`` the reset-away runs' too.

    Raises:
        CliError: no worker answers (said at once when none polls the workflow's task queue,
            rather than after the query's timeout).
    """
    surviving = execution.surviving
    task_queue = (await client.get_workflow_handle(execution.workflow_id).describe()).task_queue
    await ensure_answering(
        client,
        execution.workflow_id,
        task_queue,
        held="the chain",
        otherwise=", or check an export against the history without one: --verify --chain FILE",
    )
    chains: dict[str, list[AuditEntry]] = {}
    for run_id in [run.run_id for run in execution.runs] if every_run else surviving:
        handle = client.get_workflow_handle(execution.workflow_id, run_id=run_id)
        try:
            part = await handle.query(
                AUDIT_QUERY, result_type=AuditChain, rpc_timeout=timedelta(seconds=10)
            )
        except RPCError as error:
            raise CliError(
                f"no worker answers for {execution.workflow_id!r} ({error.message}); the chain "
                "lives in the workflow's state: start a worker on its task queue, or check an "
                "export against the history with --verify --chain FILE"
            ) from error
        chains[run_id] = list(part.entries)
    return chains


async def replayed_chains(execution: Execution) -> dict[str, list[AuditEntry]]:
    """Each run's chain, rebuilt by replaying its history with the worker's workflow code: the
    surviving runs and the runs reset away alike.

    Raises:
        CliError: a history does not replay with this code (it is not orga's, or the code
            changed in a way the history cannot follow).
    """
    # the workflow code and Temporal's worker, loaded only when a chain is rebuilt
    from orga.cli.capture import Capture, replaying

    instances: list[Any] = []
    with replaying(settings().store(), [Capture(instances)]) as replay:
        chains: dict[str, list[AuditEntry]] = {}
        for run_id, history in execution.histories.items():
            instances.clear()
            try:
                await replay(history)
            except Exception as error:
                raise CliError(
                    f"run {run_id} of {execution.workflow_id!r} does not replay with this "
                    f"code: {error}"
                ) from error
            if not instances or not hasattr(instances[-1], "audit"):
                raise CliError(
                    f"{execution.workflow_id!r} is not an orga loop or task: it keeps no audit "
                    "chain"
                )
            chains[run_id] = list(instances[-1].audit().entries)
    return chains


def surviving_chain(execution: Execution, chains: dict[str, list[AuditEntry]]) -> list[AuditEntry]:
    runs = execution.surviving
    return [entry for run_id in runs for entry in chains[run_id]]
