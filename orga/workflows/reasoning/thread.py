"""A thread's turns: where each began, its budgets, its answer, and the wait for the next one.

Workflow code, for loops with ``config.thread``. The loop runs a turn as it runs a loop (its
cycle, under the turn's timeout); ``Thread`` keeps what a conversation adds:

    turn 1 ── answered ──▶ wait for a message (idle_timeout; the working clock stops) ──┐
       ▲                         │ closed / idle / max_turns ─▶ the loop ends with the  │
       │                         ▼                              last answer as result   │
       └──────────────── turn n+1 begins: its budgets count from here ◀── a message ───┘

Each turn's budgets are the config's (``max_iterations``, ``max_total_tokens``, ``timeout``),
counted from what the thread had spent when it began, and never past the thread's own
(``ThreadConfig``): the loop's limits are shifted to "spent so far + the turn's", so every
check the loop already makes (model calls, tokens, its critic's and children's shares) bounds
the turn. A turn whose own budget runs out ends unanswered (``TurnResult.unanswered`` says
why) and the thread waits for the next message, which gets a turn's budgets of its own; only
the thread's budgets end the thread (``binds``). Answers stay readable by the ``turn`` update;
a thread that continues as new carries its turns (``ThreadCarry``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from orga.contracts.config import Limits
from orga.contracts.inference import Usage
from orga.contracts.journal import TurnAnswered
from orga.contracts.threads import (
    THREAD_MOVED,
    CloseThread,
    ThreadCarry,
    ThreadClosed,
    ThreadConfig,
    ThreadEnd,
    ThreadState,
    TurnResult,
    TurnWait,
)
from orga.core.text import cut
from orga.workflows.reasoning.finish import Finished, ThreadEnding
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.steering import Steering

__all__ = ["Thread"]

_KEPT_TURNS = 20
"""Answered turns whose results stay readable (the newest)."""
_JOURNALED = 2_000
"""Characters of an answer its ``TurnAnswered`` entry keeps."""


class Thread:
    """One loop's conversation: its turns and the wait between them."""

    def __init__(self, config: ThreadConfig, books: LoopBooks, steering: Steering) -> None:
        self.config = config
        self._books = books
        self._steering = steering
        self.turn = 1
        """The turn being worked on, or the last one answered while the thread waits."""
        self.between_turns = False
        self.idle_since: datetime | None = None
        self.turns: list[TurnResult] = []
        self.answered = 0
        self.closing: CloseThread | None = None
        """A ``close`` that arrived: the thread ends at its next wait (now, if it waits)."""
        self.ended: ThreadEnd | None = None
        self.moving = False
        """The run moves to its next (continue-as-new): waiting ``turn`` updates let go."""
        self._base_iteration = 0
        self._base_calls = 0
        self._base_usage = Usage()
        self._base_working = 0.0
        steering.turn = books.turn = 1

    def wait_for_first(self) -> None:
        """The thread was started without a message: it waits for its first."""
        self.turn = self._books.turn = 0
        self.between_turns = True
        self.idle_since = workflow.now()
        self._steering.turn = 1

    # ---- a turn ------------------------------------------------------------------------------

    def begin(self) -> None:
        """A turn begins (the first, or one a message started): its budgets count from here."""
        books = self._books
        if self.between_turns:
            self.turn += 1
        self.between_turns = False
        self.idle_since = None
        self._steering.turn = books.turn = self.turn
        self._base_iteration = books.iteration
        self._base_calls = books.model_calls
        self._base_usage = books.usage
        self._base_working = books.working_seconds()
        if books.progress is not None:
            books.progress.turn(self.turn)

    @property
    def spent_before(self) -> Usage:
        """What the thread had spent when this turn began (a turn's budgets count from it)."""
        return self._base_usage

    def limits(self, turn: Limits) -> Limits:
        """The loop's limits while this turn runs: what was spent before it plus the turn's
        budgets (``turn``), within the thread's."""
        calls = self._base_calls + turn.max_iterations
        tokens = self._base_usage.total_tokens + turn.max_total_tokens
        if self.config.max_iterations is not None:
            calls = min(calls, self.config.max_iterations)
        if self.config.max_total_tokens is not None:
            tokens = min(tokens, self.config.max_total_tokens)
        return turn.model_copy(update={"max_iterations": calls, "max_total_tokens": tokens})

    def deadline(self, turn: Limits) -> float:
        """The working seconds at which the turn runs out of time (``timeout`` per turn)."""
        return self._base_working + turn.timeout.total_seconds()

    def binds(self, budget: str, turn: Limits) -> bool:
        """Whether ``budget`` (as ``BudgetExceeded`` names it) ran out as the thread's own
        budget — which ends the thread — rather than the turn's (``turn``: the per-turn
        budgets), which ends only the turn."""
        config = self.config
        if budget == "max_iterations":
            return (
                config.max_iterations is not None
                and config.max_iterations <= self._base_calls + turn.max_iterations
            )
        if budget == "max_total_tokens":
            return (
                config.max_total_tokens is not None
                and config.max_total_tokens <= self._base_usage.total_tokens + turn.max_total_tokens
            )
        return budget.startswith("thread.")

    def describe(self) -> str:
        """A budget failure's note: the thread's budgets count from where the turn began."""
        if self.turn == 1:
            return ""
        return (
            f" (turn {self.turn} of a thread: its budgets count from the "
            f"{self._base_calls} model call(s) and {self._base_usage.total_tokens} tokens the "
            "thread had spent before it)"
        )

    def answer(self, finished: Finished) -> TurnResult:
        """The turn's answer passed the gate: keep it, journal it, and wait for the next."""
        books = self._books
        usage = books.usage.since(self._base_usage)
        result = TurnResult(
            turn=self.turn,
            output=finished.output,
            value=finished.value,
            reason=finished.reason,
            unanswered=finished.unanswered,
            spend_limit=finished.spend_limit,
            iterations=books.iteration - self._base_iteration,
            usage=usage,
            thread_usage=books.usage,
            ended_at=workflow.now(),
        )
        self.turns = [*self.turns, result][-_KEPT_TURNS:]
        self.answered += 1
        books.record(
            TurnAnswered(
                **books.stamp(),
                turn=self.turn,
                reason=finished.reason,
                output=cut(finished.unanswered or finished.output, _JOURNALED),
                iterations=result.iterations,
                tokens=usage.total_tokens,
            )
        )
        self.between_turns = True
        self.idle_since = workflow.now()
        self._steering.turn = self.turn + 1
        if books.progress is not None:
            books.progress.answered(result)
        return result

    async def next_message(self) -> bool:
        """Wait for the next message (True) or the thread's end (False: ``ended`` says why)."""
        if self.closing is not None:
            return self._end("closed")
        if self.answered >= self.config.max_turns:
            return self._end("max_turns")
        assert self.idle_since is not None
        left = self.config.idle_timeout - (workflow.now() - self.idle_since)
        books = self._books
        books.awaiting_message(True)
        try:
            await workflow.wait_condition(
                lambda: self._steering.waiting > 0 or self.closing is not None,
                timeout=max(left, timedelta(seconds=1)),
                timeout_summary=f"thread waits for message {self.turn + 1}",
            )
        except TimeoutError:
            books.awaiting_message(False)
            return self._end("idle")
        # Not in a `finally`: a worker that evicts the waiting workflow closes this coroutine
        # (GeneratorExit), and workflow code may not run then.
        books.awaiting_message(False)
        if self._steering.waiting:
            return True  # a message that came before a close is answered first
        return self._end("closed")

    def _end(self, why: ThreadEnd) -> bool:
        self.ended = why
        self._steering.closed = f"the thread has ended ({why})"
        return False

    # ---- the updates -------------------------------------------------------------------------

    def check_wait(self, wait: TurnWait) -> None:
        """Raise ``ValueError`` unless the ``turn`` update can wait for ``wait.turn`` (and
        for the turn that reads ``wait.message``)."""
        if wait.message is not None:
            self._check_message(wait.message)
        newest = self.turn + 1 if self.between_turns else self.turn
        if wait.turn > newest:
            raise ValueError(
                f"turn {wait.turn} has not begun: the thread is at turn {self.turn} "
                "(send a message first)"
            )
        if wait.turn <= self.answered and self._kept(wait.turn) is None:
            raise ValueError(
                f"turn {wait.turn}'s answer is no longer kept (the newest {_KEPT_TURNS} are): "
                "`orga journal` has it"
            )
        if self.ended is not None and wait.turn > self.answered:
            raise ValueError(f"the thread has ended ({self.ended}): turn {wait.turn} never will")

    def _check_message(self, seq: int) -> None:
        steering = self._steering
        if seq > steering.received:
            raise ValueError(f"message {seq} was not sent: {steering.received} were")
        read = steering.read_in
        forgotten = bool(read) and seq < min(read)  # read before the newest kept
        if forgotten and steering.read_by(seq) is None and not steering.is_waiting(seq):
            raise ValueError(
                f"message {seq} was read long ago (the newest {len(read)} messages' turns "
                "are kept): `orga journal` has its turn"
            )

    def _turn_of(self, wait: TurnWait) -> int | None:
        """The turn whose answer ``wait`` asks for (None: its message is not read yet)."""
        if wait.message is None:
            return wait.turn
        return self._steering.read_by(wait.message)

    async def result_of(self, wait: TurnWait, ended: Callable[[], bool]) -> TurnResult:
        """Turn ``wait.turn``'s answer — or the answer of the turn that read ``wait.message``
        — once there (``ended()`` true: the loop ended first).

        Raises:
            ApplicationError: the loop ended, or moves to its next run (``THREAD_MOVED``: ask
                the next run again), before the turn was answered.
        """

        def answered() -> TurnResult | None:
            turn = self._turn_of(wait)
            return self._kept(turn) if turn is not None else None

        await workflow.wait_condition(lambda: answered() is not None or ended() or self.moving)
        found = answered()
        if found is not None:
            return found
        if self.moving:
            raise ApplicationError(
                "the thread moved to its next run: ask it again", type=THREAD_MOVED
            )
        what = f"message {wait.message}" if wait.message is not None else f"turn {wait.turn}"
        raise ApplicationError(
            f"the thread ended before {what} was answered", type="TurnNotAnswered"
        )

    def check_close(self, close: CloseThread) -> None:
        if self.ended is not None or self.closing is not None:
            raise ValueError(f"the thread is already {'closing' if self.closing else 'ended'}")

    def close(self, close: CloseThread) -> ThreadClosed:
        """Close the thread (the validator checked it may be): it takes no more messages."""
        self.closing = close
        self._steering.closed = "the thread is closed"
        return ThreadClosed(turns=self.answered, after_turn=not self.between_turns)

    # ---- state and carry ---------------------------------------------------------------------

    def state(self) -> ThreadState:
        idle_until = (
            self.idle_since + self.config.idle_timeout
            if self.idle_since is not None and self.ended is None
            else None
        )
        return ThreadState(
            turn=self.turn,
            waiting_for_message=self.between_turns and self.ended is None,
            idle_until=idle_until,
            max_turns=self.config.max_turns,
            ended=self.ended,
            end_reason=self.closing.reason if self.closing is not None else None,
            last_turn=self.turns[-1] if self.turns else None,
        )

    def carry(self) -> ThreadCarry:
        return ThreadCarry(
            turn=self.turn,
            between_turns=self.between_turns,
            idle_since=self.idle_since,
            turns=list(self.turns),
            answered=self.answered,
            base_iteration=self._base_iteration,
            base_calls=self._base_calls,
            base_usage=self._base_usage,
            base_working=self._base_working,
            closing=self.closing,
        )

    def restore(self, carry: ThreadCarry) -> None:
        self.turn = carry.turn
        self.between_turns = carry.between_turns
        self.idle_since = carry.idle_since
        self.turns = list(carry.turns)
        self.answered = carry.answered
        self._base_iteration = carry.base_iteration
        self._base_calls = carry.base_calls
        self._base_usage = carry.base_usage
        self._base_working = carry.base_working
        self.closing = carry.closing
        self._books.turn = self.turn
        self._steering.turn = self.turn + 1 if self.between_turns else self.turn

    def last_finished(self) -> Finished:
        """The loop's ending when the thread ends: its last answer ("" before any)."""
        last = self.turns[-1] if self.turns else None
        endings: dict[ThreadEnd, ThreadEnding] = {
            "closed": "thread_closed",
            "idle": "thread_idle",
            "max_turns": "thread_max_turns",
        }
        ending = endings[self.ended or "closed"]
        if last is None:
            return Finished("", ending)
        return Finished(last.output, ending, value=last.value)

    def _kept(self, turn: int) -> TurnResult | None:
        return next((t for t in self.turns if t.turn == turn), None)
