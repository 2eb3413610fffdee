"""Act: run one turn's gated tool calls and give every call id exactly one result.

Workflow code (deterministic): calls run in parallel up to ``max_concurrent_tools``, serial
tools one at a time in the model's order, calls on the same resource in order (and skipped
after a failure on that resource). A call that needs approval waits for a person while the
others go on. Whatever happens to a call (denied, unknown, invalid, raised, timed out, circuit
open, skipped) becomes a result the model can read — unless the loop stops meanwhile (a cancel,
its timeout): then the turn's results so far are recorded and the turn ends there;
``orga.workflows.reasoning.call_executor`` runs one call.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

from orga.contracts.conversation import ToolResult
from orga.contracts.delegation import DELEGATE_TOOL
from orga.contracts.journal import ToolsDispatched
from orga.core.dispatch import predecessors
from orga.core.phases import Observing, PlannedCall, ToolDispatching
from orga.workflows.reasoning.call_executor import CallExecutor, error_result
from orga.workflows.reasoning.knowledge_bridge import KnowledgeBridge
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.tool_state import ToolState
from orga.workflows.shared.patches import ELIDE_REFUSED_ARGUMENTS

__all__ = ["ToolRunner", "act"]


async def act(
    dispatching: ToolDispatching,
    tools: ToolState,
    books: LoopBooks,
    advertised: list[str],
    knowledge: KnowledgeBridge | None,
) -> Observing:
    """Act on a loop's gated turn: run what passed, and observe one result per call id
    (journaled; the knowledge bridge sees them too)."""
    books.set_phase("dispatching")
    runner = ToolRunner(tools, books.iteration)
    try:
        await runner.run_turn(dispatching, advertised)
    except asyncio.CancelledError:
        # The loop stops mid-turn: what the calls that ended came to is on the record (their
        # receipts: an effect that may have landed says unknown), then it ends.
        if books.stopping.stops():
            books.observed(dispatching.results())
        raise
    # Refused arguments (a 5 MB one) leave the conversation: no later call could pay for them.
    elide = dispatching.refused_arguments() and workflow.patched(ELIDE_REFUSED_ARGUMENTS)
    observed = dispatching.collect(elide)
    results = observed.new_messages[-1].tool_results
    books.observed(results)
    if knowledge is not None:
        knowledge.observed([p.call for p in dispatching.planned], results)
    return observed


class ToolRunner:
    """Runs the calls of one turn."""

    def __init__(self, state: ToolState, iteration: int) -> None:
        self._state = state
        self._iteration = iteration
        self._executor = CallExecutor(state, iteration)

    async def run_turn(self, dispatching: ToolDispatching, advertised: list[str]) -> None:
        """Answer every call of the turn that has no result yet: refused, or run."""
        runnable: list[PlannedCall] = []
        waiting = set(dispatching.missing())  # the evidence tracker may have answered some
        for planned in dispatching.planned:
            if planned.call.id not in waiting:
                continue
            refused = self.refuse(planned, advertised)
            if refused is None:
                runnable.append(planned)
            else:
                dispatching.record(refused)
        state = self._state
        state.record(
            ToolsDispatched(
                **state.stamp(),
                call_ids=[p.call.id for p in runnable],
                tools=[p.call.name for p in runnable],
            )
        )
        if state.plan_delegations is not None:
            state.plan_delegations(sum(p.execute.name == DELEGATE_TOOL for p in runnable))
        await self.run(dispatching, runnable)

    def refuse(self, planned: PlannedCall, advertised: list[str]) -> ToolResult | None:
        """The result of a call that must not run at all, or ``None`` if it may run."""
        call, decision = planned.call, planned.decision
        if not decision.permits and decision.decision != "require_approval":
            reason = decision.reason or "no reason given"
            return error_result(
                call, "denied", f"The call to tool {call.name!r} was denied: {reason}"
            )
        if call.name not in advertised or call.name not in self._state.definitions:
            available = ", ".join(advertised) or "none"
            return error_result(
                call,
                "unknown_tool",
                f"There is no tool {call.name!r} available to you. Available tools: {available}.",
            )
        return None

    async def run(self, dispatching: ToolDispatching, runnable: list[PlannedCall]) -> None:
        """Run the permitted calls and record each one's result in ``dispatching``."""
        waits = predecessors([(p.index, p.execute) for p in runnable], self._state.definitions)
        finished = {p.index: asyncio.Event() for p in runnable}
        outcomes: dict[int, ToolResult] = {}
        slots = asyncio.Semaphore(self._state.max_concurrent)

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
                    call, delegate = planned.execute, self._state.delegate
                    if call.name == DELEGATE_TOOL and delegate is not None:
                        outcomes[planned.index] = await delegate(call)  # a child loop
                    else:
                        outcomes[planned.index] = await self._executor.run(call)
            finally:
                finished[planned.index].set()

        try:
            if len(runnable) == 1:
                await one(runnable[0])  # the usual turn: no task to gather
            else:
                await asyncio.gather(*(one(p) for p in runnable))
        finally:  # a turn that stops keeps what its calls came to (their receipts)
            for planned in runnable:
                if planned.index in outcomes:
                    dispatching.record(outcomes[planned.index])
        # Temporal hands a call the loop's cancellation as its result (or failure) and lets
        # the turn go on: a stopping loop ends here, its calls' outcomes recorded.
        self._state.stopping.check()

    async def _approve(self, planned: PlannedCall) -> ToolResult | None:
        """Wait for a person; the denial result, or ``None`` when approved."""
        record = await self._state.desk.approval(
            planned.execute,
            planned.decision.reason or "approval required",
            self._iteration,
            self._state.approval_timeout,
        )
        if record.approved:
            if record.arguments is not None:  # approved with edits: it runs, and shows, edited
                planned.edit(record.arguments)
            return None
        who = f" by {record.approver}" if record.approver else ""
        why = record.reason or "no reason given"
        return error_result(
            planned.call,
            "denied",
            f"The call to tool {planned.call.name!r} was not approved{who}: {why}",
        )
