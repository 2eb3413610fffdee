"""What the run a loop continues was, as the server describes it.

Worker code. A loop's next run takes its state (``LoopInput.carry``: usage, budgets spent,
journal, receipts, decided approvals, the conversation's digest) from the run before it. Any
workflow may continue as new into any type on any task queue, so a run with a carry first asks
the server what it continues: a run of the same workflow type on the same task queue that
ended by continuing as new — orga's own loop, whose code alone wrote that carry. Anything else
(a foreign workflow continuing into ``ReasoningLoop``, a failed run retried with a client's
carry) is refused before the carry is read.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from orga.contracts.setup import CONTINUED_FROM, ContinuedRun

__all__ = ["ContinuedRuns", "continuation_problem"]


class ContinuedRuns:
    """Asks the server about the run a loop's run continues."""

    def __init__(self, client: Client) -> None:
        self._client = client

    @activity.defn(name=CONTINUED_FROM)
    async def continued_from(self, run: ContinuedRun) -> str | None:
        """Why ``run`` may not take the carry it was handed (None: its predecessor is this
        workflow type's own run on this task queue, which continued as new).

        Raises:
            ApplicationError: the server could not be asked (retryable).
        """
        handle = self._client.get_workflow_handle(run.workflow_id, run_id=run.continued_run_id)
        try:
            earlier = await handle.describe()
        except RPCError as error:
            if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                return (
                    f"the run it continues ({run.continued_run_id}) is not known to the server "
                    f"({error.message}): its carry cannot be told apart from a client's"
                )
            raise ApplicationError(
                f"the server could not describe the run this one continues: {error.message}",
                type="ServerUnavailable",
            ) from error
        return continuation_problem(run, earlier.workflow_type, earlier.task_queue, earlier.status)


def continuation_problem(
    run: ContinuedRun,
    workflow_type: str,
    task_queue: str,
    status: WorkflowExecutionStatus | None,
) -> str | None:
    """Why ``run`` may not take its carry from the run it continues, which the server
    describes as a ``workflow_type`` on ``task_queue`` that ended ``status`` (None: it may)."""
    found: list[str] = []
    if workflow_type != run.workflow_type:
        found.append(f"a {workflow_type!r} workflow, not {run.workflow_type!r}")
    if task_queue != run.task_queue:
        found.append(f"on task queue {task_queue!r}, not {run.task_queue!r}")
    if status != WorkflowExecutionStatus.CONTINUED_AS_NEW:
        ended = status.name.lower() if status is not None else "unknown"
        found.append(f"which ended {ended}, not by continuing as new")
    if not found:
        return None
    return (
        f"the run it continues ({run.continued_run_id}) is {'; '.join(found)}: a carry is "
        f"taken only from {run.workflow_type}'s own run on this task queue"
    )
