"""Heartbeating while an activity waits on something slow (a model, a tool)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from temporalio import activity

__all__ = ["heartbeating"]


@contextlib.asynccontextmanager
async def heartbeating(every: float = 1.0) -> AsyncGenerator[None]:
    """Heartbeat in the background while the body waits (so a dead worker is noticed); a
    local activity cannot heartbeat, and does nothing here.

    A timer callback, not a task: most calls end within ``every`` and never heartbeat, and a
    callback costs them nothing but the timer (it runs in the activity's context, copied when
    it is scheduled)."""
    if activity.info().is_local:
        yield
        return
    loop = asyncio.get_running_loop()

    def beat() -> None:
        nonlocal timer
        activity.heartbeat()
        timer = loop.call_later(every, beat)

    timer = loop.call_later(every, beat)
    try:
        yield
    finally:
        timer.cancel()
