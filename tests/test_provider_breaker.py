"""Failover not paid per loop (issue 55): each worker keeps a breaker per (provider, model), so
a model that is down costs the worker its retries once; the loops after the first ask their
fallback at once, and a loop without one keeps retrying until the trial call gets through.

The breaker's transitions on an injected clock first (no server), then loops on the dev server.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from orga.contracts.agents import ModelChoice
from orga.contracts.errors import ProviderRejected, ProviderUnavailable
from orga.contracts.journal import Journal, ModelSwitched
from orga.scripted.server import Raw, Turn
from orga.worker.provider_health import PROVIDER_DOWN, THRESHOLD, ProviderHealth
from orga.workflows.reasoning.model_call import _PROVIDER_DOWN
from tests.harness import Harness

T0 = datetime(2026, 1, 1, tzinfo=UTC)
COOL_OFF = timedelta(seconds=30)


class Clock:
    """The breaker's time, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def fails(health: ProviderHealth, error: Exception, model: str = "m") -> ApplicationError:
    """What one call of ``model`` that raises ``error`` raises through the breaker."""
    with pytest.raises(ApplicationError) as raised, health.guard("openai", model):
        raise error
    return raised.value


def succeeds(health: ProviderHealth, model: str = "m") -> None:
    with health.guard("openai", model):
        pass


def refused(health: ProviderHealth, model: str = "m") -> ApplicationError:
    """The refusal of a call while ``model`` is down; the call's body never runs."""
    ran: list[bool] = []
    with pytest.raises(ApplicationError) as raised, health.guard("openai", model):
        ran.append(True)
    assert ran == [] and raised.value.type == PROVIDER_DOWN
    assert not raised.value.non_retryable  # retried, unless the loop has a fallback left
    return raised.value


OVERLOADED = ProviderUnavailable("openai answered HTTP 503: overloaded")


def down(clock: Clock) -> ProviderHealth:
    """A breaker whose model ``m`` went down at ``T0``."""
    health = ProviderHealth(threshold=3, cool_off=COOL_OFF, clock=clock)
    for _ in range(3):
        fails(health, OVERLOADED)
    return health


def test_the_workflow_and_the_worker_name_the_same_type() -> None:
    assert _PROVIDER_DOWN == PROVIDER_DOWN


def test_closed_until_threshold_calls_in_a_row_fail_unavailable() -> None:
    clock = Clock()
    health = ProviderHealth(threshold=3, cool_off=COOL_OFF, clock=clock)
    assert fails(health, OVERLOADED) is OVERLOADED
    succeeds(health)  # a success starts the count again
    for _ in range(2):
        assert fails(health, OVERLOADED) is OVERLOADED
    assert health.state("openai", "m") == "closed"
    opened = fails(health, OVERLOADED)  # the third in a row takes it down, and says so
    assert isinstance(opened, ApplicationError) and opened.type == PROVIDER_DOWN
    assert opened.__cause__ is OVERLOADED
    assert health.state("openai", "m") == "open"
    assert health.state("openai", "other") == "closed"  # one breaker per (provider, model)
    succeeds(health, "other")


def test_a_refused_request_is_no_verdict_on_the_model() -> None:
    clock = Clock()
    health = ProviderHealth(threshold=2, cool_off=COOL_OFF, clock=clock)
    rejected = ProviderRejected("HTTP 400: bad request")
    for _ in range(5):
        assert fails(health, rejected) is rejected
    assert health.state("openai", "m") == "closed"
    fails(health, OVERLOADED)
    fails(health, rejected)  # neither counts nor breaks the run of unavailable calls
    assert fails(health, OVERLOADED).type == PROVIDER_DOWN


def test_down_refuses_at_once_then_lets_one_trial_through() -> None:
    clock = Clock()
    health = down(clock)
    clock.now = T0 + timedelta(seconds=10)
    refusal = refused(health)
    assert refusal.next_retry_delay == timedelta(seconds=20)  # retried when the trial is due
    assert "openai model 'm' is down on this worker since 2026-01-01T00:00:00+00:00" in (
        refusal.message
    )
    assert "3 calls in a row unavailable, the last ProviderUnavailable: openai answered" in (
        refusal.message
    )
    assert "one trial call through from 2026-01-01T00:00:30+00:00" in refusal.message
    assert refusal.details[0]["trial_from"] == "2026-01-01T00:00:30+00:00"
    clock.now = T0 + COOL_OFF
    with health.guard("openai", "m"):  # the trial
        assert health.state("openai", "m") == "half_open"
        in_flight = refused(health)  # only one trial at a time
        assert in_flight.next_retry_delay is None
        assert "its trial call is in flight" in in_flight.message
    assert health.state("openai", "m") == "closed"
    succeeds(health)


