"""Resilience settings and the state they leave behind: circuit breakers and recovery strategies.

``config.circuit_breaker`` tunes one breaker per tool (its state machine is
``orga.core.breaker``). ``config.recovery`` says what a loop does when a tool call fails: a
default strategy and per-tool strategies, e.g. ``{"default": {"strategy": "llm_recovery"},
"tools": {"web_fetch": {"strategy": "retry", "max_attempts": 5}}}``. Every use of a strategy is
journaled as ``RecoveryTriggered`` (tool, strategy, error).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, NonNegativeInt

from orga.contracts.wire import Contract, Tagged

__all__ = [
    "Breaker",
    "BreakerConfig",
    "BreakerState",
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

BreakerState = Literal["closed", "open", "half_open"]


class BreakerConfig(Contract):
    """How breakers of a loop behave (``config.circuit_breaker``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_threshold: int = Field(default=5, ge=1)
    """Consecutive failures of a tool that open its breaker."""
    recovery_timeout: timedelta = Field(default=timedelta(seconds=30), gt=timedelta(0))
    """How long an open breaker refuses calls before it admits probes."""
    half_open_max_calls: int = Field(default=2, ge=1)
    """Probes admitted at once while half-open."""


class Breaker(Contract):
    """One tool's breaker (shown in the ``state`` query, carried across continue-as-new).

    Plain state: ``orga.core.breaker`` moves it between states.
    """

    state: BreakerState = "closed"
    consecutive_failures: NonNegativeInt = 0
    opened_at: datetime | None = None
    probes_in_flight: NonNegativeInt = 0
    times_opened: NonNegativeInt = 0


class _Strategy(Tagged):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Retry(_Strategy):
    """Temporal retries the call (also when the tool raises), then the error goes to the model."""

    strategy: Literal["retry"] = "retry"
    """Names the strategy."""
    max_attempts: int = Field(default=3, ge=1, le=100)
    """Attempts of the tool activity, the first included."""
    initial_interval: timedelta = Field(default=timedelta(seconds=1), gt=timedelta(0))
    """The wait before the second attempt."""
    backoff: float = Field(default=2.0, ge=1.0)
    """Each wait is this many times the one before."""


class Fallback(_Strategy):
    """After the last attempt fails, the same arguments go to these tools, in order."""

    strategy: Literal["fallback"] = "fallback"
    """Names the strategy."""
    tools: list[str] = Field(min_length=1)
    """The alternatives, tried in order (each gated); the model is told which one answered."""


class CachedResult(_Strategy):
    """The last successful result of the same tool with the same arguments, if young enough."""

    strategy: Literal["cached_result"] = "cached_result"
    """Names the strategy."""
    max_age: timedelta = Field(default=timedelta(minutes=10), gt=timedelta(0))
    """The oldest cached result (same tool, same arguments as canonical JSON) still used."""


class LlmRecovery(_Strategy):
    """The error goes back to the model as an ``is_error`` result (the default)."""

    strategy: Literal["llm_recovery"] = "llm_recovery"
    """Names the strategy."""


class Escalate(_Strategy):
    """Park the call and wait for an operator: ``retry``, ``skip``, ``result`` or ``abort``."""

    strategy: Literal["escalate"] = "escalate"
    """Names the strategy."""


class DeadLetter(_Strategy):
    """Record the call in the loop's dead-letter list; the model gets an ``is_error`` result."""

    strategy: Literal["dead_letter"] = "dead_letter"
    """Names the strategy."""


RecoveryStrategy = Annotated[
    Retry | Fallback | CachedResult | LlmRecovery | Escalate | DeadLetter,
    Field(discriminator="strategy"),
]


class RecoveryConfig(Contract):
    """``config.recovery``: a loop default and per-tool strategies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: RecoveryStrategy = Field(default_factory=LlmRecovery)
    """The strategy of every tool that has none of its own."""
    tools: dict[str, RecoveryStrategy] = Field(default_factory=dict[str, RecoveryStrategy])
    """Tool name → its own strategy."""

    def for_tool(self, name: str) -> RecoveryStrategy:
        """The strategy that applies to ``name``: its own, else the loop default."""
        return self.tools.get(name, self.default)

    def fallback_tools(self) -> list[str]:
        """Every tool named as a fallback (they must be registered, not advertised)."""
        names: list[str] = []
        for strategy in [self.default, *self.tools.values()]:
            if isinstance(strategy, Fallback):
                names += [t for t in strategy.tools if t not in names]
        return names


class DeadLetterEntry(Contract):
    """A call that failed for good under ``DeadLetter`` (listed in ``state.dead_letters``)."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    arguments: str
    error: str
    iteration: NonNegativeInt
    at: datetime
