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

Over 400 lines: the one verb and its three modes (print, export, verify), which share
reading every run of a workflow id; finding the runs is ``orga.cli.audit_runs``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from pydantic import TypeAdapter, ValidationError
from temporalio.client import Client
from temporalio.service import RPCError

from orga.cli.audit_runs import Execution, read_execution
from orga.cli.common import CliError, Json, client_for, console, execute, print_json, settings
from orga.cli.views import render_entry
from orga.cli.waiting import ensure_answering
from orga.contracts import search_attributes as sa
from orga.contracts.audit import AuditChain, AuditEntry, Effect, ExportedEntry, ResetRun
from orga.contracts.forks import FORK_MEMO
from orga.contracts.journal import ApprovalDecided, JournalEntry
from orga.contracts.messages import AUDIT_QUERY
from orga.core.audit import first_broken_link, first_difference, reset_away
from orga.core.signatures import proof_problem

__all__ = ["chain_from_history", "read_chain", "register", "run_ids"]

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
            return await _verify(client, execution, chain, accepted, as_json)
        chains = await _held_chains(client, execution, every_run=True)
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


async def _verify(
    client: Client,
    execution: Execution,
    chain: Path | None,
    accepted: set[str] | None,
    as_json: bool,
) -> int:
    """Verify the chain against the history, and what resets dropped against ``accepted`` (the
    runs whose drop the verifier accepts; ``None``: every run's).

    The workflow's own chain (no ``chain`` file) is read from its state first, then the history
    again if the workflow runs: the history then holds at least what the state showed, and the
    state's chain must be the start of the history's (a running workflow goes on appending)."""
    held: dict[str, list[AuditEntry]] | None = None
    went_on = False
    if chain is None:
        held = await _held_chains(client, execution, every_run=False)
        if execution.running:
            execution = await read_execution(client, execution.workflow_id)
            went_on = True
    surviving = execution.surviving
    away = [run.run_id for run in execution.runs if run.run_id not in surviving]
    if accepted is not None and (unknown := accepted - set(away)):
        raise CliError(
            f"--accept-reset {sorted(unknown)[0]!r}: no run of {execution.workflow_id!r} with "
            f"that id was reset away (runs reset away: {', '.join(away) or 'none'})",
            code=2,
        )
    chains = await _replayed_chains(execution)
    resets = reset_away(execution.runs, execution.current, chains)
    resets = [
        run.model_copy(update={"accepted": accepted is None or run.run_id in accepted})
        for run in resets
    ]
    rebuilt = _surviving(execution, chains)
    signed, unverified, forged = _signatures(execution.workflow_id, rebuilt)
    newer = 0
    if held is not None:
        claimed = [entry for run_id in surviving for entry in held.get(run_id, [])]
        if went_on and len(rebuilt) > len(claimed):
            newer = len(rebuilt) - len(claimed)
        problem = _chain_problem(rebuilt, claimed, newer)
    else:
        assert chain is not None
        lines = read_chain(chain)
        claimed = [line.entry() for line in lines if not line.reset_away]
        problem = _chain_problem(rebuilt, claimed, 0) or _dropped_difference(resets, lines)
    problem = problem or forged
    dropped = [run for run in resets if run.drops_governance and not run.accepted]
    verified = problem is None and not dropped
    head = rebuilt[-1].hash if rebuilt else None
    checked = str(chain) if chain is not None else "the workflow's chain"
    if as_json:
        print_json(
            {
                "verified": verified,
                "problem": problem or (_dropped_problem(dropped) if dropped else None),
                "entries": len(rebuilt),
                "appended_since_read": newer,
                "signed_decisions": signed,
                "unverified_decisions": unverified,
                "head": head,
                "runs": surviving,
                "reset_away": [run.model_dump(mode="json") for run in resets],
                "other_executions": execution.others,
            }
        )
        return 0 if verified else 1
    out = console()
    for run in resets:
        _print_reset(run, judged=True)
    _print_others(execution)
    if problem is not None:
        out.print(f"NOT verified: {checked}: {problem}", markup=False)
    elif dropped:
        out.print(f"NOT verified: {_dropped_problem(dropped)}", markup=False)
    else:
        out.print(
            f"verified: {checked} matches the history ({len(rebuilt)} entries, head {head})"
            + (f"; {newer} of them appended since its state was read" if newer else "")
            + _signatures_note(signed, unverified)
            + _resets_note(resets),
            markup=False,
        )
    return 0 if verified else 1


