"""The worker's side of ``orga.core.eager``: the activity the workflow code schedules after
``not_eager()`` is never dispatched eagerly to this worker (a worker that lacks its tool would
get it back every time); any other keeps Temporal's eager dispatch."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.worker import (
    Interceptor,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from orga.core.eager import NOT_EAGER

__all__ = ["NotEager"]


class NotEager(Interceptor):
    """Applies ``orga.core.eager.not_eager`` to the activities orga's workflows schedule."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _Inbound


class _Inbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_Outbound(outbound))


class _Outbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        if NOT_EAGER.get():
            NOT_EAGER.set(False)  # this one only
            input.disable_eager_execution = True
        return super().start_activity(input)
