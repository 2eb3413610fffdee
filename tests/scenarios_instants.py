"""Scenarios of issue 63 (``tests/scenarios.py`` records them with the rest): a loop and a task
cancelled while a tool runs (patch ``stop-means-stop``), a message sent while the critic
reviews the answer (``read-after-review``), a thread's critic whose rounds count each turn
anew (``critic-rounds-per-turn``), and a call held by a pause that waits for the resume
(``pause-waits-for-resume``); of issue 64, a task's step held by its task's pause
(``task-holds-paused-steps``)."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowFailureError, WorkflowHandle

from orga.client import start_thread
from orga.contracts.config import LoopConfig
from orga.contracts.conversation import UserMessage
from orga.contracts.critic import HumanCritic, Review
from orga.contracts.journal import CallPaused, Journal
from orga.contracts.threads import ThreadConfig
from orga.desk.releases import release_held
from orga.runtime.pauses import PauseBook
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from tests.harness import TEST_STORE, Harness
from tests.helpers import SHOP_STEPS, eventually, waiting_review
from tests.sample_tools import Running, Shop, running


async def _cancel_once_running(handle: WorkflowHandle[Any, Any], work: Running, why: str) -> None:
    await eventually(work.started.is_set, f"{work.tool.name} is running")
    await handle.cancel(reason=why)
    with contextlib.suppress(WorkflowFailureError):
        await handle.result()


async def cancelled_mid_tool(h: Harness) -> WorkflowHandle[Any, Any]:
    """A loop cancelled while a tool with effects runs (patch ``stop-means-stop``): the call
    is cancelled waiting for the tool, its receipt says unknown, the loop ends there — the
    model is not asked again."""
    export = running("export_all", raise_on_cancel=True, serial=True)
    model = h.new_model(
        [
            Turn(tool_calls=[("export_all", {"table": "orders"})]),
            Turn(tool_calls=[("export_all", {"table": "invoices"})]),
            Turn(text="done"),
        ]
    )
    async with h.worker(tools=[export.tool]):
        handle = await h.start(
            "export",
            model=model,
            tools=["export_all"],
            recovery={"default": {"strategy": "escalate"}},
            workflow_id="history-cancelled-mid-tool",
        )
        await _cancel_once_running(handle, export, "wrong customer")
    return handle


async def task_stopped_mid_step(h: Harness) -> WorkflowHandle[Any, Any]:
    """A task cancelled while a step's tool runs, which raises as it is cancelled (patch
    ``stop-means-stop``): the step is not escalated, the task stops and compensates."""
    shop = Shop(notify_fails=False)
    export = running("export_all", raise_on_cancel=True, serial=True)
    steps: list[dict[str, Any]] = [
        SHOP_STEPS[0],
        {
            "id": "export",
            "action": {"kind": "tool", "tool": "export_all", "arguments": {"table": "t"}},
            "depends_on": [SHOP_STEPS[0]["id"]],
        },
    ]
    async with h.worker(tools=[*shop.tools, export.tool]):
        handle = await h.start_task(
            steps,
            policy={"on_limit_reached": "escalate"},
            workflow_id="history-task-stopped-mid-step",
        )
        await _cancel_once_running(handle, export, "called off")
    return handle


async def message_during_review(h: Harness) -> WorkflowHandle[Any, Any]:
    """A message sent while a person reviews the answer: the model reads it and answers again,
    and that answer is reviewed (patch ``read-after-review``)."""
    model = h.new_model([Turn(text="Paris is big."), Turn(text="Paris has 2.1M people.")])
    async with h.worker():
        handle = await h.start(
            "How large is Paris?",
            model=model,
            critic={"kind": "human", "timeout": "PT1H"},
            workflow_id="history-message-during-review",
        )
        await waiting_review(handle, 1)
        await handle.execute_update("message", UserMessage(text="Give the population."))
        await handle.execute_update("review", Review(verdict="approve", reviewer="scenario"))
        await waiting_review(handle, 2)
        await handle.execute_update("review", Review(verdict="approve", reviewer="scenario"))
        await handle.result()
    return handle


async def critic_thread(h: Harness) -> WorkflowHandle[Any, Any]:
    """A thread whose critic may ask for one revision a turn (``max_rounds`` 2): turn 1 is
    revised once, and so is turn 2 — which, counted over the thread, was its third review and
    ended it ``critic_rejected`` (patch ``critic-rounds-per-turn``)."""
    model = h.new_model([Turn(text=f"draft {n}") for n in range(1, 5)])
    config = LoopConfig(model=model, thread=ThreadConfig(), critic=HumanCritic(max_rounds=2))
    async with h.worker():
        chat = await start_thread(
            h.client, config, "first", task_queue=h.task_queue, workflow_id="history-critic-thread"
        )
        h.handles.append(chat.handle)
        rounds = 0
        for turn in (1, 2):
            if turn == 2:
                await chat.say("second")
            for verdict in ("revise", "approve"):
                rounds += 1
                await waiting_review(chat.handle, rounds if turn == 1 else rounds - 2)
                await chat.handle.execute_update(
                    "review", Review(verdict=verdict, feedback="shorter", reviewer="scenario")
                )
            assert (await chat.turn(turn)).reason == "end_turn"
        await chat.close()
        await chat.handle.result()
        described = await chat.handle.describe()
    return h.client.get_workflow_handle(chat.id, run_id=described.run_id)


async def paused_for_long(h: Harness) -> WorkflowHandle[Any, Any]:
    """A call held by a pause asks again once after ``pause_recheck``, then waits for the
    resume's signal (patch ``pause-waits-for-resume``), and runs once resumed."""
    book = PauseBook(TEST_STORE)

    @tool(name="history_long_export")
    def export(table: str) -> str:
        """Export a table.

        Args:
            table: which.
        """
        return f"exported {table}"

    book.pause("tool:history_long_export", "scenario", "the export service is down")
    model = h.new_model(
        [Turn(tool_calls=[("history_long_export", {"table": "t"})]), Turn(text="ok")]
    )
    async with h.worker(tools=[export]):
        handle = await h.start(
            "export",
            model=model,
            tools=["history_long_export"],
            pause_recheck=timedelta(seconds=1),
            workflow_id="history-paused-for-long",
        )

        async def second_wait() -> bool:  # the first recheck found it paused still
            history = await handle.fetch_history()
            fired = [e for e in history.events if e.HasField("timer_fired_event_attributes")]
            return len(fired) >= 1 and any(
                isinstance(e, CallPaused)
                for e in (await handle.query("journal", result_type=Journal)).entries
            )

        await eventually(second_wait, "the call waits for the resume")
        book.resume("tool:history_long_export")
        await release_held(h.client, "tool:history_long_export")
        await handle.result()
    return handle


