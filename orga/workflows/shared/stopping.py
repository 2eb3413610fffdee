"""Whether a workflow is stopping: once it is, nothing new is asked or run.

Workflow code. A workflow stops when a client cancels it (the server's cancel request,
``workflow.cancellation_reason()``) or, for a loop's cycle, when its ``timeout`` passes
(``deadline.within`` says so here before it cancels the cycle), or a task
whose step aborted it cancels the steps beside it. Temporal hands a cancelled
activity back as an ordinary failure — or as whatever the activity ended with while it was
being cancelled: its result, or the error a tool raised on the way out — and takes the
cancellation off the task (``asyncio.Task.uncancel``). Code after an activity would go on as
if nothing had happened: a new model call, the next tool, a fallback, an escalation that
waits for an operator for ever.

So every place that reads an outcome which could hide a cancellation, and every place that is
about to ask or run something new, asks ``Stopping.check``: once the workflow stops it raises
``asyncio.CancelledError``, and the workflow ends the way a cancellation ends it (receipts
recorded, a saga's compensations run — ``undoing``: the one work a stopped task still does).
``stopping.now`` tells code that must first record what happened (a turn's receipts) without
raising.

Patch ``stop-means-stop``: before it, a loop went on after a cancel that landed while an
activity ran. A loop set up at ``SETUP_LEVEL`` 2 takes it without a marker; a run set up
earlier, or a task, asks for it only where a stop is met.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import workflow

from orga.workflows.shared.patches import STOP_MEANS_STOP, taken

__all__ = ["Stopping"]


class Stopping:
    """One workflow's stop: a client's cancel, its cycle's deadline, or a task's abort."""

    def __init__(self, level: Callable[[], int] = lambda: 0) -> None:
        self.reason: str | None = None
        """Why the workflow stops from inside: the loop's (or a thread's turn's) ``timeout``
        passed and ``within`` is cancelling the cycle, or a task's step aborted the task and
        the steps beside it are being cancelled (``None`` again once that is over)."""
        self._level = level
        """The setup level of the run (``patches.taken``)."""
        self.undoing = False
        """A task's saga runs its compensations: the one work a stopped workflow still does
        (they pass the gate and run as ever)."""

    @property
    def now(self) -> bool:
        """Whether the workflow is stopping (without asking for the patch)."""
        if self.undoing:
            return False
        return self.reason is not None or workflow.cancellation_reason() is not None

    @property
    def why(self) -> str:
        """Why it stops, in words."""
        if self.reason is not None:
            return self.reason
        reason = workflow.cancellation_reason()
        return f"cancelled: {reason}" if reason else "cancelled"

    def stops(self) -> bool:
        """Whether the workflow stops here (a run from before the patch went on)."""
        return self.now and taken(STOP_MEANS_STOP, self._level())

    def check(self) -> None:
        """Go on only while the workflow is not stopping.

        Raises:
            asyncio.CancelledError: it is stopping; nothing new may be asked or run.
        """
        if self.stops():
            raise asyncio.CancelledError(self.why)
