"""The ``Task`` workflow: steps in order, stuck steps handled by policy, and a saga that
leaves the world as it found it when the task cannot finish.

Workflow code. When a task starts, the worker resolves it (``resolve_task``): its agent, the
definitions of every tool it names, and its gate — a task naming an unknown agent or a tool it
lacks fails before any step runs. Tool steps are activities (idempotency key
``<workflow id>/<step id>``) that pass the gate first (``orga.workflows.saga.steps``); loop
steps are child ``ReasoningLoop`` workflows. A failing step is re-attempted until the step
tracker says stop (attempt limit, the same error twice, or a denial); then
``on_limit_reached`` skips it (and its dependents), aborts the task, or waits for an operator
(``resolve_escalation``: ``retry``, ``skip``, ``abort``). A step's call a pause holds is no
failure: it waits for the pause to end (``orga.workflows.saga.holds``). On abort — and on
cancellation, which arrives as ``asyncio.CancelledError`` at whatever the task awaits — running
steps are cancelled and waited for (a tool activity until it has stopped, a child loop until
it has ended), then the saga (``orga.workflows.saga.compensation``) undoes every attempted step,
shielded from cancellation, and the outcome says whether all of it was undone. One workflow
class — its state, queries and handlers, the steps' order; the setup, a step's attempts, one
attempt and the saga are ``orga.workflows.saga``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping
from typing import Final, TypeVar

from temporalio import workflow
from temporalio.common import RawValue

from orga.contracts import search_attributes as sa
from orga.contracts.audit import AUDITED_KINDS, AuditChain
from orga.contracts.errors import InvalidConfig, TaskAborted
from orga.contracts.journal import (
    CallReceipt,
    Journal,
    JournalEntry,
    ReceiptOutcome,
    Stamp,
    Terminated,
)
from orga.contracts.messages import (
    AUDIT_QUERY,
    JOURNAL_QUERY,
    PAUSE_LIFTED_SIGNAL,
    STATE_QUERY,
    TASK_WORKFLOW,
)
from orga.contracts.task import (
    Step,
    StepReport,
    StepStatus,
    TaskInput,
    TaskOutcome,
    TaskResult,
    TaskState,
    TaskStatus,
    ToolStep,
)
from orga.core.audit import AuditLog
from orga.core.judging import task_of
from orga.core.receipts import NOTE_CHARS
from orga.core.signatures import sha256_text
from orga.core.text import cut
from orga.workflows.saga.attempts import StepAttempts, StopTask
from orga.workflows.saga.compensation import Saga
from orga.workflows.saga.holds import PauseHolds
from orga.workflows.saga.setup import set_up_task
from orga.workflows.saga.steps import StepRunner, TaskClearance
from orga.workflows.shared.common import decoded, upsert
from orga.workflows.shared.desk_handlers import DeskHandlers
from orga.workflows.shared.human_desk import HumanDesk
from orga.workflows.shared.metrics import emit_entry
from orga.workflows.shared.patches import CALL_RECEIPTS, TASK_CANCELLED_STATUS

__all__ = ["TaskWorkflow"]

_ENDS: Final[Mapping[str, ReceiptOutcome]] = {
    "completed": "delivered",
    "failed": "failed",
    "cancelled": "unknown",
}
"""A step's status that ends it, and its receipt (a step cancelled mid-call: unknown, then its
compensation's receipt)."""

T = TypeVar("T")


