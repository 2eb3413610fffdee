"""Threads: a loop that after each answer waits for the next message, durably — over a worker
restart, through continue-as-new — and answers each with everything before it; sent by the
Python handle, ``orga say`` and the plain ``temporal`` CLI; per-turn and per-thread budgets;
closed, idle, or out of turns."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from datetime import timedelta

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

import orga
from orga.contracts import search_attributes as sa
from orga.contracts.config import LoopConfig
from orga.contracts.errors import BudgetExceeded
from orga.contracts.journal import Journal, MessageReceived, TurnAnswered
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.threads import ThreadConfig, TurnResult, TurnWait
from orga.scripted.server import RecordedRequest, Turn
from orga.tools.sdk import tool
from tests.harness import TEST_STORE, Harness
from tests.helpers import ORGA, eventually, failure, on, temporal, terminal
from tests.helpers import orga as orga_command


async def _start(
    harness: Harness, config: LoopConfig, first: str | None = None
) -> orga.ThreadHandle:
    chat = await orga.start_thread(harness.client, config, first, task_queue=harness.task_queue)
    harness.handles.append(chat.handle)
    return chat


async def _waiting(chat: orga.ThreadHandle, turn: int) -> LoopState:
    async def probe() -> LoopState | None:
        state = await chat.state()
        thread = state.thread
        ok = thread is not None and thread.waiting_for_message and thread.turn == turn
        return state if ok and state.status == "awaiting_message" else None

    return await eventually(probe, f"the thread waits after turn {turn}")


async def test_a_thread_answers_three_messages_over_a_worker_restart(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    @tool()
    def plus(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: the first.
            b: the second.
        """
        return a + b

    model = harness.new_model(
        [
            Turn(tool_calls=[("plus", {"a": 2, "b": 3})]),
            Turn(text="5"),
            Turn(text="20"),
            Turn(text="you asked 2+3, then times 4"),
        ]
    )
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    config = LoopConfig(model=model, tools=["plus"], thread=ThreadConfig())
    async with harness.worker(tools=[plus]):
        chat = await _start(harness, config)
        state = await _waiting(chat, 0)  # started without a message: it waits for the first
        assert state.status == "awaiting_message"
        first = await chat.send("What is 2+3?", sender="ann")
        await _waiting(chat, 1)
    assert (first.turn, first.output, first.iterations) == (1, "5", 2)
    # The worker is gone; the thread waits in Temporal alone. A new worker takes turn 2.
    async with harness.worker(tools=[plus]):
        code, out, err = await orga_command("say", chat.id, "And times 4?", env=cli)
        assert code == 0, err
        assert out.strip() == "20"
        await _waiting(chat, 2)
        code, out, err = await temporal(
            env,
            "workflow",
            "update",
            "execute",
            "--workflow-id",
            chat.id,
            "--name",
            "message",
            "--input",
            json.dumps({"text": "What did I ask?"}),
            "--output",
            "json",
        )
        assert code == 0, err
        assert json.loads(out)["result"]["turn"] == 3, out
        code, out, err = await temporal(
            env,
            "workflow",
            "update",
            "execute",
            "--workflow-id",
            chat.id,
            "--name",
            "turn",
            "--input",
            json.dumps({"turn": 3}),
            "--output",
            "json",
        )
        assert code == 0, err
        assert json.loads(out)["result"]["output"] == "you asked 2+3, then times 4", out
        again = await chat.turn(1)  # an answer stays readable
        closed = await chat.close("done for today")
        result = await chat.handle.result()
        journal = await chat.journal()
    assert again == first
    assert (closed.turns, closed.after_turn) == (3, False)
    assert (result.output, result.termination_reason) == (
        "you asked 2+3, then times 4",
        "thread_closed",
    )
    requests = harness.model.requests_for(model)
    assert [r.user_texts() for r in requests[1:]] == [
        ["What is 2+3?"],
        ["What is 2+3?", "And times 4?"],
        ["What is 2+3?", "And times 4?", "What did I ask?"],
    ]
    assert [m["content"] for m in requests[3].body["messages"] if m["role"] == "assistant"][
        -2:
    ] == ["5", "20"]
    answered = [e for e in journal.entries if isinstance(e, TurnAnswered)]
    assert [(e.turn, e.output) for e in answered] == [
        (1, "5"),
        (2, "20"),
        (3, "you asked 2+3, then times 4"),
    ]
    assert journal.entries[-1].kind == "Terminated"


