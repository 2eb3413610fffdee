"""The loop journal: typed, numbered events of what the loop did, held in workflow state.

Bounded: past ``limit`` entries the oldest are dropped and counted, so a long loop cannot
grow its state without end. Timestamps come from the workflow clock, so replay rebuilds
exactly the same journal.

Over 400 lines: one discriminated union of every event a loop journals, each a small model
that readers (``orga journal``, the desk, audits) match on by ``kind``; split by topic, the
union would be spread over as many modules.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, TypedDict

from pydantic import ConfigDict, Field, NonNegativeFloat, NonNegativeInt

from orga.contracts.approvals import DecisionProof, JudgeOpinion
from orga.contracts.inference import Usage
from orga.contracts.policy import ActionKind, Decision
from orga.contracts.verdicts import AskedPolicy
from orga.contracts.wire import Contract, Tagged

__all__ = [
    "ApprovalDecided",
    "CallOutcome",
    "CallPaused",
    "CallReceipt",
    "CallResumed",
    "CompensationSettled",
    "ContextSummarised",
    "DecisionRecord",
    "DelegationFinished",
    "DelegationStarted",
    "EscalationResolved",
    "EvidenceJudged",
    "EvidenceSaturated",
    "Forked",
    "Journal",
    "JournalEntry",
    "JudgeConsulted",
    "KnowledgeInjected",
    "KnowledgeRecalled",
    "KnowledgeStored",
    "MessageReceived",
    "ModelSwitched",
    "ObservationsCollected",
    "PolicyEvaluated",
    "PreHydrationComplete",
    "ReasoningComplete",
    "ReceiptOutcome",
    "RecoveryTriggered",
    "ReviewDecided",
    "Stamp",
    "Started",
    "StepLimitReached",
    "Terminated",
    "ToolsDispatched",
    "TurnAnswered",
]


class Stamp(TypedDict):
    """The fields every event carries, taken when the event happens."""

    seq: NonNegativeInt
    at: datetime
    agent_id: str
    iteration: NonNegativeInt


class _Event(Tagged):
    model_config = ConfigDict(frozen=True)

    seq: NonNegativeInt
    """Position in the loop's journal, from 1, never reused (also across continue-as-new)."""
    at: datetime
    """Workflow time of the event."""
    agent_id: str
    iteration: NonNegativeInt
    """The reasoning step the event belongs to (0 before the first model call)."""


class Started(_Event):
    kind: Literal["Started"] = "Started"
    tools: list[str] = Field(default_factory=list[str])
    provider: str | None = None
    model: str | None = None
    policy: str = "default"


class ReasoningComplete(_Event):
    kind: Literal["ReasoningComplete"] = "ReasoningComplete"
    stop_reason: str
    raw_stop_reason: str | None = None
    model: str = ""
    tool_calls: list[str] = Field(default_factory=list[str])
    """Names of the tools the model asked for, in its order."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens of this call."""
    blob_ref: str | None = None
    """The full answer, when the payload guard cut it."""


class DecisionRecord(Contract):
    model_config = ConfigDict(frozen=True)

    action: ActionKind
    call_id: str | None = None
    tool: str | None = None
    decision: Decision
    reason: str = ""
    policy_ids: list[str] = Field(default_factory=list[str])
    asked: AskedPolicy | None = Field(default=None, exclude_if=lambda v: v is None)
    """What the policy engine was asked (Cedar, OPA): ``orga policy what-if`` asks it again."""
    asked_above: list[AskedPolicy] = Field(
        default_factory=list[AskedPolicy], exclude_if=lambda v: not v
    )
    """What the gates up a delegated loop's tree were asked, nearest first."""


class PolicyEvaluated(_Event):
    kind: Literal["PolicyEvaluated"] = "PolicyEvaluated"
    engine: str
    policy_hash: str | None = None
    decisions: list[DecisionRecord]


class ToolsDispatched(_Event):
    kind: Literal["ToolsDispatched"] = "ToolsDispatched"
    call_ids: list[str]
    tools: list[str]


