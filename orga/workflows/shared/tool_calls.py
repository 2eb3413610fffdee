"""Running the tool activity, and what its failure means: one place for a loop's calls, a
task's steps and their compensations.

Workflow code. ``run_tool`` schedules ``run_tool`` (an activity, or a local activity for a
short pure tool) and returns the tool's result, or a ``ToolFailure`` read from the failure's
root cause by one table: the status the model or the task sees, and whether another attempt
could do better. ``WorkerWait`` is the wait of a call (or a model call naming the tool) that
no worker which took it could run, for a worker that registers its tool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError
from temporalio.workflow import ActivityCancellationType, ActivityHandle

from orga.contracts.conversation import ToolResult, ToolStatus
from orga.contracts.tools import LOCAL_TOOL_TIMEOUT, RUN_TOOL, ToolInvocation
from orga.core.eager import not_eager
from orga.workflows.shared.failures import failure_of
from orga.workflows.shared.options import tool_heartbeat_timeout
from orga.workflows.shared.patches import (
    TASK_WAITS_FOR_WORKER,
    WORKER_WAIT_ASKS_ELSEWHERE,
    WORKER_WAIT_GROWS,
)

__all__ = [
    "WORKER_WAIT_FIRST",
    "WORKER_WAIT_LONG",
    "WORKER_WAIT_LONGEST",
    "WORKER_WAIT_PATIENT",
    "ToolFailure",
    "WorkerWait",
    "run_tool",
    "tool_failure",
]

WORKER_WAIT_FIRST: Final = timedelta(seconds=2)
WORKER_WAIT_LONGEST: Final = timedelta(minutes=1)
"""A call no worker that took it could run waits this long at first, doubling to this."""
WORKER_WAIT_PATIENT: Final = timedelta(minutes=10)
WORKER_WAIT_LONG: Final = timedelta(minutes=15)
"""Once a call has waited ``WORKER_WAIT_PATIENT`` for a worker with its tool, it asks every
``WORKER_WAIT_LONG`` (patch ``worker-wait-grows``): a try is a timer and an activity, ~8
events, and a wait of days must not bring the history to the server's limit (at a minute
apart it did in about four days)."""

_BY_TYPE: Final[dict[str, tuple[ToolStatus, bool]]] = {
    "ToolInputError": ("invalid_arguments", True),
    "ToolNotFound": ("unknown_tool", True),
    "ToolNotOnThisWorker": ("failed", False),
    "InvalidConfig": ("failed", True),
    "ToolPermissionError": ("denied", False),
    "ToolFailed": ("failed", False),
    "ToolUnavailable": ("failed", False),
    "OutcomeUnknown": ("unknown", True),
    "ToolPaused": ("paused", False),
}
"""An error type's status for the model, and whether no other attempt can do better."""


@dataclass(frozen=True)
class ToolFailure:
    """Why a tool call did not give a result."""

    status: ToolStatus
    message: str
    unrecoverable: bool = False
    """No other attempt can do better (invalid arguments, no such tool, a bad setup)."""
    timed_out: bool = False
    cancelled: bool = False
    """The workflow's own cancellation reached the call."""
    typed: bool = True
    """An error the tool activity raised on purpose (its message is for the model); False for
    anything else (a cancellation, an unexpected failure)."""
    elsewhere: bool = False
    """The workers that took the call do not register the tool: another may
    (``ToolNotOnThisWorker``); the call waits for one."""


def tool_failure(error: BaseException) -> ToolFailure:
    """What a tool activity's failure (or a child loop's, for a task's step) means."""
    failure = failure_of(error)
    if failure.timed_out:
        return ToolFailure("timed_out", failure.message, timed_out=True)
    status, unrecoverable = _BY_TYPE.get(failure.kind, ("failed", False))
    return ToolFailure(
        status,
        failure.message,
        unrecoverable,
        cancelled=failure.cancelled,
        typed=failure.kind in _BY_TYPE,
        elsewhere=failure.kind == "ToolNotOnThisWorker",
    )


async def run_tool(
    invocation: ToolInvocation,
    *,
    timeout: timedelta,
    retry: RetryPolicy,
    summary: str,
    heartbeat: timedelta | None,
    cancellation: ActivityCancellationType,
    local: bool = False,
    priority: Priority = Priority.default,
) -> ToolResult | ToolFailure:
    """The tool's result, or why there is none (raises only on the workflow's cancellation).

    ``local``: a short pure tool, run as a local activity in this worker (at most
    ``LOCAL_TOOL_TIMEOUT`` an attempt, recorded as a marker). ``priority``: its fairness key
    and weight (the principal's tenant).
    """
    try:
        if local:
            handle = workflow.start_local_activity(
                RUN_TOOL,
                invocation,
                result_type=ToolResult,
                start_to_close_timeout=min(timeout, LOCAL_TOOL_TIMEOUT),
                retry_policy=retry,
                summary=summary,
            )
        else:
            handle = workflow.start_activity(
                RUN_TOOL,
                invocation,
                result_type=ToolResult,
                start_to_close_timeout=timeout,
                heartbeat_timeout=heartbeat,
                retry_policy=retry,
                summary=summary,
                cancellation_type=cancellation,
                priority=priority,
            )
        return await _outcome(handle)
    except (ActivityError, ApplicationError, TimeoutError) as error:
        # A local activity's failure may arrive as the error itself, not wrapped.
        return tool_failure(error)


