"""What a streamed loop says on its Workflow Stream besides the model's text.

A loop with ``config.stream`` publishes its model's text on the ``text`` topic (``StreamedText``,
from the model call) and, on the ``progress`` topic, a ``ProgressItem`` from the workflow
itself at each step a reader shows: a thread's turn began, the model proposed tool calls, calls
wait for a person (or no longer do), calls ended, a turn was answered, the loop ended. Each
carries the ``ProgressView`` of the loop at that moment. Together the two topics are the
whole story of a turn, in order, at offsets that never change: the AG-UI endpoint
(``orga.web``) derives its events from them, so any endpoint can replay them from any offset.

A thread keeps its current and previous turns' items; older ones are dropped when a turn
begins (``StreamCarry`` carries what is kept across continue-as-new), so what the stream holds
does not grow with the thread.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import ConfigDict, Field
from temporalio.contrib.workflow_streams import WorkflowStreamState

from orga.contracts.approvals import JudgeOpinion
from orga.contracts.state import LoopStatus, Phase
from orga.contracts.threads import TurnResult
from orga.contracts.wire import Contract

__all__ = [
    "PROGRESS_TOPIC",
    "CallResult",
    "ProgressItem",
    "ProgressKind",
    "ProgressView",
    "ProposedCall",
    "StreamCarry",
    "WaitingCall",
]

PROGRESS_TOPIC: Final = "progress"
"""The Workflow Stream topic a streamed loop publishes its ``ProgressItem`` s on."""
RESULT_SHOWN: Final = 2_000
"""Characters of a tool's result a ``CallResult`` carries (the conversation holds it whole)."""

ProgressKind = Literal["turn", "calls", "waiting", "resumed", "results", "answered", "ended"]


class WaitingCall(Contract):
    """A tool call that waits for a person's approval."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    arguments: str
    """The call's arguments (JSON), as it would run."""
    reason: str
    """Why it needs a person (the rule that asked)."""
    judge: JudgeOpinion | None = Field(default=None, exclude_if=lambda v: v is None)
    """What the loop's judge said of it (a call with a judge waits for a person once the
    judge has left it to one)."""


class ProgressView(Contract):
    """The loop as a reader shows it, at the moment of an item."""

    model_config = ConfigDict(frozen=True)

    status: LoopStatus
    phase: Phase
    turn: int | None = None
    iteration: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    tokens_left: int = 0
    """Of the loop's ``max_total_tokens`` (a thread's: of this turn's)."""
    model_calls_left: int = 0
    """Of its ``max_iterations``."""
    usd_left: float | None = None
    """Of its ``max_cost`` (None: no money budget, or the price is unknown)."""
    pending_approvals: list[WaitingCall] = Field(default_factory=list[WaitingCall])
    principal: str | None = None
    """Who the loop runs for (``Principal.describe``: ``ann@acme``, ``(claimed)`` if so)."""


class ProposedCall(Contract):
    """A tool call the model asked for."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    arguments: str
    """As the model wrote them (JSON)."""


class CallResult(Contract):
    """How a tool call ended."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    status: str
    """``ok``, ``failed``, ``denied``, ``invalid_arguments``, ``unknown_tool``, ``skipped`` …"""
    is_error: bool
    content: str
    """What the model reads of it, cut to ``RESULT_SHOWN`` characters."""


class ProgressItem(Contract):
    """One step of a streamed loop (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    kind: ProgressKind
    """``turn``: a thread's turn began; ``calls``: the model asked for ``calls``; ``waiting``:
    calls wait for people (``view.pending_approvals``, all of them); ``resumed``: none waits any
    more, the loop goes on; ``results``: ``results`` came in; ``answered``: the turn's
    ``answer``; ``ended``: the loop ended (``status``, ``message``)."""
    view: ProgressView
    turn: int | None = None
    calls: list[ProposedCall] = Field(default_factory=list[ProposedCall])
    results: list[CallResult] = Field(default_factory=list[CallResult])
    answer: TurnResult | None = None
    message: str | None = None
    """With ``ended``: how the loop ended, in words."""


class StreamCarry(Contract):
    """A streamed loop's stream, carried into its next run (continue-as-new): the items it
    keeps, at the offsets they had, so readers go on where they were."""

    state: WorkflowStreamState
    turn_began_at: int | None = None
    """The offset of the current turn's ``turn`` item (a thread: what the next turn keeps)."""
