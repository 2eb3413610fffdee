"""How a loop's cycle ends: ``Finished``, the critic's say on an answer, and the loop's result.

Workflow code. The cycle ends normally with an answer that passed the gate (``end_turn``),
with evidence that stopped telling the model anything new (``saturated``), or with an answer
the critic did not accept (``critic_rejected``); a critic that wants a revision sends the loop
round again instead (``review_answer``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from temporalio import workflow

from orga.contracts.answers import CHECK_ANSWER, AnswerCheck, CheckedAnswer
from orga.contracts.config import LoopConfig
from orga.contracts.conversation import Message
from orga.contracts.errors import OutputInvalid
from orga.contracts.evidence import ProgressSnapshot
from orga.contracts.state import LoopResult
from orga.contracts.vocabulary import ProviderName
from orga.core.phases import Answered, AnswerPolicyCheck, Observing
from orga.core.text import cut
from orga.core.typed_answers import schema_text
from orga.workflows.reasoning.critic import Critic
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.shared.options import SETUP_TIMEOUT, SHORT_RETRY
from orga.workflows.shared.patches import SCHEMA_IN_RETRY

__all__ = ["Finished", "ThreadEnding", "review_answer", "typed_answer"]


ThreadEnding = Literal["thread_closed", "thread_idle", "thread_max_turns"]
"""How a thread ends (``config.thread``): closed, idle past its timeout, or out of turns."""


@dataclass(frozen=True)
class Finished:
    """How the cycle ended, when it ended normally."""

    output: str
    reason: Literal["end_turn", "saturated", "critic_rejected", "budget_exceeded"] | ThreadEnding
    snapshot: ProgressSnapshot | None = None
    critique: str | None = None
    value: Any = None
    """A typed loop's answer, parsed and validated (``config.output_schema``)."""
    unanswered: str | None = None
    """A thread's turn that ended without an answer (``budget_exceeded``): why."""
    spend_limit: bool = False
    """It was its principal's spend limit (the next turn does not start it afresh)."""

    @property
    def message(self) -> str:
        """Why the loop ended, as its journal and state say it."""
        return {
            "end_turn": "the model answered",
            "saturated": "evidence stopped telling the model anything new",
            "critic_rejected": f"the critic did not accept the answer: {self.critique}",
            "budget_exceeded": f"the turn ended unanswered: {self.unanswered}",
            "thread_closed": "the thread was closed",
            "thread_idle": "the thread waited for a message past its idle_timeout",
            "thread_max_turns": "the thread answered its max_turns turns",
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
            value=self.value,
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


async def typed_answer(
    config: LoopConfig, outcome: Answered | AnswerPolicyCheck, misses: int
) -> tuple[Any, Observing | None]:
    """A typed loop's answer checked against ``config.output_schema``: its value, or the
    turn that shows the model why it does not match (a miss). Checked before the gate (an
    ``AnswerPolicyCheck``, so the gate judges the value), or, in a loop that began before
    that, after it (``Answered``).

    Raises:
        OutputInvalid: it does not match, and ``config.output_retries`` misses were shown.
    """
    assert config.output_schema is not None
    if isinstance(outcome, AnswerPolicyCheck):
        output, message = outcome.response.text, outcome.response.as_message()
    else:
        output, message = outcome.output, outcome.message
    checked = await workflow.execute_local_activity(
        CHECK_ANSWER,
        AnswerCheck(answer=output, output_schema=config.output_schema),
        result_type=CheckedAnswer,
        start_to_close_timeout=SETUP_TIMEOUT,
        retry_policy=SHORT_RETRY,
        summary="check the answer against output_schema",
    )
    if checked.valid:
        return checked.value, None
    if misses >= config.output_retries:
        raise OutputInvalid(
            f"the answer did not match output_schema after {misses + 1} answer(s) "
            f"(output_retries={config.output_retries}): {checked.problem}",
            {"problem": checked.problem, "answer": cut(output, 2_000)},
        )
    content = (
        "[orga] Your final answer must be JSON matching the output schema, and it does not: "
        f"{checked.problem}. Answer again with the JSON only."
    )
    if workflow.patched(SCHEMA_IN_RETRY):
        content += f" The schema: {schema_text(config.output_schema)}"
    feedback = Message(role="user", content=content)
    return None, Observing(outcome.iteration, [message, feedback])


async def review_answer(
    critic: Critic, task: str, output: str, iteration: int, value: Any = None
) -> Finished | Observing:
    """The critic's review of an answer: accepted, rejected for good, or feedback that sends
    the loop round again. A typed loop's critic reviews the answer's ``value`` (as JSON)."""
    shown = output if value is None else json.dumps(value, indent=2, ensure_ascii=False)
    record = await critic.review(task, shown)
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
