"""A person's message sent at each phase of a loop and of a thread is answered — the model's
next call reads it, and a thread's ``send`` returns the answer of the turn that read it — or
refused with a reason; never lost (issue 63: one accepted while the critic reviewed the answer
was never read; in a thread, messages accepted as a turn's end continued as new were lost, and
``send`` returned the previous turn's answer as if its message had been answered)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError

from orga.client import start_thread
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.config import LoopConfig
from orga.contracts.conversation import MessageAccepted, UserMessage
from orga.contracts.critic import Review
from orga.contracts.messages import PAUSE_LIFTED_SIGNAL
from orga.contracts.threads import ThreadConfig
from orga.desk.releases import release_held
from orga.scripted.server import RecordedRequest, Turn
from orga.tools.sdk import Tool, tool
from tests.harness import Harness, scripted_settings
from tests.helpers import Hold, eventually, held_opa, loop_state, pending, waiting_review

PHASES = ("model", "tool", "gate", "approval", "review", "answer")
"""Where the message lands: the model call that asks for a tool, the tool, the policy check of
its call, a person's approval of it, the human critic's review of the answer, the model call
whose answer ends the turn."""


@dataclass
class Phase:
    """One phase's loop: the held point (the policy check's is the OPA's), the model, the
    tools and what the loop is started with."""

    name: str
    hold: Hold
    model: str = ""
    tools: list[Tool] = field(default_factory=list[Tool])
    config: dict[str, Any] = field(default_factory=dict[str, Any])


def _phase(harness: Harness, name: str, gate: Hold) -> Phase:
    """A loop whose turn is: a model call asking for a tool, the call (approved by a person
    in ``approval``), a model call answering with the last user text it read (``read: …``),
    reviewed by a person in ``review``; held at ``name``."""
    phase = Phase(name, gate if name == "gate" else Hold())
    tool_name = "purge" if name == "approval" else "export_all"
    asked: set[str] = set()

    def respond(request: RecordedRequest) -> Turn:
        texts = request.user_texts()
        first_of_turn = texts[-1] not in asked and not texts[-1].startswith("MSG")
        if first_of_turn:
            asked.add(texts[-1])
            if name == "model":
                phase.hold.wait_here()
            return Turn(tool_calls=[(tool_name, {"table": "orders"})])
        if name == "answer" and not phase.hold.reached.is_set():
            phase.hold.wait_here()
        return Turn(text=f"read: {texts[-1]}")

    @tool
    async def export_all(table: str) -> str:
        """Export a table.

        Args:
            table: which one.
        """
        if name == "tool":
            await asyncio.to_thread(phase.hold.wait_here)
        return f"exported {table}"

    @tool(requires_approval=True)
    async def purge(table: str) -> str:
        """Purge a table (a person approves it).

        Args:
            table: which one.
        """
        return f"purged {table}"

    phase.model = harness.new_model([respond] * 20)
    phase.tools = [export_all, purge]
    phase.config = {"tools": [tool_name]}
    if name == "gate":
        phase.config["policy"] = "opa"
    if name == "review":
        phase.config["critic"] = {"kind": "human", "max_rounds": 3}
    return phase


@pytest.fixture
def opa() -> Iterator[tuple[str, Hold]]:
    """An OPA that allows everything, held at its first question until released."""
    with held_opa() as held:
        yield held


async def _at(phase: Phase, handle: WorkflowHandle[Any, Any]) -> Callable[[], Awaitable[None]]:
    """Wait until the loop is at its phase; what lets it go on from there."""

    async def release() -> None:
        phase.hold.release.set()

    if phase.name == "approval":
        [waiting] = (await pending(handle)).pending_approvals
        call_id = waiting.call_id

        async def approve() -> None:
            decision = ApprovalDecision(call_id=call_id, approved=True, approver="kim")
            await handle.execute_update("approve", decision)

        return approve
    if phase.name == "review":
        await waiting_review(handle, 1)

        async def reviewed() -> None:  # the answer, then the answer to the message
            for round_ in (1, 2):
                await waiting_review(handle, round_)
                await handle.execute_update("review", Review(verdict="approve", reviewer="kim"))

        return reviewed
    await phase.hold.arrived()
    return release


@contextlib.asynccontextmanager
async def _loop_at(
    harness: Harness, name: str, opa: tuple[str, Hold], **more: Any
) -> AsyncIterator[tuple[Phase, WorkflowHandle[Any, Any], Callable[[], Awaitable[None]]]]:
    """A loop held at phase ``name`` on a worker of its own: the phase, its handle, and what
    lets it go on."""
    url, gate = opa
    phase = _phase(harness, name, gate)
    settings = scripted_settings(harness.model, opa_url=url)
    async with harness.worker(settings=settings, tools=phase.tools):
        handle = await harness.start("go", model=phase.model, **phase.config, **more)
        yield phase, handle, await _at(phase, handle)


@pytest.mark.parametrize("name", list(PHASES))
async def test_a_message_at_each_phase_of_a_loop_is_read_before_it_answers(
    harness: Harness, name: str, opa: tuple[str, Hold]
) -> None:
    async with _loop_at(harness, name, opa) as (_, handle, go_on):
        accepted = await handle.execute_update(
            "message", UserMessage(text=f"MSG at {name}"), result_type=MessageAccepted
        )
        await go_on()
        result = await handle.result()
    assert accepted.seq == 1
    assert result.output == f"read: MSG at {name}"  # the answer is the message's


@pytest.mark.parametrize("name", [*PHASES, "between turns"])
async def test_a_message_at_each_phase_of_a_thread_gets_the_answer_of_the_turn_that_read_it(
    harness: Harness, name: str, opa: tuple[str, Hold]
) -> None:
    url, gate = opa
    phase = _phase(harness, "tool" if name == "between turns" else name, gate)
    settings = scripted_settings(harness.model, opa_url=url)
    config = LoopConfig(model=phase.model, thread=ThreadConfig(), **phase.config)
    async with harness.worker(settings=settings, tools=phase.tools):
        chat = await start_thread(harness.client, config, "first", task_queue=harness.task_queue)
        harness.handles.append(chat.handle)
        go_on = await _at(phase, chat.handle)
        if name == "between turns":
            await go_on()
            assert (await chat.turn(1)).output == "read: first"
            accepted = await chat.say(f"MSG at {name}")
        else:
            accepted = await chat.say(f"MSG at {name}")
            await go_on()
        assert accepted.turn is not None
        answered = await chat.turn(accepted.turn, message=accepted.seq)
        await chat.close()
    assert answered.output == f"read: MSG at {name}"


async def test_a_message_waiting_as_a_turn_runs_out_and_continues_as_new_is_answered_next(
    harness: Harness,
) -> None:
    """A turn whose budget runs out while a message waits ends unanswered; its history being
    long by then, the thread continues as new there. The message crosses over and the next
    turn reads it — and ``send`` returns that turn's answer, not the unanswered one the
    message was accepted for. (The inbox was not carried: the message was lost, and the
    unanswered turn passed for its answer.)"""
    hold = Hold()
    seen: list[int] = []

    def respond(request: RecordedRequest) -> Turn:
        seen.append(1)
        if len(seen) == 2:  # the turn's last model call: the message comes now, and it asks
            hold.wait_here()  # for more than the turn's budget allows
        if len(seen) <= 2:
            return Turn(tool_calls=[("export_all", {"table": f"t{len(seen)}"})])
        return Turn(text=f"read: {request.user_texts()[-1]}")

    phase = _phase(harness, "none", Hold())  # its export_all: an activity
    model = harness.new_model([respond] * 5)
    config = LoopConfig(
        model=model,
        tools=["export_all"],
        max_iterations=2,  # a thread's budgets are each turn's
        max_history_events=200,
        thread=ThreadConfig(),
    )
    async with harness.worker(tools=phase.tools):
        chat = await start_thread(harness.client, config, "first", task_queue=harness.task_queue)
        harness.handles.append(chat.handle)
        await hold.arrived()
        accepted = await chat.say("MSG as the turn runs out")
        for _ in range(200):  # the history grows past its limit meanwhile (signals that
            await chat.handle.signal(PAUSE_LIFTED_SIGNAL)  # only count; an event each)
        hold.release.set()
        assert accepted.turn == 1
        answered = await chat.turn(1, message=accepted.seq)
        unanswered = await chat.turn(1)
        latest = await chat.handle.describe()
        first = await harness.client.get_workflow_handle(
            chat.id, run_id=latest.raw_description.workflow_execution_info.first_run_id
        ).describe()
        await chat.close()
    assert unanswered.unanswered is not None and "max_iterations" in unanswered.unanswered
    assert first.status is not None and first.status.name == "CONTINUED_AS_NEW"
    assert (answered.turn, answered.output) == (2, "read: MSG as the turn runs out")


@pytest.mark.parametrize("name", list(PHASES))
async def test_a_cancel_at_each_phase_of_a_loop_ends_it_with_nothing_new_run(
    harness: Harness, name: str, opa: tuple[str, Hold]
) -> None:
    async with _loop_at(harness, name, opa) as (phase, handle, _):
        asked = len(harness.model.requests_for(phase.model))
        await handle.cancel(reason=f"cancelled at {name}")
        phase.hold.release.set()  # what was held goes on, if it still can
        with pytest.raises(WorkflowFailureError) as ended:
            await handle.result()
        state = await loop_state(handle)
    assert isinstance(ended.value.cause, CancelledError)
    assert len(harness.model.requests_for(phase.model)) == asked  # the model not asked again
    assert state.status == "cancelled" and state.tool_call_count <= 1


@pytest.mark.parametrize("name", ["model", "tool", "gate", "approval"])
async def test_a_pause_at_each_phase_of_a_loop_holds_it_before_its_next_model_call(
    harness: Harness, name: str, opa: tuple[str, Hold]
) -> None:
    """``orga pause ID`` at each phase a model call follows: what runs finishes, the next model
    call waits for the resume (the call is not lost: it is made once, after). At the critic's
    review or the answer's model call no call follows: the loop ends as it would have."""
    async with _loop_at(harness, name, opa, pause_recheck=1) as (phase, handle, go_on):
        assert harness.plugin is not None  # the worker's own pauses: seen at once
        book = harness.plugin.parts(harness.client).pauses
        book.pause(f"loop:{handle.id}", "olu", "hold on")
        asked = len(harness.model.requests_for(phase.model))
        await go_on()

        async def held() -> bool:
            return (await loop_state(handle)).status == "paused"

        await eventually(held, f"the loop holds after {name}")
        assert len(harness.model.requests_for(phase.model)) == asked
        book.resume(f"loop:{handle.id}")
        await release_held(harness.client, f"loop:{handle.id}")
        result = await handle.result()
    assert result.output.startswith("read: ")
