"""Timeouts and retry policies of the loop's activities, in one place.

Temporal owns every retry. orga's non-retryable errors carry the flag themselves; the policies
list only ``PayloadsTooLarge`` by type, because the worker would build the same oversized
payload on every attempt.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from temporalio.common import RetryPolicy

__all__ = [
    "MODEL_HEARTBEAT_TIMEOUT",
    "MODEL_RETRY",
    "POLICY_RETRY",
    "POLICY_TIMEOUT",
    "SETUP_TIMEOUT",
    "SHORT_RETRY",
    "SIDE_MODEL_RETRY",
    "TOOL_HEARTBEAT_TIMEOUT",
    "TOOL_RETRY",
    "non_retryable",
    "tool_heartbeat_timeout",
]

_NON_RETRYABLE: Final = ("PayloadsTooLarge",)
"""orga's own non-retryable errors say so themselves (``ApplicationError.non_retryable``), so
retry policies list only what arrives without that flag: the SDK's refusal of a payload over
its limit, which every attempt would build again. (Listing all ~17 orga types made each
scheduled activity ~400 bytes longer in history, on every call.)"""


def non_retryable() -> list[str]:
    """Error types no activity of the loop may retry."""
    return list(_NON_RETRYABLE)


MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=6,
    non_retryable_error_types=_NON_RETRYABLE,
)
"""Model calls: rate limits and 5xx are common and pass; ``Retry-After`` overrides the wait."""

SIDE_MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
    non_retryable_error_types=_NON_RETRYABLE,
)
"""Model calls beside the loop's own (a critic's review, a context summary): a few attempts,
then the loop decides what the failure means (its own calls get ``MODEL_RETRY``)."""

MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
"""The inference activity heartbeats while it waits on the provider: a dead worker is noticed
in 10 s instead of the whole model timeout, and a cancellation reaches it within ~8 s (the SDK
sends heartbeats at most every 80 % of this timeout)."""

TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
    non_retryable_error_types=_NON_RETRYABLE,
)
"""Tool calls: timeouts and lost workers are retried; a tool's own exception is not (unless
the tool asks), it goes back to the model."""

POLICY_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_attempts=3,
    non_retryable_error_types=_NON_RETRYABLE,
)
POLICY_TIMEOUT = timedelta(seconds=10)

SHORT_RETRY = RetryPolicy(maximum_attempts=3, non_retryable_error_types=_NON_RETRYABLE)
SETUP_TIMEOUT = timedelta(seconds=10)


TOOL_HEARTBEAT_TIMEOUT = MODEL_HEARTBEAT_TIMEOUT
"""Within it a tool call's worker must heartbeat, or the call runs again elsewhere. Temporal
counts it from when it hands the call to the worker, and a worker whose CPU is saturated starts
the calls it took seconds later (measured: up to 6 s, 150 loops of CPU-bound tools on two busy
cores); with 5 s, calls that were running fine were started a second time."""


def tool_heartbeat_timeout(timeout: timedelta) -> timedelta | None:
    """Tools heartbeat every second while they run: a lost worker is noticed within
    ``TOOL_HEARTBEAT_TIMEOUT`` rather than at the end of a long start-to-close timeout, and a
    cancellation reaches the tool at once. A call whose whole timeout is shorter has none."""
    return TOOL_HEARTBEAT_TIMEOUT if timeout > TOOL_HEARTBEAT_TIMEOUT else None
