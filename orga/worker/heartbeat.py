"""Heartbeating while an activity waits on something slow (a model, a tool)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Any, Final

from temporalio import activity
from temporalio.worker import WorkerConfig

__all__ = ["HEARTBEAT_THROTTLE", "heartbeating", "throttle_heartbeats"]


HEARTBEAT_THROTTLE: Final = timedelta(seconds=1)
"""How far apart an activity's heartbeats may be sent to the server (a cancel arrives with the
answer to the next)."""


def throttle_heartbeats(config: WorkerConfig) -> None:
    """Send heartbeats at most ``HEARTBEAT_THROTTLE`` apart, where the worker's config kept the
    SDK's throttle (80 % of the heartbeat timeout, at most 60 s): with a tool's 10 s timeout, a
    cancel reached a running tool after 8 s; now within about a second."""
    given_max = config.get("max_heartbeat_throttle_interval")  # pyright: ignore[reportUnknownMemberType]
    given_default = config.get("default_heartbeat_throttle_interval")  # pyright: ignore[reportUnknownMemberType]
    if given_max in (None, timedelta(seconds=60)):  # the SDK's defaults
        config["max_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE
    if given_default in (None, timedelta(seconds=30)):
        config["default_heartbeat_throttle_interval"] = HEARTBEAT_THROTTLE


@contextlib.asynccontextmanager
async def heartbeating(every: float = 1.0, details: tuple[Any, ...] = ()) -> AsyncGenerator[None]:
    """Heartbeat in the background while the body waits (so a dead worker is noticed); a
    local activity cannot heartbeat, and does nothing here.

    A timer callback, not a task: most calls end within ``every`` and never heartbeat, and a
    callback costs them nothing but the timer (it runs in the activity's context, copied when
    it is scheduled). Each heartbeat carries ``details`` (the server keeps the last for the
    next attempt)."""
    if activity.info().is_local:
        yield
        return
    loop = asyncio.get_running_loop()

    def beat() -> None:
        nonlocal timer
        activity.heartbeat(*details)
        timer = loop.call_later(every, beat)

    timer = loop.call_later(every, beat)
    try:
        yield
    finally:
        timer.cancel()
