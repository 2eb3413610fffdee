"""Threads: a loop that, after each answer, waits for the next message (``LoopConfig.thread``).

A thread is one ``ReasoningLoop`` workflow that holds a conversation: each user message starts
a turn (Observe → Reason → Gate → Act until an answer passes the gate), and after the answer
the loop waits durably — no process held — for the next message, until it is closed
(``close`` update), idle for ``idle_timeout``, or ``max_turns`` turns have been answered. A
message arrives by the ``message`` update (``MessageAccepted.turn`` names the turn it joins);
the ``turn`` update waits for that turn's ``TurnResult``.

Budgets: in a thread the config's ``max_iterations``, ``max_total_tokens`` and ``timeout`` are
each turn's; ``ThreadConfig`` bounds the whole thread.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final, Literal

from pydantic import ConfigDict, Field, NonNegativeFloat, NonNegativeInt

from orga.contracts.inference import Usage
from orga.contracts.wire import Contract

__all__ = [
    "THREAD_MEMO",
    "THREAD_MOVED",
    "CloseThread",
    "ThreadCarry",
    "ThreadClosed",
    "ThreadConfig",
    "ThreadEnd",
    "ThreadState",
    "TurnResult",
    "TurnWait",
]

THREAD_MEMO: Final = "orga_thread"
"""The memo key a thread sets on its workflow (``true``): listings tell threads from loops."""
THREAD_MOVED: Final = "ThreadMoved"
"""The ``turn`` update's failure type when the thread continued as new while it waited: ask
the workflow's current run again."""

ThreadEnd = Literal["closed", "idle", "max_turns"]
"""Why a thread ended: someone closed it, nobody wrote for ``idle_timeout``, or it answered
``max_turns`` turns."""


class ThreadConfig(Contract):
    """A loop that is a conversation, and the budgets of the whole thread."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    idle_timeout: timedelta = Field(default=timedelta(days=7), gt=timedelta(0))
    """How long the thread waits for the next message after an answer; then it ends (``idle``)
    with its last answer as the loop's result. JSON: seconds or an ISO 8601 duration."""
    max_turns: int = Field(default=100, ge=1, le=10_000)
    """Turns (answered messages) the thread may take; it ends after the last (``max_turns``)."""
    max_total_tokens: int | None = Field(default=None, ge=1)
    """Tokens over the whole thread (each turn also has the config's ``max_total_tokens``).
    Default: no bound beyond ``max_turns`` turns of the turn budget."""
    max_iterations: int | None = Field(default=None, ge=1)
    """Model calls over the whole thread (each turn also has the config's
    ``max_iterations``). Default: no bound beyond ``max_turns`` turns of the turn budget."""
    max_cost: float | None = Field(default=None, gt=0)
    """USD over the whole thread (each turn also has the config's ``max_cost``), priced as
    ``LoopConfig.max_cost`` is. Default: no bound beyond ``max_turns`` turns of the turn's."""


class TurnWait(Contract):
    """The ``turn`` update's argument: which turn's answer to wait for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    turn: int = Field(ge=1)
    message: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)
    """A message's number (``MessageAccepted.seq``): the answer of the turn that read it —
    ``turn``, the turn it was accepted for, or a later one (a message that came as a turn
    ran out of budget is read by the next)."""


class TurnResult(Contract):
    """One answered turn of a thread (the ``turn`` update's answer)."""

    model_config = ConfigDict(frozen=True)

    turn: NonNegativeInt
    output: str
    """The answer that passed the gate."""
    value: Any = None
    """A typed loop's answer, parsed (``config.output_schema``)."""
    reason: str
    """How the turn ended: ``end_turn``, ``saturated``, ``critic_rejected``, or
    ``budget_exceeded`` (one of the turn's own budgets ran out: no answer, ``unanswered`` says
    why, and the thread waits for the next message)."""
    unanswered: str | None = None
    """Why the turn ended without an answer (``reason`` ``budget_exceeded``): the budget that
    ran out, as ``BudgetExceeded`` says it. Write again to go on: the next turn has its own."""
    spend_limit: bool = False
    """The budget was the principal's spend limit, which the next turn shares (``orga spend``
    says what is left), not one of the turn's own."""
    iterations: NonNegativeInt
    """Model calls the turn made (its own Reason steps)."""
    usage: Usage
    """Tokens the turn spent (its critic's and children's included)."""
    thread_usage: Usage
    """Tokens the thread has spent so far, this turn included."""
    ended_at: datetime

    @property
    def said(self) -> str:
        """What a person reads of the turn: its answer, or why it has none and what to do."""
        if self.unanswered is None:
            return self.output
        if self.spend_limit:
            return (
                f"turn {self.turn} ended unanswered: {self.unanswered}. The next turn counts "
                "against the same limit (orga spend shows what is left)."
            )
        return (
            f"turn {self.turn} ended unanswered: {self.unanswered}. Write again to go on: the "
            "next turn has budgets of its own."
        )


class ThreadState(Contract):
    """A thread's part of the ``state`` query."""

    model_config = ConfigDict(frozen=True)

    turn: int
    """The turn being worked on, or the last one answered while the thread waits."""
    waiting_for_message: bool
    """True between turns: the thread waits for the next message (``idle_until``)."""
    idle_until: datetime | None = None
    """When a waiting thread ends if nobody writes."""
    max_turns: int
    ended: ThreadEnd | None = None
    end_reason: str | None = None
    """Why it was closed, in the closer's words."""
    last_turn: TurnResult | None = None


class CloseThread(Contract):
    """The ``close`` update's argument."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str = Field(default="closed", max_length=2_000)
    sender: str | None = Field(default=None, max_length=200)


class ThreadClosed(Contract):
    """The ``close`` update's answer: the thread ends now, or after the turn it works on."""

    model_config = ConfigDict(frozen=True)

    turns: int
    """Turns answered so far."""
    after_turn: bool
    """True when a turn was running: the thread ends once it is answered."""


class ThreadCarry(Contract):
    """A thread's state carried into the loop's next run (continue-as-new)."""

    model_config = ConfigDict(frozen=True)

    turn: NonNegativeInt
    between_turns: bool
    """The run ended while the thread waited for a message: the next run waits on."""
    idle_since: datetime | None = None
    turns: list[TurnResult] = Field(default_factory=list[TurnResult])
    """The newest answered turns (their answers stay readable by the ``turn`` update)."""
    answered: NonNegativeInt = 0
    base_iteration: NonNegativeInt = 0
    """The loop's iteration when the current turn began."""
    base_calls: NonNegativeInt = 0
    """Model calls the thread had paid for when the current turn began."""
    base_usage: Usage = Field(default_factory=Usage)
    base_working: NonNegativeFloat = 0.0
    """Working seconds of the loop when the current turn began."""
    closing: CloseThread | None = None
