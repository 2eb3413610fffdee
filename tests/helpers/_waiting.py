"""Waiting on a condition, and reading what a workflow ended with or waits for."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar, overload

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message, ToolResult
from orga.contracts.state import LoopState
from orga.contracts.task import TaskResult, TaskState

T = TypeVar("T")

POLL = 0.05
"""Seconds between two looks at a condition: short, so a test goes on as soon as it holds."""


@overload
async def eventually(
    probe: Callable[[], Awaitable[T | None]], what: str, *, timeout: float = 30
) -> T: ...
@overload
async def eventually(probe: Callable[[], T | None], what: str, *, timeout: float = 30) -> T: ...
async def eventually(probe: Callable[[], Any], what: str, *, timeout: float = 30) -> Any:
    """What ``probe`` returns once it holds: a true value (not ``None``, ``False``, empty).

    ``probe`` (a function or a coroutine function) is asked again every ``POLL`` seconds, so a
    test waits for the condition, never for a time; ``timeout`` only bounds a condition that
    never comes (an ``AssertionError`` naming ``what``).
    """
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = probe()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never happened within {timeout:g} s: {what}")
        await asyncio.sleep(POLL)


async def failure(handle: WorkflowHandle[Any, Any], kind: str | None = None) -> ApplicationError:
    """The ``ApplicationError`` the workflow failed with (of type ``kind``, when given)."""
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert kind is None or cause.type == kind, cause
    return cause


async def aborted(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """The report of a task that ended ``TaskAborted``."""
    return (await failure(handle, "TaskAborted")).details[0]


def statuses(report: dict[str, Any] | TaskResult | TaskState) -> dict[str, str]:
    """Each step's status, by step id."""
    steps = report["steps"] if isinstance(report, dict) else [s.model_dump() for s in report.steps]
    return {s["id"]: s["status"] for s in steps}


async def conversation(handle: WorkflowHandle[Any, Any]) -> list[Message]:
    """The loop's conversation (its ``conversation`` query)."""
    return await handle.query("conversation", result_type=list[Message])


def tool_results(messages: list[Message]) -> list[ToolResult]:
    """Every tool result in ``messages``, in order."""
    return [r for m in messages if m.role == "tool" for r in m.tool_results]


def summaries(events: Any, *, kinds: bool = False) -> list[str]:
    """Every summary in the history, in order (with ``kinds``: prefixed by the event type)."""
    convert = pydantic_data_converter.payload_converter
    found: list[str] = []
    for event in events:
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            label = convert.from_payloads([event.user_metadata.summary])[0]
            found.append(f"{event.WhichOneof('attributes')}: {label}" if kinds else label)
    return found


async def started_config(handle: WorkflowHandle[Any, Any]) -> LoopConfig:
    """The config a loop was started with, as its history holds it (a delegated child's is
    what its parent gave it)."""
    started = (await handle.fetch_history()).events[0]
    [payload] = started.workflow_execution_started_event_attributes.input.payloads
    return LoopInput.model_validate_json(payload.data).config


async def loop_state(handle: WorkflowHandle[Any, Any]) -> LoopState:
    """The loop's ``state`` query."""
    return await handle.query("state", result_type=LoopState)


async def task_state(handle: WorkflowHandle[Any, Any]) -> TaskState:
    """The task's ``state`` query."""
    return await handle.query("state", result_type=TaskState)


async def pending(
    handle: WorkflowHandle[Any, Any], count: int = 1, *, besides: Collection[str] = ()
) -> LoopState:
    """The loop's state once ``count`` approvals are pending (not counting the calls
    ``besides``: ones already decided, which the state may show until the decision lands)."""

    async def probe() -> LoopState | None:
        state = await loop_state(handle)
        waiting = [a for a in state.pending_approvals if a.call_id not in besides]
        return state if len(waiting) >= count else None

    return await eventually(probe, f"{count} approval(s) pending in {handle.id}")


async def escalated(handle: WorkflowHandle[Any, Any]) -> str:
    """The id of the loop's first pending escalation, once there is one."""

    async def probe() -> str | None:
        state = await loop_state(handle)
        return state.pending_escalations[0].escalation_id if state.pending_escalations else None

    return await eventually(probe, f"an escalation in {handle.id}")


async def task_escalated(handle: WorkflowHandle[Any, Any]) -> str:
    """The id of the task's first pending escalation, once the task waits for an operator."""

    async def probe() -> str | None:
        state = await task_state(handle)
        if not state.pending_escalations:
            return None
        assert state.status == "awaiting_operator"
        return state.pending_escalations[0].escalation_id

    return await eventually(probe, f"an escalation in task {handle.id}")


async def waiting_review(handle: WorkflowHandle[Any, Any], round_: int) -> LoopState:
    """The loop's state once review round ``round_`` waits for a person."""

    async def probe() -> LoopState | None:
        state = await loop_state(handle)
        review = state.pending_review
        return state if review is not None and review.round == round_ else None

    return await eventually(probe, f"review round {round_} pending in {handle.id}")


async def started_tool(client: Client, workflow_id: str) -> None:
    """Wait until a ``run_tool`` activity of the workflow is running on a worker."""

    async def probe() -> bool:
        description = await client.get_workflow_handle(workflow_id).describe()
        return any(
            p.activity_type.name == "run_tool" and p.state == 2  # PENDING_ACTIVITY_STATE_STARTED
            for p in description.raw_description.pending_activities
        )

    await eventually(probe, f"a tool of {workflow_id} started")


async def waits_for_a_worker(handle: WorkflowHandle[Any, Any], tool: str) -> None:
    """Until ``handle``'s history shows a call (a tool's, a step's, a model call's) waiting for
    a worker with ``tool``: the durable timer the Web UI shows."""
    shown = f'"waiting for a worker with tool {tool}"'.encode()

    async def waits() -> bool:
        history = await handle.fetch_history()
        return any(
            e.user_metadata.summary.data == shown
            for e in history.events
            if e.HasField("timer_started_event_attributes")
        )

    await eventually(waits, f"{handle.id} waiting for a worker with {tool}")
