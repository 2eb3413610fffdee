"""What a loop does when a tool call fails: recovery strategies, per tool with a loop default.

``config.recovery = {"default": {"strategy": "llm_recovery"}, "tools": {"web_fetch":
{"strategy": "retry", "max_attempts": 5}}}``. Every use of a strategy is journaled as
``RecoveryTriggered`` (tool, strategy, error).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CachedResult",
    "DeadLetter",
    "DeadLetterEntry",
    "Escalate",
    "Fallback",
    "LlmRecovery",
    "RecoveryConfig",
    "RecoveryStrategy",
    "Retry",
]


class _Strategy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Retry(_Strategy):
    """Temporal retries the call (also when the tool raises), then the error goes to the model."""

    strategy: Literal["retry"] = "retry"
    max_attempts: int = Field(default=3, ge=1, le=100)
    initial_interval: timedelta = Field(default=timedelta(seconds=1), gt=timedelta(0))
    backoff: float = Field(default=2.0, ge=1.0)


class Fallback(_Strategy):
    """After the last attempt fails, the same arguments go to these tools, in order."""

    strategy: Literal["fallback"] = "fallback"
    tools: list[str] = Field(min_length=1)


class CachedResult(_Strategy):
    """The last successful result of the same tool with the same arguments, if young enough."""

    strategy: Literal["cached_result"] = "cached_result"
    max_age: timedelta = Field(default=timedelta(minutes=10), gt=timedelta(0))


class LlmRecovery(_Strategy):
    """The error goes back to the model as an ``is_error`` result (the default)."""

    strategy: Literal["llm_recovery"] = "llm_recovery"


class Escalate(_Strategy):
    """Park the call and wait for an operator: ``retry``, ``skip``, ``result`` or ``abort``."""

    strategy: Literal["escalate"] = "escalate"


class DeadLetter(_Strategy):
    """Record the call in the loop's dead-letter list; the model gets an ``is_error`` result."""

    strategy: Literal["dead_letter"] = "dead_letter"


RecoveryStrategy = Annotated[
    Retry | Fallback | CachedResult | LlmRecovery | Escalate | DeadLetter,
    Field(discriminator="strategy"),
]


class RecoveryConfig(BaseModel):
    """``config.recovery``: a loop default and per-tool strategies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: RecoveryStrategy = Field(default_factory=LlmRecovery)
    tools: dict[str, RecoveryStrategy] = Field(default_factory=dict[str, RecoveryStrategy])

    def for_tool(self, name: str) -> RecoveryStrategy:
        return self.tools.get(name, self.default)

    def fallback_tools(self) -> list[str]:
        """Every tool named as a fallback (they must be registered, not advertised)."""
        names: list[str] = []
        for strategy in [self.default, *self.tools.values()]:
            if isinstance(strategy, Fallback):
                names += [t for t in strategy.tools if t not in names]
        return names


class DeadLetterEntry(BaseModel):
    """A call that failed for good under ``DeadLetter`` (listed in ``state.dead_letters``)."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    arguments: str
    error: str
    iteration: int
    at: datetime
