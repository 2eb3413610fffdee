"""The critic: a loop's final answer is reviewed before it is accepted.

Workflow code. A model critic is asked through the gate first (``Action::"review"`` on the
critic agent; a refusal fails the loop with ``CriticFailed``), then in the ``critique``
activity, whose structured verdict is the review. The review is a model call the loop's budget
pays for: it needs a model call and tokens left (else ``BudgetExceeded`` before it is asked),
it gets the tokens left as its budget (its answer capped to them), and what it spent is charged
to the loop, which ends ``BudgetExceeded`` if the review took it past ``max_total_tokens``. A human
critic waits on the desk for the ``review`` update (``OrgaStatus=awaiting_review``, listed by
``orga pending``; the loop's clock stops meanwhile); a review that times out counts as
``on_timeout``. Every review is journaled (``ReviewDecided``) and kept in the loop's state.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.exceptions import ActivityError

from orga.contracts.critic import (
    CRITIQUE,
    CriticConfig,
    CritiqueRequest,
    CritiqueVerdict,
    HumanCritic,
    PendingReview,
    ReviewRecord,
)
from orga.contracts.errors import BudgetExceeded, CriticFailed
from orga.contracts.journal import ReviewDecided
from orga.contracts.policy import PolicyAction
from orga.contracts.vocabulary import ProviderName
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.shared.failures import failure_of
from orga.workflows.shared.gate import Gate
from orga.workflows.shared.options import MODEL_HEARTBEAT_TIMEOUT, SIDE_MODEL_RETRY
from orga.workflows.shared.patches import CRITIC_ROUNDS_PER_TURN

__all__ = ["KEPT_REVIEWS", "Critic"]

KEPT_REVIEWS: Final = 20
"""Reviews a loop keeps (the newest; a turn has at most ``max_rounds`` ≤ 10): a thread's
reviews no longer grow its state, and what it carries, without bound."""


class Critic:
    """Reviews one loop's final answers."""

    def __init__(
        self,
        config: CriticConfig,
        books: LoopBooks,
        gate: Gate,
        *,
        provider: ProviderName | None,
        model: str | None,
        timeout: timedelta,
        task_queue: str | None = None,
    ) -> None:
        self.config = config
        self._task_queue = task_queue
        """Where the critic's model call runs (the worker's model task queue, if it has one)."""
        self._books = books
        self._gate = gate
        self._provider: ProviderName | None = provider
        self._model = model
        self._timeout = timeout

    @property
    def rounds_left(self) -> int:
        """Reviews left: of the loop's ``max_rounds`` — in a thread, of this turn's (patch
        ``critic-rounds-per-turn``: before it, every turn's reviews counted)."""
        books = self._books
        every = self.config.max_rounds - len(books.reviews)
        if books.turn is None or every > 0:  # a loop, or the rules agree
            return every
        this_turn = self.config.max_rounds - self._this_turn()
        if this_turn > 0 and workflow.patched(CRITIC_ROUNDS_PER_TURN):
            return this_turn
        return every

    def _this_turn(self) -> int:
        """Reviews of the current turn's answers (a loop: all of them)."""
        books = self._books
        if books.turn is None:
            return len(books.reviews)
        return sum(r.turn == books.turn for r in books.reviews)

    async def review(self, task: str, answer: str) -> ReviewRecord:
        """The next review of ``answer``.

        Raises:
            CriticFailed: a model critic could not give a verdict, or the gate refused it.
        """
        round_ = self._this_turn() + 1
        if isinstance(self.config, HumanCritic):
            record = await self._by_a_person(self.config, answer, round_)
        else:
            record = await self._by_a_model(task, answer, round_)
        books = self._books
        record = record.model_copy(update={"turn": books.turn})
        books.reviews = [*books.reviews, record][-KEPT_REVIEWS:]
        books.record(
            ReviewDecided(
                **books.stamp(),
                round=record.round,
                verdict=record.verdict,
                feedback=record.feedback,
                reviewer=record.reviewer,
                source=record.source,
            )
        )
        return record

    async def _by_a_person(self, config: HumanCritic, answer: str, round_: int) -> ReviewRecord:
        pending = PendingReview(round=round_, answer=answer, since=workflow.now())
        review, source = await self._books.desk.review(pending, config.timeout)
        if source == "timeout":
            verdict = "approve" if config.on_timeout == "approve" else "reject"
            return ReviewRecord(
                round=round_,
                verdict=verdict,
                feedback=f"no review within {config.timeout}: counted as {config.on_timeout}",
                source="timeout",
                at=workflow.now(),
            )
        return ReviewRecord(
            round=round_,
            verdict=review.verdict,
            feedback=review.feedback,
            reviewer=review.reviewer,
            source="update",
            at=workflow.now(),
        )

    async def _by_a_model(self, task: str, answer: str, round_: int) -> ReviewRecord:
        provider: ProviderName | None = self._provider
        model = self._model
        assert provider is not None and model is not None, "resolved with the loop's setup"
        assert self.config.kind == "model"
        critic = self.config.agent
        books, limits = self._books, self._books.limits
        left = limits.max_total_tokens - books.usage.total_tokens
        if left <= 0 or books.model_calls >= limits.max_iterations:
            budget = "max_total_tokens" if left <= 0 else "max_iterations"
            raise BudgetExceeded(
                f"critic {critic!r} cannot review answer {round_}: the loop has no "
                f"{'tokens' if left <= 0 else 'model call'} left ({books.usage.total_tokens} of "
                f"max_total_tokens={limits.max_total_tokens} tokens and {books.model_calls} of "
                f"max_iterations={limits.max_iterations} model calls used)",
                {"budget": budget},
            )
        action = PolicyAction.of_review(critic)
        [decision] = (await self._gate.decide([action], [])).decisions
        if not decision.permits:
            raise CriticFailed(
                f"the gate refused the review of the answer by critic {critic!r}: "
                f"{decision.reason or 'denied'}"
            )
        try:
            verdict = await workflow.execute_activity(
                CRITIQUE,
                CritiqueRequest(
                    critic=critic,
                    provider=provider,
                    model=model,
                    task=task,
                    answer=answer,
                    round=round_,
                    token_budget=left,
                    principal=self._books.principal,
                ),
                result_type=CritiqueVerdict,
                start_to_close_timeout=self._timeout,
                heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
                retry_policy=SIDE_MODEL_RETRY,  # CriticFailed is retried: a model may comply
                task_queue=self._task_queue,
                summary=f"critic {critic} · review {round_}",
                priority=self._books.priority,
            )
        except ActivityError as error:
            books.stopping.check()  # cut short by the loop's stop: no failure of the critic
            failure = failure_of(error)
            message = failure.message
            if failure.kind == BudgetExceeded.__name__:
                raise BudgetExceeded(
                    f"critic {critic!r} was not asked to review answer {round_}: {message}",
                    {"budget": "max_total_tokens"},
                ) from error
            raise CriticFailed(
                f"critic {critic!r} could not review answer {round_}: {message}"
            ) from error
        books.charge(verdict.usage, 1)
        if books.usage.total_tokens > limits.max_total_tokens:
            raise BudgetExceeded(
                f"critic {critic!r}'s review of answer {round_} took the loop to "
                f"{books.usage.total_tokens} tokens, over max_total_tokens="
                f"{limits.max_total_tokens}",
                {"budget": "max_total_tokens"},
            )
        return ReviewRecord(
            round=round_,
            verdict=verdict.verdict,
            feedback=verdict.feedback,
            reviewer=critic,
            source="model",
            at=workflow.now(),
        )
