"""A call held by a pause waits for the resume, not by asking again every few seconds (issue 63:
a held call re-ran an activity and a timer every 10 to 20 s, ~2,600 events an hour, until the
server ended the loop at 51,200 events after ~19 h; and a loop paused longer than its timeout
ended BudgetExceeded though its working clock stood still), and a task's step waiting for a
worker with its tool asks every quarter of an hour once it has waited ten minutes. Played on
the time-skipping server: hours pass in a moment."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    UnsandboxedWorkflowRunner,
    Worker,
)

from orga.contracts.state import LoopState
from orga.desk.releases import release_held
from orga.runtime.pauses import PauseBook
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from orga.workflows.shared.tool_calls import WorkerWait
from tests.harness import TEST_STORE, Harness
from tests.helpers import eventually, loop_state


def _tries(history: Any) -> int:
    """How many times the loop asked for its tool call (each a scheduled activity)."""
    return sum(
        1
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "run_tool"
    )


async def test_a_paused_call_waits_hours_for_the_resume_with_a_few_events(
    skipping: Harness, skipping_env: WorkflowEnvironment
) -> None:
    name = f"export_{uuid.uuid4().hex[:6]}"  # the pause is the store's: a tool of its own

    @tool(name=name)
    def export(table: str) -> str:
        """Export a table.

        Args:
            table: which one.
        """
        return f"exported {table}"

    book = PauseBook(TEST_STORE)
    book.pause(f"tool:{name}", "olu", "the export service is down")
    model = skipping.new_model([Turn(tool_calls=[(name, {"table": "t"})]), Turn(text="ok")])
    async with skipping.worker(tools=[export]):
        handle: WorkflowHandle[Any, Any] = await skipping.start(
            "export", model=model, tools=[name], pause_recheck=timedelta(seconds=10)
        )

        async def held() -> LoopState | None:
            state = await loop_state(handle)
            return state if state.status == "paused" else None

        await eventually(held, "the call waits for its paused tool")
        await skipping_env.sleep(timedelta(hours=3))
        state = await loop_state(handle)
        tries = _tries(await handle.fetch_history())
        book.resume(f"tool:{name}")
        # What orga resume tells every loop the pause held (this server lists no workflows).
        await release_held(skipping.client, f"loop:{handle.id}")
        result = await handle.result()
    assert state.status == "paused"  # three hours on, it still waits (its working clock stopped)
    # Its first try, one again after pause_recheck, then one an hour at most (the fallback).
    assert tries <= 5, tries
    assert result.output == "ok"


class _ResumeAsItAnswers(ClientInterceptor, Interceptor):
    """Ends the pause of ``target`` as ``orga resume`` does (the store, then ``pause_lifted``)
    at the worst instant: after the ``nth`` ask of ``activity_type`` found it paused, before
    the workflow reads that answer."""

    def __init__(self, activity_type: str, nth: int, book: PauseBook, target: str) -> None:
        self.activity_type, self.nth, self.book, self.target = activity_type, nth, book, target
        self.client: Client | None = None
        self.asked = 0

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        outer = self

        class _Inbound(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                try:
                    return await super().execute_activity(input)
                finally:
                    if activity.info().activity_type == outer.activity_type:
                        outer.asked += 1
                        if outer.asked == outer.nth:
                            assert outer.client is not None
                            outer.book.resume(outer.target)
                            # What orga resume tells the loops (this server lists none).
                            loop = activity.info().workflow_id
                            await release_held(outer.client, f"loop:{loop}")

        return _Inbound(next)


async def test_a_resume_while_a_held_call_is_asked_again_is_not_lost(
    skipping: Harness, skipping_env: WorkflowEnvironment
) -> None:
    """``orga resume`` between the worker's "still paused" and the workflow reading it: the
    loop had been told, and went on to wait for the next ``pause_lifted`` — an hour, the
    fallback's (seen in CI as a loop that never went on after its resume). Now the signal that
    came while the call was asked counts: it asks again at once, and runs once. Both kinds of
    held call: a tool's, and the model's."""
    book = PauseBook(TEST_STORE)
    name = f"export_{uuid.uuid4().hex[:6]}"

    @tool(name=name)
    def export(table: str) -> str:
        """Export a table.

        Args:
            table: which one.
        """
        return f"exported {table}"

    for activity_type, target in (("run_tool", f"tool:{name}"), ("call_model", None)):
        loop_id = f"loop-{uuid.uuid4().hex[:12]}"
        target = target or f"loop:{loop_id}"
        book.pause(target, "olu", "not now")
        hook = _ResumeAsItAnswers(activity_type, 2, book, target)
        config = skipping.client.config()
        config["interceptors"] = [*config["interceptors"], hook]
        client = Client(**config)
        hook.client = client
        hooked = dataclasses.replace(skipping, client=client, handles=skipping.handles)
        model = skipping.new_model([Turn(tool_calls=[(name, {"table": "t"})]), Turn(text="ok")])
        async with hooked.worker(tools=[export]):
            handle = await hooked.start(
                "export",
                model=model,
                tools=[name],
                workflow_id=loop_id,
                pause_recheck=timedelta(seconds=10),
            )
            result = await handle.result()
        history = await handle.fetch_history()
        first, last = history.events[0], history.events[-1]
        took = last.event_time.ToDatetime() - first.event_time.ToDatetime()
        assert result.output == "ok"
        # Held twice, then run: the tool once; the model twice more (the call, the answer).
        assert hook.asked == (3 if activity_type == "run_tool" else 4), activity_type
        # Two asks of ten to twenty seconds apart, the third at once: never the hour's wait.
        assert took < timedelta(minutes=5), (activity_type, took)


@workflow.defn(name="WorkerWaitSchedule")
class _WaitSchedule:
    """A call that finds no worker with its tool ``tries`` times: the gaps between its tries."""

    @workflow.run
    async def run(self, tries: int) -> list[float]:
        wait, gaps = WorkerWait("transfer"), []
        for _ in range(tries):
            before = workflow.now()
            await wait.pause()
            gaps.append((workflow.now() - before).total_seconds())  # its timer, as fired
        wait.end()
        return gaps


async def test_a_call_waiting_long_for_a_worker_with_its_tool_asks_every_quarter_hour(
    skipping_env: WorkflowEnvironment,
) -> None:
    """A call (a task's step, most of all, which no timeout bounds) that no worker with its tool
    takes asks again at once (never eagerly back to its workflow's worker), then 2 s later,
    doubling to a minute — and once it has waited ten minutes,
    doubling on to a quarter of an hour: at a minute apart, a wait of four days brought its
    history (a timer and an activity a try) to the server's limit."""
    queue = f"wait-{uuid.uuid4().hex[:8]}"
    async with Worker(
        skipping_env.client,
        task_queue=queue,
        workflows=[_WaitSchedule],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        gaps = await skipping_env.client.execute_workflow(
            _WaitSchedule.run, 19, id=queue, task_queue=queue
        )
    # At once on any other worker (patch worker-wait-asks-elsewhere), then ten minutes of 2 s
    # doubling to a minute, then doubling on to a quarter of an hour.
    assert [round(gap) for gap in gaps] == [0, 2, 4, 8, 16, 32, *[60] * 9, 120, 240, 480, 900]
