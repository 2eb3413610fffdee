"""The loop as a reader of its stream sees it (``ProgressItem.view``).

Workflow code: what the books and the thread say at the moment of a step — status (an answered
thread already waits for its next message), phase, turn, tokens and cost, what is left of the
budgets (a turn's money budget counting from where the turn began), what waits for people, and
whom the loop runs for.
"""

from __future__ import annotations

from orga.contracts.progress import ProgressView, WaitingCall
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.thread import Thread

__all__ = ["loop_view"]


def loop_view(books: LoopBooks, thread: Thread | None, max_cost: float | None) -> ProgressView:
    """``books`` and ``thread`` now, as ``ProgressView`` (``max_cost``: the loop's)."""
    limits, usage = books.limits, books.usage
    spent = usage.cost_usd
    if thread is not None:  # a turn's money budget counts from where it began
        spent -= thread.spent_before.cost_usd
    status = books.status
    if status == "running" and thread is not None and thread.between_turns:
        status = "awaiting_message"  # answered: the wait for the next message begins now
    return ProgressView(
        status=status,
        phase=books.phase,
        turn=books.turn,
        iteration=books.iteration,
        total_tokens=usage.total_tokens,
        cost_usd=usage.cost_usd or None,
        tokens_left=max(0, limits.max_total_tokens - usage.total_tokens),
        model_calls_left=max(0, limits.max_iterations - books.model_calls),
        usd_left=None if max_cost is None else round(max(0.0, max_cost - spent), 6),
        pending_approvals=[
            WaitingCall(
                call_id=p.call_id,
                tool=p.tool,
                arguments=p.arguments,
                reason=p.reason,
                judge=p.judge,
            )
            for p in books.desk.approvals.values()
            # A call the loop's judge is still weighing waits for no person yet (an AG-UI
            # client is interrupted once the judge left it to one, with what it said).
            if p.judge is not None or books.desk.judge is None
        ],
        principal=books.principal.describe() if books.principal is not None else None,
    )
