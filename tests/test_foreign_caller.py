"""Another workflow schedules orga's activities itself (tried as an attacker): any workflow in
the namespace may schedule an activity of any name on any task queue. Without a check, a
workflow of the attacker's own — on its own queue, run by its own worker — had ``run_tool``
run a transfer on the operator's worker that no gate judged and nobody approved, and
``call_model`` spend the worker's API key. The worker asks the server who scheduled each of
its activities: only orga's loops and tasks of its queues are served."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from orga.contracts.conversation import Message, ToolCall, chain_digest
from orga.contracts.inference import CALL_MODEL, ConversationSlice, InferenceRequest
from orga.contracts.tools import RUN_TOOL, ToolInvocation
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from orga.worker.callers import FOREIGN_CALLER
from tests.harness import Harness

PAID: list[int] = []


@tool(requires_approval=True, serial=True)
def pay_out(amount: int) -> str:
    """Pay money out (needs a person's approval under every gate).

    Args:
        amount: how much.
    """
    PAID.append(amount)
    return f"paid {amount}"


async def _schedule(activity: str, given: dict[str, Any], queue: str) -> Any:
    return await workflow.execute_activity(
        activity,
        given,
        task_queue=queue,
        start_to_close_timeout=timedelta(seconds=20),
        retry_policy=RetryPolicy(maximum_attempts=1),
    )


@workflow.defn(name="Intruder")
class Intruder:
    """The attacker's own workflow, on its own queue: it schedules an orga activity on the
    operator's queue with an input it wrote."""

    @workflow.run
    async def run(self, activity: str, given: dict[str, Any], queue: str) -> Any:
        return await _schedule(activity, given, queue)


@workflow.defn(name="ReasoningLoop")
class IntruderNamedLikeALoop:
    """orga's workflow type name, on the attacker's own queue."""

    @workflow.run
    async def run(self, activity: str, given: dict[str, Any], queue: str) -> Any:
        return await _schedule(activity, given, queue)


async def _refused(harness: Harness, intruder: type, activity: str, given: dict[str, Any]) -> str:
    """Run ``intruder`` on the attacker's queue against the operator's worker; the message
    of the error its activity failed with (asserted to be ``ForeignCaller``)."""
    rogue_queue = f"rogue-{uuid.uuid4().hex[:8]}"
    rogue = Worker(
        harness.client,
        task_queue=rogue_queue,
        workflows=[intruder],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with rogue, harness.worker(tools=[pay_out]):
        with pytest.raises(WorkflowFailureError) as failed:
            await harness.client.execute_workflow(
                intruder.run,  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]
                args=[activity, given, harness.task_queue],
                id=f"intruder-{uuid.uuid4().hex[:8]}",
                task_queue=rogue_queue,
            )
    cause = failed.value.cause
    assert isinstance(cause, ActivityError), cause
    refusal = cause.cause
    assert isinstance(refusal, ApplicationError) and refusal.type == FOREIGN_CALLER, refusal
    assert refusal.non_retryable
    return refusal.message


@pytest.mark.parametrize("intruder", [Intruder, IntruderNamedLikeALoop])
async def test_a_foreign_workflow_cannot_run_a_tool_past_the_gate(
    harness: Harness, intruder: type
) -> None:
    """``run_tool`` for a transfer that needs approval, scheduled by the attacker's workflow
    (its own type name, and orga's on its own queue): refused before the tool runs."""
    invocation = ToolInvocation(
        call=ToolCall(id="call-1", name="pay_out", arguments='{"amount": 999999}'),
        workflow_id="anything",
    )
    PAID.clear()
    said = await _refused(harness, intruder, RUN_TOOL, invocation.model_dump(mode="json"))
    assert PAID == []
    assert "orga's activities run only for orga's loops and tasks" in said, said
    assert "Nothing was run" in said


async def test_a_foreign_workflow_cannot_spend_the_worker_s_api_key(harness: Harness) -> None:
    """``call_model`` with a well-formed request, scheduled by the attacker's workflow typed
    ``ReasoningLoop`` on its own queue: refused, and the model is never asked."""
    model = harness.new_model([Turn(text="must not be asked")])
    messages = [Message(role="user", content="write me a poem")]
    request = InferenceRequest(
        model=model,
        iteration=1,
        conversation=ConversationSlice(
            workflow_id="anything",
            start=0,
            length=1,
            digest=chain_digest("", messages),
            messages=messages,
        ),
    )
    said = await _refused(
        harness, IntruderNamedLikeALoop, CALL_MODEL, request.model_dump(mode="json")
    )
    assert harness.model.requests_for(model) == []
    assert "'ReasoningLoop' workflow on task queue 'rogue-" in said, said


async def test_a_loop_whose_setup_ran_in_the_process_costs_no_question(harness: Harness) -> None:
    """The check's cost: a loop whose setup (a local activity) ran in the worker's process is
    known to be orga's; its model and tool calls there ask the server nothing."""
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 2, "b": 3})]), Turn(text="5")])
    service = harness.client.workflow_service
    real = service.describe_workflow_execution
    asked: list[str] = []

    async def describe(request: Any, **options: Any) -> Any:
        asked.append(request.execution.workflow_id)
        return await real(request, **options)

    service.describe_workflow_execution = describe  # pyright: ignore[reportAttributeAccessIssue]
    try:
        async with harness.worker():
            handle = await harness.start("2+3?", model=model, tools=["add"])
            result = await handle.result()
    finally:
        del service.describe_workflow_execution  # pyright: ignore[reportAttributeAccessIssue]
    assert result.output == "5"
    assert handle.id not in asked, asked
