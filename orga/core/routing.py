"""The routing table: the only place that decides what a model turn leads to.

Routing looks at the normalised ``stop_reason`` and nothing else, never the model's prose.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Literal

__all__ = ["ROUTES", "Route", "route"]

Route = Literal["act", "answer", "fail"]
"""``act``: gate and run the tool calls. ``answer``: gate the final answer. ``fail``: end the
loop with ``UnhandledStopReason``; the turn's tool calls are not run."""

ROUTES: MappingProxyType[str, Route] = MappingProxyType(
    {
        "tool_use": "act",
        "end_turn": "answer",
    }
)
"""Every stop reason not listed (``max_tokens``, ``pause_turn``, ``refusal``,
``stop_sequence``, ``model_context_window_exceeded``, anything unknown) routes to ``fail``."""


def route(stop_reason: str) -> Route:
    """Where a turn with this stop reason goes."""
    return ROUTES.get(stop_reason, "fail")
