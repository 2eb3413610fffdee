"""The answer branch of the cycle: a final answer checked, gated and reviewed.

Workflow code. A typed loop's answer is checked against its ``output_schema`` first (patch
``gate-typed-answer``: the gate then judges the value; before it, after the gate), a miss goes
back to the model with why (``misses`` count them, each turn anew); the final-answer gate
allows or denies (a denial is feedback); a message a person sent meanwhile — before the gate
decided, or while the critic reviewed the answer — sends the model round again; an allowed
answer joins the conversation, marks its turn for forks, and — where the loop has a critic —
is reviewed (the review is the loop's spend).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable

from temporalio import workflow

from orga.contracts.config import LoopConfig
from orga.contracts.errors import BudgetExceeded
from orga.contracts.policy import PolicyResult
from orga.core.phases import Answered, AnswerPolicyCheck, Observing
from orga.workflows.reasoning.durable_conversation import Conversation
from orga.workflows.reasoning.finish import Finished, review_answer, typed_answer
from orga.workflows.reasoning.loop_budgets import LoopBudgets
from orga.workflows.reasoning.loop_parts import LoopParts
from orga.workflows.reasoning.steering import Steering
from orga.workflows.shared.patches import GATE_TYPED_ANSWER, READ_AFTER_REVIEW

__all__ = ["FinalAnswers"]


class FinalAnswers:
    """One loop's final answers."""

    def __init__(
        self,
        config: LoopConfig,
        conversation: Conversation,
        steering: Steering,
        budgets: LoopBudgets,
        *,
        gate: Callable[[AnswerPolicyCheck], Awaitable[PolicyResult]],
        mark: Callable[[], None],
        task: Callable[[], str],
    ) -> None:
        self._config = config
        self._conversation = conversation
        self._steering = steering
        self._budgets = budgets
        self._gate = gate
        self._mark = mark
        """Note that this turn ended with an answer (for a fork after it)."""
        self._task = task
        """What the loop was asked (its critic reviews the answer against it)."""
        self.misses = 0
        """Answers of a typed loop that did not match its ``output_schema``, this turn."""

    async def judge(self, routed: AnswerPolicyCheck, parts: LoopParts) -> Finished | Observing:
        """Gate an answer (a typed one checked against its schema first): one that passes
        ends the cycle, once its critic accepts it; a denied one, a miss, a rejection or a
        message a person sent meanwhile goes back to the model."""
        config, evidence = self._config, parts.evidence
        value = None
        typed_first = config.output_schema is not None and workflow.patched(GATE_TYPED_ANSWER)
        if typed_first:  # a typed answer, or a miss; the gate then judges the value
            value, missed = await typed_answer(config, routed, self.misses)
            if missed is not None:
                self.misses += 1
                return missed
            routed.answer = json.dumps(value, sort_keys=True, ensure_ascii=False)
        outcome = routed.gate(await self._gate(routed))
        if isinstance(outcome, Answered) and self._steering.waiting:
            return Observing(outcome.iteration, [outcome.message])  # a person spoke: go on
        if isinstance(outcome, Answered):
            if config.output_schema is not None and not typed_first:  # before the patch
                value, missed = await typed_answer(config, outcome, self.misses)
                if missed is not None:
                    self.misses += 1
                    return missed
            self._conversation.append([outcome.message])
            self._mark()
            if evidence is not None and evidence.saturated:
                snapshot = evidence.tracker.snapshot()
                return Finished(outcome.output, "saturated", snapshot, value=value)
            if parts.critic is None:
                return Finished(outcome.output, "end_turn", value=value)
            try:
                reviewed = await review_answer(
                    parts.critic, self._task(), outcome.output, outcome.iteration, value
                )
            except BudgetExceeded as exceeded:  # the critic's review is the loop's spend
                raise self._budgets.over(exceeded) from None
            if (
                isinstance(reviewed, Finished)
                and self._steering.waiting
                and workflow.patched(READ_AFTER_REVIEW)
            ):
                # A person spoke while the answer was reviewed: the model reads it (the answer
                # is in the conversation already) and answers again.
                return Observing(outcome.iteration, [])
            if isinstance(reviewed, Finished):
                return dataclasses.replace(reviewed, value=value)
            outcome = reviewed
        return outcome
