"""``orga audit --verify``: the chain checked against the history, and what resets dropped.

The workflow's chain (or an exported one) is compared entry by entry with the chain a replay of
every run rebuilds; every signed decision is checked again; a reset that dropped a decision or
an effect fails the check unless the verifier accepts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from temporalio.client import Client

from orga.cli.audit_chains import held_chains, read_chain, replayed_chains, surviving_chain
from orga.cli.audit_runs import Execution, read_execution
from orga.cli.audit_text import counts, print_others, print_reset
from orga.cli.common import CliError, console, print_json
from orga.contracts.audit import AuditEntry, ExportedEntry, ResetRun
from orga.contracts.journal import ApprovalDecided
from orga.core.audit import first_broken_link, first_difference, reset_away
from orga.core.signatures import proof_problem

__all__ = ["chain_problem", "verify_chain"]


async def verify_chain(
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
        held = await held_chains(client, execution, every_run=False)
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
    chains = await replayed_chains(execution)
    resets = reset_away(execution.runs, execution.current, chains)
    resets = [
        run.model_copy(update={"accepted": accepted is None or run.run_id in accepted})
        for run in resets
    ]
    rebuilt = surviving_chain(execution, chains)
    signed, unverified, forged = _signatures(execution.workflow_id, rebuilt)
    newer = 0
    if held is not None:
        claimed = [entry for run_id in surviving for entry in held.get(run_id, [])]
        if went_on and len(rebuilt) > len(claimed):
            newer = len(rebuilt) - len(claimed)
        problem = chain_problem(rebuilt, claimed, newer)
    else:
        assert chain is not None
        lines = read_chain(chain)
        claimed = [line.entry() for line in lines if not line.reset_away]
        problem = chain_problem(rebuilt, claimed, 0) or _dropped_difference(resets, lines)
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
        print_reset(run, judged=True)
    print_others(execution)
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


def chain_problem(rebuilt: list[AuditEntry], claimed: list[AuditEntry], newer: int) -> str | None:
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
    runs = "; ".join(f"run {run.run_id} held {counts(run)}" for run in dropped)
    flags = " ".join(f"--accept-reset {run.run_id}" for run in dropped)
    return (
        f"a reset dropped governance from the history the workflow goes on with: {runs}. If "
        f"the reset was meant, accept what it dropped: {flags}"
    )


def _resets_note(resets: Sequence[ResetRun]) -> str:
    if not resets:
        return ""
    accepted = [run.run_id for run in resets if run.accepted and run.drops_governance]
    clean = len(resets) - len(accepted)
    parts = [f"accepted what the reset of run {run_id} dropped" for run_id in accepted]
    if clean:
        parts.append(f"{clean} run(s) reset away without dropping a decision or an effect")
    return "; " + "; ".join(parts)
