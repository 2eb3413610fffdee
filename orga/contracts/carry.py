"""What a loop carries into its next run when it continues as new.

Everything the user can observe (conversation, usage, iteration, budgets spent, breakers,
cached results, dead letters, journal, tool-call records) crosses over, so the result and the
queries of a loop that continued look the same as those of one that never did.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt

from orga.contracts.audit import GENESIS
from orga.contracts.conversation import MessageAccepted, UserMessage
from orga.contracts.critic import ReviewRecord
from orga.contracts.delegation import DelegationRecord
from orga.contracts.evidence import EvidenceCollection
from orga.contracts.inference import Usage
from orga.contracts.journal import CallReceipt, Journal
from orga.contracts.progress import StreamCarry
from orga.contracts.resilience import Breaker, DeadLetterEntry
from orga.contracts.state import ToolCallRecord
from orga.contracts.threads import ThreadCarry
from orga.contracts.wire import Contract

__all__ = ["CachedEntry", "InboxCarry", "LoopCarry", "ToolStateSnapshot", "WaitingMessage"]


class CachedEntry(Contract):
    """A successful result kept for ``CachedResult``."""

    content: str
    at: datetime


class ToolStateSnapshot(Contract):
    """The tool state: breakers, cached results, dead letters, decided approval ids."""

    breakers: dict[str, Breaker] = Field(default_factory=dict[str, Breaker])
    cache: dict[str, CachedEntry] = Field(default_factory=dict[str, CachedEntry])
    dead_letters: list[DeadLetterEntry] = Field(default_factory=list[DeadLetterEntry])
    decided_ids: list[str] = Field(default_factory=list[str])


class WaitingMessage(Contract):
    """A person's message the loop accepted and has not read yet."""

    seq: NonNegativeInt
    message: UserMessage


class InboxCarry(Contract):
    """The loop's inbox of people's messages (``Steering``): what waits to be read, how many
    were accepted so far (numbers go on counting), and which turn of a thread read each of the
    newest."""

    received: NonNegativeInt = 0
    waiting: list[WaitingMessage] = Field(default_factory=list[WaitingMessage])
    read_in: dict[NonNegativeInt, NonNegativeInt] = Field(
        default_factory=dict[NonNegativeInt, NonNegativeInt]
    )
    """Message number → the turn of a thread that read it (the newest ``READ_KEPT``)."""
    known: dict[str, MessageAccepted] = Field(
        default_factory=dict[str, MessageAccepted], max_length=32
    )
    """The ``message`` update id of each of the newest messages → how it was accepted
    (``KNOWN_KEPT``): a sender's resend after continue-as-new is answered, not taken twice."""


class LoopCarry(Contract):
    """The loop's state at the iteration boundary where it continued as new."""

    runs: PositiveInt = 1
    """How many runs the loop has had before this one."""
    digest: str
    sent: NonNegativeInt
    usage: Usage
    iteration: NonNegativeInt
    other_calls: NonNegativeInt = 0
    """Model calls of its critic and children its budget paid for so far."""
    started_at: datetime
    human_wait: timedelta = timedelta(0)
    last_stop_reason: str | None = None
    journal: Journal
    tool_calls: list[ToolCallRecord] = Field(default_factory=list[ToolCallRecord])
    tool_call_count: NonNegativeInt = 0
    receipts: list[CallReceipt] = Field(default_factory=list[CallReceipt])
    """What became of the most recent calls (the state query's)."""
    tools: ToolStateSnapshot = Field(default_factory=ToolStateSnapshot)
    evidence: EvidenceCollection | None = None
    calibration: PositiveFloat = 1.0
    """The token-estimate calibration learnt from the provider's counts."""
    delegations: list[DelegationRecord] = Field(default_factory=list[DelegationRecord])
    """The loop's finished children (the newest)."""
    reviews: list[ReviewRecord] = Field(default_factory=list[ReviewRecord])
    """The critic's reviews so far (they count towards ``max_rounds``)."""
    audit_count: NonNegativeInt = 0
    """How many entries the audit chain holds so far."""
    audit_head: str = GENESIS
    """Where the audit chain stands: the next run's entries follow this hash."""
    context_summary: str | None = None
    """An ``anchored_summary`` loop's running summary of the conversation's older messages."""
    summarised_through: NonNegativeInt = 0
    """How many messages of the conversation ``context_summary`` covers."""
    unsummarised_through: NonNegativeInt = 0
    """Where the last fold whose summary was not made would have ended (0: none): the next run
    asks the summariser again only when turns past it must leave the window."""
    thread: ThreadCarry | None = None
    """A thread's turns and where the current one began (``config.thread``)."""
    stream: StreamCarry | None = None
    """A streamed loop's stream (``config.stream``): what it keeps, at the same offsets."""
    inbox: InboxCarry | None = None
    """People's messages accepted and not yet read (a thread's, sent before a turn's end that
    continued as new), and the numbering of the messages so far."""
    moved_from: str | None = None
    """The build a run asked to move off (``config.upgrade_on_continue``): the next run starts
    on the deployment's current build; one that finds itself on this build again was kept
    there (a pinned versioning override) and does not ask again."""
