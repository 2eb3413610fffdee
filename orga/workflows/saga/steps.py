"""One attempt of a task's step: through the gate, then the tool activity or a child loop.

Workflow code. A tool step's call (and a compensation's, in ``orga.workflows.saga.compensation``)
passes the gate like a loop's call — principal: the task's agent; context: the step, and whether
it is a compensation. ``allow`` runs it, ``modify`` runs it with the policy's arguments,
``require_approval`` waits for a person (``approve`` / ``approval``, as in a loop), ``deny``
refuses it with the policy's reason. A loop step is a child ``ReasoningLoop``, which gates its
own calls under its own agent. Cancelling a running step waits until its activity or child loop
has stopped, so its effect, if any, has landed before compensation.

A tool step's call that a pause holds (``orga pause``: its tool, its task's id, its agent)
waits for the pause to end, then runs once, its approval kept (``orga.workflows.saga.holds``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow
from temporalio.common import Priority
from temporalio.exceptions import (
    ChildWorkflowError,
)
from temporalio.workflow import ChildWorkflowCancellationType

from orga.contracts.conversation import ToolCall
from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.policy import PolicyAction
from orga.contracts.principals import Principal, PrincipalClaim
from orga.contracts.state import LoopResult
from orga.contracts.task import LoopStep, Step, TaskInput
from orga.contracts.tools import ToolInvocation
from orga.workflows.saga.holds import PauseHolds
from orga.workflows.shared.gate import Gate
from orga.workflows.shared.human_desk import HumanDesk
from orga.workflows.shared.options import TOOL_RETRY
from orga.workflows.shared.stopping import Stopping
from orga.workflows.shared.tool_calls import ToolFailure, run_task_tool, tool_failure

__all__ = ["StepFailed", "StepRunner", "TaskClearance"]


class StepFailed(Exception):
    """An attempt failed; ``unrecoverable`` when no other attempt can do better; ``unknown``
    when it was lost after its effect may have begun (``OutcomeUnknown``)."""

    def __init__(self, message: str, unrecoverable: bool, unknown: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unrecoverable = unrecoverable
        self.unknown = unknown


@dataclass
class TaskClearance:
    """Whether a task's tool call may run: the gate, and the desk where people approve."""

    gate: Gate | None
    """The task's gate (``None`` only until the task is set up, before any step runs)."""
    desk: HumanDesk
    tools: list[str]
    """Every tool the task names (what its gate treats as available)."""
    approval_timeout: timedelta
    progress: int = 0
    """Steps completed so far (the journal's and the policy's ``iteration``)."""
    principal: Principal | None = None
    """Who the task runs for, as its worker resolved it."""
    handed_on: PrincipalClaim | None = None
    """What its loop steps are told they run for (``orga.core.principals.handed_on``)."""
    priority: Priority = field(default_factory=lambda: Priority.default)
    """Its steps' fairness key and weight (the principal's tenant)."""
    stopping: Stopping = field(default_factory=Stopping)
    """The task's stop (a client's cancel, or a step that aborted it): nothing new runs."""

    async def clear(self, call: ToolCall, step: str, compensation: bool) -> ToolCall | str:
        """The call to run (possibly rewritten by the policy), or why it may not run."""
        assert self.gate is not None, "a task is set up before its first step"
        action = PolicyAction.of_call(call, step=step, compensation=compensation)
        [decision] = (await self.gate.decide([action], self.tools)).decisions
        what = "compensation of step" if compensation else "step"
        if decision.decision == "deny":
            return f"the policy denied the {what} {step!r} ({call.name}): {decision.reason}"
        if decision.decision == "modify" and decision.arguments is not None:
            return call.model_copy(update={"arguments": decision.arguments})
        if decision.decision == "require_approval":
            record = await self.desk.approval(
                call, decision.reason or "approval required", self.progress, self.approval_timeout
            )
            if not record.approved:
                who = f" by {record.approver}" if record.approver else ""
                why = record.reason or "no reason given"
                return f"the {what} {step!r} ({call.name}) was not approved{who}: {why}"
            if record.arguments is not None:  # approved with edits
                return call.model_copy(update={"arguments": record.arguments})
        return call


class StepRunner:
    """Runs attempts of a task's steps."""

    def __init__(
        self,
        workflow_id: str,
        task: TaskInput,
        clearance: TaskClearance,
        scheduled: Callable[[str], None],
        holds: PauseHolds,
    ) -> None:
        self._workflow_id = workflow_id
        self._holds = holds
        self._agent_id = task.agent_id
        """The task's agent, passed to its steps' calls: a pause of it holds them."""
        self._timeout = timedelta(seconds=task.tool_timeout)
        self._clearance = clearance
        self._scheduled = scheduled
        """Told a step's id as its activity or child loop is scheduled (it is now attempted)."""

    async def attempt(self, step: Step, attempt: int) -> str:
        """The step's result.

        Raises:
            StepFailed: the attempt failed (a denial is unrecoverable).
            asyncio.CancelledError: the task was cancelled meanwhile.
        """
        action = step.action
        if isinstance(action, LoopStep):
            self._scheduled(step.id)
            try:
                # A loop step runs for the task's principal, whatever the task file said.
                child = action.input.model_copy(update={"principal": self._clearance.handed_on})
                result = await workflow.execute_child_workflow(
                    LOOP_WORKFLOW,
                    child,
                    id=f"{self._workflow_id}/{step.id}/{attempt}",
                    result_type=LoopResult,
                    memo=workflow.memo() or None,
                    cancellation_type=ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
                )
            except ChildWorkflowError as error:
                failed = tool_failure(error)
                if failed.cancelled:  # the task's cancellation: compensation, not re-attempts
                    raise asyncio.CancelledError(failed.message) from error
                raise StepFailed(failed.message, failed.unrecoverable) from None
            return result.output
        call = ToolCall(id=step.id, name=action.tool, arguments=json.dumps(action.arguments))
        cleared = await self._clearance.clear(
            call.model_copy(update={"id": f"{step.id}#{attempt}"}), step.id, compensation=False
        )
        if isinstance(cleared, str):
            raise StepFailed(cleared, unrecoverable=True)
        # The idempotency key stays <workflow id>/<first run id>/<step id> on every attempt.
        call = call.model_copy(update={"arguments": cleared.arguments})
        self._scheduled(step.id)
        invocation = ToolInvocation(
            call=call,
            workflow_id=self._workflow_id,
            chain=workflow.info().first_execution_run_id,
            agent_id=self._agent_id,
        )
        done = await self._holds.run(
            step.id,
            action.tool,
            lambda: run_task_tool(
                invocation,
                timeout=self._timeout,
                retry=TOOL_RETRY,
                summary=f"step {step.id} · {action.tool} · attempt {attempt}",
                priority=self._clearance.priority,
            ),
        )
        if isinstance(done, ToolFailure):
            if done.cancelled:  # the task's cancellation: compensation, not re-attempts
                raise asyncio.CancelledError(done.message)
            raise StepFailed(done.message, done.unrecoverable, unknown=done.status == "unknown")
        return done.content
