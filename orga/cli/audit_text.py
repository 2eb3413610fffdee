"""How ``orga audit`` reads to a person: an entry, an effect, a run a reset took away (and what
it dropped), the other executions of a workflow id.
"""

from __future__ import annotations

import json

from pydantic import TypeAdapter, ValidationError

from orga.cli.audit_runs import Execution
from orga.cli.common import console
from orga.cli.journal_text import render_entry
from orga.contracts.audit import AuditEntry, Effect, ResetRun
from orga.contracts.journal import JournalEntry

__all__ = ["counts", "effect_line", "line", "print_others", "print_reset"]

_ENTRY: TypeAdapter[JournalEntry] = TypeAdapter(JournalEntry)


def print_reset(run: ResetRun, *, judged: bool) -> None:
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
        out.print(line(entry), markup=False)
    for effect in run.effects:
        out.print(effect_line(effect), markup=False)
    if not run.drops_governance:
        verdict = "it dropped no decision and no effect"
    elif run.accepted:
        verdict = f"dropped {counts(run)}: accepted"
    elif judged:
        verdict = f"dropped {counts(run)}: not accepted"
    else:
        verdict = f"dropped {counts(run)}"
    out.print(f"      {verdict}", markup=False)


def print_others(execution: Execution) -> None:
    if execution.others:
        out = console()
        out.print(
            f"note: {execution.workflow_id!r} was used again; the earlier execution(s) "
            f"beginning with run {', '.join(execution.others)} are separate workflows, not "
            "audited here",
            markup=False,
        )


def counts(run: ResetRun) -> str:
    parts: list[str] = []
    kinds = [entry.kind for entry in run.decisions]
    parts += [f"{kinds.count(kind)} {kind}" for kind in sorted(set(kinds))]
    if run.effects:
        tools = ", ".join(f"{effect.name} {effect.ref}" for effect in run.effects[:3])
        more = f" and {len(run.effects) - 3} more" if len(run.effects) > 3 else ""
        parts.append(f"{len(run.effects)} executed effect(s) ({tools}{more})")
    return " and ".join(parts) or "no decision and no effect"


def line(entry: AuditEntry) -> str:
    try:
        text = render_entry(_ENTRY.validate_python(entry.record))
    except ValidationError:
        text = f"{entry.kind} {json.dumps(entry.record, sort_keys=True)}"
    return f"{entry.index:>4}  {entry.hash[:12]}  {text}"


def effect_line(effect: Effect) -> str:
    what = "tool" if effect.kind == "tool" else "child workflow"
    return (
        f"  effect  {what} {effect.name} {effect.ref}: {effect.outcome} (event {effect.event_id})"
    )
