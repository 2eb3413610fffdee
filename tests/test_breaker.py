"""The circuit breaker's state machine (pure): every transition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orga.contracts.resilience import Breaker, BreakerConfig
from orga.core.breaker import admit, record, reopens_at

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CONFIG = BreakerConfig(
    failure_threshold=3, recovery_timeout=timedelta(seconds=30), half_open_max_calls=2
)


def test_opens_after_consecutive_failures_only() -> None:
    b = Breaker()
    for _ in range(2):
        assert admit(b, T0, CONFIG)
        record(b, False, T0, CONFIG)
    assert admit(b, T0, CONFIG)
    record(b, True, T0, CONFIG)  # a success resets the count
    assert b.consecutive_failures == 0
    for _ in range(3):
        assert admit(b, T0, CONFIG)
        record(b, False, T0, CONFIG)
    assert b.state == "open" and b.opened_at == T0 and b.times_opened == 1
    assert reopens_at(b, CONFIG) == T0 + timedelta(seconds=30)


def test_open_refuses_without_counting_then_half_open_admits_probes() -> None:
    b = Breaker(state="open", consecutive_failures=3, opened_at=T0)
    assert not admit(b, T0 + timedelta(seconds=29), CONFIG)
    assert b.consecutive_failures == 3  # a refusal is not a failure
    later = T0 + timedelta(seconds=30)
    assert admit(b, later, CONFIG) and b.state == "half_open"
    assert admit(b, later, CONFIG)
    assert not admit(b, later, CONFIG)  # only half_open_max_calls probes at once
    record(b, True, later, CONFIG)
    assert b.state == "closed" and b.consecutive_failures == 0


def test_a_failed_probe_opens_again() -> None:
    b = Breaker(state="open", consecutive_failures=3, opened_at=T0)
    later = T0 + timedelta(seconds=31)
    assert admit(b, later, CONFIG)
    record(b, False, later, CONFIG)
    assert b.state == "open" and b.opened_at == later and b.times_opened == 1
    assert not admit(b, later + timedelta(seconds=1), CONFIG)


def test_late_success_of_a_call_admitted_before_opening_keeps_it_open() -> None:
    b = Breaker(state="open", consecutive_failures=3, opened_at=T0)
    record(b, True, T0, CONFIG)
    assert b.state == "open"