class CallOutcome(Contract):
    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    is_error: bool
    status: str
    """``ok``, ``failed``, ``denied``, ``invalid_arguments``, ``unknown_tool``, ``skipped`` …"""
    blob_ref: str | None = None
    """The full result, when the payload guard cut it."""
    error: str | None = None
    """Why a call did not succeed (the start of its error result: a denial's rule, an egress
    refusal, the exception)."""


ReceiptOutcome = Literal["delivered", "denied", "failed", "compensated", "unknown"]
"""What became of an effect: it ran (``delivered``), a rule or a person refused it
(``denied``), it did not run to an end (``failed``), it was undone (``compensated``), or nobody
can tell yet (``unknown``: its attempt was lost after it began)."""


class CallReceipt(_Event):
    """What became of one tool call (or a task's compensation): its receipt, on the journal
    and the audit chain. A call whose outcome was ``unknown`` has that receipt first, then the
    one that settles it."""

    kind: Literal["CallReceipt"] = "CallReceipt"
    call_id: str
    tool: str
    outcome: ReceiptOutcome
    digest: str | None = None
    """``delivered``: SHA-256 (hex) of the result the call returned (the model read it)."""
    by: str | None = None
    """Who or what decided it: the person who settled an unknown outcome, the compensating
    step of ``compensated``."""
    note: str = ""
    """Why, in words: the rule or person that refused it, the error, how an unknown outcome
    was settled (cut to 300 characters)."""


class CallPaused(_Event):
    """A call found its tool, its loop (or task) or its agent paused (``orga pause``): it
    waits, not run, keeping approvals already granted, and then runs once."""

    kind: Literal["CallPaused"] = "CallPaused"
    call_id: str
    tool: str
    reason: str  # who paused it, since when, and why


class CallResumed(_Event):
    """A call that waited since its ``CallPaused`` goes on: the pause ended (``orga resume``)."""

    kind: Literal["CallResumed"] = "CallResumed"
    call_id: str
    tool: str


class ObservationsCollected(_Event):
    kind: Literal["ObservationsCollected"] = "ObservationsCollected"
    outcomes: list[CallOutcome]


class RecoveryTriggered(_Event):
    kind: Literal["RecoveryTriggered"] = "RecoveryTriggered"
    tool: str
    strategy: str
    error: str


class ModelSwitched(_Event):
    """The loop's model was unavailable after its retries: it goes on with a fallback."""

    kind: Literal["ModelSwitched"] = "ModelSwitched"
    from_provider: str | None = None
    from_model: str | None = None
    to_provider: str
    to_model: str
    error: str
    """Why: the failure of the last call to the model it left."""


class StepLimitReached(_Event):
    kind: Literal["StepLimitReached"] = "StepLimitReached"
    step_id: str
    attempts: NonNegativeInt
    reason: str


class PreHydrationComplete(_Event):
    kind: Literal["PreHydrationComplete"] = "PreHydrationComplete"
    found: NonNegativeInt
    resolved: NonNegativeInt
    failed: NonNegativeInt
    tokens: NonNegativeInt
    skipped: list[str] = Field(default_factory=list[str])
    """References not resolved because their tool is not one the loop's model sees (not in
    its tools, not allowed to its agent, or hidden by its profile): ``"<type> <value>: why"``."""


class ApprovalDecided(_Event):
    kind: Literal["ApprovalDecided"] = "ApprovalDecided"
    call_id: str
    tool: str
    approved: bool
    approver: str | None = None
    reason: str | None = None
    source: str
    """``signal``, ``update``, ``timeout`` or ``mcp-elicitation``."""
    waited_seconds: NonNegativeFloat = 0.0
    verified: bool = False
    """Every decision behind it was signed by an enrolled approver and checked; ``False``: no
    approvers are enrolled (the name is the caller's claim), or the wait timed out."""
    decisions: list[DecisionProof] = Field(default_factory=list[DecisionProof])
    """Each person's decision with its proof (several where a tool needs several approvers)."""
    arguments: str | None = None
    edited_arguments: str | None = None
    """With an approval with edits: the arguments the call waited with, and those it runs with
    (the approver's, as the gate passed them)."""


