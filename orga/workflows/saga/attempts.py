"""A task's step attempted until it completes, is skipped, or stops the task.

Workflow code. Each failed attempt goes to the step's tracker (``orga.core.progress``): it
says go on, or stop — the attempt limit, the same error twice, a denial. Then the task's
``on_limit_reached`` skips the step, aborts the task, or waits for an operator
(``resolve_escalation``: ``retry``, ``skip``, ``abort``).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from temporalio import workflow

from orga.contracts.approvals import PendingEscalation
from orga.contracts.journal import JournalEntry, Stamp, StepLimitReached
from orga.contracts.messages import LOOP_WORKFLOW
from orga.contracts.task import LoopStep, Step, StepPolicy, StepReport, StepStatus
from orga.core.progress import StepTracker
from orga.workflows.saga.steps import StepFailed, StepRunner
from orga.workflows.shared.human_desk import HumanDesk

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
    ) -> None:
        self._runner = runner
        self._desk = desk
        self._policy = policy
        self._record = record
        self._stamp = stamp
        self._mark = mark
        self._completed = completed

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
            report.result = result
            self._mark(report, "completed")
            self._completed(step.id)
            return
