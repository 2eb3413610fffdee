"""Circuit breakers, one per tool, held in workflow state (pure, deterministic).

::

    closed ──failure_threshold consecutive failures──▶ open ──recovery_timeout──▶ half_open
      ▲                                                 ▲                            │
      └──────────── a probe succeeds ───────────────────┼──── a probe fails ─────────┘

The state is ``orga.contracts.resilience.Breaker``; these functions move it. Time comes from
the caller (``workflow.now()``), so replay decides exactly as the first run. A call refused by
an open breaker is not a failure of the tool: it does not count.
"""

from __future__ import annotations

from datetime import datetime

from orga.contracts.resilience import Breaker, BreakerConfig

__all__ = ["admit", "record", "reopens_at", "withdraw"]


def reopens_at(breaker: Breaker, config: BreakerConfig) -> datetime | None:
    """When an open breaker will admit probes again."""
    if breaker.state != "open" or breaker.opened_at is None:
        return None
    return breaker.opened_at + config.recovery_timeout


def admit(breaker: Breaker, now: datetime, config: BreakerConfig) -> bool:
    """May a call run now? Counts it as a probe when half-open."""
    if breaker.state == "open":
        reopen = reopens_at(breaker, config)
        if reopen is not None and now >= reopen:
            breaker.state = "half_open"
            breaker.probes_in_flight = 0
        else:
            return False
    if breaker.state == "half_open":
        if breaker.probes_in_flight >= config.half_open_max_calls:
            return False
        breaker.probes_in_flight += 1
    return True


def record(breaker: Breaker, success: bool, now: datetime, config: BreakerConfig) -> None:
    """The outcome of an admitted call."""
    was_probe = breaker.state == "half_open"
    if was_probe:
        breaker.probes_in_flight = max(0, breaker.probes_in_flight - 1)
    if success:
        if was_probe or breaker.state == "closed":
            breaker.state = "closed"
            breaker.consecutive_failures = 0
            breaker.opened_at = None
        return
    breaker.consecutive_failures += 1
    if was_probe or (
        breaker.state == "closed" and breaker.consecutive_failures >= config.failure_threshold
    ):
        breaker.state = "open"
        breaker.opened_at = now
        breaker.probes_in_flight = 0
        breaker.times_opened += 1


def withdraw(breaker: Breaker) -> None:
    """An admitted call never ran the tool's code (invalid arguments, unknown tool): it gives
    no verdict, but frees its probe slot."""
    breaker.probes_in_flight = max(0, breaker.probes_in_flight - 1)