class JudgeConsulted(_Event):
    kind: Literal["JudgeConsulted"] = "JudgeConsulted"
    call_id: str
    tool: str
    opinion: JudgeOpinion
    """What the judge said, and whether it decided the call (else why not)."""


class EscalationResolved(_Event):
    kind: Literal["EscalationResolved"] = "EscalationResolved"
    escalation_id: str
    tool: str
    action: str
    operator: str | None = None
    reason: str | None = None
    source: str


class CompensationSettled(_Event):
    """How a task's compensation of one step ended."""

    kind: Literal["CompensationSettled"] = "CompensationSettled"
    step_id: str
    tool: str
    how: Literal["succeeded", "marked_compensated", "gave_up", "failed"]
    """``succeeded``: the compensation ran; ``marked_compensated`` / ``gave_up``: an operator
    settled it; ``failed``: it could not run (its arguments could not be filled)."""
    escalations: NonNegativeInt = 0
    """How many times an operator was asked about it."""
    operator: str | None = None
    note: str | None = None
    error: str | None = None
    """The last error it met, if any."""


class DelegationStarted(_Event):
    """A ``delegate`` call started a child loop."""

    kind: Literal["DelegationStarted"] = "DelegationStarted"
    call_id: str
    agent: str
    workflow_id: str
    max_tokens: NonNegativeInt
    max_iterations: NonNegativeInt
    timeout_seconds: NonNegativeFloat


class DelegationFinished(_Event):
    """A child loop returned (or was refused before it started): what it spent."""

    kind: Literal["DelegationFinished"] = "DelegationFinished"
    call_id: str
    agent: str
    workflow_id: str | None = None
    status: str
    """``completed``, ``failed`` or ``refused``."""
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None


class ReviewDecided(_Event):
    """A critic reviewed the final answer."""

    kind: Literal["ReviewDecided"] = "ReviewDecided"
    round: NonNegativeInt
    verdict: str
    """``approve``, ``revise`` or ``reject`` (a human review that timed out as a rejection)."""
    feedback: str = ""
    reviewer: str | None = None
    source: str
    """``model``, ``update`` or ``timeout``."""


class KnowledgeInjected(_Event):
    """What the model was shown of its agent's knowledge before a reasoning step."""

    kind: Literal["KnowledgeInjected"] = "KnowledgeInjected"
    query: str
    """The search terms, from the newest user and tool messages."""
    items: list[int] = Field(default_factory=list[int])
    """The ids of the items shown (none: nothing relevant, and no injection)."""
    tokens: NonNegativeInt = 0
    error: str | None = None
    """The search failed: the step went on without knowledge."""


class KnowledgeRecalled(_Event):
    """The model searched its agent's knowledge (``recall_knowledge``)."""

    kind: Literal["KnowledgeRecalled"] = "KnowledgeRecalled"
    call_id: str
    query: str
    scope: str = "all"
    directory: str | None = None
    found: NonNegativeInt = 0


class KnowledgeStored(_Event):
    """An item went into the agent's knowledge (``store_knowledge``, or ``auto_persist``)."""

    kind: Literal["KnowledgeStored"] = "KnowledgeStored"
    item_kind: str
    content: str
    """The item, cut to a line."""
    call_id: str | None = None
    """The ``store_knowledge`` call; none for the loop's own memory."""
    item_id: NonNegativeInt | None = None
    created: bool | None = None
    """False when an equal item was there already."""
    error: str | None = None
    """Storing it failed (the loop's result stands)."""


class EvidenceJudged(_Event):
    kind: Literal["EvidenceJudged"] = "EvidenceJudged"
    call_id: str
    tool: str
    judgement: str
    """``GAINED``, ``NO_GAIN``, or the protocol outcome (``DUPLICATE_SCOPE`` …)."""
    consecutive_no_gain: NonNegativeInt
    state: str


class EvidenceSaturated(_Event):
    kind: Literal["EvidenceSaturated"] = "EvidenceSaturated"
    reason: str