async def test_each_turn_has_its_budget_and_the_thread_has_its_own(harness: Harness) -> None:
    model = harness.new_model([Turn(text=f"answer {n}") for n in range(1, 4)])
    config = LoopConfig(model=model, max_iterations=1, thread=ThreadConfig(max_iterations=2))
    async with harness.worker():
        chat = await _start(harness, config, "one")
        assert (await chat.turn(1)).output == "answer 1"  # one model call: the turn's budget
        assert (await chat.send("two")).output == "answer 2"  # a new turn: a new budget
        taken = await chat.say("three")
        assert taken.turn == 3
        error = await failure(chat.handle, BudgetExceeded.__name__)
    assert "max_iterations=2" in error.message
    assert "turn 3 of a thread" in error.message, error.message


async def test_a_turn_over_its_budget_ends_the_turn_not_the_thread(harness: Harness) -> None:
    """Seen with a real model (issue 51): it called ``add`` once too often, turn 2 hit its
    per-turn ``max_iterations``, and the whole thread failed. Now the turn ends unanswered,
    saying why; the person writes again and the next turn, with budgets of its own, answers.
    The model is told its last turn was cut."""
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 2, "b": 3})]),
            Turn(text="5"),
            Turn(tool_calls=[("add", {"a": 5, "b": 1})]),
            Turn(tool_calls=[("add", {"a": 6, "b": 1})]),  # the turn's last model call
            Turn(text="7"),
        ]
    )
    config = LoopConfig(model=model, tools=["add"], max_iterations=2, thread=ThreadConfig())
    async with harness.worker():
        chat = await _start(harness, config, "2+3?")
        assert (await chat.turn(1)).output == "5"
        cut_short = await chat.send("now add 1, twice")
        state = await _waiting(chat, 2)
        again = await chat.send("just give me the number")
        journal = await chat.handle.query("journal", result_type=Journal)
        await chat.close()
    assert cut_short.reason == "budget_exceeded" and cut_short.output == ""
    assert cut_short.unanswered is not None and "max_iterations=" in cut_short.unanswered
    assert "turn 2 of a thread" in cut_short.unanswered
    assert state.status == "awaiting_message"
    assert again.output == "7" and again.turn == 3
    last = harness.model.requests_for(model)[-1]
    assert any(t.startswith("[orga] Your last turn ended unanswered") for t in last.user_texts())
    [_, second, _] = [e for e in journal.entries if isinstance(e, TurnAnswered)]
    assert second.reason == "budget_exceeded" and "max_iterations" in second.output


