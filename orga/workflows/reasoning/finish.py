"""How a loop's cycle ends: ``Finished``, the critic's say on an answer, and the loop's result.

Workflow code. The cycle ends normally with an answer that passed the gate (``end_turn``),
with evidence that stopped telling the model anything new (``saturated``), or with an answer
the critic did not accept (``critic_rejected``); a critic that wants a revision sends the loop
round again instead (``review_answer``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orga.contracts.conversation import Message
from orga.contracts.evidence import ProgressSnapshot
from orga.contracts.state import LoopResult
from orga.contracts.vocabulary import ProviderName
from orga.core.phases import Observing
from orga.workflows.reasoning.critic import Critic
from orga.workflows.reasoning.loop_books import LoopBooks

__all__ = ["Finished", "review_answer"]


@dataclass(frozen=True)
class Finished:
    """How the cycle ended, when it ended normally."""

    output: str
    reason: Literal["end_turn", "saturated", "critic_rejected"]
    snapshot: ProgressSnapshot | None = None
    critique: str | None = None

    @property
    def message(self) -> str:
        """Why the loop ended, as its journal and state say it."""
        return {
            "end_turn": "the model answered",
            "saturated": "evidence stopped telling the model anything new",
            "critic_rejected": f"the critic did not accept the answer: {self.critique}",
        }[self.reason]

    def result(
        self,
        books: LoopBooks,
        *,
        workflow_id: str,
        messages: int,
        provider: ProviderName | None,
        model: str | None,
    ) -> LoopResult:
        """The loop's result: this ending, with what its books counted."""
        return LoopResult(
            output=self.output,
            iterations=books.iteration,
            model_calls=books.model_calls,
            usage=books.usage,
            termination_reason=self.reason,
            tool_call_count=books.tool_call_count,
            workflow_id=workflow_id,
            messages=messages,
            snapshot=self.snapshot,
            critique=self.critique,
            provider=provider,
            model=model,
        )


async def review_answer(
    critic: Critic, task: str, output: str, iteration: int
) -> Finished | Observing:
    """The critic's review of an answer: accepted, rejected for good, or feedback that sends
    the loop round again."""
    record = await critic.review(task, output)
    if record.verdict == "approve":
        return Finished(output, "end_turn")
    if record.verdict == "reject" or critic.rounds_left <= 0:
        return Finished(output, "critic_rejected", critique=record.feedback)
    feedback = Message(
        role="user",
        content=(
            f"[orga critic] Your answer was not accepted yet (review {record.round} of at "
            f"most {critic.config.max_rounds}). Revise it: {record.feedback}"
        ),
    )
    return Observing(iteration, [feedback])
