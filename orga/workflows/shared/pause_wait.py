"""A call held by a pause waits for the pause to end: for a signal, not by polling.

Workflow code. A tool call (or a model call) that finds its tool, agent or loop paused does not
run; it waits, then asks again. The first time it asks again after ``recheck`` (plus a random
share of it: the pause may have ended meanwhile, before anyone could tell the loop); from then
on it waits for ``pause_lifted`` — the signal ``orga resume`` and the desk send to the loops a
pause holds — with a fallback of ``PAUSE_FALLBACK``, then asks again within ``recheck`` (the
calls a resume releases run spread out). Before patch ``pause-waits-for-resume`` every wait was
a ``recheck`` timer and a call: ~2,600 events an hour, until the server ended the loop at
51,200 events; now ~8 an hour.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Final

from temporalio import workflow

from orga.workflows.shared.patches import PAUSE_WAITS_FOR_RESUME, RESUME_WHILE_ASKING

__all__ = ["PAUSE_FALLBACK", "wait_out_pause"]

PAUSE_FALLBACK: Final = timedelta(hours=1)
"""How long a held call waits for ``pause_lifted`` before it asks again all the same (a resume
that could not signal the loop: its store written directly, Temporal out of reach)."""


async def wait_out_pause(
    lifted: Callable[[], int] | None,
    recheck: timedelta,
    *,
    first: bool,
    summary: str,
    asked: int,
) -> None:
    """Wait before a held call asks again. ``lifted``: how many ``pause_lifted`` signals the
    loop has had (None: it cannot be signalled); ``first``: the call's first wait;
    ``asked``: how many it had when the call was asked — one that came since (the resume
    raced the answer "paused") is the one it waits for, already here."""
    spread = recheck * (1 + workflow.random().random())
    if first or lifted is None or not workflow.patched(PAUSE_WAITS_FOR_RESUME):
        await workflow.sleep(spread, summary=summary)
        return
    seen = lifted()
    if asked < seen and workflow.patched(RESUME_WHILE_ASKING):
        await workflow.sleep(spread - recheck, summary=f"{summary} · resumed")
        return
    try:
        await workflow.wait_condition(
            lambda: lifted() > seen,
            timeout=PAUSE_FALLBACK,
            timeout_summary=f"{summary} · until resumed",
        )
    except TimeoutError:
        return
    await workflow.sleep(spread - recheck, summary=f"{summary} · resumed")
