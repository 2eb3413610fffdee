"""Scenarios of streamed loops (``tests/scenarios.py`` records them with the rest): what the
workflow publishes on its Workflow Stream adds nothing to history, but its handlers, the
desk's deferred publish and a continued run's carried stream must keep replaying."""

from __future__ import annotations

from typing import Any

from temporalio.client import WorkflowHandle

import orga
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.config import LoopConfig
from orga.contracts.threads import ThreadConfig
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import pending
from tests.sample_tools import transfer


async def streamed_thread(h: Harness) -> WorkflowHandle[Any, Any]:
    """A streamed thread (as the AG-UI endpoint starts one): an answer, then two calls of one
    step that wait for people — the first approved with edits, the second denied — then the
    answer."""
    model = h.new_model(
        [
            Turn(text="hello there"),
            Turn(
                text="Paying both.",
                tool_calls=[
                    ("transfer", {"amount": 5, "to": "a"}),
                    ("transfer", {"amount": 6, "to": "b"}),
                ],
            ),
            Turn(text="paid a"),
        ]
    )
    config = LoopConfig(model=model, tools=["transfer"], stream=True, thread=ThreadConfig())
    async with h.worker(tools=[transfer]):
        chat = await orga.start_thread(
            h.client, config, "hi", workflow_id="history-streamed-thread", task_queue=h.task_queue
        )
        await chat.turn(1)
        await chat.say("pay both")
        decided: list[str] = []
        for approved in (True, False):  # each waits in turn: one run's interrupt, then the next
            state = await pending(chat.handle, besides=decided)
            [waiting] = [a for a in state.pending_approvals if a.call_id not in decided]
            decided.append(waiting.call_id)
            decision = ApprovalDecision(
                call_id=waiting.call_id,
                approved=approved,
                reason="r",
                approver="scenario",
                arguments='{"amount": 4, "to": "a"}' if approved else None,
            )
            await chat.handle.execute_update("approve", decision)
        await chat.turn(2)
        await chat.close()
        await chat.handle.result()
        first_run = (await chat.handle.describe()).run_id  # one run: it does not continue
    return h.client.get_workflow_handle(chat.id, run_id=first_run)


STREAM_SCENARIOS = {"streamed_thread": streamed_thread}