async def _outcome(handle: ActivityHandle[ToolResult]) -> ToolResult:
    """The call's outcome, even when the workflow is cancelled as (or after) it comes.

    Cancelled while it waits, Temporal's SDK drops a result that arrived in the same workflow
    task as the cancellation: the call would have delivered its effect with no receipt. So the
    call is shielded from the waiter's cancellation; on it, the call is asked to stop (unless
    its result is already in) and its own outcome is what the caller reads — its result, its
    failure, or, once it stopped, its cancellation (``cancellation``: waited for or not)."""
    try:
        return await asyncio.shield(handle)
    except asyncio.CancelledError:
        await asyncio.sleep(0)  # a result that came with the cancellation settles first
        if not handle.done():
            handle.cancel()  # the call is asked to stop
        return await handle


async def run_task_tool(
    invocation: ToolInvocation,
    *,
    timeout: timedelta,
    retry: RetryPolicy,
    summary: str,
    priority: Priority = Priority.default,
) -> ToolResult | ToolFailure:
    """A task's step or compensation: ``run_tool``, its cancellation waited for; when only
    the workers that took it lack the tool, it waits for one that has it and runs again rather
    than failing (patch ``task-waits-for-worker``: before it, that counted as a failure)."""
    wait = WorkerWait(invocation.call.name)
    while True:
        wait.asking()
        done = await run_tool(
            invocation,
            timeout=timeout,
            retry=retry,
            summary=summary,
            heartbeat=tool_heartbeat_timeout(timeout),
            cancellation=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            priority=priority,
        )
        if not (
            isinstance(done, ToolFailure)
            and done.elsewhere
            and workflow.patched(TASK_WAITS_FOR_WORKER)
        ):
            return done
        await wait.pause()


class WorkerWait:
    """A call's wait for a worker that registers ``tool``: a durable timer between tries (2 s,
    doubling to a minute, and on to 15 minutes after the first ten; the loop's timeout bounds
    it), counted in ``waiting`` (tool → calls waiting: a loop's ``waiting_for_workers``) while it
    lasts, with ``changed`` told when the count starts and ends."""

    def __init__(
        self,
        tool: str,
        waiting: dict[str, int] | None = None,
        changed: Callable[[], None] | None = None,
    ) -> None:
        self.tool = tool
        self._waiting = waiting if waiting is not None else {}
        self._changed = changed
        self._pause = WORKER_WAIT_FIRST
        self._waited = timedelta(0)
        self._counted = False
        self._elsewhere = False
        """The next try goes to any worker of the queue, never eagerly to this one."""

    async def pause(self) -> None:
        """Wait before the next try (counted from the first)."""
        if not self._counted:
            self._waiting[self.tool] = self._waiting.get(self.tool, 0) + 1
            self._counted = True
            self._tell()
        # The first try may have been handed straight back to this workflow's worker (eager
        # dispatch), the very one that lacks the tool: the next asks any other, at once.
        at_once = not self._elsewhere and workflow.patched(WORKER_WAIT_ASKS_ELSEWHERE)
        self._elsewhere = True
        if at_once:
            return
        await workflow.sleep(self._pause, summary=f"waiting for a worker with tool {self.tool}")
        self._waited += self._pause
        longest = WORKER_WAIT_LONGEST
        if self._waited >= WORKER_WAIT_PATIENT and workflow.patched(WORKER_WAIT_GROWS):
            longest = WORKER_WAIT_LONG
        self._pause = min(self._pause * 2, longest)

    def asking(self) -> None:
        """Before each try: once one found no worker with the tool, the next is handed to
        any worker of the queue, never eagerly back to the one running the workflow (which
        may be the one that lacks it: ``orga.core.eager``)."""
        not_eager(self._elsewhere)

    def end(self) -> None:
        """The call ran (or failed otherwise): it no longer waits."""
        if not self._counted:
            return
        self._counted = False
        self._waiting[self.tool] -= 1
        if not self._waiting[self.tool]:
            del self._waiting[self.tool]
        self._tell()

    def _tell(self) -> None:
        if self._changed is not None:
            self._changed()
