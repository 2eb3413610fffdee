"""Fitting the conversation sent to a model into the context budget (pure, deterministic).

The durable conversation is never changed; only what one model call sees. Units that must stay
together stay together: an assistant turn with tool calls and the tool turn that answers it.
System messages and injected context (``[KNOWLEDGE_CONTEXT]``, ``[PRE_HYDRATED_CONTEXT]``) are
never dropped. Strategies:

* ``sliding_window`` — keep the protected messages and the newest whole units that fit.
* ``observation_masking`` — replace older tool results by a one-line placeholder naming the
  tool, oldest first, until it fits (then slide if it still does not).
* ``anchored_summary`` — keep the protected messages, the first user message and the newest
  units that fit, with a marker saying how much was left out in between.

Token estimates are UTF-8 bytes / 4 per text, plus a few per message, times a calibration
factor the loop derives from the provider's reported usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orga.contracts.conversation import Message
from orga.contracts.inference import ContextStrategy
from orga.core.text import estimate_tokens

__all__ = [
    "INJECTED_MARKERS",
    "Fitted",
    "estimate_message_tokens",
    "fit",
    "units",
]

INJECTED_MARKERS = ("[KNOWLEDGE_CONTEXT]", "[PRE_HYDRATED_CONTEXT]")
_PER_MESSAGE = 4


def estimate_message_tokens(message: Message) -> int:
    """Deterministic estimate of one message's tokens."""
    total = _PER_MESSAGE + estimate_tokens(message.content)
    for call in message.tool_calls:
        total += _PER_MESSAGE + estimate_tokens(call.name) + estimate_tokens(call.arguments)
    for result in message.tool_results:
        total += _PER_MESSAGE + estimate_tokens(result.content)
    return total


def _protected(message: Message) -> bool:
    return message.role == "system" or message.content.startswith(INJECTED_MARKERS)


def units(messages: Sequence[Message]) -> list[list[int]]:
    """Indices of messages that must be kept or dropped together, in order."""
    grouped: list[list[int]] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        if (
            message.role == "assistant"
            and message.tool_calls
            and index + 1 < len(messages)
            and messages[index + 1].role == "tool"
        ):
            grouped.append([index, index + 1])
            index += 2
        else:
            grouped.append([index])
            index += 1
    return grouped


@dataclass(frozen=True)
class Fitted:
    """What one model call sees."""

    messages: list[Message]
    estimated_tokens: int
    dropped: int
    """Messages left out."""
    masked: int
    """Tool results replaced by a placeholder."""


def _cost(messages: Sequence[Message], calibration: float) -> int:
    return round(sum(estimate_message_tokens(m) for m in messages) * calibration)


def _marker(count: int) -> Message:
    return Message(
        role="user",
        content=f"[orga: {count} earlier message(s) were left out to fit the context budget]",
    )


def _gaps(keep: list[bool]) -> int:
    """How many runs of left-out units lie between or before kept ones (one marker each)."""
    gaps, open_gap = 0, False
    for kept in keep:
        if not kept:
            open_gap = True
        elif open_gap:
            gaps, open_gap = gaps + 1, False
    return gaps + (1 if open_gap else 0)


def _slide(
    messages: list[Message], budget: int, calibration: float, anchor_first_user: bool
) -> tuple[list[Message], int]:
    grouped = units(messages)
    costs = [_cost([messages[i] for i in unit], calibration) for unit in grouped]
    marker = _cost([_marker(len(messages))], calibration)
    keep = [all(_protected(messages[i]) for i in unit) for unit in grouped]
    keep[-1] = True  # the newest unit always goes: it is what the model must answer
    if anchor_first_user:
        first_user = next(
            (p for p, u in enumerate(grouped) if messages[u[0]].role == "user" and not keep[p]),
            None,
        )
        if first_user is not None:
            keep[first_user] = True

    def cost(plan: list[bool]) -> int:
        return sum(c for c, k in zip(costs, plan, strict=True) if k) + marker * _gaps(plan)

    for position in range(len(grouped) - 2, -1, -1):
        if keep[position]:
            continue
        trial = [*keep]
        trial[position] = True
        if cost(trial) > budget:
            break  # the window is contiguous: nothing older than the first unit that missed
        keep = trial
    kept: list[Message] = []
    dropped = pending_gap = 0
    for position, unit in enumerate(grouped):
        if keep[position]:
            if pending_gap:
                kept.append(_marker(pending_gap))
                pending_gap = 0
            kept.extend(messages[i] for i in unit)
        else:
            pending_gap += len(unit)
            dropped += len(unit)
    if pending_gap:
        kept.append(_marker(pending_gap))
    return kept, dropped


def _mask(messages: list[Message], budget: int, calibration: float) -> tuple[list[Message], int]:
    masked = list(messages)
    count = 0
    grouped = units(masked)
    for unit in grouped[:-1]:  # never the newest results
        if _cost(masked, calibration) <= budget:
            break
        for i in unit:
            message = masked[i]
            if message.role != "tool":
                continue
            results = [
                r.model_copy(
                    update={"content": f"[result of {r.name} omitted to fit the context budget]"}
                )
                for r in message.tool_results
            ]
            masked[i] = message.model_copy(update={"tool_results": results})
            count += len(results)
    return masked, count


def fit(
    messages: Sequence[Message],
    budget: int,
    strategy: ContextStrategy = "observation_masking",
    calibration: float = 1.0,
) -> Fitted:
    """What the model should see of ``messages`` within ``budget`` tokens."""
    given = list(messages)
    total = _cost(given, calibration)
    if total <= budget:
        return Fitted(given, total, 0, 0)
    masked = 0
    if strategy == "observation_masking":
        given, masked = _mask(given, budget, calibration)
        if _cost(given, calibration) <= budget:
            return Fitted(given, _cost(given, calibration), 0, masked)
    kept, dropped = _slide(given, budget, calibration, strategy == "anchored_summary")
    return Fitted(kept, _cost(kept, calibration), dropped, masked)