@workflow.defn(name=TASK_WORKFLOW)
class TaskWorkflow(DeskHandlers):
    """A multi-step task with saga compensation. Input ``TaskInput``, result ``TaskResult``."""

    @workflow.init
    def __init__(self, input: RawValue) -> None:
        checked, self._invalid = decoded(TaskInput, input, "task")
        task = checked or TaskInput(steps=[Step(id="invalid", action=ToolStep(tool="none"))])
        self._input = task
        self._steps = {step.id: step for step in task.steps}
        self._reports = {step.id: StepReport(id=step.id) for step in task.steps}
        self._order: list[str] = []
        self._attempted: list[str] = []
        self._status: TaskStatus = "running"
        self._published_status = "running"
        """``OrgaStatus`` as last upserted (a status that did not change is not upserted)."""
        self._outcome: TaskOutcome | None = None
        self._uncompensated: list[str] = []
        self._journal = Journal()
        self._audit = AuditLog()
        self._desk = HumanDesk(
            on_change=self._on_waiting_change, record=self._record, stamp=self._stamp
        )
        self._workflow_id = workflow.info().workflow_id
        self._message: str | None = None
        self._clearance = TaskClearance(
            gate=None, desk=self._desk, tools=[], approval_timeout=task.approval_timeout
        )
        self._holds = PauseHolds(
            self._record, self._stamp, self._on_waiting_change, self._clearance.stopping
        )
        self._holds.recheck = task.pause_recheck
        self._runner = StepRunner(
            self._workflow_id, task, self._clearance, scheduled=self._scheduled, holds=self._holds
        )
        self._attempts = StepAttempts(
            self._runner,
            self._desk,
            task.policy,
            record=self._record,
            stamp=self._stamp,
            mark=self._mark,
            completed=self._completed,
            receipt=self._receipt,
            stopping=self._clearance.stopping,
        )
        self._saga = Saga(
            workflow_id=self._workflow_id,
            steps=self._steps,
            reports=self._reports,
            order=self._order,
            attempted=self._attempted,
            tool_timeout=task.tool_timeout,
            escalate_after=task.compensation_escalate_after,
            clearance=self._clearance,
            on_change=self._show,
            record=self._record,
            stamp=self._stamp,
        )

    @workflow.query(name=STATE_QUERY)
    def state(self) -> TaskState:
        """Every step's status, attempts, result and errors; pending escalations."""
        return TaskState(
            status=self._status,
            steps=[r.model_copy() for r in self._reports.values()],
            completion_order=list(self._order),
            pending_escalations=list(self._desk.escalations.values()),
            pending_approvals=list(self._desk.approvals.values()),
            receipts=self._receipts(),
            agent_id=self._input.agent_id,
            message=self._message,
            outcome=self._outcome,
            uncompensated=list(self._uncompensated),
            principal=self._clearance.principal,
            paused_calls=dict(self._holds.calls),
        )

    @workflow.query(name=JOURNAL_QUERY)
    def journal(self) -> Journal:
        return self._journal

    @workflow.query(name=AUDIT_QUERY)
    def audit(self) -> AuditChain:
        """The task's audit chain: policy decisions, approvals, escalations, compensations."""
        return self._audit.chain()

    def judged_as(self) -> tuple[str, str]:
        """Its agent and task as a judge is shown them (no query: ``orga judge what-if``)."""
        return self._input.agent_id, task_of(self._input)

    def trace_root(self) -> dict[str, str]:
        """The GenAI attributes of its trace's first span, if no context came (tracing)."""
        agent = {} if self._invalid else {"gen_ai.agent.name": self._input.agent_id}
        return {"gen_ai.operation.name": "invoke_workflow", **agent}

    @workflow.signal(name=PAUSE_LIFTED_SIGNAL)
    def pause_lifted(self) -> None:
        """A pause ended (``orga resume``, the desk): a step's call it held asks again."""
        self._holds.lifted += 1

    def _on_waiting_change(self) -> None:
        if self._status in ("running", "awaiting_operator"):
            self._status = "awaiting_operator" if self._desk.waiting else "running"
            self._upsert_status()
        self._show()

    def _show(self) -> None:
        """The Web UI's current details: every step's status, and who is waited for."""
        lines = [f"**task** {self._status}" + (f" · {self._outcome}" if self._outcome else "")]
        lines += [f"- {r.id}: {r.status}" for r in self._reports.values()]
        waiting = [*self._desk.approvals, *self._desk.escalations]
        if waiting:
            lines.append(f"waiting for an operator: {', '.join(waiting)}")
        if self._holds.calls:
            lines.append(f"held by a pause: {', '.join(self._holds.calls)}")
        workflow.set_current_details("\n".join(lines))

    def _mark(self, report: StepReport, status: StepStatus) -> None:
        report.status = status
        if status in _ENDS and workflow.patched(CALL_RECEIPTS):
            why = "compensated next" if self._steps[report.id].compensation else "none undoes it"
            cancelled = f"cancelled while running: its effect may have landed ({why})"
            note = {"failed": report.errors[-1] if report.errors else "", "cancelled": cancelled}
            digest = sha256_text(report.result or "") if status == "completed" else None
            self._receipt(report, _ENDS[status], note.get(status, ""), digest)
        self._show()

    def _receipt(
        self, report: StepReport, outcome: ReceiptOutcome, note: str, digest: str | None = None
    ) -> None:
        step = self._steps[report.id]
        self._record(
            CallReceipt(
                **self._stamp(),
                call_id=report.id,
                tool=step.action.tool if isinstance(step.action, ToolStep) else "(loop)",
                outcome=outcome,
                digest=digest,
                note=cut(note, NOTE_CHARS),
            )
        )

    def _receipts(self) -> list[CallReceipt]:
        return [e for e in self._journal.entries if isinstance(e, CallReceipt)]

    def _completed(self, step_id: str) -> None:
        self._order.append(step_id)
        self._clearance.progress = len(self._order)

    def _scheduled(self, step_id: str) -> None:
        """A step's activity or child loop is being scheduled: it is attempted from now on."""
        report = self._reports[step_id]
        if not report.attempted:
            report.attempted = True
            self._attempted.append(step_id)

    # ---- the task --------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: RawValue) -> TaskResult:
        if self._invalid is None:
            self._invalid = await set_up_task(
                self._input,
                self._clearance,
                self._desk,
                workflow_id=self._workflow_id,
                record=self._record,
                stamp=self._stamp,
                done=lambda: len(self._order),
            )
        if self._invalid is not None:
            self._status = "failed"
            self._message = self._invalid
            self._record(Terminated(**self._stamp(), reason="InvalidConfig", message=self._invalid))
            raise InvalidConfig(self._invalid)
        upsert([sa.AGENT_ID.value_set(self._input.agent_id), sa.STATUS.value_set("running")])
        self._show()
        try:
            await self._run_steps()
        except StopTask as abort:
            await self._stop()
            self._status = "aborted"
            message = f"the task stopped: {abort.reason}; {self._saga.undone()}"
            self._finish("TaskAborted", message)
            raise TaskAborted(message, self._result()) from None
        except asyncio.CancelledError:
            await self._stop()
            self._status = "cancelled"
            why = workflow.cancellation_reason()
            said = f"the task was cancelled: {why}" if why else "the task was cancelled"
            self._finish("cancelled", f"{said}; {self._saga.undone()}")
            raise
        self._status = "completed"
        self._outcome = "completed"
        self._finish("completed", "every step completed or was skipped")
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result()

    async def _stop(self) -> None:
        """The task cannot go on: its running steps have stopped; undo what it attempted."""
        self._clearance.stopping.undoing = True  # the one work a stopped task still does
        if self._holds.release_all():  # a stopped task holds nothing
            self._upsert_status()
        await self._shielded(self._saga.compensate())
        for report in self._reports.values():
            if report.status == "pending":
                report.status = "skipped"
                report.errors.append("not run: the task stopped first")
        self._outcome, self._uncompensated = self._saga.outcome()

    def _result(self) -> TaskResult:
        return TaskResult(
            status=self._status,
            steps=list(self._reports.values()),
            outcome=self._outcome or "completed",
            uncompensated=list(self._uncompensated),
            message=self._message,
            receipts=self._receipts(),
        )

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
            except (asyncio.CancelledError, StopTask, Exception) as stop:
                # One step aborted, or the task was cancelled: stop the batch's other steps
                # (whose calls may come back as plain failures: they must not be retried,
                # skipped or escalated, ``Stopping``).
                # (Any other BaseException is the worker evicting this workflow: touch nothing.)
                if isinstance(stop, StopTask):
                    self._clearance.stopping.reason = f"the task stopped: {stop.reason}"
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError, StopTask):
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
            report.errors.append(f"skipped: it depends on {blocked!r}, which did not complete")
            self._mark(report, "skipped")
            return
        try:
            await self._attempts.run(step, report)
        except asyncio.CancelledError:
            if report.status in ("running", "awaiting_operator"):
                report.errors.append("cancelled while running")
                self._mark(report, "cancelled")
            raise

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
        if entry.kind in AUDITED_KINDS:  # a governance record: onto the audit chain too
            self._audit.add(entry.kind, entry)
        emit_entry(entry, "task")

    def _finish(self, reason: str, message: str) -> None:
        self._message = message
        self._record(Terminated(**self._stamp(), reason=reason, message=message))
        self._upsert_status()
        self._show()

    def _upsert_status(self) -> None:
        mapped = {
            "running": "running",
            "awaiting_operator": "awaiting_approval",
            "completed": "completed",
        }.get(self._status, "failed")
        if mapped == "running" and self._holds.calls:
            mapped = "paused"  # a step's call waits for a pause to end
        if self._status == "cancelled" and workflow.patched(TASK_CANCELLED_STATUS):
            mapped = "cancelled"  # `orga list --status cancelled` shows it
        if mapped != self._published_status:
            self._published_status = mapped
            upsert([sa.STATUS.value_set(mapped)])
