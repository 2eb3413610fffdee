"""Pre-hydration in a running loop: resolve what the task refers to before the first model call.

Workflow code. References found in the user's messages (``orga.core.prehydration``) are
resolved by their tools as ordinary tool calls: all through the gate at once, then in parallel,
each with its breaker and recovery strategy. Only tools the loop's model sees may resolve a
reference (pre-hydration widens nothing: a resolver tool outside the loop's tools, its agent's
or its profile skips the reference, and the journal says so). A call the gate does not simply
allow (denied, or needing a person) is dropped rather than waited for; so is one that fails.
What resolved is injected as one system message starting ``[PRE_HYDRATED_CONTEXT]``.
"""

from __future__ import annotations

import asyncio
import json

from orga.contracts.conversation import Message, ToolCall, ToolResult
from orga.contracts.journal import PreHydrationComplete
from orga.contracts.policy import PolicyAction, PolicyDecision
from orga.contracts.prehydration import PreHydrationConfig
from orga.core.prehydration import Reference, extract, render
from orga.core.text import estimate_tokens
from orga.workflows.reasoning.call_executor import CallExecutor
from orga.workflows.reasoning.durable_conversation import Conversation
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.tool_state import ToolState
from orga.workflows.shared.gate import Gate

__all__ = ["pre_hydrate", "pre_hydrate_loop"]


async def pre_hydrate(
    config: PreHydrationConfig,
    messages: list[Message],
    *,
    tools: ToolState,
    gate: Gate,
    books: LoopBooks,
    advertised: list[str],
) -> Message | None:
    """The ``[PRE_HYDRATED_CONTEXT]`` message for ``messages``, or ``None`` if nothing resolved.

    ``advertised``: the tools the model sees, the only ones that may resolve a reference.
    """
    text = "\n".join(m.content for m in messages if m.role == "user")
    references = extract(text, config)
    planned: list[tuple[Reference, ToolCall]] = []
    skipped: list[str] = []
    for reference in references:
        resolver = config.resolvers.get(reference.ref_type)
        if resolver is None:
            continue
        if resolver.tool not in advertised:
            skipped.append(
                f"{reference.ref_type} {reference.value}: {resolver.tool} is not a tool of "
                "this loop"
            )
            continue
        arguments = json.dumps({resolver.argument: reference.value}, ensure_ascii=False)
        call = ToolCall(id=f"prehydrate-{reference.id}", name=resolver.tool, arguments=arguments)
        planned.append((reference, call))
    resolved: list[tuple[Reference, str]] = []
    if planned:
        actions = [PolicyAction.of_call(c) for _, c in planned]
        verdict = await gate.decide(actions, advertised)
        executor = CallExecutor(tools, books.iteration)

        async def resolve(call: ToolCall, decision: PolicyDecision) -> ToolResult | None:
            if not decision.permits:
                return None  # denied, or needs a person: not worth waiting for here
            if decision.decision == "modify" and decision.arguments is not None:
                call = call.model_copy(update={"arguments": decision.arguments})
            result = await executor.run(call)
            return result if result.status in ("ok", "recovered") else None

        results = await asyncio.gather(
            *(resolve(c, d) for (_, c), d in zip(planned, verdict.decisions, strict=False))
        )
        resolved = [
            (reference, result.content)
            for (reference, _), result in zip(planned, results, strict=True)
            if result is not None
        ]
    message: Message | None = None
    tokens = 0
    if resolved:
        content = render(resolved, config.max_context_tokens)
        tokens = estimate_tokens(content)
        # A user message, not a system one: what a page or a file says is data the task
        # brought along, never instructions with the authority of the system prompt.
        message = Message(role="user", content=content)
    books.record(
        PreHydrationComplete(
            **books.stamp(),
            found=len(references),
            resolved=len(resolved),
            failed=len(references) - len(resolved),
            tokens=tokens,
            skipped=skipped,
        )
    )
    return message


async def pre_hydrate_loop(
    config: PreHydrationConfig,
    conversation: Conversation,
    *,
    tools: ToolState,
    gate: Gate,
    books: LoopBooks,
    advertised: list[str],
) -> None:
    """Before a loop's first reasoning step: what its task refers to joins ``conversation``
    (the ``[PRE_HYDRATED_CONTEXT]`` message), if anything resolved."""
    books.set_phase("observing")
    message = await pre_hydrate(
        config,
        conversation.messages,
        tools=tools,
        gate=gate,
        books=books,
        advertised=advertised,
    )
    if message is not None:
        conversation.append([message])
