"""Where a loop's budgets end it: the ``BudgetExceeded`` it raises, and what a thread's turn does
when its own budget runs out.

Workflow code. Every budget failure names its budget and limit and carries the loop's state;
in a thread it says that the turn's budgets count from where the turn began. After each model
call the loop checks what it spent (``check_spent``): an answer cut at the tokens left, tokens
over ``max_total_tokens``, cost over ``max_cost`` (each turn's in a thread) and the thread's own
``max_cost``; a price it cannot know ends a loop with ``max_cost``, never counts as free. A
thread's turn over one of its own budgets ends unanswered and the thread waits on; the thread's
own budgets end it (``turn_over``, patch ``turn-budget-ends-turn``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from temporalio import workflow

from orga.contracts.config import Limits, LoopConfig
from orga.contracts.conversation import Message
from orga.contracts.errors import BudgetExceeded
from orga.contracts.inference import InferenceResponse
from orga.contracts.state import LoopState
from orga.workflows.reasoning.durable_conversation import Conversation
from orga.workflows.reasoning.finish import Finished
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.thread import Thread
from orga.workflows.shared.patches import TURN_BUDGET_ENDS_TURN

__all__ = ["LoopBudgets", "of_which"]


def of_which(others: int) -> str:
    """How many of a loop's model calls its critic, children and summaries made, if any."""
    return (
        f"({others} of them by its critic and delegated children or its context summaries) "
        if others
        else ""
    )


def _named(exceeded: BudgetExceeded) -> str:
    """The budget ``exceeded`` names (a part of the loop that does not name one: tokens)."""
    details: object = exceeded.details[0] if exceeded.details else None
    named = cast(dict[str, object], details).get("budget") if isinstance(details, dict) else None
    return str(named or "max_total_tokens")


class LoopBudgets:
    """One loop's budget failures."""

    def __init__(
        self,
        books: LoopBooks,
        limits: Callable[[], Limits],
        thread: Thread | None,
        state: Callable[[], LoopState],
    ) -> None:
        self._books = books
        self._limits = limits
        """The budgets that apply now (a thread's shifted to the running turn)."""
        self._thread = thread
        self._state = state

    def exceeded(self, budget: str, limit: float, message: str) -> BudgetExceeded:
        """The failure of ``budget`` at ``limit``: ``message``, the turn's note, the state."""
        message += self.note()
        return BudgetExceeded(message, {"budget": budget, "limit": limit, "state": self._state()})

    def note(self) -> str:
        """In a thread, where its turn's budgets count from."""
        return self._thread.describe() if self._thread is not None else ""

    def timed_out(self) -> BudgetExceeded:
        limit = self._limits().timeout.total_seconds()
        return BudgetExceeded(
            f"the loop ran out of time: timeout is {limit:g} s (config.timeout), reached at "
            f"iteration {self._books.iteration}{self.note()}",
            {"budget": "timeout", "limit": limit, "state": self._state()},
        )

    def over(self, exceeded: BudgetExceeded) -> BudgetExceeded:
        """``exceeded`` (raised by a part of the loop) with the limit and the loop's state."""
        budget = _named(exceeded)
        limits = self._limits()
        limit = limits.max_iterations if budget == "max_iterations" else limits.max_total_tokens
        return self.exceeded(budget, limit, exceeded.message)

    def check_spent(self, response: InferenceResponse, config: LoopConfig) -> None:
        """End the loop if the model call ``response`` took it past a budget."""
        books, limit = self._books, self._limits().max_total_tokens
        if response.budget_capped and response.stop_reason == "max_tokens":
            raise self.exceeded(
                "max_total_tokens",
                limit,
                f"the model's answer at iteration {books.iteration} was cut at the tokens left "
                f"of max_total_tokens={limit} ({books.usage.total_tokens} used)",
            )
        if books.usage.total_tokens > limit:
            raise self.exceeded(
                "max_total_tokens",
                limit,
                f"the loop used {books.usage.total_tokens} tokens, over max_total_tokens="
                f"{limit}, at iteration {books.iteration}",
            )
        if config.max_cost is not None:
            self._keep_max_cost(config.max_cost, response)
        thread = self._thread
        if thread is not None and thread.config.max_cost is not None:
            self._keep_max_cost(thread.config.max_cost, response, whole_thread=True)

    def _keep_max_cost(
        self, max_cost: float, response: InferenceResponse, *, whole_thread: bool = False
    ) -> None:
        """End the loop once what its calls cost passes ``max_cost`` (USD), or once a call's
        price is unknown: it cannot be kept then. In a thread, the config's ``max_cost`` is
        each turn's; ``whole_thread``: the thread's own (``ThreadConfig.max_cost``)."""
        usage, iteration = self._books.usage, self._books.iteration
        if self._thread is not None and not whole_thread:  # a thread's budgets are each turn's
            usage = usage.since(self._thread.spent_before)
        budget = "thread.max_cost" if whole_thread else "max_cost"
        if usage.unpriced_calls:
            raise self.exceeded(
                budget,
                max_cost,
                f"{budget}={max_cost:g} USD cannot be kept: the price of "
                + (
                    f"model {response.model!r}"
                    if response.usage.unpriced_calls
                    else "a model its critic, summaries or children called"
                )
                + " is unknown to the worker's price table (give it in "
                f"ORGA_MODEL_PRICES); {usage.cost_usd:.6f} USD counted so far, at iteration "
                f"{iteration}",
            )
        if usage.cost_usd > max_cost:
            spent = "the thread" if whole_thread else "the loop"
            raise self.exceeded(
                budget,
                max_cost,
                f"{spent} cost {usage.cost_usd:.6f} USD, over {budget}={max_cost:g} USD, at "
                f"iteration {iteration}",
            )

    def turn_over(
        self, exceeded: BudgetExceeded, turn: Limits, conversation: Conversation
    ) -> Finished:
        """A thread's turn ran out of a budget: of its own (``turn``: the per-turn budgets),
        it ends unanswered (the model is told at its next turn) and the thread waits on; of
        the thread's, it ends the thread.

        Raises:
            BudgetExceeded: ``exceeded``, when it is the thread's budget (or before the patch).
        """
        thread = self._thread
        assert thread is not None
        if thread.binds(_named(exceeded), turn) or not workflow.patched(TURN_BUDGET_ENDS_TURN):
            raise exceeded
        conversation.append(
            [
                Message(
                    role="user",
                    content=f"[orga] Your last turn ended unanswered: {exceeded.message}",
                )
            ]
        )
        details: object = exceeded.details[0] if exceeded.details else None
        principal = isinstance(details, dict) and "principal" in details
        return Finished(
            "", "budget_exceeded", unanswered=exceeded.message, spend_limit=bool(principal)
        )
