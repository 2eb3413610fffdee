"""A loop's history read back run by run, following continue-as-new: what each model call was
sent and what each turn wrote."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowHistory

from orga.contracts.inference import CALL_MODEL, InferenceRequest
from tests.harness import Harness

__all__ = ["requests_per_run", "runs", "turns_written"]


async def runs(
    harness: Harness, handle: WorkflowHandle[Any, Any]
) -> AsyncIterator[WorkflowHistory]:
    """The history of every run of a loop, in order (following continue-as-new)."""
    run_id = handle.first_execution_run_id
    while run_id:
        history = await harness.client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        yield history
        last = history.events[-1]
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id


async def requests_per_run(
    harness: Harness, handle: WorkflowHandle[Any, Any]
) -> list[list[InferenceRequest]]:
    """The request of every model call, run by run (from the histories)."""
    converter = harness.client.data_converter
    found: list[list[InferenceRequest]] = []
    async for history in runs(harness, handle):
        calls: list[InferenceRequest] = []
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                scheduled = event.activity_task_scheduled_event_attributes
                if scheduled.activity_type.name == CALL_MODEL:
                    [request] = await converter.decode(scheduled.input.payloads, [InferenceRequest])
                    calls.append(request)
        found.append(calls)
    return found


async def turns_written(
    harness: Harness, handle: WorkflowHandle[Any, Any]
) -> list[tuple[int, int]]:
    """``(events, bytes)`` of the history each whole turn wrote, in order across every run:
    from one model call's scheduling to the next's, each run's first and last turn left out
    (its setup, its continue or its answer)."""
    turns: list[tuple[int, int]] = []
    async for history in runs(harness, handle):
        starts = [
            i
            for i, event in enumerate(history.events)
            if event.HasField("activity_task_scheduled_event_attributes")
            and event.activity_task_scheduled_event_attributes.activity_type.name == CALL_MODEL
        ]
        for begin, end in itertools.pairwise(starts[1:]):  # the run's first turn left out
            written = history.events[begin:end]
            turns.append((len(written), sum(e.ByteSize() for e in written)))
    return turns
