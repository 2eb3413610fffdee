"""A task's step attempted until it completes, is skipped, or stops the task.

Workflow code. Each failed attempt goes to the step's tracker (``orga.core.progress``): it
says go on, or stop — the attempt limit, the same error twice, a denial. Then the task's
``on_limit_reached`` skips the step, aborts the task, or waits for an operator
(``resolve_escalation``: ``retry``, ``skip``, ``abort``). An attempt lost after its effect may
have begun (``OutcomeUnknown``) always waits for a person, who may also say it happened
(``result``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Literal

from temporalio import workflow

from orga.contracts.approvals import PendingEscalation
from orga.contracts.journal import JournalEntry, ReceiptOutcome, Stamp, StepLimitReached
from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.task import LoopStep, Step, StepPolicy, StepReport, StepStatus
from orga.core.progress import StepTracker
from orga.workflows.saga.steps import StepFailed, StepRunner
from orga.workflows.shared.human_desk import HumanDesk
from orga.workflows.shared.patches import TASK_UNKNOWN_STEP
from orga.workflows.shared.stopping import Stopping

__all__ = ["StepAttempts", "StopTask"]


class StopTask(Exception):
    """A step failed for good (or an operator said abort): the task stops, and its saga runs."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StepAttempts:
    """Attempts a task's steps (one ``StepRunner`` attempt at a time)."""

    def __init__(
        self,
        runner: StepRunner,
        desk: HumanDesk,
        policy: StepPolicy,
        *,
        record: Callable[[JournalEntry], None],
        stamp: Callable[[], Stamp],
        mark: Callable[[StepReport, StepStatus], None],
        completed: Callable[[str], None],
        receipt: Callable[[StepReport, ReceiptOutcome, str], None],
        stopping: Stopping | None = None,
    ) -> None:
        self._runner = runner
        self._desk = desk
        self._policy = policy
        self._record = record
        self._stamp = stamp
        self._mark = mark
        self._completed = completed
        self._receipt = receipt
        self._stopping = stopping or Stopping()
        """The task's stop: a step that failed meanwhile ends there (no re-attempt, skip or
        escalation)."""

    async def run(self, step: Step, report: StepReport) -> None:
        """Attempt the step until it completes, is skipped, or aborts the task.

        Raises:
            StopTask: the step failed for good and the policy (or an operator) aborts.
        """
        tracker = StepTracker()
        escalations = 0
        while True:
            self._mark(report, "running")
            report.attempts += 1
            try:
                result = await self._runner.attempt(step, report.attempts)
            except StepFailed as failure:
                report.errors.append(failure.message)
                if self._stopping.stops():  # the cancellation, handed over as a failure: the
                    # step ends cancelled (its receipt: unknown; the saga compensates it)
                    raise asyncio.CancelledError(self._stopping.why) from None
                if failure.unknown and workflow.patched(TASK_UNKNOWN_STEP):
                    escalations += 1
                    settled = await self._settle_unknown(step, report, failure, escalations)
                    if settled == "again":
                        tracker.reset()
                        continue
                    return
                decision = tracker.failed(
                    failure.message, self._policy, unrecoverable=failure.unrecoverable
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
                action = self._policy.on_limit_reached
                if action == "escalate":
                    escalations += 1
                    self._mark(report, "awaiting_operator")
                    record = await self._desk.escalation(
                        PendingEscalation(
                            escalation_id=f"{step.id}#{escalations}",
                            tool=step.action.tool
                            if not isinstance(step.action, LoopStep)
                            else LOOP_WORKFLOW,
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
                    if record.action == "retry":
                        tracker.reset()
                        continue
                    if record.action == "abort":
                        self._mark(report, "failed")
                        who = record.operator or "an operator"
                        why = f": {record.reason}" if record.reason else ""
                        raise StopTask(
                            f"{who} aborted it at step {step.id!r}{why} (the step had failed: "
                            f"{decision.reason})"
                        ) from None
                    action = "skip_step"
                if action == "skip_step":
                    self._mark(report, "skipped")
                    return
                self._mark(report, "failed")
                raise StopTask(f"step {step.id!r} failed: {decision.reason}") from None
            self._complete(step, report, result)
            return

    def _complete(self, step: Step, report: StepReport, result: str) -> None:
        report.result = result
        self._mark(report, "completed")
        self._completed(step.id)

    async def _settle_unknown(
        self, step: Step, report: StepReport, failure: StepFailed, count: int
    ) -> Literal["again", "settled"]:
        """A step whose attempt was lost mid-effect: an ``unknown`` receipt, then a person
        says what became of it, whatever the task's ``on_limit_reached``.

        ``result``: it happened (the step completes with that result, so an abort later
        compensates it); ``retry``: run it again; ``skip``: it did not happen, go on;
        ``abort``: stop the task (its completed steps are compensated).

        Raises:
            StopTask: the operator aborted the task.
        """
        self._receipt(report, "unknown", failure.message)
        self._mark(report, "awaiting_operator")
        assert not isinstance(step.action, LoopStep)  # only a tool's attempt is lost mid-effect
        record = await self._desk.escalation(
            PendingEscalation(
                escalation_id=f"{step.id}#{count}",
                tool=step.action.tool,
                arguments=json.dumps(step.action.arguments),
                error=failure.message,
                since=workflow.now(),
                options=["result", "retry", "skip", "abort"],
            )
        )
        who = record.operator or "an operator"
        why = f": {record.reason}" if record.reason else ""
        match record.action:
            case "retry":
                return "again"
            case "result":
                value = record.result
                shown = value if isinstance(value, str) else json.dumps(value, default=str)
                self._complete(step, report, f"[result supplied by {who}]\n{shown}")
            case "abort":
                self._mark(report, "failed")
                raise StopTask(
                    f"{who} aborted it at step {step.id!r}{why} (its outcome was unknown: "
                    f"{failure.message})"
                )
            case _:  # skip (the others are never offered here)
                said = f"skipped by {who}{why}: its effect did not happen"
                report.errors.append(said)
                self._receipt(report, "failed", said)
                self._mark(report, "skipped")
        return "settled"
