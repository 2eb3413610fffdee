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
    local activity cannot heartbeat, and does nothing here."""
    if activity.info().is_local:
        yield
        return

    async def beat() -> None:
        while True:  # a call that ends within ``every`` never heartbeats: nothing to send
            await asyncio.sleep(every)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
