"""Scenarios of loops whose model fails over (``tests/scenarios.py`` records them with the
rest): a model down on the worker (``orga.worker.provider_health``) sends a loop with a
fallback to it at once, under patch ``provider-down-switches``."""

from __future__ import annotations

from typing import Any

from temporalio.client import WorkflowHandle

from orga.contracts.agents import ModelChoice
from orga.scripted.server import Raw, Turn
from orga.worker.provider_health import THRESHOLD
from tests.harness import Harness

_DOWN = Raw(503, {"error": {"message": "overloaded"}}, headers={"retry-after-ms": "10"})
"""A model that is down (and asks to be tried again soon, so the first loop's retries are
quick)."""


async def provider_down(h: Harness) -> WorkflowHandle[Any, Any]:
    """A first loop pays the retries that take its model down on the worker, then switches;
    the recorded loop, on the same worker and model, is refused ``ProviderDown`` on its first
    attempt and asks its fallback without retrying."""
    primary = h.new_model([_DOWN] * THRESHOLD)
    fallback = h.new_model([Turn(text="from the fallback"), Turn(text="the fallback, at once")])
    fallbacks = [ModelChoice(provider="anthropic", model=fallback)]
    async with h.worker():
        first = await h.start("hi", provider="openai", model=primary, fallbacks=fallbacks)
        await first.result()
        handle = await h.start(
            "hi again", provider="openai", model=primary, fallbacks=fallbacks,
            workflow_id="history-provider-down",
        )  # fmt: skip
        await handle.result()
    return handle


FAILOVER_SCENARIOS = {"provider_down": provider_down}
