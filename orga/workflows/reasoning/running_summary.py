"""An ``anchored_summary`` loop's running summary of the turns that left its context window.

Workflow code. Before each model call the loop works out, with the same pure plan the model
call's fitting uses (``orga.core.context.fold``: the conversation, the knowledge message it
will show and the token calibration are all in workflow state), whether turns must leave the
window. If they must, the ``summarise_context`` activity folds them into the summary so far —
only those not folded before — on the loop's provider and model. The call is the loop's spend:
it needs a model call left besides the one it prepares (else it is not made), gets the tokens
left as its budget, and what it spent is charged to the loop (``LoopBooks.charge``, one model
call). The summary and how many messages it covers (``through``) are workflow state, carried
across continue-as-new, and go with every model call, which shows the summary after the anchors
in place of those messages. A summary that cannot be made (no call left, a failed call, an
answer without text — charged like any other) is journaled with its error; the previous summary
stands and the model call shows a marker for the rest, as before summaries existed. The loop
then asks again only when turns past that fold must leave the window (``unsummarised_through``,
carried too): a summariser that keeps failing or answering nothing costs one call per fold,
not one per model call. Every fold asked for, made or not, is a ``ContextSummarised`` journal
entry.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from orga.contracts.conversation import Message
from orga.contracts.inference import (
    SUMMARISE_CONTEXT,
    ConversationSlice,
    SummaryRequest,
    SummaryResponse,
    Usage,
)
from orga.contracts.journal import ContextSummarised
from orga.contracts.vocabulary import ProviderName
from orga.core.context import Fold, fold, summary_tokens
from orga.core.text import estimate_tokens
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.shared.failures import failure_message
from orga.workflows.shared.options import MODEL_HEARTBEAT_TIMEOUT, SIDE_MODEL_RETRY
from orga.workflows.shared.patches import SUMMARY_AFTER_FAILURE

__all__ = ["RunningSummary"]


class RunningSummary:
    """What the loop's summary says and how many messages it covers."""

    def __init__(
        self,
        books: LoopBooks,
        text: str | None = None,
        through: int = 0,
        unsummarised_through: int = 0,
    ) -> None:
        self._books = books
        self.text = text
        """The summary of messages ``[0, through)`` (anchors aside), ``None`` before any."""
        self.through = through
        self.unsummarised_through = unsummarised_through
        """Where the last fold that was not made would have ended: past ``through``, the
        summariser is not asked again until turns past it must leave."""

    @property
    def marks(self) -> tuple[str | None, int, int]:
        """What a fork point and the next run carry of it: its text, the messages it covers,
        and where the last fold not made would have ended."""
        return (self.text, self.through, self.unsummarised_through)

    async def prepare(
        self,
        seen: list[Message],
        conversation: ConversationSlice,
        *,
        budget: int,
        calibration: float,
        provider: ProviderName | None,
        model: str | None,
        timeout: timedelta,
        task_queue: str | None,
        iteration: int,
    ) -> None:
        """Fold what must leave the window before the model call that sees ``seen`` (the
        conversation and its knowledge message) and carries ``conversation``."""
        leaving = fold(seen, budget, calibration, self.text, self.through)
        if leaving is None:
            return
        if (
            self.unsummarised_through > self.through
            and fold(seen, budget, calibration, self.text, self.unsummarised_through) is None
            and workflow.patched(SUMMARY_AFTER_FAILURE)
        ):
            return  # what the fold not made left out still leaves; nothing newer must yet
        books, limits = self._books, self._books.limits
        if books.model_calls + 1 > limits.max_iterations:
            self._failed(
                leaving,
                f"no model call left for it besides the loop's next one ({books.model_calls} "
                f"of max_iterations={limits.max_iterations} counted)",
            )
            return
        request = SummaryRequest(
            provider=provider,
            model=model,
            iteration=iteration,
            conversation=conversation,
            start=leaving.start,
            through=leaving.through,
            previous=self.text,
            max_output_tokens=summary_tokens(budget),
            context_token_budget=budget,
            token_calibration=calibration,
            token_budget=limits.max_total_tokens - books.usage.total_tokens,
            principal=books.principal,
        )
        try:
            made = await workflow.execute_activity(
                SUMMARISE_CONTEXT,
                request,
                result_type=SummaryResponse,
                start_to_close_timeout=timeout,
                heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
                retry_policy=SIDE_MODEL_RETRY,  # worth a little waiting, not a stalled loop
                task_queue=task_queue,
                summary=f"context summary · messages [{leaving.start}, {leaving.through})",
            )
        except ActivityError as error:
            books.stopping.check()  # cut short by the loop's stop: it ends here
            self._failed(leaving, failure_message(error))
            return
        books.charge(made.usage, 1)  # what was served, an answer without text included
        if not made.text:
            self._failed(
                leaving,
                f"the summariser {made.model!r} answered with no text (stop_reason "
                f"{made.stop_reason!r}; {made.usage.total_tokens} tokens charged)",
                made.usage,
            )
            return
        self.text, self.through = made.text, leaving.through
        books.record(
            ContextSummarised(
                **books.stamp(),
                start=leaving.start,
                through=leaving.through,
                folded=made.folded,
                tokens=estimate_tokens(made.text),
                usage=made.usage,
                model=made.model,
            )
        )

    def _failed(self, leaving: Fold, error: str, usage: Usage | None = None) -> None:
        books = self._books
        self.unsummarised_through = leaving.through
        books.record(
            ContextSummarised(
                **books.stamp(),
                start=leaving.start,
                through=leaving.through,
                error=f"the summary of {len(leaving.messages)} message(s) was not made: {error}",
                usage=usage or Usage(),
            )
        )
