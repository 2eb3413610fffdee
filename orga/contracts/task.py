"""Contracts of the ``Task`` workflow: multi-step tasks with saga compensation.

A task is an ordered list of steps. A step is a tool call or a reasoning loop (a child
``ReasoningLoop`` workflow). A step may declare a compensation — a tool call that undoes it,
whose arguments may refer to the step's result (``"${result}"``, ``"${result.order_id}"``) — and
``depends_on`` earlier steps. When the task aborts or is cancelled, running steps are first
cancelled and waited for; then the compensation of every *attempted* step (one whose activity or
child loop was scheduled, whether or not it completed) runs, newest first, until it succeeds or
an operator settles it. The outcome says whether everything was undone.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from orga.contracts.approvals import PendingApproval, PendingEscalation
from orga.contracts.config import LoopInput
from orga.contracts.journal import CallReceipt
from orga.contracts.principals import Principal, PrincipalClaim
from orga.contracts.wire import Compact, Contract, Tagged

__all__ = [
    "Compensation",
    "LimitAction",
    "LoopStep",
    "Step",
    "StepPolicy",
    "StepReport",
    "StepStatus",
    "TaskInput",
    "TaskOutcome",
    "TaskResult",
    "TaskState",
    "TaskStatus",
    "ToolStep",
]

StepStatus = Literal[
    "pending",
    "running",
    "awaiting_operator",
    "completed",
    "failed",
    "skipped",
    "cancelled",
    "compensating",
    "compensated",
    "compensation_failed",
]
"""``awaiting_operator``: a failing step waits for ``resolve_escalation``; ``cancelled``: it was
running when the task stopped; ``compensating`` … ``compensation_failed``: its undoing."""
TaskOutcome = Literal["completed", "compensated", "compensation_incomplete"]
"""``completed``: every step completed or was skipped. ``compensated``: the task stopped and
every attempted step that declares a compensation was undone. ``compensation_incomplete``: some
could not be (``uncompensated`` names them)."""
TaskStatus = Literal["running", "awaiting_operator", "completed", "aborted", "cancelled", "failed"]
"""``failed``: the task could not start (its input, or a tool it names, is invalid)."""
LimitAction = Literal["skip_step", "abort_task", "escalate"]


class StepPolicy(Contract):
    """How a task treats failing steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_reattempts_per_step: int = Field(default=2, ge=0, le=100)
    """Attempts after the first one failed."""
    similarity_threshold: float = Field(default=0.85, ge=0.0, le=1.0)
    """Two consecutive errors this similar mean the step is stuck."""
    on_limit_reached: LimitAction = "abort_task"
    """``skip_step`` (and its dependents), ``abort_task`` (and compensate) or ``escalate``."""


class ToolStep(Tagged):
    """Call one tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tool"] = "tool"
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict[str, Any])


class LoopStep(Tagged):
    """Run a reasoning loop as a child workflow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["loop"] = "loop"
    input: LoopInput


class Compensation(Contract):
    """The tool call that undoes a step.

    It runs for every attempted step, also one that failed or was cancelled mid-call (its
    effect may have happened anyway): the tool gets the step's idempotency key as
    ``ctx.step_key`` to find out what the step did, and does nothing when it did nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Values ``"${result}"`` / ``"${result.path.to.field}"`` are replaced by the step's
    result (parsed as JSON for a path); by ``null`` when the step did not complete."""


