"""``orga audit``: a loop's or task's governance records as a hash chain, checked against history.

The chain lives in the workflow's state (the ``audit`` query, one per run: continue-as-new
starts each run from the previous run's head). ``--verify`` does not trust that state: it
replays every run of the workflow from the history Temporal recorded, with the worker's own
workflow code, reads the chain the replay rebuilt, and compares the chain being checked (the
workflow's, or an ``--export`` file given with ``--chain``) entry by entry. The first entry whose
link, hash or content departs from the history is reported, and the exit code is 1.

Every run counts, not only the ones the workflow goes on with. A Temporal reset starts a new
run from a point of an earlier one and leaves that run's later records off the surviving chain;
``orga audit`` lists such runs and what they hold that the surviving history does not, and
``--verify`` fails when a reset dropped a decision (``DECISION_KINDS``) or an effect (a tool
call or child workflow that ran), unless the verifier accepts that reset (``--accept-reset``).

Its parts: finding the runs (``orga.cli.audit_runs``), reading each run's chain
(``orga.cli.audit_chains``), verifying (``orga.cli.audit_verify``), and how an entry, a run
reset away and an effect read (``orga.cli.audit_text``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, cast

import typer
from pydantic import TypeAdapter
from temporalio.client import Client
from temporalio.service import RPCError

from orga.cli.audit_chains import held_chains
from orga.cli.audit_runs import Execution, read_execution
from orga.cli.audit_text import line, print_others, print_reset
from orga.cli.audit_verify import verify_chain
from orga.cli.common import CliError, Json, client_for, console, execute, print_json, settings
from orga.contracts import search_attributes as sa
from orga.contracts.audit import AuditEntry, ExportedEntry, ResetRun
from orga.contracts.forks import FORK_MEMO
from orga.contracts.journal import JournalEntry
from orga.core.audit import reset_away

__all__ = ["register"]

_ENTRY: TypeAdapter[JournalEntry] = TypeAdapter(JournalEntry)
_FORKS_SHOWN = 20
"""Forks of a loop listed under its audit at most."""


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
            help="Rebuild every run's chain from the workflow's history (replaying it) and "
            "report the first entry that does not match, and what resets dropped; exit 1 if an "
            "entry does not match or a reset dropped a decision or an effect.",
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
        typer.Option(help="Write every run's entries to this file, one JSON entry per line."),
    ] = None,
    accept_reset: Annotated[
        list[str] | None,
        typer.Option(
            "--accept-reset",
            help="With --verify: accept what the reset of this run dropped (the run id "
            "--verify names; repeatable).",
        ),
    ] = None,
    accept_resets: Annotated[
        bool,
        typer.Option("--accept-resets", help="With --verify: accept what every reset dropped."),
    ] = False,
    as_json: Json = False,
) -> None:
    """A workflow's audit chain: every policy decision, approval, review, escalation
    resolution, delegation and compensation, each entry holding the SHA-256 of the one before;
    and the runs a reset took off it, with what they hold that the surviving history does not."""

    async def body() -> int:
        if chain is not None and not verify:
            raise CliError("--chain names a chain to verify: add --verify", code=2)
        if (accept_reset or accept_resets) and not verify:
            raise CliError("--accept-reset(s) accepts what --verify found: add --verify", code=2)
        client = await client_for(settings())
        execution = await read_execution(client, workflow_id)
        if verify:
            accepted = None if accept_resets else set(accept_reset or ())
            return await verify_chain(client, execution, chain, accepted, as_json)
        chains = await held_chains(client, execution, every_run=True)
        resets = reset_away(execution.runs, execution.current, chains)
        entries = _exported(execution, chains, resets)
        if export is not None:
            export.write_text("".join(entry.model_dump_json() + "\n" for entry in entries))
        if as_json:
            print_json([entry.model_dump(mode="json") for entry in entries])
        elif export is not None:
            console().print(f"wrote {len(entries)} entries to {export}", markup=False)
        else:
            _print(execution, chains, resets)
            await _print_forks(client, workflow_id)
        return 0

    execute(body, as_json=as_json)


def _exported(
    execution: Execution, chains: dict[str, list[AuditEntry]], resets: Sequence[ResetRun]
) -> list[ExportedEntry]:
    """The surviving chain, run by run, then what each reset-away run holds beyond it."""
    runs = execution.surviving
    return [
        ExportedEntry(**entry.model_dump(), run_id=run_id)
        for run_id in runs
        for entry in chains[run_id]
    ] + [
        ExportedEntry(**entry.model_dump(), run_id=run.run_id, reset_away=True)
        for run in resets
        for entry in run.entries
    ]


def _print(
    execution: Execution, chains: dict[str, list[AuditEntry]], resets: Sequence[ResetRun]
) -> None:
    out = console()
    runs = execution.surviving
    if not any(chains[run_id] for run_id in runs) and not resets:
        out.print("no governance records yet")
        return
    for run_id in runs:
        out.print(f"run {run_id}", markup=False)
        for entry in chains[run_id]:
            out.print(line(entry), markup=False)
    for run in resets:
        print_reset(run, judged=False)
    print_others(execution)


async def _print_forks(client: Client, workflow_id: str) -> None:
    """The loops forked from this one (``orga fork``; found by the ``OrgaForkedFrom`` search
    attribute, which a namespace without orga's attributes does not have)."""
    query = f"{sa.FORKED_FROM.name} = {json.dumps(workflow_id)}"
    try:
        forks = [w async for w in client.list_workflows(query, limit=_FORKS_SHOWN + 1)]
    except RPCError:
        return
    out = console()
    for listed in forks[:_FORKS_SHOWN]:
        source: object = (await listed.memo()).get(FORK_MEMO)
        at = cast(dict[str, object], source).get("at") if isinstance(source, dict) else None
        out.print(f"forked: {listed.id} after turn {at if at is not None else '?'}", markup=False)
    if len(forks) > _FORKS_SHOWN:
        out.print(f"forked: … (more: temporal workflow list --query {query!r})", markup=False)
