"""Reading a loop's state after one of its turns (a fork point), from its newest run back.

Shared by the worker's ``fetch_fork_point`` activity (the state a fork starts from) and the
client that starts a fork (``start_fork_run``, behind ``LoopHandle.fork`` and ``orga fork``: it
checks the turn and takes the source's config and task queue).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from orga.contracts import search_attributes as sa
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.forks import FORK_MEMO, ForkPoint, ForkPointAsk, ForkRequest
from orga.contracts.messages import FORK_QUERY
from orga.contracts.state import LoopResult
from orga.runtime.settings import Settings

__all__ = ["ForkPointError", "read_fork_point", "start_fork_run"]

_RUNS = 1_000
"""Runs walked back at most (a loop continues as new every few thousand events)."""


class ForkPointError(Exception):
    """The loop, or a run of it holding the turn, cannot be read."""


async def read_fork_point(
    client: Client, workflow_id: str, at: int, run_id: str | None = None
) -> ForkPoint:
    """The state of loop ``workflow_id`` after turn ``at``: asked of ``run_id`` (default: its
    newest run), then of the runs it continued, until one holds the turn.

    Raises:
        ForkPointError: no such loop, no worker answers its queries, or no run holds the turn.
    """
    for _ in range(_RUNS):
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        try:
            point = await handle.query(FORK_QUERY, ForkPointAsk(at=at), result_type=ForkPoint)
        except (RPCError, WorkflowQueryFailedError) as error:
            raise ForkPointError(f"the loop {workflow_id!r} cannot be read: {error}") from error
        if point.found:
            return point
        if point.earlier_run_id is None:
            raise ForkPointError(
                f"the loop {workflow_id!r} has no turn {at} to fork after (turns {point.first} "
                f"to {point.last}, as `orga journal` numbers them: it N)"
            )
        run_id = point.earlier_run_id
    raise ForkPointError(f"no run of {workflow_id!r} holds turn {at}")


async def start_fork_run(
    client: Client,
    ask: ForkRequest,
    workflow: str,
    overrides: Mapping[str, Any],
    *,
    workflow_id: str | None = None,
    task_queue: str | None = None,
) -> tuple[WorkflowHandle[Any, LoopResult], bool]:
    """Start the fork ``ask`` names as workflow type ``workflow``: the source's config with
    ``overrides``, on the source's task queue unless ``task_queue`` says otherwise, with the
    memo and search attribute that name its source. Returns its handle, and whether it is a
    thread.

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
    given = LoopInput(config=config, fork=request)
    options: dict[str, Any] = {
        "id": workflow_id or f"{kind}-{uuid.uuid4().hex[:12]}",
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
