"""Running the tool activity, and what its failure means: one place for a loop's calls, a
task's steps and their compensations.

Workflow code. ``run_tool`` schedules ``run_tool`` (an activity, or a local activity for a
short pure tool) and returns the tool's result, or a ``ToolFailure`` read from the failure's
root cause by one table: the status the model or the task sees, and whether another attempt
could do better.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError
from temporalio.workflow import ActivityCancellationType

from orga.contracts.conversation import ToolResult, ToolStatus
from orga.contracts.tools import LOCAL_TOOL_TIMEOUT, RUN_TOOL, ToolInvocation
from orga.workflows.shared.failures import failure_of

__all__ = ["ToolFailure", "run_tool", "tool_failure"]

_BY_TYPE: Final[dict[str, tuple[ToolStatus, bool]]] = {
    "ToolInputError": ("invalid_arguments", True),
    "ToolNotFound": ("unknown_tool", True),
    "ToolNotOnThisWorker": ("failed", False),
    "InvalidConfig": ("failed", True),
    "ToolPermissionError": ("denied", False),
    "ToolFailed": ("failed", False),
    "ToolUnavailable": ("failed", False),
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
) -> ToolResult | ToolFailure:
    """The tool's result, or why there is none (raises only on the workflow's cancellation).

    ``local``: a short pure tool, run as a local activity in this worker (at most
    ``LOCAL_TOOL_TIMEOUT`` an attempt, recorded as a marker).
    """
    try:
        if local:
            return await workflow.execute_local_activity(
                RUN_TOOL,
                invocation,
                result_type=ToolResult,
                start_to_close_timeout=min(timeout, LOCAL_TOOL_TIMEOUT),
                retry_policy=retry,
                summary=summary,
            )
        return await workflow.execute_activity(
            RUN_TOOL,
            invocation,
            result_type=ToolResult,
            start_to_close_timeout=timeout,
            heartbeat_timeout=heartbeat,
            retry_policy=retry,
            summary=summary,
            cancellation_type=cancellation,
        )
    except (ActivityError, ApplicationError, TimeoutError) as error:
        # A local activity's failure may arrive as the error itself, not wrapped.
        return tool_failure(error)
