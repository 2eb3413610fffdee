"""Contracts of human decisions: approvals of gated calls and resolutions of escalations.

A person answers with the ``approval`` signal or the ``approve`` update (same payload); the
update is validated first, so an unknown or already-decided call id is rejected back to the
caller and nothing is written to history. Escalations (a failing step parked for an operator)
are answered with ``resolve_escalation``.

Where the worker's operator enrolled approvers (``EnrolledApprover``: a name and an Ed25519
public key), a decision must be signed by an enrolled approver's private key
(``orga.core.signatures`` says what is signed); the workflow verifies it before recording it,
and records the key's fingerprint. Where none are enrolled, decisions are recorded as
*unverified*: the name is whatever the caller sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from orga.contracts.wire import Contract

__all__ = [
    "ApprovalDecision",
    "ApprovalRecord",
    "DecisionChannel",
    "DecisionProof",
    "DecisionSource",
    "EnrolledApprover",
    "EscalationAction",
    "EscalationRecord",
    "EscalationResolution",
    "JudgeOpinion",
    "PendingApproval",
    "PendingEscalation",
    "Verdict",
]

DecisionSource = Literal["signal", "update", "timeout", "mcp-elicitation", "judge"]
"""How a decision arrived: the ``approval`` signal, the ``approve`` update, the wait's timeout,
the ``approve`` update sent by ``orga mcp`` after it asked the person by MCP elicitation, or
the loop's judge (``orga.contracts.judges``)."""
DecisionChannel = Literal["mcp-elicitation", "a2a"]
"""What a signed decision may say of how the person was asked (covered by the signature):
``a2a``, sent by a remote A2A caller the endpoint's operator lets decide."""
EscalationAction = Literal["retry", "skip", "result", "abort", "mark_compensated", "give_up"]
"""``mark_compensated`` and ``give_up`` settle a compensation that keeps failing (a task's)."""


Verdict = Literal["approve", "deny", "escalate"]
"""What a judge may say of a call: ``escalate`` leaves it to a person."""


class JudgeOpinion(Contract):
    """What a judge said of a call, and what became of it (journaled; shown while it waits)."""

    model_config = ConfigDict(frozen=True)

    judge: str
    verdict: Verdict
    """What the judge said: ``escalate`` also when it failed, timed out or was unsure."""
    confidence: float = 0.0
    reasons: str = ""
    at: datetime
    decides: bool = False
    """The opinion decided the call (else a person decides)."""
    why_not: str | None = None
    """Why it did not decide: shadow mode, unsure, failed, a policy that reserves the call for
    people, a four-eyes call, a person first."""


class EnrolledApprover(Contract):
    """A person the worker's operator allows to decide, and the key that proves it is them
    (``[approvers.<name>]`` in the agents file or the ``ORGA_APPROVERS`` file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    public_key: str = Field(min_length=1, max_length=200)
    """The Ed25519 public key: 32 raw bytes, base64 (``orga approver keygen`` prints it)."""
    groups: list[str] = Field(default_factory=list[str])
    """What policies may know them by (Cedar: the approver's ``groups`` attribute)."""


class ApprovalDecision(Contract):
    """What a person sends: the payload of the ``approval`` signal and the ``approve`` update."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    approved: bool
    reason: str | None = None
    approver: str | None = None
    arguments: str | None = None
    """Approve with edits: the call's arguments as they should run (a JSON object), validated
    against the tool's schema and passed through the gate again."""
    via: DecisionChannel | None = None
    """How the person was asked, when not directly (``orga mcp``'s elicitation)."""
    signed_at: datetime | None = None
    signature: str | None = None
    """The approver's Ed25519 signature (base64) of the decision
    (``orga.core.signatures.decision_text``), made at ``signed_at``."""


class DecisionProof(Contract):
    """One person's decision on a call, as the workflow checked it."""

    model_config = ConfigDict(frozen=True)

    approver: str | None = None
    approved: bool
    reason: str | None = None
    source: DecisionSource
    at: datetime
    verified: bool = False
    """Signed with the key enrolled for ``approver`` and checked by the workflow; ``False``:
    no approvers are enrolled, so the name is the caller's claim."""
    key_fingerprint: str | None = None
    public_key: str | None = None
    """The enrolled key the signature was checked against (so the audit can re-check it)."""
    signature: str | None = None
    signed_at: datetime | None = None
    arguments_sha256: str | None = None
    """SHA-256 of the arguments the person was shown (the call as it waited)."""
    edited_arguments: str | None = None
    """The arguments the person approved instead (approve with edits)."""
    via: DecisionChannel | None = None


class PendingApproval(Contract):
    """A gated call waiting for a person (listed in ``state.pending_approvals``)."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    arguments: str
    reason: str
    """Why it needs approval (the gate's reason)."""
    since: datetime
    iteration: int = 0
    arguments_sha256: str = ""
    """SHA-256 of ``arguments`` (UTF-8): what a signed decision names."""
    signatures_required: bool = False
    """Approvers are enrolled: only a decision signed by one of them is recorded. ``False``:
    decisions are recorded *unverified* (the name is the caller's claim)."""
    approvals_needed: int = 1
    """Distinct approvers who must approve before it runs (any deny stops it)."""
    approved_by: list[str] = Field(default_factory=list[str])
    """Who approved so far, when more than one must."""
    judge: JudgeOpinion | None = None
    """What the loop's judge said of it (it waits for a person: the judge did not decide)."""


class ApprovalRecord(Contract):
    """The decision as recorded (returned by the ``approve`` update)."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    approved: bool
    reason: str | None = None
    approver: str | None = None
    """Who decided (with several approvers: each, comma-separated)."""
    source: DecisionSource
    at: datetime
    verified: bool = False
    """Every decision behind it was signed by an enrolled approver and checked."""
    complete: bool = True
    """``False``: an approval recorded while the call still needs others' (four eyes)."""
    arguments: str | None = None
    """With an approval with edits: the arguments the call runs with."""
    decisions: list[DecisionProof] = Field(default_factory=list[DecisionProof])
    """Each person's decision, with its proof."""


class EscalationResolution(Contract):
    """The payload of ``resolve_escalation``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    escalation_id: str
    action: EscalationAction
    result: Any = None
    """For ``result``: what the model sees as the call's result."""
    reason: str | None = None
    operator: str | None = None


class PendingEscalation(Contract):
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


class EscalationRecord(Contract):
    model_config = ConfigDict(frozen=True)

    escalation_id: str
    action: EscalationAction
    result: Any = None
    reason: str | None = None
    operator: str | None = None
    source: DecisionSource
    at: datetime
