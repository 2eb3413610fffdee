"""The fork activity: read a loop's state after one of its turns, for a fork to start from.

The worker asks the source itself (``orga.runtime.forks``: the ``fork_point`` query, which
Temporal answers from the source's history even when it has ended, through its runs), so the
state a fork starts from never comes from the client that asked for the fork — and only from
a loop of orga's type that ran on the task queue this worker serves (the fork's own), for the
run that was asked, with a state a loop could have recorded.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from orga.contracts.errors import InvalidConfig
from orga.contracts.forks import FETCH_FORK_POINT, ForkPoint, ForkRequest
from orga.runtime.forks import ForkPointError, read_fork_point

__all__ = ["fetch_fork_point"]


@activity.defn(name=FETCH_FORK_POINT)
async def fetch_fork_point(request: ForkRequest) -> ForkPoint:
    """The source's state after turn ``request.at``.

    Raises:
        ApplicationError: (non-retryable) no such loop, not an orga loop of this worker's task
            queue, a state no loop records, or no run of it holds that turn.
    """
    try:
        return await read_fork_point(
            activity.client(),
            request.workflow_id,
            request.at,
            request.run_id,
            task_queues={activity.info().task_queue},
        )
    except ForkPointError as error:
        raise ApplicationError(
            str(error), type=InvalidConfig.__name__, non_retryable=True
        ) from error
