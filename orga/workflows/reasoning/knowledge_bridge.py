"""The knowledge bridge of a loop: what the model is shown of its agent's knowledge, and what
the loop remembers.

Workflow code. Before each reasoning step, search terms are taken from the newest user and tool
messages (``orga.core.knowledge.newest_terms``) and the agent's knowledge is searched in an
activity; the best items become the one ``[KNOWLEDGE_CONTEXT]`` message the next model call
sees, replacing the previous one — a user message marked as notes, never a system one, since
what a loop stored may come from what its model read (the durable conversation never holds it;
the request that carries it, and the search's result, are in history, so replay sees the same).
A step with no search terms keeps the current message. A failed search is journaled and the
step goes on without knowledge. When the loop completes with ``auto_persist`` (which needs the
agent's leave, checked at start), its task and answer are stored as working memory — after the
gate allows it (``Action::"remember"`` on the agent's store; anything but ``allow`` or ``modify``
stores nothing, and the journal says why). ``recall_knowledge`` / ``store_knowledge`` calls are
journaled.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from orga.contracts.conversation import Message, ToolCall, ToolResult
from orga.contracts.journal import KnowledgeInjected, KnowledgeRecalled, KnowledgeStored
from orga.contracts.knowledge import (
    RECALL_TOOL,
    SEARCH_KNOWLEDGE,
    STORE_TOOL,
    WRITE_KNOWLEDGE,
    KnowledgeConfig,
    KnowledgeHits,
    KnowledgeQuery,
    KnowledgeWrite,
    KnowledgeWritten,
)
from orga.contracts.policy import PolicyAction
from orga.core.arguments import try_parse_arguments
from orga.core.knowledge import injection, newest_terms
from orga.core.text import cut, estimate_tokens
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.shared.failures import failure_message
from orga.workflows.shared.gate import Gate
from orga.workflows.shared.options import non_retryable

__all__ = ["KnowledgeBridge"]

_TIMEOUT = timedelta(seconds=20)
_HEARTBEAT = timedelta(seconds=10)
_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=4,
    non_retryable_error_types=non_retryable(),
)
_MEMORY_QUESTION = 500
"""Characters of the loop's task kept with its answer in working memory."""


class KnowledgeBridge:
    """One loop's use of its agent's knowledge (``config.knowledge``)."""

    def __init__(
        self, config: KnowledgeConfig, namespace: str, books: LoopBooks, gate: Gate
    ) -> None:
        self.config = config
        self.namespace = namespace
        self._books = books
        self._gate = gate
        self.context: str | None = None
        """The ``[KNOWLEDGE_CONTEXT]`` message the next model call sees."""

    async def before_step(self, messages: Sequence[Message], iteration: int) -> str | None:
        """Search for the next reasoning step; the message it should see."""
        if self.config.max_context_items == 0:
            return None
        query = newest_terms(messages)
        if not query:
            return self.context
        books = self._books
        try:
            hits = await workflow.execute_activity(
                SEARCH_KNOWLEDGE,
                KnowledgeQuery(
                    namespace=self.namespace,
                    text=query,
                    limit=self.config.max_context_items,
                    threshold=self.config.relevance_threshold,
                    within=self.config.directory or "",
                ),
                result_type=KnowledgeHits,
                start_to_close_timeout=_TIMEOUT,
                heartbeat_timeout=_HEARTBEAT,
                retry_policy=_RETRY,
                summary=f"knowledge · iteration {iteration}",
            )
        except ActivityError as error:
            books.stopping.check()  # cut short by the loop's stop: it ends here
            books.record(
                KnowledgeInjected(**books.stamp(), query=query, error=failure_message(error))
            )
            return self.context
        shown = injection(hits.items, self.config.max_context_tokens)
        self.context, ids = shown if shown is not None else (None, [])
        tokens = estimate_tokens(self.context) if self.context else 0
        books.record(KnowledgeInjected(**books.stamp(), query=query, items=ids, tokens=tokens))
        return self.context

    async def remember(self, task: str, answer: str) -> None:
        """Store the loop's task and answer as working memory (``auto_persist``)."""
        books = self._books
        content = f"Task: {cut(task, _MEMORY_QUESTION, 'task')}\nAnswer: {answer}"
        action = PolicyAction.of_memory(self.namespace, content)
        [decision] = (await self._gate.decide([action], [])).decisions
        if not decision.permits:
            # Nobody waits at the end of a loop for a memory write: not allowed, not stored.
            refused = decision.reason or decision.decision
            books.record(
                KnowledgeStored(
                    **books.stamp(),
                    item_kind="memory",
                    content=cut(content, 200, "memory"),
                    error=f"the gate did not allow storing it ({decision.decision}): {refused}",
                )
            )
            return
        try:
            written = await workflow.execute_activity(
                WRITE_KNOWLEDGE,
                KnowledgeWrite(
                    namespace=self.namespace,
                    kind="memory",
                    content=content,
                    source=workflow.info().workflow_id,
                ),
                result_type=KnowledgeWritten,
                start_to_close_timeout=_TIMEOUT,
                heartbeat_timeout=_HEARTBEAT,
                retry_policy=_RETRY,
                summary="knowledge · remember the answer",
            )
        except ActivityError as error:
            books.record(
                KnowledgeStored(
                    **books.stamp(),
                    item_kind="memory",
                    content=cut(content, 200, "memory"),
                    error=failure_message(error),
                )
            )
            return
        books.record(
            KnowledgeStored(
                **books.stamp(),
                item_kind="memory",
                content=cut(content, 200, "memory"),
                item_id=written.id,
                created=written.created,
            )
        )

    def observed(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> None:
        """Journal the model's own ``recall_knowledge`` / ``store_knowledge`` calls."""
        books = self._books
        outcome = {r.call_id: r for r in results}
        for call in calls:
            result = outcome.get(call.id)
            if result is None or result.is_error or call.name not in (RECALL_TOOL, STORE_TOOL):
                continue
            arguments = try_parse_arguments(call.arguments)
            if arguments is None:
                continue
            if call.name == RECALL_TOOL:
                found = 0 if result.content == "nothing found" else result.content.count("\n") + 1
                books.record(
                    KnowledgeRecalled(
                        **books.stamp(),
                        call_id=call.id,
                        query=str(arguments.get("query", "")),
                        scope=str(arguments.get("scope", "all")),
                        directory=arguments.get("directory"),
                        found=found,
                    )
                )
            else:
                books.record(
                    KnowledgeStored(
                        **books.stamp(),
                        item_kind="fact",
                        content=cut(result.content, 200, "fact"),
                        call_id=call.id,
                        created=result.content.startswith("stored"),
                    )
                )
