"""Whether a fork point is a state some loop could have recorded (pure).

A fork starts from the state its worker read from the source loop (``orga.runtime.forks``):
from a loop of orga's own workflow type, on a task queue the fork's worker serves, for the run
that was asked. That makes the answer a loop's; this check refuses, besides, any state no loop
records (a system message after the conversation began is only ever orga's injected
context) — so that a bug or a source that is not what it seems cannot hand a fork negative
budgets spent (a credit against every later call), a system message in the middle of the
conversation, or a tool result for a call that never ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from orga.contracts.conversation import Message
from orga.contracts.forks import ForkPoint
from orga.core.context import INJECTED_MARKERS, leading_system

__all__ = ["fork_point_problem"]


def _budget_problem(point: ForkPoint) -> str | None:
    usage = point.usage
    counts = {
        "usage.input_tokens": usage.input_tokens,
        "usage.output_tokens": usage.output_tokens,
        "usage.total_tokens": usage.total_tokens,
        "usage.cache_read_input_tokens": usage.cache_read_input_tokens,
        "usage.cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "usage.unpriced_calls": usage.unpriced_calls,
        "model_calls": point.model_calls,
        "tool_call_count": point.tool_call_count,
        "at": point.at,
    }
    negative = [f"{name}={value}" for name, value in counts.items() if value < 0]
    if negative:
        return f"negative counts ({', '.join(negative)}): spending is never negative"
    if not math.isfinite(usage.cost_usd) or usage.cost_usd < 0:
        return f"a cost of {usage.cost_usd!r} USD: spending is never negative"
    if usage.cache_read_input_tokens + usage.cache_creation_input_tokens > usage.input_tokens:
        return "more cached input tokens than input tokens"
    if point.model_calls < point.at:
        return f"{point.model_calls} model call(s) after turn {point.at}: each turn is one"
    if not math.isfinite(point.calibration) or point.calibration <= 0:
        return f"a token calibration of {point.calibration!r}"
    return None


def _order_problem(messages: Sequence[Message]) -> str | None:
    opening = leading_system(messages)
    for index, message in enumerate(messages[opening:], start=opening):
        before = messages[index - 1] if index else None
        if message.role == "system" and not message.content.startswith(INJECTED_MARKERS):
            return f"a system message at {index}, after the conversation began"
        if index == opening and message.role != "user":
            return f"the conversation begins with a {message.role} message, not the user's"
        if message.role == "tool":
            asked = [c.id for c in before.tool_calls] if before is not None else []
            answered = [r.call_id for r in message.tool_results]
            if not asked or answered != asked:
                return (
                    f"tool results at {index} ({answered!r}) that answer no assistant turn's "
                    f"calls ({asked!r})"
                )
        if before is not None and before.tool_calls and message.role != "tool":
            return f"the calls of the assistant turn at {index - 1} have no results"
    if messages and messages[-1].tool_calls:
        return "the last assistant turn's calls have no results"
    return None


def fork_point_problem(point: ForkPoint) -> str | None:
    """Why ``point`` is a state no loop records (negative or impossible budgets spent, roles
    out of order, a system message after the conversation began, tool results that answer no
    call, summary marks past its end); ``None`` if a loop could have recorded it."""
    problem = _budget_problem(point) or _order_problem(point.messages)
    if problem is None and not (
        0 <= point.summarised_through <= len(point.messages)
        and 0 <= point.unsummarised_through <= len(point.messages)
    ):
        problem = "summary marks past the end of the conversation"
    return problem
