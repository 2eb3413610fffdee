"""One budget for a tree of loops: what the next model call may spend (pure).

A loop's ``max_total_tokens`` covers its own model calls, its critic's and every call of the
children it delegates to (whose usage is charged to it when they return). Checking the total
only after a call lets the call that crosses the line spend without bound, so before each call
the tokens left are handed to the call itself: once the conversation is fitted and its input
estimated, the input must fit in what is left, and the answer may use at most the rest
(``max_output_tokens`` lowered to it). A call can then pass its budget only by what the
estimate of its input missed. The same holds for ``max_iterations``: children's and critics'
model calls count against the loop that paid for them (``LoopBooks.other_calls``).

Every call that was answered is charged (``served``), an answer without text included: what the
provider reported, or, where it reported nothing, orga's estimate of the input sent and the
output received (a call is never free because its provider kept quiet).
"""

from __future__ import annotations

from typing import Final

from orga.contracts.inference import InferenceResponse, Usage
from orga.core.text import estimate_tokens

__all__ = ["SAFE_OUTPUT_TOKENS", "OutOfBudget", "output_cap", "served"]

SAFE_OUTPUT_TOKENS: Final = 4_096
"""An answer length every model allows. With no ``max_output_tokens`` configured, the budget
lowers the provider's own limit only below this (a larger cap could exceed what a model allows
and be refused)."""


class OutOfBudget(ValueError):
    """The call's input alone needs at least what is left of the budget."""


def output_cap(
    configured: int | None, left: int | None, estimated_input: int
) -> tuple[int | None, bool]:
    """The ``max_output_tokens`` to send, and whether the budget lowered it.

    Args:
        configured: the loop's ``max_output_tokens`` (``None``: the provider's default).
        left: the tokens the loop has left (``None``: no budget to keep, as in calls recorded
            before budgets were handed to calls).
        estimated_input: the fitted request's estimated input tokens.

    Raises:
        OutOfBudget: fewer than one token would be left for the answer.
    """
    if left is None:
        return configured, False
    room = left - estimated_input
    if room < 1:
        raise OutOfBudget(
            f"the next model call's input is about {estimated_input} tokens and "
            f"{max(left, 0)} are left"
        )
    ceiling = configured if configured is not None else SAFE_OUTPUT_TOKENS
    if room < ceiling:
        return room, True
    return configured, False


def served(response: InferenceResponse, estimated_input: int) -> Usage:
    """What answering ``response`` is charged: the provider's usage, with orga's estimate for
    a count it left at zero (``estimated_input`` for the input; the text, tool calls and
    reasoning received for the output), marked ``estimated``."""
    reported = response.usage
    output = estimate_tokens(response.text) + sum(
        estimate_tokens(c.name) + estimate_tokens(c.arguments) for c in response.tool_calls
    )
    output += sum(estimate_tokens(r.text) for r in response.reasoning)
    input_tokens = reported.input_tokens or estimated_input
    output_tokens = reported.output_tokens or output
    if (input_tokens, output_tokens) == (reported.input_tokens, reported.output_tokens):
        return reported
    return reported.model_copy(
        update={
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": max(reported.total_tokens, input_tokens + output_tokens),
            "estimated": True,
        }
    )
