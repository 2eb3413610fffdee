"""Whose calls orga's activities take: only those of orga's own loops and tasks.

Any workflow in the namespace may schedule an activity of any name on any task queue. A
workflow of someone else's (its own type, run by its own worker on its own queue) could so
have ``run_tool`` run a transfer on the operator's queue that no gate judged and nobody
approved, or ``call_model`` spend the worker's API keys under any principal it names. So before
one of orga's activities runs — a plain one: a local activity runs only on the worker that runs
its workflow — the worker asks the server which workflow scheduled it (``activity.info()`` names
it: the server sets it): it must be orga's loop or task type (``ReasoningLoop``, ``Task``) on
this activity's task queue, or on the worker's loops' queue (a model queue's worker,
``ORGA_MODEL_TASK_QUEUE``, serves the loops of its process's main worker). Anything else is
refused, non-retryable (``ForeignCaller``), before the activity does anything, and logged. The
answer is kept for the newest ``KEPT`` runs: at most one question per run per worker process,
none for a loop whose setup (a local activity) ran in the process (``Runs``).

What stays Temporal's to guard: a worker someone else runs *on the operator's own queue* runs
the workflow tasks it polls — namespace authorization is the boundary there.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Final

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from orga.contracts.messages import LOOP_WORKFLOW, TASK_WORKFLOW

__all__ = ["FOREIGN_CALLER", "KEPT", "CallerCheck", "Runs", "activity_name"]

FOREIGN_CALLER: Final = "ForeignCaller"
"""The error type of an activity refused because no orga workflow of ours scheduled it."""

KEPT: Final = 4_096
"""Runs whose answer a worker keeps (the newest)."""

_ORGA: Final = frozenset({LOOP_WORKFLOW, TASK_WORKFLOW})
_log = logging.getLogger("orga")


def activity_name(fn: Callable[..., Any]) -> str:
    """The name an ``@activity.defn`` function is registered under (temporalio keeps its
    definition private)."""
    return activity._Definition.must_from_callable(fn).name or ""  # pyright: ignore[reportPrivateUsage, reportUnknownMemberType]


class Runs:
    """What the worker process knows of the runs that scheduled its activities: run id → the
    workflow type and task queue (the newest ``KEPT``), as the server described them — or as a
    local activity proves them: only the worker that runs a workflow runs its local
    activities, so the run is one of this worker's own (its setup, ``resolve_loop``, is local:
    a loop served by one process asks the server nothing)."""

    def __init__(self) -> None:
        self._known: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def get(self, run: str) -> tuple[str, str] | None:
        found = self._known.get(run)
        if found is not None:
            self._known.move_to_end(run)
        return found

    def put(self, run: str, workflow_type: str, task_queue: str) -> None:
        self._known[run] = (workflow_type, task_queue)
        self._known.move_to_end(run)
        while len(self._known) > KEPT:
            self._known.popitem(last=False)


class CallerCheck(Interceptor):
    """Refuses a plain activity of ``names`` that no orga workflow of ours scheduled (see the
    module docstring); ``loops_queue``: where the worker's loops run; ``runs``: what the
    process knows (shared by its workers)."""

    def __init__(
        self, client: Client, loops_queue: str, names: Iterable[str], runs: Runs | None = None
    ) -> None:
        self._client = client
        self._loops_queue = loops_queue
        self._names = frozenset(names)
        self._runs = runs or Runs()

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self)

    async def check(self) -> None:
        """Raise ``ForeignCaller`` unless an orga workflow of ours scheduled this activity.

        Raises:
            ApplicationError: ``ForeignCaller``, non-retryable; or, retryable, the server
                could not be asked.
        """
        info = activity.info()
        if info.activity_type not in self._names:
            return
        run = info.workflow_run_id or ""
        if info.is_local:  # this worker runs the workflow: one of its own
            self._runs.put(run, info.workflow_type or "", info.task_queue)
            return
        if info.workflow_type not in _ORGA:
            problem: str | None = f"a {info.workflow_type!r} workflow"
        else:
            found = self._runs.get(run) or await self._described(info)
            workflow_type, queue = found
            ours = workflow_type in _ORGA and queue in (info.task_queue, self._loops_queue)
            problem = None if ours else f"a {workflow_type!r} workflow on task queue {queue!r}"
        if problem is None:
            return
        _log.warning("refused %s of %r: %s", info.activity_type, info.workflow_id, problem)
        raise ApplicationError(
            f"{info.activity_type} was scheduled by {problem}: orga's activities run only for "
            "orga's loops and tasks on this worker's task queues. Nothing was run",
            type=FOREIGN_CALLER,
            non_retryable=True,
        )

    async def _described(self, info: activity.Info) -> tuple[str, str]:
        """The scheduling run's type and task queue, as the server describes it (kept)."""
        handle = self._client.get_workflow_handle(
            info.workflow_id or "", run_id=info.workflow_run_id
        )
        try:
            described = await handle.describe()
        except RPCError as error:
            raise ApplicationError(
                f"cannot ask the server which workflow scheduled {info.activity_type}: "
                f"{error.message}",
                type="CallerUnknown",
            ) from error
        self._runs.put(info.workflow_run_id or "", described.workflow_type, described.task_queue)
        return described.workflow_type, described.task_queue


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, check: CallerCheck) -> None:
        super().__init__(next)
        self._check = check

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        await self._check.check()
        return await super().execute_activity(input)
