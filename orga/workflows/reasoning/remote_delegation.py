"""A delegation to an agent at an A2A endpoint: the ``delegate_remote`` activity, and the
call's result from its answer.

Workflow code (``orga.workflows.reasoning.delegation`` carves the share and keeps the books;
``orga.activities.remote_agents`` talks to the endpoint). The activity is bounded by the
call's time and a margin to cancel the remote task, heartbeats while it waits, and is retried
when a worker is lost or the endpoint is out of reach — an attempt after a lost one asks the
remote before it sends anything. A cancel of the loop waits for the activity to cancel the
remote task.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

from orga.contracts.conversation import ToolCall, ToolResult
from orga.contracts.delegation import DELEGATE_REMOTE, RemoteAnswer, RemoteDelegation
from orga.workflows.shared.options import TOOL_HEARTBEAT_TIMEOUT, non_retryable

__all__ = ["REMOTE_RETRY", "ask_remote", "remote_result"]

REMOTE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=6,
    non_retryable_error_types=non_retryable(),
)
"""A lost worker or an endpoint out of reach is asked again, within the call's time."""
_MARGIN: Final = timedelta(seconds=30)
"""Past the call's deadline, the time its last attempt has to cancel the remote task."""
_SETTLED: Final = {
    "reconciled": "an earlier attempt of this delegation was lost after it sent the task; the "
    "remote agent had it, and its answer was awaited: it was not sent again",
    "ran again": "an earlier attempt of this delegation was lost before the remote agent had "
    "the task; it was sent once, now",
}


async def ask_remote(ask: RemoteDelegation, within: timedelta, summary: str) -> RemoteAnswer:
    """The remote agent's answer (``ActivityError`` if it gave none: see the activity)."""
    return await workflow.execute_activity(
        DELEGATE_REMOTE,
        ask,
        result_type=RemoteAnswer,
        schedule_to_close_timeout=within + _MARGIN,
        heartbeat_timeout=TOOL_HEARTBEAT_TIMEOUT,
        retry_policy=REMOTE_RETRY,
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=summary,
    )


def remote_result(call: ToolCall, answer: RemoteAnswer) -> ToolResult:
    """The call's result: the answer's text (its value as JSON when it has no text), after
    how a lost attempt was settled, if one was (the receipts say ``unknown``, then
    ``delivered``)."""
    content = answer.output
    if not content and answer.value is not None:
        content = json.dumps(answer.value, ensure_ascii=False)
    settled = {"reconciled": "reconciled", "sent": "ran again"}.get(answer.settled or "")
    if settled is not None:  # the model reads how a lost attempt was settled
        content = f"[{_SETTLED[settled]}]\n{content}"
    return ToolResult(call_id=call.id, name=call.name, content=content, settled=settled)
