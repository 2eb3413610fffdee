"""Each model's health on this worker: a circuit breaker per (provider, model), in memory.

Worker code, shared by every loop whose model calls this worker makes, so a provider that is
down costs the worker its retries once, not every loop its own::

    closed ──THRESHOLD calls in a row unavailable──▶ down ──COOL_OFF──▶ half_open (one trial)
      ▲                                               ▲                          │
      └─────────── the trial succeeds ────────────────┼──── the trial fails ─────┘

The state machine is the tool breakers' (``orga.core.breaker``, on ``Breaker``), timed by the
worker's clock instead of the workflow's, and held by the process, not by a loop: it starts
closed on every worker and is not shared between workers. A call refused while down fails at
once with ``ProviderDown`` (``orga.contracts.errors``, retryable), which asks Temporal to try
again when the trial is due; a loop with a fallback model left lists that type as
non-retryable and switches at once (``orga.workflows.reasoning.model_call``).

Only failures that say the model cannot be reached count: ``ProviderUnavailable`` (408, 409,
429, 5xx, network errors and timeouts of the HTTP client, in-band errors) and a call Temporal
cancelled at its timeout. A refusal of the request (``ProviderRejected``, ``ProviderAuthError``),
a malformed answer, a budget or a cancellation gives no verdict. Activities run on the worker's
event loop, and no ``await`` stands between reading a breaker and moving it: nothing else
changes it meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator
from datetime import UTC, datetime, timedelta
from typing import Final

from temporalio import activity
from temporalio.exceptions import ApplicationError, FailureError

from orga.contracts.errors import ProviderDown, ProviderUnavailable
from orga.contracts.resilience import Breaker, BreakerConfig, BreakerState
from orga.core.breaker import admit, record, reopens_at, withdraw

__all__ = ["COOL_OFF", "PROVIDER_DOWN", "THRESHOLD", "ProviderHealth", "unavailable"]

PROVIDER_DOWN: Final = ProviderDown.__name__
"""The ``ApplicationError`` type of a call refused because its model is down on this worker
(the workflow's ``model_call`` names the same type)."""

THRESHOLD: Final = 5
"""Model calls in a row that fail unavailable before the model is down on this worker: fewer
than one call's retries (``MODEL_RETRY``: 6 attempts), so the first loop to meet an outage
switches to its fallback one backoff (~16 s) early, and the loops after it at once."""

COOL_OFF: Final = timedelta(seconds=30)
"""How long a model that is down is not asked; then one trial call is let through."""

_log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


def unavailable(error: BaseException) -> bool:
    """Does ``error`` (what a model call raised) say the model cannot be reached now?"""
    if isinstance(error, ProviderUnavailable):
        return True
    if isinstance(error, asyncio.CancelledError) and activity.in_activity():
        details = activity.cancellation_details()
        return details is not None and details.timed_out
    return False


class ProviderHealth:
    """The breakers of one worker's models, by ``(provider, model)``."""

    def __init__(
        self,
        *,
        threshold: int = THRESHOLD,
        cool_off: timedelta = COOL_OFF,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        """``threshold``: unavailable calls in a row that take a model down; ``cool_off``: how
        long it stays down before a trial call; ``clock``: the time (tests pass their own)."""
        self._config = BreakerConfig(
            failure_threshold=threshold, recovery_timeout=cool_off, half_open_max_calls=1
        )
        self._clock = clock
        self._breakers: dict[tuple[str, str], Breaker] = {}
        self._last_error: dict[tuple[str, str], str] = {}

    def state(self, provider: str, model: str) -> BreakerState:
        """``closed``, ``open`` (down) or ``half_open`` (a trial is due or in flight)."""
        breaker = self._breakers.get((provider, model))
        return "closed" if breaker is None else breaker.state

    @contextlib.contextmanager
    def guard(self, provider: str, model: str) -> Generator[None]:
        """Around one call of ``model``: refuses it while the model is down, and records how
        the call ended.

        Raises:
            ProviderDown: (retryable) before the body runs when
                the model is down, or in place of the body's unavailable failure (chained) when
                that failure takes it down.
        """
        key = (provider, model)
        breaker = self._breakers.setdefault(key, Breaker())
        if not admit(breaker, self._clock(), self._config):
            raise self._down(key, breaker)
        trial = breaker.state == "half_open"
        try:
            yield
        except BaseException as error:
            if not unavailable(error):
                if trial and breaker.state == "half_open":
                    withdraw(breaker)  # no verdict on the model: the next call is the trial
                raise
            said = error.message if isinstance(error, FailureError) else str(error)
            self._last_error[key] = f"{type(error).__name__}: {said}"
            was = breaker.state
            record(breaker, False, self._clock(), self._config)
            if breaker.state != "open":
                raise
            if was != "open":
                _log.warning("%s %r is down on this worker: %s", provider, model, self._said(key))
            raise self._down(key, breaker) from error
        record(breaker, True, self._clock(), self._config)
        if trial and breaker.state == "closed":
            _log.warning("%s %r answered its trial call: up again on this worker", provider, model)

    def _said(self, key: tuple[str, str]) -> str:
        return self._last_error.get(key, "no failure recorded")

    def _down(self, key: tuple[str, str], breaker: Breaker) -> ApplicationError:
        """The refusal of a call while ``key``'s model is down (or its trial is in flight)."""
        provider, model = key
        since = breaker.opened_at
        again = reopens_at(breaker, self._config)
        wait = again - self._clock() if again is not None else None
        when = (
            f"this worker lets one trial call through from {again.isoformat()}"
            if again is not None
            else "its trial call is in flight on this worker"
        )
        return ProviderDown(
            f"{provider} model {model!r} is down on this worker since "
            f"{since.isoformat() if since else '?'} ({breaker.consecutive_failures} calls "
            f"in a row unavailable, the last {self._said(key)}); {when}. A loop with a fallback "
            "model turns to it now; one without retries the call.",
            {
                "provider": provider,
                "model": model,
                "down_since": since.isoformat() if since else None,
                "trial_from": again.isoformat() if again is not None else None,
                "last_error": self._said(key),
            },
            # A retry lands when the trial is due, so a loop without a fallback gets its trial
            # instead of spending its attempts while the model is down.
            next_retry_delay=wait if wait is not None and wait > timedelta(0) else None,
        )
