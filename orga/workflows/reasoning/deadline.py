"""The loop's hard timeout, on working time: the clock stops while the loop waits for people.

Workflow code. ``within`` runs the loop's cycle as its own task and waits for it on a workflow
timer; at the deadline it cancels the cycle (with whatever activity it awaits) and raises
``TimeoutError`` once the cycle has stopped: ``books.stopping`` says why meanwhile, so the
cycle asks or runs nothing new (``orga.workflows.shared.stopping``). While the loop waits for a
person there is no timer, only the wait's own::

    within ── create_task(cycle) ──┬── nobody waited for: timer(limit - working seconds)
                                   │      fires ─▶ cancel the cycle, TimeoutError
                                   ├── a person is asked: cancel the timer, wait for the
                                   │      answer, then a new timer for what is left
                                   └── the cycle ends ─▶ its result (the timer lapses)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from temporalio import workflow

from orga.workflows.reasoning.loop_books import LoopBooks

__all__ = ["within"]

_T = TypeVar("_T")


async def within(cycle: Coroutine[Any, Any, _T], books: LoopBooks, limit: float) -> _T:
    """Run ``cycle`` under a timeout of ``limit`` working seconds (``books.working_seconds``).

    The deadline's timer is cancelled only when a person is asked or a call waits for its pause
    to end (the clock stops: ``books.clock_stopped``); when the
    cycle ends first it is left to lapse, so a loop's history carries no cancelled timer.

    Raises:
        TimeoutError: the deadline passed (the cycle was cancelled and has ended).
    """
    task = asyncio.create_task(cycle)
    deadline: asyncio.Task[None] | None = None
    try:
        while not task.done():
            if books.clock_stopped():
                if deadline is not None:
                    deadline.cancel()
                    deadline = None
                await workflow.wait_condition(lambda: task.done() or not books.clock_stopped())
                continue
            if deadline is None:
                remaining = limit - books.working_seconds()
                if remaining <= 0:
                    raise TimeoutError
                deadline = asyncio.create_task(workflow.sleep(remaining, summary="loop timeout"))
            await workflow.wait_condition(
                lambda timer=deadline: task.done() or books.clock_stopped() or timer.done()
            )
            if deadline.done() and not task.done():
                raise TimeoutError
    except (TimeoutError, asyncio.CancelledError) as stop:
        # The deadline, or the loop itself was cancelled: stop the cycle and wait for it. The
        # cycle asks ``books.stopping`` after each activity (Temporal hands it a cancelled one
        # as a plain failure): the deadline is said there, a cancel the server says itself.
        # (Any other BaseException is the worker evicting this workflow: touch nothing.)
        if isinstance(stop, TimeoutError):
            books.stopping.reason = f"its timeout of {limit:g} s of working time passed"
        task.cancel()
        try:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        finally:
            books.stopping.reason = None  # a thread's next turn starts afresh
        raise
    return task.result()
