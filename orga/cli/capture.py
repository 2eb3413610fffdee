"""The workflow instance a replay builds, handed out to read its state after (``orga audit``,
``orga judge what-if``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

__all__ = ["Capture"]


class Capture(Interceptor):
    """Hands out the workflow instance a replay builds, to read its state afterwards;
    ``started`` is given it before its code runs (to listen to it as it replays)."""

    def __init__(self, instances: list[Any], started: Callable[[Any], None] | None = None) -> None:
        self.instances = instances
        self.started = started

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        instances, started = self.instances, self.started

        class Inbound(WorkflowInboundInterceptor):
            async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
                instance = workflow.instance()
                instances.append(instance)
                if started is not None:
                    started(instance)
                return await super().execute_workflow(input)

        return Inbound