class ContextSummarised(_Event):
    """An ``anchored_summary`` loop folded the turns that left its context window into its
    running summary (a model call its budget paid for) — or could not, and showed a marker
    where they were instead."""

    kind: Literal["ContextSummarised"] = "ContextSummarised"
    start: NonNegativeInt
    """The first message folded in this time (where the previous summary ended)."""
    through: NonNegativeInt
    """Where this fold ends: the summary covers messages ``[0, through)`` after it (when it
    failed, what it would have covered)."""
    folded: NonNegativeInt = 0
    """Messages folded in this time."""
    tokens: NonNegativeInt = 0
    """The summary's estimated length."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens the summariser's call spent (charged to the loop)."""
    model: str = ""
    error: str | None = None
    """The summary could not be made: the previous one stands, and the messages it does not
    cover are left out with a marker."""


class MessageReceived(_Event):
    kind: Literal["MessageReceived"] = "MessageReceived"
    number: NonNegativeInt
    """Its number among the messages this run of the loop was sent."""
    sender: str | None = None
    text: str
    """The message, cut to 2 000 characters (the conversation holds it whole)."""
    characters: NonNegativeInt
    received_at: datetime
    """When the loop took it; it joined the conversation at this entry's time (an Observe)."""


class TurnAnswered(_Event):
    kind: Literal["TurnAnswered"] = "TurnAnswered"
    turn: NonNegativeInt
    """The thread's turn (from 1) whose answer passed the gate, or that ended unanswered; the
    thread now waits."""
    reason: str
    """``end_turn``, ``saturated``, ``critic_rejected``, or ``budget_exceeded`` (the turn's
    own budget ran out: ``output`` says which)."""
    output: str
    """The answer (or why there is none), cut to 2 000 characters (the conversation holds the
    answer whole)."""
    iterations: NonNegativeInt
    """Model calls of the turn."""
    tokens: NonNegativeInt
    """Tokens the turn spent."""


class Forked(_Event):
    kind: Literal["Forked"] = "Forked"
    source_workflow_id: str
    source_run_id: str
    turn: NonNegativeInt
    """The source's turn after which this loop starts."""
    state_hash: str
    """SHA-256 of the state carried from the source (``ForkPoint.state_hash``)."""
    said: str | None = None
    """The user message the fork adds (cut to 2 000 characters)."""
    replaced: bool = False


class Terminated(_Event):
    kind: Literal["Terminated"] = "Terminated"
    reason: str
    """``end_turn`` on success; otherwise the failure's type (``BudgetExceeded`` …)."""
    message: str = ""


JournalEntry = Annotated[
    Started
    | ReasoningComplete
    | PolicyEvaluated
    | ToolsDispatched
    | ObservationsCollected
    | CallReceipt
    | CallPaused
    | CallResumed
    | RecoveryTriggered
    | ModelSwitched
    | StepLimitReached
    | PreHydrationComplete
    | ApprovalDecided
    | JudgeConsulted
    | EscalationResolved
    | CompensationSettled
    | DelegationStarted
    | DelegationFinished
    | ReviewDecided
    | KnowledgeInjected
    | KnowledgeRecalled
    | KnowledgeStored
    | EvidenceJudged
    | EvidenceSaturated
    | ContextSummarised
    | MessageReceived
    | TurnAnswered
    | Forked
    | Terminated,
    Field(discriminator="kind"),
]


class Journal(Contract):
    """The bounded list of entries, and how many were dropped to keep it bounded."""

    limit: NonNegativeInt = 1_000
    entries: list[JournalEntry] = Field(default_factory=list[JournalEntry])
    dropped: NonNegativeInt = 0
    next_seq: NonNegativeInt = 1

    def append(self, entry: JournalEntry) -> None:
        """Add an entry whose ``seq`` was taken from ``take_seq``."""
        self.entries.append(entry)
        excess = len(self.entries) - self.limit
        if excess > 0:
            del self.entries[:excess]
            self.dropped += excess

    def take_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq
