"""The saga: undo what a stopped task did, newest first, through the gate, until it is undone.

Workflow code. When a task stops (aborted, or cancelled), its running steps have already been
cancelled and waited for; then every *attempted* step — one whose activity or child loop was
scheduled, completed or not — that declares a compensation is undone, newest first. Each
compensation gets the step's idempotency key (``ctx.step_key``), so one whose step never took
effect can tell and do nothing.

Each compensation passes the gate like a step (``compensation: true`` in the policy's context);
one the policy denies (or a person does not approve) goes to an operator. A compensation that
fails is retried with back-off and without an attempt cap; after ``escalate_after`` failed
attempts an operator is asked as well (``resolve_escalation``), while the retries go on:
``retry`` tries again at once, ``mark_compensated`` records that someone undid it by hand (with
their note), ``give_up`` records it as not undone. Whichever comes first — a successful retry or
the operator — settles it. The caller runs all of it shielded from cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Literal

from temporalio import workflow
from temporalio.common import RetryPolicy

from orga.contracts.approvals import EscalationAction, PendingEscalation
from orga.contracts.conversation import ToolCall
from orga.contracts.journal import CallReceipt, CompensationSettled, JournalEntry, Stamp
from orga.contracts.task import Step, StepReport, TaskOutcome, ToolStep
from orga.contracts.tools import ToolInvocation
from orga.core.template import fill_template
from orga.workflows.saga.steps import TaskClearance
from orga.workflows.shared.options import non_retryable
from orga.workflows.shared.patches import CALL_RECEIPTS
from orga.workflows.shared.tool_calls import ToolFailure, run_task_tool

__all__ = ["Saga"]


def _retry(attempts: int) -> RetryPolicy:
    """Exponential back-off from 1 s to a minute; ``attempts`` 0: no cap."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=attempts,
        non_retryable_error_types=non_retryable(),
    )


_Settled = Literal["succeeded", "marked_compensated", "gave_up", "failed", "retry"]


class Saga:
    """Compensations of one task."""

    def __init__(
        self,
        *,
        workflow_id: str,
        steps: dict[str, Step],
        reports: dict[str, StepReport],
        order: list[str],
        attempted: list[str],
        tool_timeout: float,
        escalate_after: int,
        clearance: TaskClearance,
        on_change: Callable[[], None],
        record: Callable[[JournalEntry], None],
        stamp: Callable[[], Stamp],
    ) -> None:
        self._workflow_id = workflow_id
        self._steps = steps
        self._reports = reports
        self._order = order
        """Completed steps, in completion order."""
        self._attempted = attempted
        """Attempted steps, in the order they were first scheduled."""
        self._timeout = timedelta(seconds=tool_timeout)
        self._escalate_after = escalate_after
        self._clearance = clearance
        self._on_change = on_change
        self._record = record
        self._stamp = stamp
        self._asked: dict[str, int] = {}

    # ---- the saga ----------------------------------------------------------------------------

    async def compensate(self) -> None:
        """Undo the attempted steps, newest first; every compensation is seen through."""
        for step_id in reversed(self._attempted):
            step, report = self._steps[step_id], self._reports[step_id]
            if step.compensation is None:
                continue
            template = step.compensation.arguments
            try:
                arguments = fill_template(template, report.result)
            except ValueError as error:
                report.compensation_error = str(error)
                self._settle(step_id, "failed")
                continue
            call = ToolCall(
                id=f"{step_id}.compensate",
                name=step.compensation.tool,
                arguments=json.dumps(arguments),
            )
            self._set(report, "compensating")
            cleared = await self._cleared(step_id, call)
            if cleared is None:
                continue  # an operator chose to leave it; recorded in the report
            await self._see_through(step_id, cleared)

    def outcome(self) -> tuple[TaskOutcome, list[str]]:
        """``compensated`` or ``compensation_incomplete``, and the steps left not undone."""
        left = [
            s for s in reversed(self._attempted) if self._reports[s].status == "compensation_failed"
        ]
        return ("compensation_incomplete" if left else "compensated"), left

    def undone(self) -> str:
        """What compensation did, in words, for the task's final message."""
        done = self._attempted
        if not done:
            return "no step had been attempted, so nothing needed compensating"
        newest_first = list(reversed(done))
        declared = [s for s in newest_first if self._steps[s].compensation is not None]
        undone = [s for s in declared if self._reports[s].status == "compensated"]
        failed = [s for s in declared if self._reports[s].status == "compensation_failed"]
        kept = [s for s in newest_first if self._steps[s].compensation is None]
        parts: list[str] = []
        if undone:
            parts.append(f"compensated {', '.join(undone)}")
        if failed:
            parts.append(f"compensation INCOMPLETE for {', '.join(failed)}")
        if kept:
            parts.append(f"{', '.join(kept)} declared no compensation")
        return "; ".join(parts)

    # ---- one compensation --------------------------------------------------------------------

    async def _see_through(self, step_id: str, call: ToolCall) -> None:
        """Run the compensation until it succeeds or an operator settles it."""
        report = self._reports[step_id]
        while True:
            error = await self._run(step_id, call, _retry(self._escalate_after))
            if error is None:
                self._settle(step_id, "succeeded")
                return
            report.compensation_error = error
            action, operator, note = await self._escalate_while_retrying(step_id, call, error)
            if action != "retry":
                self._settle(step_id, action, operator=operator, note=note)
                return

    async def _escalate_while_retrying(
        self, step_id: str, call: ToolCall, error: str
    ) -> tuple[_Settled, str | None, str | None]:
        """Ask an operator while the compensation keeps being retried; whichever settles it
        first wins (a retry that succeeds withdraws the question)."""
        question = asyncio.ensure_future(
            self._ask(
                step_id,
                call,
                f"the compensation of step {step_id!r} failed {self._escalate_after} time(s), "
                f"last: {error}; it is still being retried",
                ["retry", "mark_compensated", "give_up"],
            )
        )
        retrying = asyncio.ensure_future(self._run(step_id, call, _retry(0)))
        await workflow.wait([question, retrying], return_when=asyncio.FIRST_COMPLETED)
        if retrying.done() and retrying.result() is None:
            question.cancel()  # withdrawn from the desk
            with contextlib.suppress(asyncio.CancelledError):
                await question
            return "succeeded", None, None
        if not question.done():  # the retries stopped (a non-retryable error): ask only
            self._reports[step_id].compensation_error = retrying.result()
        action, operator, note = await question
        retrying.cancel()
        if await retrying is None:  # an attempt in flight is waited for, not abandoned
            return "succeeded", None, None
        settled: dict[EscalationAction, _Settled] = {
            "retry": "retry",
            "mark_compensated": "marked_compensated",
        }
        return settled.get(action, "gave_up"), operator, note

    async def _ask(
        self, step_id: str, call: ToolCall, error: str, options: list[EscalationAction]
    ) -> tuple[EscalationAction, str, str | None]:
        """An operator's answer about a compensation: action, who, their note."""
        asked = self._asked[step_id] = self._asked.get(step_id, 0) + 1
        record = await self._clearance.desk.escalation(
            PendingEscalation(
                escalation_id=f"{step_id}.compensate#{asked}",
                tool=call.name,
                arguments=call.arguments,
                error=error,
                since=workflow.now(),
                iteration=len(self._order),
                options=options,
            )
        )
        return record.action, record.operator or "an operator", record.reason

    async def _run(self, step_id: str, call: ToolCall, retry: RetryPolicy) -> str | None:
        """One compensation activity (with its retries): ``None`` when it succeeded, else the
        error; a cancellation waits for an attempt in flight and counts as its failure. The
        workers that took it lacking the tool is no failure: it waits for one that has it."""
        try:
            done = await run_task_tool(
                ToolInvocation(
                    call=call,
                    workflow_id=self._workflow_id,
                    chain=workflow.info().first_execution_run_id,
                    retry_tool_errors=True,
                    compensates=step_id,
                ),
                timeout=self._timeout,
                retry=retry,
                summary=f"compensate {step_id} · {call.name}",
            )
            if isinstance(done, ToolFailure):
                return done.message
        except asyncio.CancelledError:
            return "cancelled: an operator settled it"
        return None

    async def _cleared(self, step_id: str, call: ToolCall) -> ToolCall | None:
        """The compensation to run, once the gate (or, after a denial, an operator) lets it."""
        report = self._reports[step_id]
        while True:
            cleared = await self._clearance.clear(call, step_id, compensation=True)
            if not isinstance(cleared, str):
                return cleared
            options: list[EscalationAction] = ["retry", "mark_compensated", "give_up"]
            action, operator, note = await self._ask(step_id, call, cleared, options)
            if action == "retry":
                continue
            report.compensation_error = cleared
            how: _Settled = "marked_compensated" if action == "mark_compensated" else "gave_up"
            self._settle(step_id, how, operator=operator, note=note)
            return None

    def _settle(
        self,
        step_id: str,
        how: _Settled,
        *,
        operator: str | None = None,
        note: str | None = None,
    ) -> None:
        """Record how the step's compensation ended (report and journal)."""
        report = self._reports[step_id]
        why = f": {note}" if note else ""
        if how == "marked_compensated":
            report.compensation_note = f"marked compensated by {operator}{why}"
        elif how == "gave_up":
            report.compensation_note = f"left uncompensated by {operator}{why}"
        ok = how in ("succeeded", "marked_compensated")
        self._set(report, "compensated" if ok else "compensation_failed")
        compensation = self._steps[step_id].compensation
        if ok and workflow.patched(CALL_RECEIPTS):
            action = self._steps[step_id].action
            self._record(
                CallReceipt(
                    **self._stamp(),
                    call_id=step_id,
                    tool=action.tool if isinstance(action, ToolStep) else "(loop)",
                    outcome="compensated",
                    by=compensation.tool if compensation is not None else operator,
                    note=report.compensation_note or "",
                )
            )
        self._record(
            CompensationSettled(
                **self._stamp(),
                step_id=step_id,
                tool=compensation.tool if compensation is not None else "",
                how="failed" if how == "retry" else how,
                escalations=self._asked.get(step_id, 0),
                operator=operator,
                note=note,
                error=report.compensation_error,
            )
        )

    def _set(
        self,
        report: StepReport,
        status: Literal["compensating", "compensated", "compensation_failed"],
    ) -> None:
        report.status = status
        self._on_change()