class Step(Contract):
    """One step of a task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=100, pattern=r"^[\w.-]+$")
    action: Annotated[ToolStep | LoopStep, Field(discriminator="kind")]
    compensation: Compensation | None = None
    depends_on: list[str] = Field(default_factory=list[str])
    parallel: bool = False
    """May start together with the step before it (when its dependencies allow)."""

    @field_validator("id")
    @classmethod
    def _not_a_compensation_id(cls, value: str) -> str:
        if value.endswith(".compensate"):
            raise ValueError(
                f"step id {value!r} ends in '.compensate', which names the compensation of step "
                f"{value.removesuffix('.compensate')!r} (its idempotency key and escalations): "
                "choose another id"
            )
        return value


class TaskInput(Compact):
    """The input of the ``Task`` workflow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: list[Step] = Field(min_length=1)
    policy: StepPolicy = Field(default_factory=StepPolicy)
    agent_id: str = "task"
    tool_timeout: float = Field(default=30.0, gt=0)
    """Seconds for one attempt of a tool step or a compensation."""
    approval_timeout: timedelta = Field(default=timedelta(hours=1), gt=timedelta(0))
    """How long a step (or compensation) the gate sends to a person waits for a decision;
    then it is denied ("approval timed out")."""
    compensation_escalate_after: int = Field(default=5, ge=1, le=100)
    """Failed attempts after which a compensation also goes to an operator (``retry`` now,
    ``mark_compensated`` by hand, or ``give_up``); its retries go on meanwhile."""
    pause_recheck: timedelta = Field(
        default=timedelta(seconds=10), ge=timedelta(seconds=1), le=timedelta(minutes=10)
    )
    """A step whose call a pause holds (its tool's, its task's or its agent's: ``orga
    pause``) asks again after this long plus a random share of it, then when the pause ends
    (``LoopConfig.pause_recheck``)."""
    principal: PrincipalClaim | None = None
    """Who the task runs for (``LoopInput.principal``); its loop steps run for it too."""

    @model_validator(mode="after")
    def _check_steps(self) -> TaskInput:
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"step id {step.id!r} is used twice")
            unknown = [d for d in step.depends_on if d not in seen]
            if unknown:
                raise ValueError(
                    f"step {step.id!r} depends on {unknown!r}, which are not earlier steps"
                )
            seen.add(step.id)
        return self


class StepReport(Contract):
    """What happened to one step."""

    id: str
    status: StepStatus = "pending"
    attempts: int = 0
    result: str | None = None
    errors: list[str] = Field(default_factory=list[str])
    attempted: bool = False
    """Its activity or child loop was scheduled: its compensation runs if the task stops."""
    compensation_error: str | None = None
    """The last error of its compensation."""
    compensation_note: str | None = None
    """Who settled its compensation by hand (marked it compensated, or gave up), and why."""


class TaskState(Contract):
    """The ``state`` query of a task."""

    status: TaskStatus
    steps: list[StepReport]
    completion_order: list[str]
    pending_escalations: list[PendingEscalation] = Field(default_factory=list[PendingEscalation])
    pending_approvals: list[PendingApproval] = Field(default_factory=list[PendingApproval])
    receipts: list[CallReceipt] = Field(default_factory=list[CallReceipt])
    """What became of each step's effect and each compensation, so far."""
    """Steps (or compensations) the gate sent to a person, waiting for a decision."""
    agent_id: str = "task"
    message: str | None = None
    """How the task ended, in words, once it has (what was compensated, who aborted)."""
    outcome: TaskOutcome | None = None
    """Once it has ended: whether everything it did stands, or was undone."""
    uncompensated: list[str] = Field(default_factory=list[str])
    """Attempted steps whose compensation did not happen (``compensation_incomplete``)."""
    principal: Principal | None = None
    """Who the task runs for, as its worker resolved it (``verified`` false: a claim)."""
    paused_calls: dict[str, str] = Field(default_factory=dict[str, str])
    """Steps whose call a pause holds (``orga pause``), by step id: who paused what, since
    when and why. Each runs once the pause ends."""


class TaskResult(Contract):
    """The result of a completed task (an aborted one fails with the same report)."""

    status: TaskStatus
    steps: list[StepReport]
    outcome: TaskOutcome = "completed"
    """``compensated`` or ``compensation_incomplete`` for a task that stopped."""
    uncompensated: list[str] = Field(default_factory=list[str])
    """Attempted steps whose compensation did not happen."""
    message: str | None = None
    """How the task ended, in words."""
    receipts: list[CallReceipt] = Field(default_factory=list[CallReceipt])
    """What became of each step's effect and each compensation (``orga receipts``)."""
