"""The workflow instance a replay builds, handed out to read its state after (``orga audit``,
``orga judge what-if``); and a replay that keeps the SDK's own logs of a failing history off
the terminal, and what it leaves behind (the verb says what it could not replay)."""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
import warnings
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

if TYPE_CHECKING:
    from orga.runtime.store import Store

__all__ = ["Capture", "replaying"]


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
def replaying(
    store: Store, interceptors: Sequence[Interceptor]
) -> Generator[Callable[[WorkflowHistory], Awaitable[None]]]:
    """Replays with the worker's workflow code (``orga.plugin.replayer``) that keep what a
    failing history leaves off the terminal; the verb says what it could not replay.

    Within the block the replays run in a runtime whose SDK core logs nothing, and the SDK's
    Python loggers say nothing below CRITICAL: a history that does not replay would print the
    core's warnings (with colour codes) and a traceback among the verb's output, its
    ``--json`` too. A history that fails as its workflow starts (a crafted one, with no input)
    leaves the SDK's coroutine never awaited: collected later, Python would warn of it — or,
    collected while a later replay runs sandboxed code, print "Exception ignored" and a
    traceback (seen in CI). So its warning is ignored, what cannot be raised within the block
    is dropped, and the replayer and what it left are collected before the block ends."""
    from orga.plugin import replayer
    from orga.runtime.connect import quiet_runtime

    logger = logging.getLogger("temporalio")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    hook = sys.unraisablehook
    sys.unraisablehook = _dropped
    held = [replayer(store, interceptors=interceptors, runtime=quiet_runtime())]

    async def replay(history: WorkflowHistory) -> None:
        await held[0].replay_workflow(history)

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
            try:
                yield replay
            finally:
                held.clear()
                gc.collect()
    finally:
        sys.unraisablehook = hook
        logger.setLevel(level)


def _dropped(_: Any) -> None:
    """What a replayed history left behind and Python cannot raise: not the verb's to show."""
