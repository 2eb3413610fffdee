"""The saga: undo a task's completed steps, newest first, through the gate.

Workflow code. Each compensation passes the gate like a step (``compensation: true`` in the
policy's context). A compensation the policy denies (or a person does not approve) is not
dropped: an operator is asked (``resolve_escalation``: ``retry`` asks the gate again, ``skip``
leaves the step uncompensated, recorded as such). A compensation that fails after its retries
is recorded and the others still run. The caller runs all of it shielded from cancellation.
"""

from __future__ import annotations

import json
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from orga.contracts.approvals import PendingEscalation
from orga.contracts.conversation import ToolCall, ToolResult
from orga.contracts.task import Step, StepReport
from orga.contracts.tools import RUN_TOOL, ToolInvocation
from orga.core.template import fill_template
from workflows.options import non_retryable
from workflows.steps import TaskClearance, failure_text

__all__ = ["Saga"]

_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=non_retryable(),
)


class Saga:
    """Compensations of one task."""

    def __init__(
        self,
        *,
        workflow_id: str,
        steps: dict[str, Step],
        reports: dict[str, StepReport],
        order: list[str],
        tool_timeout: float,
        clearance: TaskClearance,
    ) -> None:
        self._workflow_id = workflow_id
        self._steps = steps
        self._reports = reports
        self._order = order
        self._timeout = timedelta(seconds=tool_timeout)
        self._clearance = clearance

    async def compensate(self) -> None:
        """Undo the completed steps, newest first; every compensation is attempted."""
        for step_id in reversed(self._order):
            step, report = self._steps[step_id], self._reports[step_id]
            if step.compensation is None:
                continue
            try:
                arguments = fill_template(step.compensation.arguments, report.result)
            except ValueError as error:
                report.status = "compensation_failed"
                report.compensation_error = str(error)
                continue
            call = ToolCall(
                id=f"{step_id}.compensate",
                name=step.compensation.tool,
                arguments=json.dumps(arguments),
            )
            cleared = await self._cleared(step_id, call)
            if cleared is None:
                continue  # an operator chose to leave it; recorded in the report
            try:
                await workflow.execute_activity(
                    RUN_TOOL,
                    ToolInvocation(
                        call=cleared,
                        workflow_id=self._workflow_id,
                        chain=workflow.info().first_execution_run_id,
                        retry_tool_errors=True,
                    ),
                    result_type=ToolResult,
                    start_to_close_timeout=self._timeout,
                    retry_policy=_RETRY,
                    summary=f"compensate {step_id} · {call.name}",
                )
            except ActivityError as error:
                report.status = "compensation_failed"
                report.compensation_error = failure_text(error)[0]
                continue
            report.status = "compensated"

    async def _cleared(self, step_id: str, call: ToolCall) -> ToolCall | None:
        """The compensation to run, once the gate (or, after a denial, an operator) lets it."""
        report = self._reports[step_id]
        asked = 0
        while True:
            cleared = await self._clearance.clear(call, step_id, compensation=True)
            if not isinstance(cleared, str):
                return cleared
            asked += 1
            record = await self._clearance.desk.escalation(
                PendingEscalation(
                    escalation_id=f"{step_id}.compensate#{asked}",
                    tool=call.name,
                    arguments=call.arguments,
                    error=cleared,
                    since=workflow.now(),
                    iteration=len(self._order),
                    options=["retry", "skip"],
                )
            )
            if record.action == "skip":
                who = record.operator or "an operator"
                why = f": {record.reason}" if record.reason else ""
                report.status = "compensation_failed"
                report.compensation_error = f"{cleared}; left uncompensated by {who}{why}"
                return None

    def undone(self) -> str:
        """What compensation did, in words, for the task's final message."""
        if not self._order:
            return "no step had completed, so nothing needed compensating"
        newest_first = list(reversed(self._order))
        done = [s for s in newest_first if self._steps[s].compensation is not None]
        undone = [s for s in done if self._reports[s].status == "compensated"]
        failed = [s for s in done if self._reports[s].status == "compensation_failed"]
        kept = [s for s in newest_first if self._steps[s].compensation is None]
        parts: list[str] = []
        if undone:
            parts.append(f"compensated {', '.join(undone)}")
        if failed:
            parts.append(f"compensation FAILED for {', '.join(failed)}")
        if kept:
            parts.append(f"{', '.join(kept)} declared no compensation")
        return "; ".join(parts)
