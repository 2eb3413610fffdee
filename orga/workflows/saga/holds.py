"""A task's step calls that a pause holds: each waits for the pause to end, then runs once.

Workflow code. A step's call whose tool, task (``orga pause ID``) or agent is paused does not
run: the tool activity fails ``ToolPaused`` before the tool is called. ``PauseHolds.run`` then
waits — once ``recheck`` (plus a random share of it), then for the ``pause_lifted`` signal
``orga resume`` sends (``orga.workflows.shared.pause_wait``) — and asks again, the approval
already granted kept: no attempt is spent, nothing is skipped or compensated for it. The call
is journaled ``CallPaused`` when it begins to wait and ``CallResumed`` when it goes on, and the
task is listed ``paused`` meanwhile. A stopping task waits for nothing. Patch
``task-holds-paused-steps``: before it, a held call failed the step's attempt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow

from orga.contracts.conversation import ToolResult
from orga.contracts.journal import CallPaused, CallResumed, JournalEntry, Stamp
from orga.workflows.shared.patches import TASK_HOLDS_PAUSED_STEPS
from orga.workflows.shared.pause_wait import wait_out_pause
from orga.workflows.shared.stopping import Stopping
from orga.workflows.shared.tool_calls import ToolFailure

__all__ = ["PauseHolds"]


@dataclass
class PauseHolds:
    """The calls of one task's steps that pauses hold, and how they wait."""

    record: Callable[[JournalEntry], None]
    stamp: Callable[[], Stamp]
    changed: Callable[[], None]
    """Told when a call begins or ends waiting (the task's status says ``paused``)."""
    stopping: Stopping
    recheck: timedelta = field(default_factory=lambda: timedelta(seconds=10))
    """How long a held call waits before it asks again (plus up to as much)."""
    lifted: int = 0
    """``pause_lifted`` signals so far: a held call waits for the next."""
    calls: dict[str, str] = field(default_factory=dict[str, str])
    """Steps whose call waits, and why (the pause's ``describe()``)."""

    async def run(
        self, step_id: str, tool: str, call: Callable[[], Awaitable[ToolResult | ToolFailure]]
    ) -> ToolResult | ToolFailure:
        """``call``'s outcome, asked again while a pause holds it."""
        first = True
        while True:
            asked = self.lifted
            done = await call()
            why = (
                done.message if isinstance(done, ToolFailure) and done.status == "paused" else None
            )
            if (
                why is None
                or self.stopping.stops()  # a stopping task waits for nothing
                or not workflow.patched(TASK_HOLDS_PAUSED_STEPS)
            ):
                if why is None and self.calls.pop(step_id, None) is not None:  # it went on
                    self.record(CallResumed(**self.stamp(), call_id=step_id, tool=tool))
                    self.changed()
                return done
            if step_id not in self.calls:
                self.record(CallPaused(**self.stamp(), call_id=step_id, tool=tool, reason=why))
            self.calls[step_id] = why
            self.changed()
            await wait_out_pause(
                lambda: self.lifted,
                self.recheck,
                first=first,
                summary=f"step {step_id} paused · {tool}",
                asked=asked,
            )
            first = False

    def release_all(self) -> bool:
        """The task stops: nothing it held waits any more. Whether anything did."""
        held = bool(self.calls)
        self.calls.clear()
        return held
