"""The loop's setup, resolved by the worker when the loop starts: tools, provider and model.

Recorded once in history (a local activity's marker), so every later step — on any worker,
after any restart — uses the same tool definitions and the same model, whatever the defaults
of the worker that happens to run it.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from orga.contracts.config import LoopConfig
from orga.contracts.tools import ToolDefinition
from orga.contracts.vocabulary import ProviderName

__all__ = ["RESOLVE_LOOP", "LoopSetup", "LoopSetupRequest"]

RESOLVE_LOOP: Final = "resolve_loop"
"""Name of the local activity that resolves a loop's setup."""


class LoopSetupRequest(BaseModel):
    """The input of ``resolve_loop``."""

    model_config = ConfigDict(frozen=True)

    config: LoopConfig
    tools: list[str] = Field(default_factory=list[str])
    """Every tool the loop may run: its own, pre-hydration's and the fallbacks'."""


class LoopSetup(BaseModel):
    """What the worker resolved."""

    model_config = ConfigDict(frozen=True)

    tools: list[ToolDefinition] = Field(default_factory=list[ToolDefinition])
    provider: ProviderName
    model: str
