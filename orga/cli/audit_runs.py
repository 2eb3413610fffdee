"""Every run of a workflow's execution, read from Temporal: for ``orga audit``.

Continue-as-new links a run to the one before it; a reset starts a new run from a point of an
earlier one, whose events up to that point it copies, and leaves the earlier run (completed, or
terminated by the reset) off the history the workflow goes on with. The runs are found three
ways, so none is missed while visibility catches up: from the current run back through
continue-as-new, from each reset run to the run it was reset from, and from the visibility
listing of the workflow id (which alone finds a run that continued from a run later reset
away). Runs of another execution of the same id (the id used again after the first closed) are
named, not audited.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Literal

from pydantic import ValidationError
from temporalio.api.enums.v1 import WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent, WorkflowTaskFailedEventAttributes
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from orga.cli.common import CliError
from orga.contracts.audit import Effect
from orga.contracts.tools import RUN_TOOL, ToolInvocation
from orga.core.audit import RunFacts, lineage

__all__ = ["Execution", "read_execution"]

_Outcome = Literal["completed", "failed", "timed_out", "canceled", "terminated"]
_ENDS: dict[str, tuple[str, _Outcome]] = {
    "activity_task_completed_event_attributes": ("scheduled_event_id", "completed"),
    "activity_task_failed_event_attributes": ("scheduled_event_id", "failed"),
    "activity_task_timed_out_event_attributes": ("scheduled_event_id", "timed_out"),
    "activity_task_canceled_event_attributes": ("scheduled_event_id", "canceled"),
    "child_workflow_execution_completed_event_attributes": ("initiated_event_id", "completed"),
    "child_workflow_execution_failed_event_attributes": ("initiated_event_id", "failed"),
    "child_workflow_execution_timed_out_event_attributes": ("initiated_event_id", "timed_out"),
    "child_workflow_execution_canceled_event_attributes": ("initiated_event_id", "canceled"),
    "child_workflow_execution_terminated_event_attributes": ("initiated_event_id", "terminated"),
}
"""The events that end an activity or a child workflow: the field naming the event that began
it, and the outcome."""


@dataclass
class Execution:
    """The runs of one execution of a workflow id, with their histories."""

    workflow_id: str
    current: str
    """The run the workflow goes on with (the newest)."""
    runs: list[RunFacts]
    histories: dict[str, WorkflowHistory]
    others: list[str] = field(default_factory=list[str])
    """First runs of other executions of the same workflow id (not audited here)."""
    running: bool = False
    """The workflow was running when its runs were read: its history may have grown since."""

    @property
    def surviving(self) -> list[str]:
        """The runs of the history the workflow goes on with, oldest first."""
        return lineage({run.run_id: run for run in self.runs}, self.current)


async def read_execution(client: Client, workflow_id: str) -> Execution:
    """Every run of the workflow's current execution, with its history and what it says.

    Raises:
        CliError: there is no such workflow, or its runs cannot be listed.
    """
    try:
        description = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise CliError(f"there is no workflow {workflow_id!r}") from error
        raise
    current = description.run_id
    running = description.status == WorkflowExecutionStatus.RUNNING
    histories: dict[str, WorkflowHistory] = {}
    pending = [current, *await _listed_runs(client, workflow_id)]
    while pending:
        run_id = pending.pop()
        if run_id in histories:
            continue
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories[run_id] = history
        started = history.events[0].workflow_execution_started_event_attributes
        pending.append(started.continued_execution_run_id)
        if reset := _reset_of(run_id, history.events):
            pending.append(reset[0].base_run_id)
        pending = [run for run in pending if run]
    first = _first_run(histories[current])
    others = sorted({_first_run(h) for h in histories.values()} - {first})
    mine = {run_id: h for run_id, h in histories.items() if _first_run(h) == first}
    runs = [await _facts(client, run_id, history) for run_id, history in mine.items()]
    return Execution(workflow_id, current, runs, mine, others, running)


async def _listed_runs(client: Client, workflow_id: str) -> list[str]:
    quoted = workflow_id.replace("\\", "\\\\").replace("'", "\\'")
    try:
        return [run.run_id async for run in client.list_workflows(f"WorkflowId = '{quoted}'")]
    except RPCError as error:
        raise CliError(
            f"cannot list the runs of {workflow_id!r} ({error.message}): the audit must see "
            "every run, reset ones included"
        ) from error


def _first_run(history: WorkflowHistory) -> str:
    started = history.events[0].workflow_execution_started_event_attributes
    return started.first_execution_run_id or history.run_id


def _reset_of(
    run_id: str, events: Sequence[HistoryEvent]
) -> tuple[WorkflowTaskFailedEventAttributes, int] | None:
    """The run's reset marker (a workflow task failed for ``RESET_WORKFLOW`` naming this run
    as the new one; a run reset from a reset run also holds its base's, copied) and its event
    id; ``None`` if no reset made the run."""
    for event in events:
        if event.HasField("workflow_task_failed_event_attributes"):
            failed = event.workflow_task_failed_event_attributes
            if (
                failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
                and failed.new_run_id == run_id
            ):
                return failed, event.event_id
    return None


async def _facts(client: Client, run_id: str, history: WorkflowHistory) -> RunFacts:
    events = history.events
    started = events[0].workflow_execution_started_event_attributes
    reset = _reset_of(run_id, events)
    marker = events[reset[1] - 1] if reset else events[0]
    return RunFacts(
        run_id=run_id,
        began=marker.event_time.ToDatetime(tzinfo=UTC),
        continued_from=started.continued_execution_run_id or None,
        reset_from=reset[0].base_run_id if reset else None,
        reset_event=reset[1] if reset else 0,
        reason=reset[0].failure.message if reset else "",
        effects=tuple(await _effects(client, run_id, events)),
    )


async def _effects(client: Client, run_id: str, events: Sequence[HistoryEvent]) -> list[Effect]:
    """The tool calls (``run_tool`` activities) and child workflows the run started, each at
    the event that records how it ended (or its start, while it was in flight). An activity
    cancelled before any attempt started never ran and is left out; local activities are pure
    tools by contract and are not effects."""
    ends: dict[int, HistoryEvent] = {}
    for event in events:
        which = event.WhichOneof("attributes") or ""
        if which in _ENDS:
            ends[getattr(getattr(event, which), _ENDS[which][0])] = event
    effects: list[Effect] = []
    for event in events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            if event.activity_task_scheduled_event_attributes.activity_type.name != RUN_TOOL:
                continue
            end = ends.get(event.event_id)
            if end is not None and _attributes(end).started_event_id == 0:
                continue  # cancelled or timed out before an attempt started
            call = (await _invocation(client, run_id, event)).call
            effects.append(_effect("tool", call.name, call.id, event, end))
        elif event.HasField("child_workflow_execution_started_event_attributes"):
            child = event.child_workflow_execution_started_event_attributes
            end = ends.get(child.initiated_event_id)
            name, ref = child.workflow_type.name, child.workflow_execution.workflow_id
            effects.append(_effect("child_workflow", name, ref, event, end))
    return effects


def _attributes(event: HistoryEvent) -> Any:
    """The event's attributes message (its type depends on the event's)."""
    return getattr(event, event.WhichOneof("attributes") or "")


def _effect(
    kind: Literal["tool", "child_workflow"],
    name: str,
    ref: str,
    began: HistoryEvent,
    end: HistoryEvent | None,
) -> Effect:
    if end is None:
        return Effect(event_id=began.event_id, kind=kind, name=name, ref=ref, outcome="in_flight")
    outcome = _ENDS[end.WhichOneof("attributes") or ""][1]
    return Effect(event_id=end.event_id, kind=kind, name=name, ref=ref, outcome=outcome)


async def _invocation(client: Client, run_id: str, event: HistoryEvent) -> ToolInvocation:
    payloads = event.activity_task_scheduled_event_attributes.input.payloads
    try:
        [invocation] = await client.data_converter.decode(payloads, [ToolInvocation])
    except (ValidationError, ValueError, RuntimeError) as error:
        raise CliError(
            f"event {event.event_id} of run {run_id}: the run_tool input does not decode "
            f"({error}); run orga audit with the worker's store and codec settings"
        ) from error
    if not isinstance(invocation, ToolInvocation):  # pragma: no cover - decode honours the hint
        raise CliError(f"event {event.event_id} of run {run_id}: not a tool invocation")
    return invocation
