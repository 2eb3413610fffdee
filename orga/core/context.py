"""Fitting the conversation sent to a model into the context budget (pure, deterministic).

The durable conversation is never changed; only what one model call sees. Units that must stay
together stay together: an assistant turn with tool calls and the tool turn that answers it.
System messages and injected context (``[KNOWLEDGE_CONTEXT]``, ``[PRE_HYDRATED_CONTEXT]``) are
never dropped. Strategies:

* ``sliding_window`` — keep the protected messages and the newest whole units that fit.
* ``observation_masking`` — replace older tool results by a one-line placeholder naming the
  tool, oldest first, until it fits (then slide if it still does not).
* ``anchored_summary`` — keep the protected messages, the first user message and the newest
  units that fit; what left the window is folded into a running summary (a model call the
  loop makes; ``fold`` says which units, the same plan on every replay), shown as one
  ``[CONTEXT_SUMMARY]`` message right after the anchors. Without a summary (none yet, or the
  summariser failed) a marker says how much was left out in between.

Token estimates are UTF-8 bytes / 4 per text, plus a few per message, times a calibration
factor the loop derives from the provider's reported usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from orga.contracts.conversation import Message
from orga.contracts.inference import ContextStrategy
from orga.core.text import estimate_tokens

__all__ = [
    "FOLD_TO",
    "INJECTED_MARKERS",
    "SUMMARY_MARKER",
    "SUMMARY_SHARE",
    "Fitted",
    "Fold",
    "estimate_message_tokens",
    "fit",
    "fold",
    "injected",
    "leading_system",
    "summarised",
    "summary_message",
    "summary_tokens",
    "units",
]

SUMMARY_MARKER: Final = "[CONTEXT_SUMMARY]"
"""Starts the message that shows an ``anchored_summary`` loop's running summary."""
INJECTED_MARKERS = ("[KNOWLEDGE_CONTEXT]", "[PRE_HYDRATED_CONTEXT]", SUMMARY_MARKER)
_PER_MESSAGE = 4

SUMMARY_SHARE: Final = 4
"""A running summary may take up to ``1/SUMMARY_SHARE`` of the context budget: the
summariser's answer is capped to it, and a fold leaves room for it."""
FOLD_TO: Final = 2
"""A fold leaves the newest turns at most ``1/FOLD_TO`` of the room the anchors and the summary
leave, so the next fold is several turns away (not one summariser call per turn)."""


def estimate_message_tokens(message: Message) -> int:
    """Deterministic estimate of one message's tokens."""
    total = _PER_MESSAGE + estimate_tokens(message.content)
    for call in message.tool_calls:
        total += _PER_MESSAGE + estimate_tokens(call.name) + estimate_tokens(call.arguments)
    for result in message.tool_results:
        total += _PER_MESSAGE + estimate_tokens(result.content)
    return total


def leading_system(messages: Sequence[Message]) -> int:
    """How many system messages open ``messages`` (the agent's prompt, whom it may delegate
    to, the loop's own prompt: a loop puts them there before anything else)."""
    count = 0
    for message in messages:
        if message.role != "system":
            break
        count += 1
    return count


def injected(message: Message, markers: str | tuple[str, ...] = INJECTED_MARKERS) -> bool:
    """Whether ``message`` is context orga injected under one of ``markers``: a user message
    that begins with it. A person's message may not (``orga.core.speakers`` refuses it where it
    enters); a model's answer may begin with anything, and is never taken for injected context
    (it would be kept whatever else is dropped, or pass for the running summary)."""
    return message.role == "user" and message.content.startswith(markers)


def _protected(message: Message) -> bool:
    return message.role == "system" or injected(message)


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
    summarised: int = 0
    """Messages the running summary stands for (``anchored_summary``)."""


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


def _anchors(messages: Sequence[Message], grouped: list[list[int]]) -> list[bool]:
    """Which units ``anchored_summary`` always keeps: the protected ones and the first user
    message (the task)."""
    anchors = [all(_protected(messages[i]) for i in unit) for unit in grouped]
    first_user = next(
        (p for p, u in enumerate(grouped) if messages[u[0]].role == "user" and not anchors[p]),
        None,
    )
    if first_user is not None:
        anchors[first_user] = True
    return anchors


