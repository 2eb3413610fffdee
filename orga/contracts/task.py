"""Contracts of the ``Task`` workflow: multi-step tasks with saga compensation.

A task is an ordered list of steps. A step is a tool call or a reasoning loop (a child
``ReasoningLoop`` workflow). A step may declare a compensation — a tool call that undoes it,
whose arguments may refer to the step's result (``"${result}"``, ``"${result.order_id}"``) — and
``depends_on`` earlier steps. When the task aborts (or cannot go on), the compensations of the
completed steps run in reverse completion order.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orga.contracts.approvals import PendingApproval, PendingEscalation
from orga.contracts.config import LoopInput

__all__ = [
    "Compensation",
    "LimitAction",
    "LoopStep",
    "Step",
    "StepPolicy",
    "StepReport",
    "StepStatus",
    "TaskInput",
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
    "skipped",
    "failed",
    "compensated",
    "compensation_failed",
]
TaskStatus = Literal["running", "awaiting_operator", "completed", "aborted", "cancelled", "failed"]
"""``failed``: the task could not start (its input, or a tool it names, is invalid)."""
LimitAction = Literal["skip_step", "abort_task", "escalate"]


class StepPolicy(BaseModel):
    """How a task treats failing steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_reattempts_per_step: int = Field(default=2, ge=0, le=100)
    """Attempts after the first one failed."""
    similarity_threshold: float = Field(default=0.85, ge=0.0, le=1.0)
    """Two consecutive errors this similar mean the step is stuck."""
    on_limit_reached: LimitAction = "abort_task"
    """``skip_step`` (and its dependents), ``abort_task`` (and compensate) or ``escalate``."""


class ToolStep(BaseModel):
    """Call one tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tool"] = "tool"
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict[str, Any])


class LoopStep(BaseModel):
    """Run a reasoning loop as a child workflow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["loop"] = "loop"
    input: LoopInput


class Compensation(BaseModel):
    """The tool call that undoes a completed step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Values ``"${result}"`` / ``"${result.path.to.field}"`` are replaced by the step's
    result (parsed as JSON for a path)."""


class Step(BaseModel):
    """One step of a task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=100, pattern=r"^[\w.-]+$")
    action: Annotated[ToolStep | LoopStep, Field(discriminator="kind")]
    compensation: Compensation | None = None
    depends_on: list[str] = Field(default_factory=list[str])
    parallel: bool = False
    """May start together with the step before it (when its dependencies allow)."""


class TaskInput(BaseModel):
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


class StepReport(BaseModel):
    """What happened to one step."""

    id: str
    status: StepStatus = "pending"
    attempts: int = 0
    result: str | None = None
    errors: list[str] = Field(default_factory=list[str])
    compensation_error: str | None = None


class TaskState(BaseModel):
    """The ``state`` query of a task."""

    status: TaskStatus
    steps: list[StepReport]
    completion_order: list[str]
    pending_escalations: list[PendingEscalation] = Field(default_factory=list[PendingEscalation])
    pending_approvals: list[PendingApproval] = Field(default_factory=list[PendingApproval])
    """Steps (or compensations) the gate sent to a person, waiting for a decision."""
    agent_id: str = "task"
    message: str | None = None
    """How the task ended, in words, once it has (what was compensated, who aborted)."""


class TaskResult(BaseModel):
    """The result of a completed task (an aborted one fails with the same report)."""

    status: TaskStatus
    steps: list[StepReport]