def test_a_failed_trial_takes_it_down_again() -> None:
    clock = Clock()
    health = down(clock)
    clock.now = T0 + timedelta(seconds=31)
    assert fails(health, OVERLOADED).type == PROVIDER_DOWN
    assert health.state("openai", "m") == "open"
    clock.now = T0 + timedelta(seconds=60)  # counted from the failed trial, not from T0
    assert refused(health).next_retry_delay == timedelta(seconds=1)
    clock.now = T0 + timedelta(seconds=61)
    succeeds(health)
    assert health.state("openai", "m") == "closed"


def test_a_trial_without_verdict_leaves_the_next_call_the_trial() -> None:
    clock = Clock()
    health = down(clock)
    clock.now = T0 + COOL_OFF
    fails(health, ProviderRejected("HTTP 400: bad request"))
    assert health.state("openai", "m") == "half_open"
    succeeds(health)  # the next call is let through, and its success closes the breaker
    assert health.state("openai", "m") == "closed"


# ---- on the dev server ---------------------------------------------------------------------

DOWN = Raw(503, {"error": {"message": "overloaded"}})
"""A model that is down, without ``Retry-After``: Temporal's backoff (1, 2, 4, 8 s) applies."""


async def test_a_side_call_shares_the_breaker_of_the_loops_calls() -> None:
    """A critic's review or a context summary (``SpendGuard.charged``) of a model the loops
    took down is refused unasked, and its own unavailable failures count toward the breaker."""
    from temporalio.testing import ActivityEnvironment

    from orga.activities.principals import SpendGuard
    from orga.worker.principals import PrincipalRegistry

    health = ProviderHealth()
    guard = SpendGuard(PrincipalRegistry(), None, None, health)
    asked: list[str] = []

    async def side_call() -> None:
        async def call() -> Any:
            asked.append("asked")
            raise OVERLOADED

        await guard.charged(
            None, provider="openai", model="m", estimated=10, max_output=10, call=call
        )

    for _ in range(THRESHOLD - 1):
        with pytest.raises(ProviderUnavailable):
            await ActivityEnvironment().run(side_call)
    with pytest.raises(ApplicationError) as failed:  # the side call's failure takes it down
        await ActivityEnvironment().run(side_call)
    assert failed.value.type == PROVIDER_DOWN and len(asked) == THRESHOLD
    refused(health)  # the loop's own calls see it down too
    with pytest.raises(ApplicationError) as failed:
        await ActivityEnvironment().run(side_call)
    assert failed.value.type == PROVIDER_DOWN and len(asked) == THRESHOLD  # not asked


async def test_ten_loops_pay_for_a_down_model_once(harness: Harness) -> None:
    """Ten loops, one after another on one worker, whose model is down: the first pays the
    retries that take it down and switches; the others ask their fallback at once."""
    primary = harness.new_model([DOWN] * THRESHOLD)
    fallback = harness.new_model([Turn(text=f"answer {n}") for n in range(10)])

    def asked() -> int:
        return len(harness.model.requests_for(primary))

    to_switch: list[float] = []
    async with harness.worker():
        for n in range(10):
            started = time.monotonic()
            handle = await harness.start(
                f"question {n}", provider="openai", model=primary,
                fallbacks=[ModelChoice(provider="anthropic", model=fallback)],
            )  # fmt: skip
            assert (await handle.result()).output == f"answer {n}"
            journal = await handle.query("journal", result_type=Journal)
            [switched] = [e for e in journal.entries if isinstance(e, ModelSwitched)]
            assert "(ProviderDown)" in switched.error
            first_asked = harness.model.requests_for(fallback)[n].at
            to_switch.append(first_asked - started)
            if n == 0:  # the first loop paid the retries, then the breaker opened
                assert asked() == THRESHOLD
                assert "ProviderUnavailable" in switched.error  # the cause it names
                assert all(
                    r.at < first_asked for r in harness.model.requests_for(primary)
                )  # every attempt came before the switch
        assert harness.plugin is not None
        health = harness.plugin.parts(harness.client).inference.health
        assert health.state("openai", primary) == "open"
    assert asked() == THRESHOLD  # loops 2 to 10 never asked the model that is down
    print(
        f"\nfrom a loop's start to its fallback's first request: loop 1 {to_switch[0]:.2f} s, "
        f"loop 10 {to_switch[9]:.3f} s"
    )


async def test_a_loop_without_fallback_retries_until_the_trial_gets_through(
    harness: Harness,
) -> None:
    """No fallback: ``ProviderDown`` is retried, the retry waits for the trial, and the
    model's answer to the trial closes the breaker."""
    soon = Raw(503, {"error": {"message": "overloaded"}}, headers={"retry-after-ms": "10"})
    model = harness.new_model([*[soon] * THRESHOLD, Turn(text="back again")])
    async with harness.worker():
        assert harness.plugin is not None
        inference = harness.plugin.parts(harness.client).inference
        inference.health = ProviderHealth(cool_off=timedelta(seconds=1))  # a short cool-off
        result = await harness.run("hi", provider="openai", model=model)
        assert inference.health.state("openai", model) == "closed"
    assert result.output == "back again"
    assert len(harness.model.requests_for(model)) == THRESHOLD + 1  # the trial, once