async def test_orga_say_reads_a_turn_that_ended_unanswered(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """The person reads why the turn has no answer, and that writing again goes on."""
    model = harness.new_model(
        [
            Turn(tool_calls=[("add", {"a": 5, "b": 1})]),
            Turn(tool_calls=[("add", {"a": 6, "b": 1})]),
            Turn(text="7"),
        ]
    )
    config = LoopConfig(model=model, tools=["add"], max_iterations=2, thread=ThreadConfig())
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    async with harness.worker():
        chat = await _start(harness, config)
        code, out, err = await orga_command("say", chat.id, "add 1, twice", env=cli)
        assert code == 0, err
        assert out.startswith("turn 1 ended unanswered: the model asked for 1 tool call(s)")
        assert "Write again to go on" in out
        code, out, err = await orga_command("say", chat.id, "the number, please", env=cli)
        assert (code, out.strip()) == (0, "7"), err
        await chat.close()


async def test_a_closed_thread_takes_no_message_and_an_idle_one_ends(harness: Harness) -> None:
    asked, release = threading.Event(), threading.Event()

    def slow_answer(_request: RecordedRequest) -> Turn:
        asked.set()
        release.wait(timeout=60)  # the test releases it once the thread is closing
        return Turn(text="hello")

    model = harness.new_model([slow_answer, Turn(text="hi again")])
    async with harness.worker():
        chat = await _start(harness, LoopConfig(model=model, thread=ThreadConfig()), "hi")
        await eventually(asked.is_set, "the first turn is answering")
        closing = await chat.close("enough")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await chat.say("one more")
        with pytest.raises(WorkflowUpdateFailedError) as twice:
            await chat.close("again")
        release.set()
        result = await chat.handle.result()
        idle = await _start(
            harness,
            LoopConfig(model=model, thread=ThreadConfig(idle_timeout=timedelta(seconds=1))),
            "hi",
        )
        idle_result: LoopResult = await idle.handle.result()
        once = harness.new_model([Turn(text="once")])
        loop = orga.loop(harness.client, (await harness.start("x", model=once)).id)
        with pytest.raises(WorkflowUpdateFailedError) as not_a_thread:
            await loop.handle.execute_update("turn", TurnWait(turn=1))
        await loop.result()
    assert closing.after_turn
    assert "the thread is closed" in str(refused.value.cause)
    assert "already closing" in str(twice.value.cause)
    assert (result.output, result.termination_reason) == ("hello", "thread_closed")
    assert (idle_result.output, idle_result.termination_reason) == ("hi again", "thread_idle")
    assert "not a thread" in str(not_a_thread.value.cause)


async def test_a_long_thread_continues_as_new_and_keeps_its_turns(harness: Harness) -> None:
    turns = 12
    model = harness.new_model([Turn(text=f"answer {n}") for n in range(1, turns + 1)])
    config = LoopConfig(model=model, max_history_events=200, thread=ThreadConfig())
    async with harness.worker():
        chat = await _start(harness, config)
        answers: list[TurnResult] = [await chat.send(f"message {n}") for n in range(1, turns + 1)]
        description = await chat.handle.describe()
        first_run = await harness.client.get_workflow_handle(
            chat.id, run_id=description.raw_description.workflow_execution_info.first_run_id
        ).describe()
        kept = await chat.turn(turns - 5)
        state = await chat.state()
        await chat.close()
        result = await chat.handle.result()
    assert [a.output for a in answers] == [f"answer {n}" for n in range(1, turns + 1)]
    assert first_run.status is not None and first_run.status.name == "CONTINUED_AS_NEW"
    assert kept.output == f"answer {turns - 5}"
    assert state.thread is not None and state.thread.turn == turns
    assert result.output == f"answer {turns}"
    last = harness.model.requests_for(model)[-1]
    assert last.user_texts() == [f"message {n}" for n in range(1, turns + 1)]


async def test_orgas_own_notices_travel_into_the_next_run(harness: Harness) -> None:
    """A conversation that holds orga's own notices (``[orga] Your last turn ended
    unanswered…``) continues as new: the next run carries them as the loop's, never as a
    person's task that imitates them."""
    turns = 14
    steps = [
        Turn(tool_calls=[("add", {"a": 1, "b": 1})]),
        Turn(tool_calls=[("add", {"a": 2, "b": 2})]),
    ]
    model = harness.new_model([*steps, *(Turn(text=f"answer {n}") for n in range(2, turns + 1))])
    config = LoopConfig(
        model=model, tools=["add"], max_iterations=2, max_history_events=200, thread=ThreadConfig()
    )
    async with harness.worker():
        chat = await _start(harness, config)
        cut_short = await chat.send("add twice")
        answers = [await chat.send(f"message {n}") for n in range(2, turns + 1)]
        description = await chat.handle.describe()
        first_run = await harness.client.get_workflow_handle(
            chat.id, run_id=description.raw_description.workflow_execution_info.first_run_id
        ).describe()
        await chat.close()
        result = await chat.handle.result()
    assert cut_short.reason == "budget_exceeded"
    assert first_run.status is not None and first_run.status.name == "CONTINUED_AS_NEW"
    assert [a.output for a in answers] == [f"answer {n}" for n in range(2, turns + 1)]
    assert result.output == f"answer {turns}"
    last = harness.model.requests_for(model)[-1]
    assert any(t.startswith("[orga] Your last turn ended unanswered") for t in last.user_texts())


async def test_orga_list_shows_a_thread_and_what_it_waits_for(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model([Turn(text="hello")])
    async with harness.worker():
        chat = await _start(harness, LoopConfig(model=model, thread=ThreadConfig()), "hi")
        await _waiting(chat, 1)

        async def listed() -> dict[str, object] | None:
            code, out, err = await orga_command("list", "--json", env=on(env, harness))
            assert code == 0, err
            rows = [r for r in json.loads(out) if r["workflow_id"] == chat.id]
            ok = rows and rows[0]["status"] == "awaiting_message"
            return rows[0] if ok else None

        row = await eventually(listed, "orga list shows the waiting thread")
        code, out, err = await orga_command("state", chat.id, env=on(env, harness))
        await chat.close()
        journal: Journal = await chat.journal()
    assert row["kind"] == "thread"
    assert code == 0, err
    assert "waiting for   the next message (turn 2)" in out, out
    assert any(isinstance(e, TurnAnswered) for e in journal.entries)


async def test_orga_chat_streams_asks_approvals_inline_and_leaves_the_thread_waiting(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    @tool(requires_approval=True)
    def plus(a: int, b: int) -> int:
        """Add two numbers (a person approves each call).

        Args:
            a: the first.
            b: the second.
        """
        return a + b

    model = harness.new_model(
        [
            Turn(tool_calls=[("plus", {"a": 2, "b": 3})]),
            Turn(text="2+3 is 5"),
            Turn(text="times 4 is 20"),
        ]
    )
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url, "ORGA_APPROVER": "ann"}
    async with harness.worker(tools=[plus]):
        with terminal([ORGA, "chat", "--tool", "plus", "--model", model], cli) as term:
            screen = await term.shows("you>")
            term.type("What is 2+3?")
            screen = await term.shows("approve? [y/N")
            assert '"a": 2' in screen or "a: 2" in screen or '"a":2' in screen, screen
            term.type("y")
            screen = await term.shows("orga> 2+3 is 5")
            mark = screen.index("orga> 2+3 is 5")
            await term.shows("you>", after=mark)
            term.type("And times 4?")
            screen = await term.shows("orga> times 4 is 20", after=mark)
            term.press("C-c")
            screen = await term.shows("[exited", after=mark)
        found = re.search(r"started (thread-[0-9a-f]{12})", screen)
        assert found, screen
        thread_id = found.group(1)
        assert f"thread {thread_id} waits for your next message" in screen
        chat = orga.thread(harness.client, thread_id)
        harness.handles.append(chat.handle)
        await _waiting(chat, 2)  # Ctrl-C left it waiting, nothing lost
        with terminal([ORGA, "chat", thread_id], cli) as term:
            await term.shows("turn 2: times 4 is 20")
            await term.shows("you>")
            term.type("/close")
            screen = await term.shows("[exited 0]")
        result = await chat.handle.result()
        journal = await chat.journal()
    assert f"thread {thread_id} closed (thread_closed)" in screen
    assert result.output == "times 4 is 20"
    decided = [e for e in journal.entries if e.kind == "ApprovalDecided"]
    assert len(decided) == 1 and decided[0].approver == "ann"  # type: ignore[union-attr]
    requests = harness.model.requests_for(model)
    assert requests[-1].user_texts() == ["What is 2+3?", "And times 4?"]


async def test_a_thread_cancelled_while_it_waits_for_a_message_says_cancelled(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model([Turn(text="hello")])
    async with harness.worker():
        chat = await harness.start_thread("hi", model=model)
        await chat.turn(1)
        code, _, err = await orga_command(
            "cancel", chat.id, "--reason", "done here", env=on(env, harness)
        )
        with pytest.raises(WorkflowFailureError):
            await chat.handle.result()
        state = await chat.state()
        listed = await eventually(
            lambda: _status_listed(harness, chat.id), "the thread is listed as cancelled"
        )
    assert code == 0, err
    assert state.status == "cancelled" and state.thread is not None
    assert listed == "cancelled"


async def _status_listed(harness: Harness, workflow_id: str) -> str | None:
    """``OrgaStatus`` of ``workflow_id`` once it is no longer ``awaiting_message``."""
    query = f"WorkflowId = '{workflow_id}'"
    async for execution in harness.client.list_workflows(query):
        status = execution.typed_search_attributes.get(sa.STATUS)
        if status not in (None, "awaiting_message"):
            return status
    return None


async def test_a_flood_of_messages_to_a_thread_is_bounded_and_loses_nothing_it_took(
    harness: Harness,
) -> None:
    """Tried as an attacker (issue 50): 60 messages sent to a thread at once. Each is either
    taken (and then read by the model, journaled) or refused with a reason — the inbox's bound,
    or Temporal's own limit on updates in flight — and the thread stays whole: it still answers
    the next message, and its history does not grow with what it refused."""
    model = harness.new_model([])
    harness.model.script(model, [Turn(text=f"answer {n}") for n in range(60)])
    config = LoopConfig(model=model, thread=ThreadConfig())
    async with harness.worker():
        chat = await _start(harness, config, "hello")
        await _waiting(chat, 1)
        loop = orga.loop(harness.client, chat.id)

        async def send(n: int) -> str:
            try:
                await loop.say(f"flood {n}")
            except WorkflowUpdateFailedError as error:
                return f"refused: {error.cause}"
            except RPCError as error:
                return f"server: {error.status.name}"
            return "taken"

        outcomes = await asyncio.gather(*(send(n) for n in range(60)))
        taken = outcomes.count("taken")
        state = await eventually(lambda: _waiting_any(chat), "the thread waits again")
        answer = await chat.send("are you still there?")
        journal = await chat.handle.query("journal", result_type=Journal)
        events = len((await chat.handle.fetch_history()).events)
        await chat.close()
    others = {o for o in outcomes if o != "taken"}
    assert taken >= 1
    assert all("messages already wait" in o or o.startswith("server:") for o in others), others
    received = [e.text for e in journal.entries if isinstance(e, MessageReceived)]
    assert sorted(t for t in received if t.startswith("flood")) == sorted(
        f"flood {n}" for n, o in enumerate(outcomes) if o == "taken"
    )
    assert answer.output.startswith("answer")
    assert state.status == "awaiting_message"
    assert events < 20 * taken + 200  # what was refused left nothing in history


async def _waiting_any(chat: orga.ThreadHandle) -> LoopState | None:
    state = await chat.state()
    return state if state.status == "awaiting_message" else None
