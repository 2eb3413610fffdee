"""The loop's hard timeout, on working time: the clock stops while the loop waits for people.

Workflow code. ``within`` runs the loop's cycle as its own task and waits for it on a workflow
timer; at the deadline it cancels the cycle (with whatever activity it awaits) and raises
``TimeoutError``, however the cycle reacts to its cancellation. While the loop waits for a
person there is no timer, only the wait's own::

    within ── create_task(cycle) ──┬── nobody waited for: timer(limit - working seconds)
                                   │      fires ─▶ cancel the cycle, TimeoutError
                                   ├── a person is asked: wait for the answer (no timer)
                                   └── the cycle ends ─▶ its result
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from temporalio import workflow

from workflows.reasoning.bookkeeping import LoopBooks

__all__ = ["within"]

_T = TypeVar("_T")


async def within(cycle: Coroutine[Any, Any, _T], books: LoopBooks, limit: float) -> _T:
    """Run ``cycle`` under a timeout of ``limit`` working seconds (``books.working_seconds``).

    Raises:
        TimeoutError: the deadline passed (the cycle was cancelled and has ended).
    """
    desk = books.desk
    task = asyncio.create_task(cycle)
    try:
        while not task.done():
            if desk.waiting:
                await workflow.wait_condition(lambda: task.done() or not desk.waiting)
                continue
            remaining = limit - books.working_seconds()
            if remaining <= 0:
                raise TimeoutError
            await workflow.wait_condition(
                lambda: task.done() or desk.waiting,
                timeout=remaining,
                timeout_summary="loop timeout",
            )
    except (TimeoutError, asyncio.CancelledError):
        # The deadline, or the loop itself was cancelled: stop the cycle and wait for it.
        # (Any other BaseException is the worker evicting this workflow: touch nothing.)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise
    return task.result()
