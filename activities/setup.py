"""The setup activity: what the worker resolves for a loop before its first step.

A local activity, run once when a loop starts (its result is recorded in history): the tool
definitions from this worker's registry, and the effective provider and model — the loop's own
choice, else this worker's defaults. Every later model call uses what was recorded here, so a
loop keeps its model even when workers with other defaults pick it up.
"""

from __future__ import annotations

from temporalio import activity

from orga.contracts.setup import RESOLVE_LOOP, LoopSetup, LoopSetupRequest
from orga.runtime.settings import Settings
from orga.runtime.tools import ToolRegistry

__all__ = ["SetupActivities"]


class SetupActivities:
    """Resolves loops against one worker's settings and tool registry."""

    def __init__(self, *, settings: Settings, registry: ToolRegistry) -> None:
        self._settings = settings
        self._registry = registry

    @activity.defn(name=RESOLVE_LOOP)
    async def resolve_loop(self, request: LoopSetupRequest) -> LoopSetup:
        """The loop's tools, provider and model.

        Raises:
            InvalidConfig: a tool is not registered here, or the provider is not served here.
        """
        tools = self._registry.definitions(request.tools, named_by="config.tools")
        provider = self._settings.provider(request.config.provider)
        return LoopSetup(
            tools=tools,
            provider=provider.name,
            model=request.config.model or provider.default_model,
        )
