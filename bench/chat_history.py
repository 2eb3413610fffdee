"""What a long conversation's history says, per tool call of its long turn: the history
bytes, the time (by the server's clock) and the model call's share, and this process's memory
when the tool ran. Read by ``bench/long_conversation.py``."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from bench.chat_workloads import CALLS, MODEL_CALLS


async def history_of(client: Client, workflow_id: str) -> list[HistoryEvent]:
    """Every event of every run of the workflow, in order."""
    handle = client.get_workflow_handle(workflow_id)
    described = await handle.describe()
    run_id: str | None = described.raw_description.workflow_execution_info.first_run_id
    events: list[HistoryEvent] = []
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events += history.events
        last = history.events[-1]
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return events


def _seconds(event: HistoryEvent) -> float:
    return event.event_time.seconds + event.event_time.nanos / 1e9


def _model_seconds(span: list[HistoryEvent]) -> float:
    """From the model call that opens ``span`` being scheduled until it completed."""
    for event in span:
        completed = event.activity_task_completed_event_attributes
        if event.HasField("activity_task_completed_event_attributes") and (
            completed.scheduled_event_id == span[0].event_id
        ):
            return _seconds(event) - _seconds(span[0])
    return float("nan")


@dataclass
class Measured:
    """One variant's conversation, one run."""

    stopped: str | None
    """Why it stopped, or ``None``: it completed."""
    turn: int
    """The turn it stopped in (0: none)."""
    reached: int
    """Model calls the long turn scheduled (``calls + 1`` when it completed)."""
    tokens: int | None
    runs: int
    """Runs of the workflow (one more than its continues-as-new)."""
    runs_in_turn: int
    """Runs that began during the long turn."""
    events: int
    history_bytes: int
    call_bytes: list[int]
    """History bytes of each tool call of the long turn: from its model call's scheduling to
    the next model call's, every event between (the tool's and the workflow tasks' too)."""
    call_seconds: list[float]
    model_seconds: list[float]
    """Of each call's time, its model call's (scheduled to completed)."""
    rss_kib: list[int]
    """This process's resident memory when each tool call of the long turn ran."""


def measure(
    events: list[HistoryEvent], build_calls: int, stop: tuple[int, str] | None, tokens: int | None
) -> Measured:
    model_calls = [
        index
        for index, event in enumerate(events)
        if event.HasField("activity_task_scheduled_event_attributes")
        and event.activity_task_scheduled_event_attributes.activity_type.name in MODEL_CALLS
    ]
    turn = model_calls[build_calls:]
    spans = list(itertools.pairwise(turn))
    stopped = stop[1] if stop else None
    ended = events[-1]
    if stop and ended.HasField("workflow_execution_terminated_event_attributes"):
        terminated = ended.workflow_execution_terminated_event_attributes
        stopped = f"terminated by {terminated.identity}: {terminated.reason}"
    return Measured(
        stopped=stopped,
        turn=stop[0] if stop else 0,
        reached=len(turn),
        tokens=tokens,
        runs=sum(e.HasField("workflow_execution_started_event_attributes") for e in events),
        runs_in_turn=sum(
            e.HasField("workflow_execution_started_event_attributes") for e in events[turn[0] :]
        )
        if turn
        else 0,
        events=len(events),
        history_bytes=sum(e.ByteSize() for e in events),
        call_bytes=[sum(e.ByteSize() for e in events[a:b]) for a, b in spans],
        call_seconds=[_seconds(events[b]) - _seconds(events[a]) for a, b in spans],
        model_seconds=[_model_seconds(events[a:b]) for a, b in spans],
        rss_kib=list(CALLS),
    )