async def task_step_paused(h: Harness) -> WorkflowHandle[Any, Any]:
    """A task paused (``orga pause ID``) before its step runs: the step's call is held — it
    asks again once after ``pause_recheck``, then waits for the resume's signal — and runs
    once resumed (patch ``task-holds-paused-steps``)."""
    book = PauseBook(TEST_STORE)
    task_id = "history-task-step-paused"

    @tool(name="history_task_export")
    def export(table: str) -> str:
        """Export a table.

        Args:
            table: which.
        """
        return f"exported {table}"

    book.pause(f"loop:{task_id}", "scenario", "the export service is down")
    async with h.worker(tools=[export]):
        handle = await h.start_task(
            [
                {
                    "id": "export",
                    "action": {
                        "kind": "tool",
                        "tool": "history_task_export",
                        "arguments": {"table": "t"},
                    },
                }
            ],
            pause_recheck=timedelta(seconds=1),
            workflow_id=task_id,
        )

        async def second_wait() -> bool:  # the first recheck found it paused still
            history = await handle.fetch_history()
            fired = [e for e in history.events if e.HasField("timer_fired_event_attributes")]
            return len(fired) >= 1 and any(
                isinstance(e, CallPaused)
                for e in (await handle.query("journal", result_type=Journal)).entries
            )

        await eventually(second_wait, "the step waits for the resume")
        book.resume(f"loop:{task_id}")
        await release_held(h.client, f"loop:{task_id}")
        await handle.result()
    return handle


INSTANT_SCENARIOS = {
    "cancelled_mid_tool": cancelled_mid_tool,
    "task_stopped_mid_step": task_stopped_mid_step,
    "message_during_review": message_during_review,
    "critic_thread": critic_thread,
    "paused_for_long": paused_for_long,
    "task_step_paused": task_step_paused,
}