def _signatures(workflow_id: str, entries: Sequence[AuditEntry]) -> tuple[int, int, str | None]:
    """How many recorded decisions were signed (each checked again), how many unverified,
    and the first signature that does not hold."""
    signed = unverified = 0
    for entry in entries:
        if entry.kind != "ApprovalDecided":
            continue
        decided = ApprovalDecided.model_validate(entry.record)
        for proof in decided.decisions:
            if not proof.verified:
                unverified += 1
                continue
            signed += 1
            if problem := proof_problem(workflow_id, decided.call_id, proof):
                return signed, unverified, f"entry {entry.index}: {problem}"
    return signed, unverified, None


def _signatures_note(signed: int, unverified: int) -> str:
    notes: list[str] = []
    if signed:
        notes.append(f"{signed} signed decision(s), every signature checked again")
    if unverified:
        notes.append(
            f"{unverified} decision(s) unverified (no approvers enrolled: the names are claims)"
        )
    return "".join(f"; {note}" for note in notes)


def _chain_problem(rebuilt: list[AuditEntry], claimed: list[AuditEntry], newer: int) -> str | None:
    """Where ``claimed`` departs from the history's chain ``rebuilt``, of which the last
    ``newer`` entries were appended after ``claimed`` was read (a running workflow's)."""
    return (
        first_broken_link(rebuilt)
        or first_broken_link(claimed)
        or first_difference(rebuilt[: len(rebuilt) - newer], claimed)
    )


def _dropped_difference(resets: Sequence[ResetRun], lines: Sequence[ExportedEntry]) -> str | None:
    """Where an export's reset-away entries depart from what the history's reset-away runs
    hold; ``None`` for an export that has none (written before any reset)."""
    claimed = [(line.run_id, line.entry()) for line in lines if line.reset_away]
    truth = [(run.run_id, entry) for run in resets for entry in run.entries]
    if not claimed and not any(line.run_id for line in lines):
        return None  # an export from before runs were named: it holds the surviving chain only
    for (run_id, entry), (given_run, given) in zip(truth, claimed, strict=False):
        if (run_id, entry) != (given_run, given):
            return (
                f"the reset-away entry {given.index} of run {given_run} differs from the "
                f"history (entry {entry.index} of run {run_id})"
            )
    if len(truth) != len(claimed):
        return (
            f"the history's reset-away runs hold {len(truth)} entries the surviving chain "
            f"does not, the chain checked lists {len(claimed)}"
        )
    return None


def _dropped_problem(dropped: Sequence[ResetRun]) -> str:
    runs = "; ".join(f"run {run.run_id} held {_counts(run)}" for run in dropped)
    flags = " ".join(f"--accept-reset {run.run_id}" for run in dropped)
    return (
        f"a reset dropped governance from the history the workflow goes on with: {runs}. If "
        f"the reset was meant, accept what it dropped: {flags}"
    )


def _counts(run: ResetRun) -> str:
    parts: list[str] = []
    kinds = [entry.kind for entry in run.decisions]
    parts += [f"{kinds.count(kind)} {kind}" for kind in sorted(set(kinds))]
    if run.effects:
        tools = ", ".join(f"{effect.name} {effect.ref}" for effect in run.effects[:3])
        more = f" and {len(run.effects) - 3} more" if len(run.effects) > 3 else ""
        parts.append(f"{len(run.effects)} executed effect(s) ({tools}{more})")
    return " and ".join(parts) or "no decision and no effect"


