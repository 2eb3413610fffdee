"""``recall_knowledge`` and ``store_knowledge``: the tools a loop with ``config.knowledge`` gets
(gated like any other), over its agent's store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal

from orga.contracts.errors import ToolInputError
from orga.contracts.knowledge import RECALL_TOOL, STORE_TOOL, KnowledgeQuery, KnowledgeWrite
from orga.core.knowledge import directory_levels, format_items, normalise_directory
from orga.knowledge import Knowledge
from orga.tools.sdk import Tool, ToolContext, tool

__all__ = ["knowledge_tools"]


def _namespace(ctx: ToolContext, tool_name: str) -> str:
    if ctx.knowledge_namespace is None:
        raise ToolInputError(
            f"{tool_name} is only for loops that use their agent's knowledge "
            "(config.knowledge): this one does not"
        )
    return ctx.knowledge_namespace


def knowledge_tools(knowledge: Callable[[], Knowledge]) -> list[Tool]:
    """``recall_knowledge`` and ``store_knowledge``, over the store ``knowledge`` opens (when
    a loop first uses it)."""

    @tool(name=RECALL_TOOL, timeout=20)
    async def recall_knowledge(
        query: str,
        ctx: ToolContext,
        limit: int = 5,
        directory: str | None = None,
        scope: Literal["all", "conventions"] = "all",
    ) -> str:
        """Search what this agent has learned before: facts, earlier answers, conventions.

        Args:
            query: what to look for, in a few words.
            limit: at most this many results (1 to 20).
            directory: with scope "conventions": the source directory you work in, such as
                "src/api/handlers"; its conventions come first, then its parents', up to the
                root, then the language's.
            scope: "all" (a plain search) or "conventions" (the conventions that apply to
                directory).
        """
        namespace = _namespace(ctx, RECALL_TOOL)
        if not 1 <= limit <= 20:
            raise ToolInputError(f"limit must be between 1 and 20, not {limit}")
        try:
            where = normalise_directory(directory) if directory is not None else None
        except ValueError as error:
            raise ToolInputError(str(error)) from error
        home = ctx.knowledge_directory
        if scope == "conventions" and home is not None:
            # The walk up from a directory brings its conventions: only the loop's own tree.
            where = home if where is None else where
            if home not in directory_levels(where):
                raise ToolInputError(
                    f"directory {where!r} is outside the directory this loop works in "
                    f"({home!r}; '' is the root): ask for {home!r} or one below it"
                )
        request = KnowledgeQuery(
            namespace=namespace,
            text=query,
            limit=limit,
            scope=scope,
            directory=where,
            within=home if scope == "all" else None,
        )
        hits = await asyncio.to_thread(lambda: knowledge().search(request))
        return format_items(hits.items)

    @tool(name=STORE_TOOL, timeout=20)
    async def store_knowledge(
        subject: str, predicate: str, object: str, ctx: ToolContext, confidence: float = 1.0
    ) -> str:
        """Remember a fact for this agent's later work, as subject, predicate and object
        ("ann", "prefers", "tea"). Store what will still be true and useful later.

        Args:
            subject: who or what the fact is about.
            predicate: the relation ("prefers", "is owned by", "runs on").
            object: the value.
            confidence: how sure you are, from 0 to 1.
        """
        namespace = _namespace(ctx, STORE_TOOL)
        parts = [subject.strip(), predicate.strip(), object.strip()]
        if not all(parts):
            raise ToolInputError("subject, predicate and object must all be non-empty")
        if not 0.0 <= confidence <= 1.0:
            raise ToolInputError(f"confidence must be between 0 and 1, not {confidence}")
        write = KnowledgeWrite(
            namespace=namespace,
            kind="fact",
            content=" ".join(parts),
            subject=parts[0],
            predicate=parts[1],
            object=parts[2],
            confidence=confidence,
            source=ctx.workflow_id,
        )
        written = await asyncio.to_thread(lambda: knowledge().add(write))
        if written.created:
            return f"stored fact #{written.id}: {write.content}"
        return f"already known (fact #{written.id}): {write.content}"

    return [recall_knowledge, store_knowledge]
