"""Readable text for the CLI: loop state, journal entries, lists of loops. Pure formatting."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from rich.table import Table

from orga.contracts.inference import Usage
from orga.contracts.principals import SpendLine
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.task import StepReport, TaskResult, TaskState
from orga.desk.inbox_text import argument_lines, decided_by, labelled
from orga.runtime.safe_text import one_line, printable

__all__ = [
    "WorkflowRow",
    "render_result",
    "render_state",
    "render_task",
    "render_task_result",
    "rows_table",
    "shorten",
]


def _status(state: LoopState) -> str:
    """The status, and the phase where it says more (a cancelled loop's is ``failed``)."""
    if state.status in ("completed", "failed", "cancelled") and state.phase != state.status:
        return state.status
    return f"{state.status} (phase: {state.phase})"


def render_state(state: LoopState, spend: Sequence[SpendLine] = ()) -> str:
    """A loop's state, one fact per line, then what it waits for and its last tool calls;
    ``spend``: its principal's ledger lines (what is left of each limit)."""
    usage = state.usage
    model = f"{state.provider or '?'} {state.model or '(the worker default)'}"
    lines = [
        f"workflow      {state.workflow_id}",
        f"agent         {state.agent_id}",
        *([f"principal     {state.principal.describe()}"] if state.principal else []),
        *(f"{'left' if n == 0 else '':<14}{_left(line)}" for n, line in enumerate(spend)),
        f"status        {_status(state)}",
        f"model         {model}",
        f"iteration     {state.iteration}"
        + (
            f" (model calls paid for: {state.model_calls}, with its critic's and children's)"
            if state.model_calls > state.iteration
            else ""
        ),
        f"tokens        {usage.total_tokens} ({usage.input_tokens} in, {usage.output_tokens} out"
        + (f", {usage.cache_read_input_tokens} cached" if usage.cache_read_input_tokens else "")
        + ")"
        + (" estimated" if usage.estimated else ""),
        f"cost          {_cost(usage)}",
        f"stop reason   {state.last_stop_reason or '-'}",
        f"tool calls    {state.tool_call_count}",
        f"messages      {state.messages}",
        f"started       {state.started_at.isoformat(timespec='seconds')}",
    ]
    if state.termination_reason:
        message = f": {state.termination_message}" if state.termination_message else ""
        lines.append(_field("ended", f"{state.termination_reason}{message}"))
    if state.output is not None:
        lines.append(_field("output", state.output))
    if (thread := state.thread) is not None:
        ended = f" · ended: {thread.ended}" if thread.ended else ""
        lines.append(f"thread        turn {thread.turn} of at most {thread.max_turns}{ended}")
        if thread.waiting_for_message:
            until = thread.idle_until.isoformat(timespec="seconds") if thread.idle_until else "-"
            lines += [
                f"waiting for   the next message (turn {thread.turn + 1}) until {until}",
                f"              orga say {_ids(state.workflow_id)} '…'",
                f"              orga close {_ids(state.workflow_id)}",
            ]
    for approval in state.pending_approvals:
        lines += [
            f"waiting for   approval of call {approval.call_id} ({approval.tool}) since "
            f"{approval.since.isoformat(timespec='seconds')}",
            *_arguments(approval.arguments, 14),
            f"              why: {one_line(approval.reason)}",
            f"              decides: {one_line(decided_by(approval))}",
            f"              orga approve {_ids(state.workflow_id, approval.call_id)} --reason '…'",
            f"              orga deny {_ids(state.workflow_id, approval.call_id)} --reason '…'",
        ]
    for tool in state.waiting_for_workers:
        lines += [
            f"waiting for   a worker with `{one_line(tool)}`: the workers of this task queue "
            "that took the call do not register it",
            "              start one with the tool's module (ORGA_TOOL_MODULES), or give "
            "every worker the same tools",
        ]
    for escalation in state.pending_escalations:
        lines += [
            f"waiting for   an operator: escalation {escalation.escalation_id} "
            f"({escalation.tool}) since {escalation.since.isoformat(timespec='seconds')}",
            *_arguments(escalation.arguments, 14),
            f"              error: {shorten(escalation.error)}",
            f"              orga resolve {_ids(state.workflow_id, escalation.escalation_id)} "
            f"--action {{{','.join(escalation.options)}}} --reason '…'",
        ]
    for child in state.delegations:
        error = f" · {shorten(child.error)}" if child.error else ""
        if child.waiting is not None:
            error += f" · waits for a person at the remote agent: {shorten(child.waiting)}"
        lines.append(
            f"delegated     {one_line(child.agent)} {child.status} · {child.usage.total_tokens} "
            f"of {child.max_tokens} tokens · {one_line(child.workflow_id) or '-'}{error}"
        )
    for call in state.tool_calls[-10:]:
        mark = "!" if call.is_error else " "
        lines.append(
            f"  {mark} it {call.iteration:<3} {one_line(call.tool):<20} {call.status:<18} "
            f"{one_line(call.call_id)}"
        )
    return "\n".join(lines)


def _field(label: str, text: str) -> str:
    """``label`` and ``text`` (made printable), its later lines indented under the first."""
    return f"{label:<14}" + printable(text).replace("\n", "\n" + " " * 14)


def _arguments(arguments: str, indent: int) -> list[str]:
    """A waiting call's arguments in full, one per line (as ``orga pending --full``)."""
    lines, _ = argument_lines(arguments, full=True)
    width = max(100, indent + 40)
    return [
        line
        for number, text in enumerate(lines)
        for line in labelled("arguments" if number == 0 else "", text, width, indent)
    ]


def _ids(*ids: str) -> str:
    """Ids as a shell reads them (``notify#1`` is quoted: ``#`` can start a comment)."""
    return " ".join(shlex.quote(i) for i in ids)


def shorten(text: str, limit: int = 100) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_result(result: LoopResult) -> str:
    model = f", {result.provider} {result.model}" if result.model else ""
    return (
        f"{result.output}\n\n"
        f"({result.termination_reason} after {result.iterations} iteration(s), "
        f"{result.tool_call_count} tool call(s), {result.usage.total_tokens} tokens{model})"
    )


@dataclass(frozen=True)
class WorkflowRow:
    """One loop or task in a listing, from Temporal's visibility records."""

    workflow_id: str
    kind: str
    status: str
    agent_id: str
    iteration: int
    tokens: int
    started: datetime | None
    principal: str = "-"
    """The user (``user@tenant``) it runs for, as its search attributes say."""


def _left(line: SpendLine) -> str:
    """``user ann, 2026-12-04: 0.950000 of 1 USD left (0.05 spent, 0 held)``."""
    parts: list[str] = []
    if line.limit_usd is not None:
        left = max(line.limit_usd - line.spent_usd - line.reserved_usd, 0.0)
        parts.append(f"{left:.6f} of {line.limit_usd:g} USD")
    if line.limit_tokens is not None:
        left_tokens = max(line.limit_tokens - line.spent_tokens - line.reserved_tokens, 0)
        parts.append(f"{left_tokens} of {line.limit_tokens} tokens")
    said = " and ".join(parts) + " left" if parts else "no limit"
    return one_line(
        f"{line.scope} {line.name}, {line.key}: {said} ({line.spent_usd:.6f} USD, "
        f"{line.spent_tokens} tokens spent)"
    )


def rows_table(rows: Sequence[WorkflowRow]) -> Table:
    """Loops and tasks, newest first, as a table."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("WORKFLOW ID", "KIND", "STATUS", "AGENT", "PRINCIPAL"):
        table.add_column(column, no_wrap=True)
    table.add_column("ITER", justify="right")
    table.add_column("TOKENS", justify="right")
    table.add_column("STARTED", no_wrap=True)
    for row in rows:
        started = row.started.isoformat(timespec="seconds") if row.started else "-"
        iteration = str(row.iteration) if row.kind in ("loop", "thread") else "-"
        tokens = str(row.tokens) if row.kind in ("loop", "thread") else "-"
        texts = (row.workflow_id, row.kind, row.status, row.agent_id, row.principal)
        names = (one_line(text) for text in texts)
        table.add_row(*names, iteration, tokens, started)
    return table


def render_task(state: TaskState, workflow_id: str) -> str:
    """A task's steps, one per line, what waits for an operator, and how it ended."""
    # "completed · completed" says nothing twice: the outcome only when it adds to the status.
    outcome = f" · {state.outcome}" if state.outcome and state.outcome != state.status else ""
    lines = [f"task {workflow_id} ({state.agent_id}): {state.status}{outcome}"]
    if state.uncompensated:
        lines.append(f"  NOT UNDONE: {', '.join(state.uncompensated)}")
    if state.message:
        lines.append("  " + printable(state.message).replace("\n", "\n  "))
    lines += _steps(state.steps)
    for escalation in state.pending_escalations:
        lines += [
            f"  waiting for an operator: escalation {escalation.escalation_id} "
            f"({escalation.tool}) since {escalation.since.isoformat(timespec='seconds')}",
            *_arguments(escalation.arguments, 4),
            f"    error: {shorten(escalation.error)}",
            f"    orga resolve {_ids(workflow_id, escalation.escalation_id)} "
            f"--action {{{','.join(escalation.options)}}} --reason '…'",
        ]
    return "\n".join(lines)


def render_task_result(result: TaskResult) -> str:
    """A finished task's steps (from its result or its failure's report)."""
    head = f"task {result.status}" + (
        f" · {result.outcome}" if result.status != "completed" else ""
    )
    lines = [head]
    if result.uncompensated:
        lines.append(f"  NOT UNDONE: {', '.join(result.uncompensated)}")
    return "\n".join([*lines, *_steps(result.steps)])


def _steps(steps: Iterable[StepReport]) -> list[str]:
    lines: list[str] = []
    for step in steps:
        detail = step.result or (step.errors[-1] if step.errors else "")
        if step.compensation_note:
            detail = step.compensation_note
        elif step.compensation_error and step.status != "compensated":
            detail = f"compensation failed: {step.compensation_error}"
        lines.append(
            f"  {step.id:<16} {step.status:<20} attempts {step.attempts:<3} {shorten(detail, 80)}"
        )
    return lines


def _cost(usage: Usage) -> str:
    """What the loop's calls cost, and how many the price table could not price."""
    said = f"{usage.cost_usd:.6f} USD"
    if usage.unpriced_calls:
        said += f" + {usage.unpriced_calls} call(s) of a model with no known price"
    return said
