"""Reading a loop's state after one of its turns (a fork point), from its newest run back.

Shared by the worker's ``fetch_fork_point`` activity (the state a fork starts from) and the
client that starts a fork (``start_fork_run``, behind ``LoopHandle.fork`` and ``orga fork``: it
checks the turn and takes the source's config and task queue).

Whoever can reach the namespace can start a workflow of any type on a task queue of its own,
with a worker of its own that answers the ``fork_point`` query as it likes. So each run read is
first described by the server: it must be of orga's loop type (``ReasoningLoop``), run under
the workflow id that was asked and — where the reader says which (the fork's worker: its own
queue) — on a task queue the reader serves; the query then goes to that very run, its answer
must name it, and what it answers must be a state a loop could have recorded
(``orga.core.fork_points``). Anything else is refused, saying why.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from orga.contracts import search_attributes as sa
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.forks import FORK_MEMO, ForkPoint, ForkPointAsk, ForkRequest
from orga.contracts.messages import FORK_QUERY, LOOP_WORKFLOW
from orga.contracts.principals import PrincipalClaim
from orga.contracts.state import LoopResult
from orga.core.fork_points import fork_point_problem
from orga.runtime.settings import Settings

__all__ = ["ForkPointError", "read_fork_point", "start_fork_run"]

_RUNS = 1_000
"""Runs walked back at most (a loop continues as new every few thousand events)."""


class ForkPointError(Exception):
    """The loop, or a run of it holding the turn, cannot be read."""


async def read_fork_point(
    client: Client,
    workflow_id: str,
    at: int,
    run_id: str | None = None,
    *,
    task_queues: Collection[str] | None = None,
) -> ForkPoint:
    """The state of loop ``workflow_id`` after turn ``at``: asked of ``run_id`` (default: its
    newest run), then of the runs it continued, until one holds the turn. Each run must be an
    orga loop (and, with ``task_queues``, have run on one of them); its ``task_queue`` is the
    one the server recorded.

    Raises:
        ForkPointError: no such loop, not an orga loop, not on a queue of ``task_queues``, no
            worker answers its queries, an answer that is not that run's or a state no loop
            records, or no run holds the turn.
    """
    for _ in range(_RUNS):
        handle, task_queue = await _source_run(client, workflow_id, run_id, task_queues)
        try:
            point = await handle.query(FORK_QUERY, ForkPointAsk(at=at), result_type=ForkPoint)
        except (RPCError, WorkflowQueryFailedError) as error:
            raise ForkPointError(f"the loop {workflow_id!r} cannot be read: {error}") from error
        if (point.workflow_id, point.run_id) != (workflow_id, handle.run_id):
            raise ForkPointError(
                f"the loop {workflow_id!r} (run {handle.run_id}) answered for another run "
                f"({point.workflow_id!r}, run {point.run_id}): a fork starts only from the "
                "state its source's own run records"
            )
        point = point.model_copy(update={"task_queue": task_queue})
        if point.found:
            if (problem := fork_point_problem(point)) is not None:
                raise ForkPointError(
                    f"the state of {workflow_id!r} after turn {at} is not one a loop records "
                    f"({problem}): nothing was forked"
                )
            return point
        if point.earlier_run_id is None:
            raise ForkPointError(
                f"the loop {workflow_id!r} has no turn {at} to fork after (turns {point.first} "
                f"to {point.last}, as `orga journal` numbers them: it N)"
            )
        run_id = point.earlier_run_id
    raise ForkPointError(f"no run of {workflow_id!r} holds turn {at}")


async def _source_run(
    client: Client, workflow_id: str, run_id: str | None, task_queues: Collection[str] | None
) -> tuple[WorkflowHandle[Any, Any], str]:
    """The run ``run_id`` of ``workflow_id`` (default: its newest), pinned, and the task queue
    it ran on, once the server describes it as an orga loop on a queue of ``task_queues``.

    Raises:
        ForkPointError: it cannot be described, is of another type, or on another queue.
    """
    which = f"{workflow_id!r}" + (f" (run {run_id})" if run_id else "")
    try:
        described = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    except RPCError as error:
        raise ForkPointError(f"the loop {which} cannot be read: {error.message}") from error
    if described.workflow_type != LOOP_WORKFLOW:
        raise ForkPointError(
            f"{which} is a {described.workflow_type!r} workflow, not an orga loop "
            f"({LOOP_WORKFLOW!r}): a fork starts only from a loop"
        )
    if task_queues is not None and described.task_queue not in task_queues:
        raise ForkPointError(
            f"the loop {which} ran on task queue {described.task_queue!r}, which this worker "
            f"does not serve ({', '.join(sorted(task_queues))}): a fork starts only from a "
            "loop its own worker's queue ran, so that its state is a loop's of this "
            "deployment. Fork it on its own queue."
        )
    pinned = client.get_workflow_handle(workflow_id, run_id=described.run_id)
    return pinned, described.task_queue


async def start_fork_run(
    client: Client,
    ask: ForkRequest,
    workflow: str,
    overrides: Mapping[str, Any],
    *,
    workflow_id: str | None = None,
    task_queue: str | None = None,
    principal: Callable[[str], PrincipalClaim | None] | None = None,
) -> tuple[WorkflowHandle[Any, LoopResult], bool]:
    """Start the fork ``ask`` names as workflow type ``workflow``: the source's config with
    ``overrides``, on the source's task queue unless ``task_queue`` says otherwise, with the
    memo and search attribute that name its source, running for ``principal(fork_id)`` (none
    by default: a fork is its starter's, never its source's). Returns its handle, and whether
    it is a thread.

    Raises:
        ForkPointError: the source or its turn cannot be read, or the turn is an answer and
            the fork says nothing after it.
        pydantic.ValidationError: an override is not a valid config value.
    """
    point = await read_fork_point(client, ask.workflow_id, ask.at)
    config = LoopConfig.model_validate({**point.config, **overrides})
    if point.answered and ask.say is None and config.thread is None:
        raise ForkPointError(
            f"turn {ask.at} of {ask.workflow_id} is its answer: a fork after it must say "
            "something (say=…, orga fork --say)"
        )
    request = ask.model_copy(update={"run_id": point.run_id})
    kind = "thread" if config.thread is not None else "loop"
    fork_id = workflow_id or f"{kind}-{uuid.uuid4().hex[:12]}"
    claim = principal(fork_id) if principal is not None else None
    given = LoopInput(config=config, fork=request, principal=claim)
    options: dict[str, Any] = {
        "id": fork_id,
        "task_queue": task_queue or point.task_queue or Settings.from_env().task_queue,
        "result_type": LoopResult,
        "memo": {FORK_MEMO: {"workflow_id": ask.workflow_id, "run_id": point.run_id, "at": ask.at}},
        "static_summary": f"fork of {ask.workflow_id} after turn {ask.at}",
    }
    attributes = TypedSearchAttributes([SearchAttributePair(sa.FORKED_FROM, ask.workflow_id)])
    try:
        handle = await client.start_workflow(
            workflow, given, search_attributes=attributes, **options
        )
    except RPCError as error:
        if "search attribute" not in error.message.lower():
            raise
        # A namespace without orga's attributes (`orga server` registers them): the memo and
        # the journal still name the source.
        handle = await client.start_workflow(workflow, given, **options)
    return handle, kind == "thread"
