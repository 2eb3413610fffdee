"""The knowledge activities: an agent's knowledge, searched and written on the worker.

``search_knowledge`` (before each reasoning step of a loop with ``config.knowledge``) and
``write_knowledge`` (its memory, when the loop completes) are activities the workflow calls;
the tools the model calls over the same store are ``orga.knowledge.tools``. They reach the
store (``ORGA_STORE_URL``) from a thread, heartbeating; the workflow only sees their results.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import activity

from orga.contracts.knowledge import (
    SEARCH_KNOWLEDGE,
    WRITE_KNOWLEDGE,
    KnowledgeHits,
    KnowledgeQuery,
    KnowledgeWrite,
    KnowledgeWritten,
)
from orga.knowledge import Knowledge
from orga.worker.heartbeat import heartbeating

__all__ = ["KnowledgeActivities"]


class KnowledgeActivities:
    """The knowledge of one store, opened on first use."""

    def __init__(self, knowledge: Callable[[], Knowledge]) -> None:
        self._open = knowledge
        self._knowledge: Knowledge | None = None

    @property
    def knowledge(self) -> Knowledge:
        if self._knowledge is None:
            self._knowledge = self._open()
        return self._knowledge

    @activity.defn(name=SEARCH_KNOWLEDGE)
    async def search_knowledge(self, query: KnowledgeQuery) -> KnowledgeHits:
        """The items of the query's namespace that match it, best first."""
        async with heartbeating():
            return await asyncio.to_thread(lambda: self.knowledge.search(query))

    @activity.defn(name=WRITE_KNOWLEDGE)
    async def write_knowledge(self, write: KnowledgeWrite) -> KnowledgeWritten:
        """Store one item (an equal one is kept once)."""
        async with heartbeating():
            return await asyncio.to_thread(lambda: self.knowledge.add(write))
