"""The workflow instance a replay builds, handed out to read its state after (``orga audit``,
``orga judge what-if``); and a replay that keeps the SDK's own logs of a failing history off
the terminal (the verb says what it could not replay)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Generator
from typing import Any

from temporalio import workflow
from temporalio.runtime import Runtime
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

__all__ = ["Capture", "quietly"]


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


@contextlib.contextmanager
def quietly() -> Generator[Runtime]:
    """Within it, replays run in a runtime whose SDK core logs nothing, and the SDK's Python
    loggers say nothing below CRITICAL: a history that does not replay would print the core's
    warnings (with colour codes) and a traceback among the verb's output, its ``--json`` too.
    Yields the runtime to replay in."""
    from orga.runtime.connect import quiet_runtime

    logger = logging.getLogger("temporalio")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield quiet_runtime()
    finally:
        logger.setLevel(level)
