"""A person's answer recorded in the workflow task that raises what it answers.

A query is answered from a worker's memory, which can hold a wait that the workflow task still
in flight raised; the server records the person's signal sent then before that task's start.
The answer must reach the wait the same task raises, and the history must replay the same way
(``tests/histories/found/``: the history where it did not, from a CI run)."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker

from orga.contracts.approvals import EscalationResolution
from orga.contracts.journal import EscalationResolved, Journal
from orga.contracts.state import LoopResult
from orga.plugin import OrgaPlugin, http_client
from orga.runtime.presence import publish_tools
from orga.scripted.server import Turn
from orga.tools.sdk import Tool, ToolContext, tool
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import eventually


def _down_after(release: asyncio.Event, calls: list[str]) -> Tool:
    @tool(name="lookup")
    async def lookup(query: str, ctx: ToolContext) -> str:
        """Down: fails every attempt, once released.

        Args:
            query: what to look up.
        """
        calls.append(ctx.call_id)
        await release.wait()
        raise ConnectionError(f"lookup service is down ({query})")

    return lookup


async def test_a_resolution_signalled_before_the_task_that_raises_its_escalation_resolves_it(
    harness: Harness,
) -> None:
    """The call's last attempt fails while no worker runs workflows; the operator's
    ``resolve_escalation`` signal, naming the escalation that failure raises (``<call>#1``), is
    recorded before the workflow task that raises it. The worker that then runs the task
    raises it and resolves it with that answer (before, the signal came first and was ignored:
    the loop waited on). The history replays (the harness replays every loop)."""
    release = asyncio.Event()
    calls: list[str] = []
    model = harness.new_model(
        [Turn(tool_calls=[("lookup", {"query": "stock"})]), Turn(text="the operator says 7")]
    )
    workflows = await harness.another_process()  # runs the workflow; lookup is not on it
    async with http_client() as http:
        with_tool = OrgaPlugin(
            tools=[_down_after(release, calls)],
            settings=scripted_settings(harness.model),
            store=TEST_STORE,
            http=http,
            tracing=False,
        )
        parts = with_tool.parts(harness.client)
        publish_tools(TEST_STORE, harness.task_queue, harness.client.identity, ["lookup"])
        # The loop's setup needs lookup: where it lands on the other worker, it is asked again
        # on any worker of the queue (SetupElsewhere), as the server places it. Many pollers
        # here make this worker the likely one; the wait below bounds the rest.
        async with Worker(
            harness.client,
            task_queue=harness.task_queue,
            activities=parts.activities(),
            max_concurrent_activity_task_polls=20,
        ):
            async with workflows.worker():
                handle = await harness.start(
                    "look up the stock",
                    model=model,
                    tools=["lookup"],
                    recovery={"default": {"strategy": "escalate"}},
                )
                await eventually(lambda: calls, "lookup started", timeout=90)
            [call_id] = set(calls)
            release.set()  # no worker runs workflows now: the failure waits in a task
            await eventually(lambda: _failed_unseen(handle), "the call failed, not yet seen")
            await handle.signal(
                "resolve_escalation",
                EscalationResolution(
                    escalation_id=f"{call_id}#1",
                    action="result",
                    result="7 in stock",
                    reason="counted by hand",
                    operator="ops",
                ),
            )
            async with workflows.worker():
                result = await asyncio.wait_for(handle.result(), 120)  # bounds a loop that waits on
                journal = await handle.query("journal", result_type=Journal)
    resolved = [e for e in journal.entries if isinstance(e, EscalationResolved)]
    assert isinstance(result, LoopResult) and result.output == "the operator says 7"
    assert [(e.escalation_id, e.action, e.operator, e.source) for e in resolved] == [
        (f"{call_id}#1", "result", "ops", "signal")
    ]


async def _failed_unseen(handle: WorkflowHandle[Any, Any]) -> bool:
    """The call's activity (the last scheduled) has failed and no workflow task has started
    since."""
    events = [e.event_type for e in (await handle.fetch_history()).events]
    return events[-2:] == [
        EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    ]
