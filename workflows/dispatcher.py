"""Act: run one turn's gated tool calls and give every call id exactly one result.

Workflow code (deterministic): calls run as activities, in parallel up to
``max_concurrent_tools``, serial tools one at a time in the model's order, calls on the same
resource in order (and skipped after a failure on that resource). Whatever happens to a call
(denied, unknown, invalid, raised, timed out, skipped) becomes an ``is_error`` result the
model can read; nothing here raises for a single call's failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from orga.approvals import ApprovalRecord
    from orga.conversation import ToolCall, ToolResult, ToolStatus
    from orga.dispatch import RUN_TOOL, ToolInvocation, predecessors
    from orga.phases import PlannedCall, ToolDispatching
    from orga.tools import ToolDefinition

from workflows.human import HumanDesk
from workflows.options import TOOL_RETRY

__all__ = ["PendingWait", "ToolRunner", "error_result"]


@dataclass(frozen=True)
class PendingWait:
    """When a person was asked."""

    asked: datetime


_STATUS_BY_ERROR_TYPE: dict[str, ToolStatus] = {
    "ToolInputError": "invalid_arguments",
    "ToolNotFound": "unknown_tool",
    "ToolFailed": "failed",
}


def error_result(call: ToolCall, status: ToolStatus, content: str) -> ToolResult:
    """The ``is_error`` result of a call that did not succeed."""
    return ToolResult(
        call_id=call.id, name=call.name, content=content, is_error=True, status=status
    )


class ToolRunner:
    """Runs the calls of a turn for one loop."""

    def __init__(
        self,
        *,
        workflow_id: str,
        definitions: Mapping[str, ToolDefinition],
        max_concurrent: int,
        default_timeout: timedelta,
        desk: HumanDesk,
        approval_timeout: timedelta,
        iteration: int,
        on_approval: Callable[[ApprovalRecord, PendingWait], None],
    ) -> None:
        self._workflow_id = workflow_id
        self._definitions = definitions
        self._max_concurrent = max_concurrent
        self._default_timeout = default_timeout
        self._desk = desk
        self._approval_timeout = approval_timeout
        self._iteration = iteration
        self._on_approval = on_approval

    def refuse(self, planned: PlannedCall) -> ToolResult | None:
        """The result of a call that must not run at all, or ``None`` if it may run."""
        call, decision = planned.call, planned.decision
        if not decision.permits and decision.decision != "require_approval":
            reason = decision.reason or "no reason given"
            return error_result(
                call, "denied", f"The call to tool {call.name!r} was denied: {reason}"
            )
        if call.name not in self._definitions:
            available = ", ".join(sorted(self._definitions)) or "none"
            return error_result(
                call,
                "unknown_tool",
                f"There is no tool {call.name!r} available to you. Available tools: {available}.",
            )
        return None

    async def run(self, dispatching: ToolDispatching, runnable: list[PlannedCall]) -> None:
        """Run the permitted calls and record each one's result in ``dispatching``."""
        waits = predecessors([(p.index, p.call) for p in runnable], self._definitions)
        finished = {p.index: asyncio.Event() for p in runnable}
        outcomes: dict[int, ToolResult] = {}
        slots = asyncio.Semaphore(self._max_concurrent)

        async def one(planned: PlannedCall) -> None:
            try:
                for before in waits[planned.index]:
                    await finished[before.index].wait()
                    earlier = outcomes[before.index]
                    if before.skip_if_failed and earlier.is_error:
                        outcomes[planned.index] = error_result(
                            planned.call,
                            "skipped",
                            f"Skipped: it touches the same resource as call {earlier.call_id!r} "
                            f"({earlier.name}), which did not succeed.",
                        )
                        return
                if planned.decision.decision == "require_approval":
                    denied = await self._approve(planned)
                    if denied is not None:
                        outcomes[planned.index] = denied
                        return
                async with slots:
                    outcomes[planned.index] = await self._execute(planned.call)
            finally:
                finished[planned.index].set()

        await asyncio.gather(*(one(p) for p in runnable))
        for planned in runnable:
            dispatching.record(outcomes[planned.index])

    async def _approve(self, planned: PlannedCall) -> ToolResult | None:
        """Wait for a person; the denial result, or ``None`` when approved."""
        asked = workflow.now()
        record = await self._desk.approval(
            planned.call,
            planned.decision.reason or "approval required",
            self._iteration,
            self._approval_timeout,
        )
        self._on_approval(record, PendingWait(asked))
        if record.approved:
            return None
        who = f" by {record.approver}" if record.approver else ""
        why = record.reason or "no reason given"
        return error_result(
            planned.call,
            "denied",
            f"The call to tool {planned.call.name!r} was not approved{who}: {why}",
        )

    async def _execute(self, call: ToolCall) -> ToolResult:
        definition = self._definitions[call.name]
        timeout = definition.timeout or self._default_timeout
        try:
            return await workflow.execute_activity(
                RUN_TOOL,
                ToolInvocation(call=call, workflow_id=self._workflow_id),
                result_type=ToolResult,
                start_to_close_timeout=timeout,
                retry_policy=TOOL_RETRY,
                summary=f"tool {call.name} · {call.id}",
            )
        except ActivityError as error:
            cause = error.cause
            if isinstance(cause, TimeoutError):
                return error_result(
                    call,
                    "timed_out",
                    f"Tool {call.name!r} did not finish within {timeout.total_seconds():g} s.",
                )
            if isinstance(cause, ApplicationError):
                status = _STATUS_BY_ERROR_TYPE.get(cause.type or "", "failed")
                return error_result(call, status, cause.message)
            return error_result(call, "failed", f"Tool {call.name!r} failed: {error.message}")