def _resets_note(resets: Sequence[ResetRun]) -> str:
    if not resets:
        return ""
    accepted = [run.run_id for run in resets if run.accepted and run.drops_governance]
    clean = len(resets) - len(accepted)
    parts = [f"accepted what the reset of run {run_id} dropped" for run_id in accepted]
    if clean:
        parts.append(f"{clean} run(s) reset away without dropping a decision or an effect")
    return "; " + "; ".join(parts)


def _surviving(execution: Execution, chains: dict[str, list[AuditEntry]]) -> list[AuditEntry]:
    runs = execution.surviving
    return [entry for run_id in runs for entry in chains[run_id]]


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
            out.print(_line(entry), markup=False)
    for run in resets:
        _print_reset(run, judged=False)
    _print_others(execution)


def _print_reset(run: ResetRun, *, judged: bool) -> None:
    out = console()
    if run.reset_into is not None:
        kept = (run.reset_event or 1) - 1
        how = (
            f"reset into run {run.reset_into}, which kept its first {kept} events"
            f"{f': {run.reason!r}' if run.reason else ''}"
        )
    else:
        how = f"it continued from run {run.continued_from}, which was reset away"
    out.print(f"run {run.run_id} was reset away ({how})", markup=False)
    for entry in run.entries:
        out.print(_line(entry), markup=False)
    for effect in run.effects:
        out.print(_effect(effect), markup=False)
    if not run.drops_governance:
        verdict = "it dropped no decision and no effect"
    elif run.accepted:
        verdict = f"dropped {_counts(run)}: accepted"
    elif judged:
        verdict = f"dropped {_counts(run)}: not accepted"
    else:
        verdict = f"dropped {_counts(run)}"
    out.print(f"      {verdict}", markup=False)


def _print_others(execution: Execution) -> None:
    if execution.others:
        out = console()
        out.print(
            f"note: {execution.workflow_id!r} was used again; the earlier execution(s) "
            f"beginning with run {', '.join(execution.others)} are separate workflows, not "
            "audited here",
            markup=False,
        )


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


def _line(entry: AuditEntry) -> str:
    try:
        text = render_entry(_ENTRY.validate_python(entry.record))
    except ValidationError:
        text = f"{entry.kind} {json.dumps(entry.record, sort_keys=True)}"
    return f"{entry.index:>4}  {entry.hash[:12]}  {text}"


def _effect(effect: Effect) -> str:
    what = "tool" if effect.kind == "tool" else "child workflow"
    return (
        f"  effect  {what} {effect.name} {effect.ref}: {effect.outcome} (event {effect.event_id})"
    )


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


async def _held_chains(
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


async def chain_from_history(client: Client, workflow_id: str) -> list[AuditEntry]:
    """The surviving chain rebuilt by replaying the workflow's recorded history with the
    worker's workflow code (no worker and no query involved).

    Raises:
        CliError: the history does not replay with this code.
    """
    execution = await read_execution(client, workflow_id)
    return _surviving(execution, await _replayed_chains(execution))


async def _replayed_chains(execution: Execution) -> dict[str, list[AuditEntry]]:
    """Each run's chain, rebuilt by replaying its history with the worker's workflow code: the
    surviving runs and the runs reset away alike.

    Raises:
        CliError: a history does not replay with this code (it is not orga's, or the code
            changed in a way the history cannot follow).
    """
    # the workflow code and Temporal's worker, loaded only when a chain is rebuilt
    from orga.cli.capture import Capture
    from orga.plugin import replayer

    instances: list[Any] = []
    capture = Capture(instances)
    replaying = replayer(settings().store(), interceptors=[capture])
    chains: dict[str, list[AuditEntry]] = {}
    for run_id, history in execution.histories.items():
        instances.clear()
        try:
            await replaying.replay_workflow(history)
        except Exception as error:
            raise CliError(
                f"run {run_id} of {execution.workflow_id!r} does not replay with this code: {error}"
            ) from error
        if not instances or not hasattr(instances[-1], "audit"):
            raise CliError(
                f"{execution.workflow_id!r} is not an orga loop or task: it keeps no audit chain"
            )
        chains[run_id] = list(instances[-1].audit().entries)
    return chains
