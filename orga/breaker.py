"""Circuit breakers, one per tool, held in workflow state (pure, deterministic).

::

    closed ──failure_threshold consecutive failures──▶ open ──recovery_timeout──▶ half_open
      ▲                                                 ▲                            │
      └──────────── a probe succeeds ───────────────────┼──── a probe fails ─────────┘

Time comes from the caller (``workflow.now()``), so replay decides exactly as the first run.
A call refused by an open breaker is not a failure of the tool: it does not count.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Breaker", "BreakerConfig", "BreakerState"]

BreakerState = Literal["closed", "open", "half_open"]


class BreakerConfig(BaseModel):
    """How breakers of a loop behave (``config.circuit_breaker``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failure_threshold: int = Field(default=5, ge=1)
    """Consecutive failures of a tool that open its breaker."""
    recovery_timeout: timedelta = Field(default=timedelta(seconds=30), gt=timedelta(0))
    """How long an open breaker refuses calls before it admits probes."""
    half_open_max_calls: int = Field(default=2, ge=1)
    """Probes admitted at once while half-open."""


class Breaker(BaseModel):
    """One tool's breaker (shown in the ``state`` query, carried across continue-as-new)."""

    state: BreakerState = "closed"
    consecutive_failures: int = 0
    opened_at: datetime | None = None
    probes_in_flight: int = 0
    times_opened: int = 0

    def reopens_at(self, config: BreakerConfig) -> datetime | None:
        """When an open breaker will admit probes again."""
        if self.state != "open" or self.opened_at is None:
            return None
        return self.opened_at + config.recovery_timeout

    def admit(self, now: datetime, config: BreakerConfig) -> bool:
        """May a call run now? Counts it as a probe when half-open."""
        if self.state == "open":
            reopen = self.reopens_at(config)
            if reopen is not None and now >= reopen:
                self.state = "half_open"
                self.probes_in_flight = 0
            else:
                return False
        if self.state == "half_open":
            if self.probes_in_flight >= config.half_open_max_calls:
                return False
            self.probes_in_flight += 1
        return True

    def record(self, success: bool, now: datetime, config: BreakerConfig) -> None:
        """The outcome of an admitted call."""
        was_probe = self.state == "half_open"
        if was_probe:
            self.probes_in_flight = max(0, self.probes_in_flight - 1)
        if success:
            if was_probe or self.state == "closed":
                self.state = "closed"
                self.consecutive_failures = 0
                self.opened_at = None
            return
        self.consecutive_failures += 1
        if was_probe or (
            self.state == "closed" and self.consecutive_failures >= config.failure_threshold
        ):
            self.state = "open"
            self.opened_at = now
            self.probes_in_flight = 0
            self.times_opened += 1
