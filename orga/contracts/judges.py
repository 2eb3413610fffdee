"""Contracts of a judge: an approver that is code, deciding gated calls before a person does.

The operator defines a judge in the agents file (``[judges.<name>]``: the Python callable it
runs, its confidence floor, whether it is on or in shadow) and enrolls its public key as an
approver (``[approvers.<name>]``, groups for the policies); an agent names it (``judge``). When
one of that agent's loops holds a call for approval, the workflow asks the judge (an activity)
while the call waits: the judge's answer is an opinion (``JudgeOpinion``) — approve, deny or
escalate, with its confidence and reasons — and, when it is clear and sure, a decision signed
with the judge's key, checked by the workflow like a person's and by the gate's policies
(``Action::"approve"``/``"deny"`` with the judge as the approver). Anything else escalates: the
call waits for a person, who sees the opinion. A person who decides first wins: the judge's
call is cancelled, and an answer that lands anyway is recorded and ignored.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from pydantic import ConfigDict, Field

from orga.contracts.approvals import ApprovalDecision, JudgeOpinion, PendingApproval, Verdict
from orga.contracts.wire import Contract

__all__ = [
    "CONSULT_JUDGE",
    "JudgeAnswer",
    "JudgeCase",
    "JudgeOpinion",
    "JudgeRequest",
    "JudgeSeat",
    "JudgeSpec",
    "JudgeVerdict",
    "Verdict",
]


CONSULT_JUDGE: Final = "consult_judge"
"""Name of the activity that asks a judge (``orga.activities.judges``)."""


class JudgeSpec(Contract):
    """A judge of the worker (``[judges.<name>]`` in the agents file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    code: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    """The callable that judges, ``module:function`` (sync or async), called with a
    ``JudgeCase``; it returns a ``JudgeVerdict`` (or a dict of one)."""
    key_file: str = Field(min_length=1)
    """The judge's Ed25519 private key (PEM, readable by its owner only; relative to the agents
    file): it signs the judge's decisions. Its public key is enrolled as
    ``[approvers.<name>]``."""
    confidence_floor: float = Field(default=0.8, ge=0.0, le=1.0)
    """Below it, the judge is unsure: the call escalates to a person."""
    timeout: timedelta = Field(default=timedelta(seconds=30), gt=timedelta(0))
    """How long the judge may take; then the call escalates."""
    shadow: bool = False
    """Record what the judge would decide and show it; a person still decides every call."""
    counts_as_person: bool = False
    """It may be one of the approvers a four-eyes call needs (else such calls escalate)."""

    def seat(self) -> JudgeSeat:
        """What a loop's setup records of this judge (its code and key stay on the worker)."""
        return JudgeSeat(
            name=self.name,
            confidence_floor=self.confidence_floor,
            timeout=self.timeout,
            shadow=self.shadow,
            counts_as_person=self.counts_as_person,
        )


class JudgeSeat(Contract):
    """The judge of a loop's agent, as its setup recorded it in history."""

    model_config = ConfigDict(frozen=True)

    name: str
    confidence_floor: float = 0.8
    timeout: timedelta = timedelta(seconds=30)
    shadow: bool = False
    counts_as_person: bool = False


class JudgeCase(Contract):
    """What a judge sees of a held call."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    agent: str
    task: str
    """The loop's task (its first user message)."""
    call_id: str
    tool: str
    arguments: str
    """The call's arguments, a JSON object as the model wrote them."""
    reason: str
    """Why the gate holds it for approval."""


class JudgeVerdict(Contract):
    """What a judge's callable returns."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    reasons: str = Field(default="", max_length=2000)


class JudgeRequest(Contract):
    """The ``consult_judge`` activity's input."""

    model_config = ConfigDict(frozen=True)

    judge: str
    case: JudgeCase
    pending: PendingApproval
    """The call as it waits (what a signed decision names)."""


class JudgeAnswer(Contract):
    """The ``consult_judge`` activity's result."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    confidence: float = 0.0
    reasons: str = ""
    why_not: str | None = None
    """Why the answer escalates (the judge failed, answered no verdict, was unsure)."""
    decision: ApprovalDecision | None = None
    """A clear, sure approve or deny, signed with the judge's key."""
