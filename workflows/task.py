"""The ``Task`` workflow: steps in order, stuck steps handled by policy, and a saga that
leaves the world as it found it when the task cannot finish.

Workflow code. Tool steps and compensations are activities (each with its retry policy and the
idempotency key ``<workflow id>/<step id>``); loop steps are child ``ReasoningLoop`` workflows.
A failing step is re-attempted until the step tracker says stop (attempt limit, or the same
error twice); then ``on_limit_reached`` skips it (and its dependents), aborts the task, or waits
for an operator (``resolve_escalation``: ``retry``, ``skip``, ``abort``). On abort — and on
cancellation, which arrives as ``asyncio.CancelledError`` at whatever the task awaits — the
compensations of the completed steps run in reverse completion order, each retried, shielded
from cancellation, a failing one recorded and the rest still run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
)

from orga.contracts import search_attributes as sa
from orga.contracts.approvals import PendingEscalation
from orga.contracts.conversation import ToolCall, ToolResult
from orga.contracts.errors import InvalidConfig, TaskAborted
from orga.contracts.journal import (
    EscalationResolved,
    Journal,
    JournalEntry,
    Stamp,
    StepLimitReached,
    Terminated,
)
from orga.contracts.state import LoopResult
from orga.contracts.task import (
    LoopStep,
    Step,
    StepReport,
    TaskInput,
    TaskResult,
    TaskState,
    TaskStatus,
    ToolStep,
)
from orga.contracts.tools import RUN_TOOL, ToolInvocation
from orga.core.progress import StepTracker
from orga.core.template import fill_template
from workflows.catalog import describe
from workflows.common import decoded, upsert
from workflows.human import EscalationHandlers, HumanDesk
from workflows.options import TOOL_RETRY, non_retryable, tool_heartbeat_timeout
from workflows.patches import VALIDATE_TASK

__all__ = ["TaskWorkflow"]

_UNRECOVERABLE = frozenset({"ToolInputError", "ToolNotFound", "InvalidConfig"})
T = TypeVar("T")


class _StepFailed(Exception):
    def __init__(self, message: str, unrecoverable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.unrecoverable = unrecoverable


class _Abort(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _failure_text(error: FailureError) -> tuple[str, bool]:
    cause: BaseException | None = error
    while isinstance(cause, ActivityError | ChildWorkflowError) and cause.cause is not None:
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        return cause.message, (cause.type or "") in _UNRECOVERABLE
    return str(cause or error), False


def _raise_if_cancelled(error: ActivityError | ChildWorkflowError) -> None:
    """The task's cancellation reaches an awaited activity or child as its failure: turn it
    back into the cancellation it is, so compensation runs instead of re-attempts."""
    if isinstance(error.cause, CancelledError):
        raise asyncio.CancelledError(str(error.cause)) from error


@workflow.defn(name="Task")
class TaskWorkflow(EscalationHandlers):
    """A multi-step task with saga compensation. Input ``TaskInput``, result ``TaskResult``."""

    @workflow.init
    def __init__(self, input: RawValue) -> None:
        checked, self._invalid = decoded(TaskInput, input, "task")
        task = checked or TaskInput(steps=[Step(id="invalid", action=ToolStep(tool="none"))])
        self._input = task
        self._steps = {step.id: step for step in task.steps}
        self._reports = {step.id: StepReport(id=step.id) for step in task.steps}
        self._order: list[str] = []
        self._status: TaskStatus = "running"
        self._desk = HumanDesk(on_change=self._on_waiting_change)
        self._journal = Journal()
        self._workflow_id = workflow.info().workflow_id
        self._message: str | None = None

    # ---- queries and people ----------------------------------------------------------------

    @workflow.query(name="state")
    def state(self) -> TaskState:
        """Every step's status, attempts, result and errors; pending escalations."""
        return TaskState(
            status=self._status,
            steps=[r.model_copy() for r in self._reports.values()],
            completion_order=list(self._order),
            pending_escalations=list(self._desk.escalations.values()),
            agent_id=self._input.agent_id,
            message=self._message,
        )

    @workflow.query(name="journal")
    def journal(self) -> Journal:
        return self._journal

    def _on_waiting_change(self) -> None:
        if self._status in ("running", "awaiting_operator"):
            self._status = "awaiting_operator" if self._desk.waiting else "running"
            self._upsert_status()

    # ---- the task --------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: RawValue) -> TaskResult:
        if self._invalid is None and workflow.patched(VALIDATE_TASK):
            self._invalid = await self._missing_tools()
        if self._invalid is not None:
            self._status = "failed"
            self._message = self._invalid
            self._record(Terminated(**self._stamp(), reason="InvalidConfig", message=self._invalid))
            raise InvalidConfig(self._invalid)
        upsert([sa.AGENT_ID.value_set(self._input.agent_id), sa.STATUS.value_set("running")])
        try:
            await self._run_steps()
        except _Abort as abort:
            await self._shielded(self._compensate())
            self._status = "aborted"
            message = f"the task stopped: {abort.reason}; {self._undone()}"
            self._finish("TaskAborted", message)
            raise TaskAborted(
                message, TaskResult(status="aborted", steps=list(self._reports.values()))
            ) from None
        except asyncio.CancelledError:
            await self._shielded(self._compensate())
            self._status = "cancelled"
            self._finish("cancelled", f"the task was cancelled; {self._undone()}")
            raise
        self._status = "completed"
        self._finish("completed", "every step completed or was skipped")
        await workflow.wait_condition(workflow.all_handlers_finished)
        return TaskResult(status="completed", steps=list(self._reports.values()))

    async def _run_steps(self) -> None:
        batches: list[list[Step]] = []
        for step in self._input.steps:
            if step.parallel and batches:
                batches[-1].append(step)
            else:
                batches.append([step])
        for batch in batches:
            tasks = [asyncio.create_task(self._run_step(step)) for step in batch]
            try:
                await asyncio.gather(*tasks)
            except (asyncio.CancelledError, _Abort, Exception):
                # One step aborted, or the task was cancelled: stop the batch's other steps.
                # (Any other BaseException is the worker evicting this workflow: touch nothing.)
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError, _Abort):
                        await task
                raise

    async def _run_step(self, step: Step) -> None:
        report = self._reports[step.id]
        await workflow.wait_condition(
            lambda: all(
                self._reports[d].status not in ("pending", "running") for d in step.depends_on
            )
        )
        blocked = [d for d in step.depends_on if self._reports[d].status != "completed"]
        if blocked:
            report.status = "skipped"
            report.errors.append(f"skipped: it depends on {blocked!r}, which did not complete")
            return
        tracker = StepTracker()
        escalations = 0
        while True:
            report.status = "running"
            report.attempts += 1
            try:
                result = await self._attempt(step, report.attempts)
            except _StepFailed as failure:
                report.errors.append(failure.message)
                decision = tracker.failed(
                    failure.message, self._input.policy, unrecoverable=failure.unrecoverable
                )
                if decision.action == "continue":
                    continue
                self._record(
                    StepLimitReached(
                        **self._stamp(),
                        step_id=step.id,
                        attempts=tracker.attempts,
                        reason=decision.reason,
                    )
                )
                action = self._input.policy.on_limit_reached
                if action == "escalate":
                    escalations += 1
                    report.status = "awaiting_operator"
                    record = await self._desk.escalation(
                        PendingEscalation(
                            escalation_id=f"{step.id}#{escalations}",
                            tool=step.action.tool
                            if not isinstance(step.action, LoopStep)
                            else "ReasoningLoop",
                            arguments=json.dumps(
                                step.action.arguments
                                if not isinstance(step.action, LoopStep)
                                else {}
                            ),
                            error=decision.reason,
                            since=workflow.now(),
                            options=["retry", "skip", "abort"],  # a step has no result to give
                        )
                    )
                    self._record(
                        EscalationResolved(
                            **self._stamp(),
                            escalation_id=record.escalation_id,
                            tool=step.id,
                            action=record.action,
                            operator=record.operator,
                            reason=record.reason,
                            source=record.source,
                        )
                    )
                    if record.action == "retry":
                        tracker.reset()
                        continue
                    if record.action == "abort":
                        report.status = "failed"
                        who = record.operator or "an operator"
                        why = f": {record.reason}" if record.reason else ""
                        raise _Abort(
                            f"{who} aborted it at step {step.id!r}{why} (the step had failed: "
                            f"{decision.reason})"
                        ) from None
                    action = "skip_step"
                if action == "skip_step":
                    report.status = "skipped"
                    return
                report.status = "failed"
                raise _Abort(f"step {step.id!r} failed: {decision.reason}") from None
            except asyncio.CancelledError:
                report.status = "failed"
                report.errors.append("cancelled while running")
                raise
            report.status = "completed"
            report.result = result
            self._order.append(step.id)
            return

    async def _attempt(self, step: Step, attempt: int) -> str:
        action = step.action
        if isinstance(action, LoopStep):
            try:
                result = await workflow.execute_child_workflow(
                    "ReasoningLoop",
                    action.input,
                    id=f"{self._workflow_id}/{step.id}/{attempt}",
                    result_type=LoopResult,
                    memo=workflow.memo() or None,
                )
            except ChildWorkflowError as error:
                _raise_if_cancelled(error)
                raise _StepFailed(*_failure_text(error)) from None
            return result.output
        call = ToolCall(id=step.id, name=action.tool, arguments=json.dumps(action.arguments))
        try:
            done = await workflow.execute_activity(
                RUN_TOOL,
                ToolInvocation(call=call, workflow_id=self._workflow_id),
                result_type=ToolResult,
                start_to_close_timeout=timedelta(seconds=self._input.tool_timeout),
                heartbeat_timeout=tool_heartbeat_timeout(
                    timedelta(seconds=self._input.tool_timeout)
                ),
                retry_policy=TOOL_RETRY,
                summary=f"step {step.id} · {action.tool} · attempt {attempt}",
            )
        except ActivityError as error:
            _raise_if_cancelled(error)
            raise _StepFailed(*_failure_text(error)) from None
        return done.content

    # ---- the saga ----------------------------------------------------------------------------

    async def _compensate(self) -> None:
        """Undo the completed steps, newest first; every compensation is attempted."""
        for step_id in reversed(self._order):
            step, report = self._steps[step_id], self._reports[step_id]
            if step.compensation is None:
                continue
            try:
                arguments = fill_template(step.compensation.arguments, report.result)
                await workflow.execute_activity(
                    RUN_TOOL,
                    ToolInvocation(
                        call=ToolCall(
                            id=f"{step_id}.compensate",
                            name=step.compensation.tool,
                            arguments=json.dumps(arguments),
                        ),
                        workflow_id=self._workflow_id,
                        retry_tool_errors=True,
                    ),
                    result_type=ToolResult,
                    start_to_close_timeout=timedelta(seconds=self._input.tool_timeout),
                    retry_policy=RetryPolicy(
                        initial_interval=timedelta(seconds=1),
                        maximum_interval=timedelta(seconds=10),
                        maximum_attempts=3,
                        non_retryable_error_types=non_retryable(),
                    ),
                    summary=f"compensate {step_id} · {step.compensation.tool}",
                )
            except (ActivityError, ValueError) as error:
                message = (
                    _failure_text(error)[0] if isinstance(error, ActivityError) else str(error)
                )
                report.status = "compensation_failed"
                report.compensation_error = message
                continue
            report.status = "compensated"

    def _undone(self) -> str:
        """What compensation did, in words, for the task's final message."""
        newest_first = list(reversed(self._order))
        done = [s for s in newest_first if self._steps[s].compensation is not None]
        if not self._order:
            return "no step had completed, so nothing needed compensating"
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

    async def _missing_tools(self) -> str | None:
        """Why the task cannot run on this worker (a tool it names is missing), or ``None``."""
        names: list[str] = []
        for step in self._input.steps:
            action = step.action
            wanted = action.input.config.tools if isinstance(action, LoopStep) else [action.tool]
            if step.compensation is not None:
                wanted = [*wanted, step.compensation.tool]
            names += [n for n in wanted if n not in names]
        try:
            await describe(names, "the task cannot run on this worker")
        except InvalidConfig as error:
            return f"{error.message}. Nothing was run."
        return None

    async def _shielded(self, work: Awaitable[T]) -> T:
        """Run ``work`` to the end even if the task is cancelled (again) meanwhile."""
        task = asyncio.ensure_future(work)
        while True:
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                if task.done():
                    raise

    # ---- bookkeeping -------------------------------------------------------------------------

    def _stamp(self) -> Stamp:
        return Stamp(
            seq=self._journal.take_seq(),
            at=workflow.now(),
            agent_id=self._input.agent_id,
            iteration=len(self._order),
        )

    def _record(self, entry: JournalEntry) -> None:
        self._journal.append(entry)

    def _finish(self, reason: str, message: str) -> None:
        self._message = message
        self._record(Terminated(**self._stamp(), reason=reason, message=message))
        self._upsert_status()

    def _upsert_status(self) -> None:
        mapped = {
            "running": "running",
            "awaiting_operator": "awaiting_approval",
            "completed": "completed",
        }.get(self._status, "failed")
        upsert([sa.STATUS.value_set(mapped)])
