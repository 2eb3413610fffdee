"""Contracts of a judge: an approver that is code or a model, deciding gated calls before a
person does.

The operator defines a judge in the agents file (``[judges.<name>]``: the Python callable it
runs, or the agent whose model answers with the operator's criteria; its confidence floor,
whether it is on or in shadow) and enrolls its public key as an
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

from pydantic import ConfigDict, Field, model_validator

from orga.contracts.approvals import ApprovalDecision, JudgeOpinion, PendingApproval, Verdict
from orga.contracts.inference import Usage
from orga.contracts.principals import Principal
from orga.contracts.wire import Contract

__all__ = [
    "CONSULT_JUDGE",
    "VERDICT_TOOL",
    "JudgeAnswer",
    "JudgeCase",
    "JudgeOpinion",
    "JudgeRequest",
    "JudgeSeat",
    "JudgeSpec",
    "JudgeTrial",
    "JudgeVerdict",
    "Verdict",
]


CONSULT_JUDGE: Final = "consult_judge"
"""Name of the activity that asks a judge (``orga.activities.judges``)."""
VERDICT_TOOL: Final = "submit_verdict"
"""The tool a model judge must call with its verdict (a verdict in prose is not taken)."""


class JudgeSpec(Contract):
    """A judge of the worker (``[judges.<name>]`` in the agents file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    code: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    """A judge that is code: the callable that judges, ``module:function`` (sync or async),
    called with a ``JudgeCase``; it returns a ``JudgeVerdict`` (or a dict of one)."""
    agent: str | None = Field(default=None, min_length=1, max_length=200)
    """A judge that is a model: the agent of the agents file whose provider and model answer,
    with ``criteria`` (one model call per held call, offered only ``submit_verdict``)."""
    criteria: str | None = Field(default=None, min_length=1, max_length=20_000)
    """What a model judge approves, denies and leaves to a person (its instructions)."""
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

    @model_validator(mode="after")
    def _one_kind(self) -> JudgeSpec:
        if (self.code is None) == (self.agent is None):
            raise ValueError(
                'a judge is code (code = "module:function") or a model (agent = "<agent>" '
                "with criteria): give exactly one of code and agent"
            )
        if self.agent is not None and self.criteria is None:
            raise ValueError(
                "a model judge needs its criteria: what it approves, denies, escalates"
            )
        if self.code is not None and self.criteria is not None:
            raise ValueError("criteria are a model judge's: a judge that is code has none")
        return self

    def seat(self) -> JudgeSeat:
        """What a loop's setup records of this judge (its code and key stay on the worker)."""
        return JudgeSeat(
            name=self.name,
            confidence_floor=self.confidence_floor,
            timeout=self.timeout,
            shadow=self.shadow,
            counts_as_person=self.counts_as_person,
            model=self.agent is not None,
        )


class JudgeSeat(Contract):
    """The judge of a loop's agent, as its setup recorded it in history."""

    model_config = ConfigDict(frozen=True)

    name: str
    confidence_floor: float = 0.8
    timeout: timedelta = timedelta(seconds=30)
    shadow: bool = False
    counts_as_person: bool = False
    model: bool = False
    """A model judge (its call goes where the loop's model calls go: ``ORGA_MODEL_TASK_QUEUE``
    when the worker sets one); False for code."""


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

    @classmethod
    def of(cls, pending: PendingApproval, *, workflow_id: str, agent: str, task: str) -> JudgeCase:
        """The case of a call as it waits: what the workflow shows its judge, and what
        ``orga judge what-if`` shows a candidate of the calls people decided."""
        return cls(
            workflow_id=workflow_id,
            agent=agent,
            task=task,
            call_id=pending.call_id,
            tool=pending.tool,
            arguments=pending.arguments,
            reason=pending.reason,
        )


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
    principal: Principal | None = None
    """Who the loop runs for: a model judge's call is charged to its spend ledger."""


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
    usage: Usage = Field(default_factory=Usage)
    """What a model judge's call served (charged to the loop, as its own calls are)."""
    model_calls: int = Field(default=0, ge=0, le=1)
    """1 for a model judge's call (it counts among the loop's model calls)."""


class JudgeTrial(Contract):
    """A case a judge is tried on (``orga judge record`` writes them, ``orga judge test`` runs
    them): a call a person decided, and what the judge must say of it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="", max_length=1_000)
    case: JudgeCase
    expect: Verdict
    """``approve``/``deny``: the judge must not decide the other way (an escalation passes
    unless ``--strict``); ``escalate``: the call is a person's, and the judge must not decide
    it."""
