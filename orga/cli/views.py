"""Readable text for the CLI: loop state, journal entries, lists of loops. Pure formatting."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from orga.contracts.journal import (
    ApprovalDecided,
    EscalationResolved,
    EvidenceJudged,
    EvidenceSaturated,
    JournalEntry,
    ObservationsCollected,
    PolicyEvaluated,
    PreHydrationComplete,
    ReasoningComplete,
    RecoveryTriggered,
    Started,
    StepLimitReached,
    Terminated,
    ToolsDispatched,
)
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.task import StepReport

__all__ = [
    "LoopRow",
    "render_entry",
    "render_result",
    "render_rows",
    "render_state",
    "render_task",
]


def _time(moment: datetime) -> str:
    return moment.strftime("%H:%M:%S")


def render_state(state: LoopState) -> str:
    """A loop's state, one fact per line."""
    usage = state.usage
    lines = [
        f"workflow      {state.workflow_id}",
        f"agent         {state.agent_id}",
        f"status        {state.status} (phase: {state.phase})",
        f"iteration     {state.iteration}",
        f"tokens        {usage.total_tokens} ({usage.input_tokens} in, {usage.output_tokens} out)"
        + (" estimated" if usage.estimated else ""),
        f"stop reason   {state.last_stop_reason or '-'}",
        f"tool calls    {state.tool_call_count}",
        f"messages      {state.messages}",
        f"started       {state.started_at.isoformat(timespec='seconds')}",
    ]
    if state.termination_reason:
        lines.append(f"ended         {state.termination_reason}")
    if state.output is not None:
        lines.append(f"output        {state.output}")
    for call in state.tool_calls[-10:]:
        mark = "!" if call.is_error else " "
        lines.append(
            f"  {mark} it {call.iteration:<3} {call.tool:<20} {call.status:<18} {call.call_id}"
        )
    return "\n".join(lines)


def _detail(entry: JournalEntry) -> str:
    match entry:
        case Started():
            tools = ", ".join(entry.tools) or "no tools"
            return f"policy {entry.policy}, {tools}"
        case ReasoningComplete():
            calls = f" → {', '.join(entry.tool_calls)}" if entry.tool_calls else ""
            return f"{entry.stop_reason} ({entry.model}, {entry.usage.total_tokens} tokens){calls}"
        case PolicyEvaluated():
            verdicts = "; ".join(
                f"{d.decision} {d.tool or d.action}"
                + (f" [{', '.join(d.policy_ids)}]" if d.policy_ids else "")
                + (f": {d.reason}" if d.reason and d.decision != "allow" else "")
                for d in entry.decisions
            )
            return f"{entry.engine}: {verdicts}"
        case ToolsDispatched():
            return ", ".join(entry.tools) or "nothing to run"
        case ObservationsCollected():
            return ", ".join(f"{o.tool} {o.status}" for o in entry.outcomes)
        case RecoveryTriggered():
            return f"{entry.tool}: {entry.strategy} after {entry.error}"
        case StepLimitReached():
            return f"step {entry.step_id} after {entry.attempts} attempts: {entry.reason}"
        case PreHydrationComplete():
            return (
                f"found {entry.found}, resolved {entry.resolved}, failed {entry.failed}, "
                f"{entry.tokens} tokens"
            )
        case ApprovalDecided():
            verdict = "approved" if entry.approved else "denied"
            who = f" by {entry.approver}" if entry.approver else ""
            why = f": {entry.reason}" if entry.reason else ""
            return f"{entry.tool} {entry.call_id} {verdict}{who} ({entry.source}){why}"
        case EscalationResolved():
            who = f" by {entry.operator}" if entry.operator else ""
            return f"{entry.tool} {entry.escalation_id}: {entry.action}{who} ({entry.source})"
        case EvidenceJudged():
            return (
                f"{entry.tool} {entry.call_id}: {entry.judgement} "
                f"({entry.consecutive_no_gain} without gain, {entry.state})"
            )
        case EvidenceSaturated():
            return entry.reason
        case Terminated():
            return f"{entry.reason}: {entry.message}" if entry.message else entry.reason


def render_entry(entry: JournalEntry) -> str:
    """One journal entry on one line."""
    head = f"#{entry.seq:<4} {_time(entry.at)}  it {entry.iteration:<3} {entry.kind:<22}"
    return f"{head} {_detail(entry)}"


def render_result(result: LoopResult) -> str:
    return (
        f"{result.output}\n\n"
        f"({result.termination_reason} after {result.iterations} iteration(s), "
        f"{result.tool_call_count} tool call(s), {result.usage.total_tokens} tokens)"
    )


@dataclass(frozen=True)
class LoopRow:
    """One loop in a listing, from Temporal's visibility records."""

    workflow_id: str
    status: str
    agent_id: str
    iteration: int
    tokens: int
    started: datetime | None


def render_rows(rows: Iterable[LoopRow]) -> str:
    header = f"{'WORKFLOW ID':<36} {'STATUS':<18} {'AGENT':<14} {'ITER':>5} {'TOKENS':>8}  STARTED"
    lines = [header]
    for row in rows:
        started = row.started.isoformat(timespec="seconds") if row.started else "-"
        lines.append(
            f"{row.workflow_id:<36} {row.status:<18} {row.agent_id:<14} {row.iteration:>5} "
            f"{row.tokens:>8}  {started}"
        )
    if len(lines) == 1:
        lines.append("(no loops)")
    return "\n".join(lines)


def render_task(status: str, steps: Iterable[StepReport], pending: Iterable[str] = ()) -> str:
    """A task's steps, one per line, with what happened to each."""
    lines = [f"task {status}"]
    for step in steps:
        detail = step.result or (step.errors[-1] if step.errors else "")
        if step.compensation_error:
            detail = f"compensation failed: {step.compensation_error}"
        if len(detail) > 80:
            detail = detail[:79] + "…"
        lines.append(f"  {step.id:<16} {step.status:<20} attempts {step.attempts:<3} {detail}")
    lines += [f"  waiting for an operator: {escalation}" for escalation in pending]
    return "\n".join(lines)
