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
answer is kept for the newest ``KEPT`` runs: one question per run per worker.

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

__all__ = ["FOREIGN_CALLER", "KEPT", "CallerCheck", "activity_name"]

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


class CallerCheck(Interceptor):
    """Refuses a plain activity of ``names`` that no orga workflow of ours scheduled (see the
    module docstring); ``loops_queue``: where the worker's loops run."""

    def __init__(self, client: Client, loops_queue: str, names: Iterable[str]) -> None:
        self._client = client
        self._loops_queue = loops_queue
        self._names = frozenset(names)
        self._known: OrderedDict[str, str | None] = OrderedDict()
        """Run id and the activity's queue → why its workflow may not call (None: it may)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self)

    async def check(self) -> None:
        """Raise ``ForeignCaller`` unless an orga workflow of ours scheduled this activity.

        Raises:
            ApplicationError: ``ForeignCaller``, non-retryable; or, retryable, the server
                could not be asked.
        """
        info = activity.info()
        if info.is_local or info.activity_type not in self._names:
            return
        run = f"{info.workflow_run_id}/{info.task_queue}"
        if run in self._known:
            self._known.move_to_end(run)
            problem = self._known[run]
        else:
            problem = await self._problem(info)
            self._known[run] = problem
            while len(self._known) > KEPT:
                self._known.popitem(last=False)
        if problem is None:
            return
        _log.warning("refused %s of %r: %s", info.activity_type, info.workflow_id, problem)
        raise ApplicationError(
            f"{info.activity_type} was scheduled by {problem}: orga's activities run only for "
            "orga's loops and tasks on this worker's task queues. Nothing was run",
            type=FOREIGN_CALLER,
            non_retryable=True,
        )

    async def _problem(self, info: activity.Info) -> str | None:
        if info.workflow_type not in _ORGA:
            return f"a {info.workflow_type!r} workflow"
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
        queues = {info.task_queue, self._loops_queue}
        if described.workflow_type in _ORGA and described.task_queue in queues:
            return None
        return f"a {described.workflow_type!r} workflow on task queue {described.task_queue!r}"


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, check: CallerCheck) -> None:
        super().__init__(next)
        self._check = check

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        await self._check.check()
        return await super().execute_activity(input)
