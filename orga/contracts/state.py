"""What a loop reports: the ``state`` query's answer and the workflow's result."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, NonNegativeInt

from orga.contracts.approvals import PendingApproval, PendingEscalation
from orga.contracts.critic import PendingReview, ReviewRecord
from orga.contracts.delegation import DelegationRecord
from orga.contracts.evidence import EvidenceCollection, ProgressSnapshot
from orga.contracts.inference import Usage
from orga.contracts.journal import CallReceipt
from orga.contracts.principals import Principal
from orga.contracts.resilience import Breaker, DeadLetterEntry
from orga.contracts.threads import ThreadState
from orga.contracts.wire import Contract

__all__ = [
    "LoopResult",
    "LoopState",
    "LoopStatus",
    "Phase",
    "ToolCallRecord",
]

LoopStatus = Literal[
    "running",
    "awaiting_approval",
    "awaiting_review",
    "awaiting_message",
    "awaiting_worker",
    "awaiting_remote",
    "paused",
    "completed",
    "failed",
    "cancelled",
]
"""``cancelled``: someone cancelled the loop (``orga cancel``, ``LoopHandle.cancel``, Temporal);
its reason is the journal's ``Terminated`` message. ``awaiting_message``: a thread answered
and waits for the next message. ``awaiting_worker``: a tool call waits for a worker that
registers its tool (``waiting_for_workers``). ``awaiting_remote``: a remote agent it delegated
to waits for a person at its endpoint (``delegations``' ``waiting``)."""
Phase = Literal[
    "starting",
    "observing",
    "reasoning",
    "policy_check",
    "dispatching",
    "awaiting_message",
    "completed",
    "failed",
]


class ToolCallRecord(Contract):
    """One tool call the loop handled, and how it ended."""

    model_config = ConfigDict(frozen=True)

    iteration: NonNegativeInt
    call_id: str
    tool: str
    status: str
    """``ok``, ``failed``, ``denied``, ``invalid_arguments``, ``unknown_tool``, ``skipped`` …"""
    is_error: bool


class LoopState(Contract):
    """The answer to the ``state`` query."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    agent_id: str
    status: LoopStatus
    phase: Phase
    iteration: NonNegativeInt
    usage: Usage
    """Tokens spent by the loop, its critic and its delegated children."""
    model_calls: NonNegativeInt = 0
    """Model calls its budget paid for (``LoopResult.model_calls``)."""
    started_at: datetime
    last_stop_reason: str | None = None
    tool_call_count: NonNegativeInt = 0
    tool_calls: list[ToolCallRecord] = Field(default_factory=list[ToolCallRecord])
    """The most recent tool calls (up to 100), oldest first."""
    paused_calls: dict[str, str] = Field(default_factory=dict[str, str])
    """Calls whose tool is paused (``orga pause --tool``): call id → who paused it and why."""
    receipts: list[CallReceipt] = Field(default_factory=list[CallReceipt])
    """What became of the most recent calls (up to 100), oldest first (``orga receipts``)."""
    messages: NonNegativeInt = 0
    """Length of the conversation (the ``conversation`` query returns it)."""
    output: str | None = None
    termination_reason: str | None = None
    """How the loop ended: ``end_turn``, ``saturated``, or the failure's type."""
    termination_message: str | None = None
    """What happened, in words (a failure's message)."""
    provider: str | None = None
    """The provider the worker resolved for this loop (its default when the config named none)."""
    model: str | None = None
    """The model the worker resolved for this loop (its default when the config named none)."""
    principal: Principal | None = None
    """Who the loop runs for, as its worker resolved it (``verified`` false: a claim); ``orga
    state`` adds what the principal's ledger has left."""
    pending_approvals: list[PendingApproval] = Field(default_factory=list[PendingApproval])
    """Calls waiting for a person, listed before the loop starts waiting."""
    pending_escalations: list[PendingEscalation] = Field(default_factory=list[PendingEscalation])
    breakers: dict[str, Breaker] = Field(default_factory=dict[str, Breaker])
    """One circuit breaker per tool that has run."""
    dead_letters: list[DeadLetterEntry] = Field(default_factory=list[DeadLetterEntry])
    waiting_for_workers: list[str] = Field(default_factory=list[str])
    """Tools whose calls wait for a worker that registers them (workers of the task queue with
    different tool modules): ``waiting for a worker with `issue_refund```."""
    evidence: EvidenceCollection | None = None
    """The information-gain tracker, for loops with evidence tools."""
    advertised: list[str] = Field(default_factory=list[str])
    """The tools the model sees (after the tool profile)."""
    pending_review: PendingReview | None = None
    """A final answer waiting for a person's review (``config.critic`` human)."""
    reviews: list[ReviewRecord] = Field(default_factory=list[ReviewRecord])
    """The reviews of the loop's answers so far."""
    delegations: list[DelegationRecord] = Field(default_factory=list[DelegationRecord])
    """The loop's children (``delegate``): agent, status, budget and spend."""
    knowledge_context: str | None = None
    """The ``[KNOWLEDGE_CONTEXT]`` message the model sees now (``config.knowledge``)."""
    thread: ThreadState | None = None
    """A thread's turn and what it waits for (``config.thread``)."""


class LoopResult(Contract):
    """The workflow's result when the loop completes."""

    model_config = ConfigDict(frozen=True)

    output: str
    """The model's final answer."""
    value: Any = None
    """With ``config.output_schema``: the answer parsed, as validated against it (with
    ``output_type`` in Python: an instance of that model)."""
    iterations: int
    """Model calls made by the loop itself (its Reason steps)."""
    model_calls: int = 0
    """Model calls its budget paid for: its own, its critic's and every delegated child's
    (``max_iterations`` bounds this). 0 in results recorded before it was counted."""
    usage: Usage
    termination_reason: str
    """``end_turn`` when the model finished its turn; ``saturated`` when evidence stopped
    telling it anything new (a normal completion, with ``snapshot``); ``critic_rejected`` when
    the critic still asked for a revision after ``max_rounds`` reviews (with ``critique``)."""
    critique: str | None = None
    """With ``critic_rejected``: the critic's last feedback."""
    tool_call_count: int = 0
    workflow_id: str = ""
    messages: int = 0
    """Length of the final conversation (the ``conversation`` query returns it)."""
    snapshot: ProgressSnapshot | None = None
    """When the loop ended ``saturated``: what it checked and what each check returned."""
    provider: str | None = None
    """The provider that answered (the worker's default when the config named none)."""
    model: str | None = None
    """The model that answered (the worker's default when the config named none)."""
