"""The tool activity: run one tool call of the worker's registry."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final, Literal

from opentelemetry import trace
from temporalio import activity
from temporalio.exceptions import ApplicationError

from orga.activities.elsewhere import Elsewhere, hand_on
from orga.contracts.conversation import ToolResult
from orga.contracts.errors import (
    OutcomeUnknown,
    ToolFailed,
    ToolNotFound,
    ToolNotOnThisWorker,
    ToolPaused,
)
from orga.contracts.evidence import Evidence
from orga.contracts.tools import (
    RUN_TOOL,
    ToolInvocation,
    idempotency_key,
)
from orga.core.text import cut
from orga.runtime.pauses import Pause, PauseBook
from orga.runtime.tracing import tracer
from orga.tools._loading import render_value
from orga.tools._outcomes import BEGAN, ENDED, has_effects, lost_before, mark_began, settle
from orga.tools.ledger import Ledger
from orga.tools.sdk import Tool, ToolContext, ToolRegistry, parse_arguments
from orga.worker.blobs import BlobStore
from orga.worker.heartbeat import heartbeating
from orga.worker.metrics import observe

__all__ = ["ToolActivities"]


class ToolActivities:
    """Runs the tools of one worker's registry."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        blobs: BlobStore,
        ledger: Ledger,
        pauses: PauseBook | None = None,
        elsewhere: Elsewhere | None = None,
    ) -> None:
        self._elsewhere = elsewhere
        """Whether a live worker of a task queue registers a tool (``hand_on``)."""
        self._registry = registry
        self._blobs = blobs
        self._ledger = ledger
        self._pauses = pauses
        """What is paused (``orga pause``): a call of a paused tool, loop, task or agent does not
        run."""

    def _tool(self, name: str) -> Tool:
        found = self._registry.get(name)
        registered = ", ".join(self._registry.names()) or "none"
        if found is None and (withdrawn := self._registry.absent(name)) is not None:
            raise ToolNotFound(f"{withdrawn} (registered: {registered})")
        if found is None:
            # The loop's setup found it (the workflow runs only tools it resolved): another
            # worker of this task queue registers it, and the call waits for one.
            raise ToolNotOnThisWorker(
                f"tool {name!r} is not registered on this worker (registered: {registered}): "
                "waiting for a worker that has it",
                {"tool": name},
            )
        return found

    @activity.defn(name=RUN_TOOL)
    async def run_tool(self, invocation: ToolInvocation) -> ToolResult:
        """Run one call. Invalid arguments and tool exceptions fail the activity with a typed
        error that the loop turns into an ``is_error`` result for the model."""
        call = invocation.call
        try:
            found = self._tool(call.name)
        except ToolNotOnThisWorker as missing:  # to a worker with the tool, if one is live
            await hand_on(self._elsewhere, missing)
        arguments = found.validate(parse_arguments(call.name, call.arguments))
        held = self._held(invocation)
        if held is not None:  # not run: the loop waits for the pause to end, and asks again
            raise ToolPaused(held.describe(), non_retryable=True)
        context = ToolContext(
            call_id=call.id,
            workflow_id=invocation.workflow_id,
            idempotency_key=idempotency_key(invocation.workflow_id, call.id, invocation.chain),
            attempt=activity.info().attempt,
            ledger=self._ledger,
            knowledge_namespace=invocation.knowledge_namespace,
            knowledge_directory=invocation.knowledge_directory,
            step_key=None
            if invocation.compensates is None
            else idempotency_key(invocation.workflow_id, invocation.compensates, invocation.chain),
        )
        info = activity.info()
        # Only a tool with effects is settled after a lost attempt, so only its begun effect is
        # marked (a heartbeat the server has stored before the tool runs: one call to it); a
        # local activity cannot heartbeat.
        marked = not info.is_local and has_effects(found)
        settled: str | None = None
        if marked and lost_before(info.attempt, info.heartbeat_details):
            async with heartbeating(details=(BEGAN,)):  # reconciling: still mid-effect
                reconciled = await settle(found, context)  # OutcomeUnknown: a person decides
            if reconciled is not None:
                return self._result(invocation, found, reconciled.value, "reconciled")
            settled = "ran again"
        if marked:
            await mark_began()  # stored before the effect, or the tool does not run
        started = time.monotonic()
        span = tracer().start_span(
            f"execute_tool {call.name}",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
            },
        )
        try:
            with trace.use_span(span, end_on_exit=True):
                async with heartbeating(details=(BEGAN,) if marked else ()):
                    value = await found.invoke(arguments, context)
        except asyncio.CancelledError as cancelled:
            if marked:  # cancelled mid-effect: what became of it, nobody can say
                raise _cancelled_mid_effect(call.name, call.id) from cancelled
            raise
        except ApplicationError:
            self._ended(marked)
            raise
        except Exception as error:
            if marked and activity.is_cancelled():  # it raised as it was being cancelled
                raise _cancelled_mid_effect(call.name, call.id) from error
            self._ended(marked)
            observe("orga_tool_call_latency", _elapsed_ms(started), tool=call.name)
            raise ToolFailed(
                cut(f"tool {call.name!r} raised {type(error).__name__}: {error}", 8_000, "error"),
                non_retryable=not invocation.retry_tool_errors,
            ) from error
        observe("orga_tool_call_latency", _elapsed_ms(started), tool=call.name)
        return self._result(invocation, found, value, settled)

    def _held(self, invocation: ToolInvocation) -> Pause | None:
        """The pause that holds this call, if any: its tool's, its loop's or task's (its
        workflow id) or its agent's — a paused loop or agent holds its calls as a paused tool
        does, approved ones included. A compensation is held by its tool's pause only: it
        undoes what a stopped task did, which a pause of the task or its agent must not
        leave half done."""
        if self._pauses is None:
            return None
        targets = [f"tool:{invocation.call.name}"]
        if invocation.compensates is None:
            targets.append(f"loop:{invocation.workflow_id}")
            if invocation.agent_id is not None:
                targets.append(f"agent:{invocation.agent_id}")
        return self._pauses.held(*targets)

    @staticmethod
    def _ended(marked: bool) -> None:
        """The tool raised: its attempt ended (a retry is not one after a lost attempt)."""
        if marked:
            activity.heartbeat(ENDED)

    def _result(
        self, invocation: ToolInvocation, found: Tool, value: Any, settled: str | None
    ) -> ToolResult:
        """The call's result, from what the tool returned (or ``reconcile`` found)."""
        call = invocation.call
        evidence: Literal["found", "none"] | None = None
        if isinstance(value, Evidence):
            evidence, value = ("found" if value.found else "none"), value.observation
        rendered = render_value(value)
        if evidence is None and found.definition.evidence:
            evidence = "found" if rendered.strip() else "none"
        content, reference = self._blobs.guard(rendered, invocation.max_result_bytes, "tool result")
        if settled is not None:  # the model reads the settled outcome, never a silent retry
            content = f"[{_SETTLED[settled]}]\n{content}"
        return ToolResult(
            call_id=call.id,
            name=call.name,
            content=content,
            blob_ref=reference,
            evidence=evidence,
            settled=settled,
        )


def _cancelled_mid_effect(tool: str, call_id: str) -> OutcomeUnknown:
    """A call cancelled after its effect began: the effect may or may not have happened."""
    return OutcomeUnknown(
        f"call {call_id!r} of tool {tool!r} was cancelled while it ran, after its effect "
        "began: whether the effect happened, nobody can say (ask by the call's idempotency "
        "key)",
        non_retryable=True,
    )


_SETTLED: Final = {
    "reconciled": "an earlier attempt of this call was lost after it began; the tool's "
    "reconcile found that its effect happened, so it did not run again",
    "ran again": "an earlier attempt of this call was lost after it began; it ran again "
    "(the tool is idempotent, or its reconcile found no effect)",
}


def _elapsed_ms(started: float) -> float:
    return (time.monotonic() - started) * 1000
