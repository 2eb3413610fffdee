"""Contracts of human decisions: approvals of gated calls and resolutions of escalations.

A person answers with the ``approval`` signal or the ``approve`` update (same payload); the
update is validated first, so an unknown or already-decided call id is rejected back to the
caller and nothing is written to history. Escalations (a failing step parked for an operator)
are answered with ``resolve_escalation``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ApprovalDecision",
    "ApprovalRecord",
    "DecisionSource",
    "EscalationAction",
    "EscalationRecord",
    "EscalationResolution",
    "PendingApproval",
    "PendingEscalation",
]

DecisionSource = Literal["signal", "update", "timeout"]
EscalationAction = Literal["retry", "skip", "result", "abort", "mark_compensated", "give_up"]
"""``mark_compensated`` and ``give_up`` settle a compensation that keeps failing (a task's)."""


class ApprovalDecision(BaseModel):
    """What a person sends: the payload of the ``approval`` signal and the ``approve`` update."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    approved: bool
    reason: str | None = None
    approver: str | None = None


class PendingApproval(BaseModel):
    """A gated call waiting for a person (listed in ``state.pending_approvals``)."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    arguments: str
    reason: str
    """Why it needs approval (the gate's reason)."""
    since: datetime
    iteration: int = 0


class ApprovalRecord(BaseModel):
    """The decision as recorded (returned by the ``approve`` update)."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    approved: bool
    reason: str | None = None
    approver: str | None = None
    source: DecisionSource
    at: datetime


class EscalationResolution(BaseModel):
    """The payload of ``resolve_escalation``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    escalation_id: str
    action: EscalationAction
    result: Any = None
    """For ``result``: what the model sees as the call's result."""
    reason: str | None = None
    operator: str | None = None


class PendingEscalation(BaseModel):
    """A failing step parked for an operator."""

    model_config = ConfigDict(frozen=True)

    escalation_id: str
    tool: str
    arguments: str
    error: str
    since: datetime
    iteration: int = 0
    options: list[EscalationAction] = Field(
        default_factory=lambda: ["retry", "skip", "result", "abort"]
    )


class EscalationRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    escalation_id: str
    action: EscalationAction
    result: Any = None
    reason: str | None = None
    operator: str | None = None
    source: DecisionSource
    at: datetime