def summary_tokens(budget: int) -> int:
    """How long a running summary may be, in tokens, for a context budget of ``budget``."""
    return max(64, budget // SUMMARY_SHARE)


def summary_message(summary: str) -> Message:
    """The user message that shows the running summary: material, like other injected
    context, never instructions with the system prompt's authority."""
    return Message(
        role="user",
        content=f"{SUMMARY_MARKER}\nA summary of the earlier turns of this conversation, "
        "written to fit the context budget (they were left out; this is what they held):\n"
        f"{summary}",
    )


def summarised(messages: Sequence[Message], start: int, through: int) -> list[Message]:
    """The messages a summary of ``[start, through)`` stands for: whole units that lie in it,
    never an anchor (system and injected messages, the first user message stay as they are)."""
    grouped = units(messages)
    anchors = _anchors(messages, grouped)
    return [
        messages[i]
        for position, unit in enumerate(grouped)
        if not anchors[position] and unit[0] >= start and unit[-1] < through
        for i in unit
    ]


def _with_summary(messages: list[Message], summary: str, through: int) -> tuple[list[Message], int]:
    """``messages`` with what the summary stands for (``[0, through)`` less the anchors)
    replaced by the summary, shown where the first of them was: after the anchors."""
    grouped = units(messages)
    anchors = _anchors(messages, grouped)
    shown: list[Message] = []
    replaced = 0
    for position, unit in enumerate(grouped):
        if not anchors[position] and unit[-1] < through:
            if not replaced:
                shown.append(summary_message(summary))
            replaced += len(unit)
            continue
        shown.extend(messages[i] for i in unit)
    return shown, replaced


@dataclass(frozen=True)
class Fold:
    """Units that must leave the window before the next model call, to be folded into the
    running summary: ``messages`` are those of ``[start, through)`` that are not anchors."""

    start: int
    """Where the previous summary ended (``summarised_through``)."""
    through: int
    """Where the new summary will end: its ``summarised_through``."""
    messages: list[Message]


def fold(
    messages: Sequence[Message],
    budget: int,
    calibration: float = 1.0,
    summary: str | None = None,
    summarised_through: int = 0,
) -> Fold | None:
    """What an ``anchored_summary`` loop folds into its summary before its next model call
    (``messages`` as that call sees them), or ``None`` when they fit with the summary it has.

    The newest unit always stays; older ones stay while they fit in ``1/FOLD_TO`` of what the
    anchors and a summary of ``summary_tokens(budget)`` leave of ``budget``; everything older
    that is not an anchor, and not folded already, is folded. Messages before
    ``summarised_through`` count as folded even without a ``summary`` (a fold whose summary was
    not made: they are left out either way).
    """
    given = list(messages)
    shown = (
        _with_summary(given, summary or "", summarised_through)[0] if summarised_through else given
    )
    if _cost(shown, calibration) <= budget:
        return None
    grouped = units(given)
    anchors = _anchors(given, grouped)
    costs = [_cost([given[i] for i in unit], calibration) for unit in grouped]
    fixed = sum(c for c, anchored in zip(costs, anchors, strict=True) if anchored)
    room = (budget - fixed - summary_tokens(budget)) // FOLD_TO
    movable = [p for p, anchored in enumerate(anchors) if not anchored]
    kept, used = len(grouped), 0
    for rank, position in enumerate(reversed(movable)):
        if grouped[position][-1] < summarised_through:
            break  # folded already
        if rank > 0 and used + costs[position] > room:
            break  # the window is contiguous
        kept, used = position, used + costs[position]
    leaving = [p for p in movable if p < kept and grouped[p][-1] >= summarised_through]
    if not leaving:
        return None
    through = grouped[leaving[-1]][-1] + 1
    return Fold(
        start=summarised_through,
        through=through,
        messages=[given[i] for p in leaving for i in grouped[p]],
    )


def _slide(
    messages: list[Message], budget: int, calibration: float, anchor_first_user: bool
) -> tuple[list[Message], int]:
    grouped = units(messages)
    costs = [_cost([messages[i] for i in unit], calibration) for unit in grouped]
    marker = _cost([_marker(len(messages))], calibration)
    keep = (
        _anchors(messages, grouped)
        if anchor_first_user
        else [all(_protected(messages[i]) for i in unit) for unit in grouped]
    )
    keep[-1] = True  # the newest unit always goes: it is what the model must answer

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
    summary: str | None = None,
    summarised_through: int = 0,
) -> Fitted:
    """What the model should see of ``messages`` within ``budget`` tokens.

    With ``anchored_summary`` and a ``summary`` of messages ``[0, summarised_through)``, those
    messages (less the anchors) are replaced by the summary first; what still does not fit is
    left out with a marker.
    """
    given = list(messages)
    replaced = 0
    if strategy == "anchored_summary" and summary:
        given, replaced = _with_summary(given, summary, summarised_through)
    total = _cost(given, calibration)
    if total <= budget:
        return Fitted(given, total, 0, 0, replaced)
    masked = 0
    if strategy == "observation_masking":
        given, masked = _mask(given, budget, calibration)
        if _cost(given, calibration) <= budget:
            return Fitted(given, _cost(given, calibration), 0, masked)
    kept, dropped = _slide(given, budget, calibration, strategy == "anchored_summary")
    return Fitted(kept, _cost(kept, calibration), dropped, masked, replaced)
