"""The workflow instance a replay builds, handed out to read its state after (``orga audit``)."""

from __future__ import annotations

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
    """Hands out the workflow instance a replay builds, to read its state afterwards."""

    def __init__(self, instances: list[Any]) -> None:
        self.instances = instances

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        instances = self.instances

        class Inbound(WorkflowInboundInterceptor):
            async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
                instances.append(workflow.instance())
                return await super().execute_workflow(input)

        return Inbound
