"""What the desk knows of a workflow before it acts, and the desk's one error.

``describe`` reads what Temporal itself records (type, status, task queue: no worker needed);
``of_kind`` refuses a workflow of the other kind with the command that fits it; ``read_state``
asks a worker for the ``state`` query, saying at once when none serves the task queue. Every
refusal is a ``DeskError``: one line for a person, and nothing was recorded.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final, Literal, TypeVar

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from orga.contracts.messages import LOOP_WORKFLOW, STATE_QUERY, TASK_WORKFLOW
from orga.runtime.presence import presence, start_hint

__all__ = [
    "KINDS",
    "DeskError",
    "WorkflowFacts",
    "describe",
    "of_kind",
    "read_state",
    "refused",
]

KINDS: Final = {"loop": LOOP_WORKFLOW, "task": TASK_WORKFLOW}
"""What people call each workflow type."""

_M = TypeVar("_M", bound=BaseModel)


class DeskError(Exception):
    """A refusal to report in one line: nothing was recorded."""


class WorkflowFacts(BaseModel):
    """What Temporal itself records of a workflow (no worker needed)."""

    workflow_id: str
    workflow_type: str
    status: str
    """Temporal's execution status: ``running``, ``completed``, ``failed``, …"""
    task_queue: str
    closed_at: datetime | None = None


async def describe(client: Client, workflow_id: str) -> WorkflowFacts:
    """Type, status and task queue of a workflow.

    Raises:
        DeskError: there is no such workflow, or Temporal refused to say.
    """
    handle = client.get_workflow_handle(workflow_id)
    try:
        description = await handle.describe()
    except RPCError as error:
        raise refused(error, workflow_id, client.namespace) from error
    return _facts(description)


async def of_kind(client: Client, workflow_id: str, kind: Literal["loop", "task"]) -> WorkflowFacts:
    """``describe``, refusing (with the right command) a workflow of the other kind.

    Raises:
        DeskError: no such workflow, or it is not a ``kind``.
    """
    facts = await describe(client, workflow_id)
    if facts.workflow_type == KINDS[kind]:
        return facts
    hints = {
        LOOP_WORKFLOW: f"use `orga state {workflow_id}`",
        TASK_WORKFLOW: f"use `orga task state {workflow_id}`",
    }
    hint = hints.get(facts.workflow_type, f"not an orga {kind}")
    article = "a loop" if facts.workflow_type == LOOP_WORKFLOW else f"a {facts.workflow_type}"
    raise DeskError(f"{workflow_id!r} is {article}: {hint}")


def _facts(description: WorkflowExecutionDescription) -> WorkflowFacts:
    status = description.status
    return WorkflowFacts(
        workflow_id=description.id,
        workflow_type=description.workflow_type,
        status=status.name.lower() if status is not None else "unknown",
        task_queue=description.task_queue,
        closed_at=description.close_time,
    )


def refused(error: RPCError, workflow_id: str, namespace: str) -> DeskError:
    """Temporal's refusal of a request about ``workflow_id``, as a person reads it."""
    if error.status == RPCStatusCode.NOT_FOUND:
        return DeskError(f"there is no workflow {workflow_id!r} in namespace {namespace!r}")
    return DeskError(f"Temporal refused the request for {workflow_id!r}: {error.message}")


async def read_state(
    client: Client,
    workflow_id: str,
    result_type: type[_M],
    workflow_type: str,
    *,
    timeout: float = 10.0,
    served: dict[str, bool] | None = None,
) -> _M:
    """The ``state`` query of a workflow of ``workflow_type`` (a worker answers it).

    ``served``: what is known of which task queues a worker serves (filled as it is learnt, so
    a listing of many workflows asks once per queue).

    Raises:
        DeskError: no such workflow, no worker serves its task queue (said at once, without
            waiting for the query), none answered within ``timeout`` seconds, or the answer is
            not a ``result_type`` (a worker running other code).
    """
    facts = await describe(client, workflow_id)
    known = {} if served is None else served
    if facts.task_queue not in known:
        known[facts.task_queue] = bool(await presence(client, facts.task_queue))
    if not known[facts.task_queue]:
        raise DeskError(
            f"no worker is polling task queue {facts.task_queue!r} to answer for "
            f"{workflow_type} {workflow_id!r}: start one there ({start_hint(facts.task_queue)})"
        )
    handle = client.get_workflow_handle(workflow_id)
    try:
        return await handle.query(
            STATE_QUERY, result_type=result_type, rpc_timeout=timedelta(seconds=timeout)
        )
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise refused(error, workflow_id, client.namespace) from error
        raise DeskError(
            f"no worker answers for {workflow_type} {workflow_id!r}: {error.message}"
        ) from error
    except WorkflowQueryFailedError as error:
        raise DeskError(f"the state query of {workflow_id!r} failed: {error.message}") from error
    except ValueError as error:  # pydantic's ValidationError: an answer of another shape
        first = str(error).splitlines()[0]
        raise DeskError(
            f"the state of {workflow_id!r} is not a {workflow_type}'s ({first}); is its worker "
            "running another version of orga?"
        ) from error
