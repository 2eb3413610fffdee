"""A local activity that needs tools its worker lacks runs where they are.

Workflow code. The setup (``resolve_loop``, ``resolve_task``) and the gate's check
(``evaluate_policy``) are local activities: they read the tools of the worker that runs the
workflow. Temporal hands a workflow task to any worker of the queue, and where the workers of
one queue register different tools (a deployment half rolled out; a worker started without a
module), the one running the workflow may lack a tool another live worker of the queue
registers. It says so (``SETUP_ELSEWHERE``, as the store's lists of the workers' tools say:
``orga.runtime.presence``), and the same activity runs again as a plain activity, which
Temporal hands to any worker of the queue and retries within a fraction of a second until a
worker that has the tools takes it (``ELSEWHERE_RETRY``). A tool no live worker registers
still fails as before (``InvalidConfig``, or the gate's denial).

Before, a setup that landed on the wrong worker failed its workflow task, which the server
made again after a backoff that grows (10 s, then ~25 s, …: a loop waited half a minute and
more), and once its workflow moved to a worker without the tool, the gate denied the tool's
calls ("not registered on the worker that checked the call"). Replay: the plain activity
follows the local one's recorded failure, which earlier histories never hold (their failed
workflow task recorded nothing), so no patch is asked.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import FailureError

from orga.contracts.setup import SETUP_ELSEWHERE
from orga.core.eager import not_eager
from orga.workflows.shared.failures import failure_of
from orga.workflows.shared.options import non_retryable

__all__ = ["ELSEWHERE_RETRY", "ELSEWHERE_TIMEOUT", "where_the_tools_are"]

T = TypeVar("T")

ELSEWHERE_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(milliseconds=100),
    backoff_coefficient=1.5,
    maximum_interval=timedelta(seconds=2),
    maximum_attempts=0,  # bounded by ELSEWHERE_TIMEOUT
    non_retryable_error_types=non_retryable(),
)
"""Each try lands on any worker of the queue: one that lacks the tools fails it retryable,
one that has them answers."""
ELSEWHERE_TIMEOUT: Final = timedelta(minutes=2)
"""How long the tries go on (the worker that has the tools is live: the store said so)."""


async def where_the_tools_are(
    name: str,
    arg: object,
    result_type: type[T],
    *,
    timeout: timedelta,
    retry_policy: RetryPolicy,
    summary: str,
) -> T:
    """The local activity ``name``'s result — or, where it says the tools it needs are on
    another worker of the queue (``SETUP_ELSEWHERE``), the same activity's as a plain activity
    that a worker with the tools runs.

    Raises:
        FailureError: the local activity's failure (any other), or the plain activity's.
    """
    try:
        return await workflow.execute_local_activity(
            name,
            arg,
            result_type=result_type,
            start_to_close_timeout=timeout,
            retry_policy=retry_policy,
            summary=summary,
        )
    except FailureError as error:
        if failure_of(error).kind != SETUP_ELSEWHERE:
            raise
    not_eager()  # never back to this worker, which lacks the tools
    return await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=timeout,
        schedule_to_close_timeout=ELSEWHERE_TIMEOUT,
        retry_policy=ELSEWHERE_RETRY,
        summary=f"{summary} · on a worker with the tools",
    )
