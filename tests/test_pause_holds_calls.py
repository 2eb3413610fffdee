"""A paused loop, task or agent holds its tool calls, approved ones included, exactly as a
paused tool does, and the resume runs each once (issue 64: ``orga pause ID`` and ``orga pause
--agent`` were checked only before the next model call, so a refund approved while its loop
was paused ran at once; a task's step whose tool was paused failed its attempt, and could be
skipped or compensated for it).

Each pause is made through the worker's own pause book (seen at once: another process's is
seen within a second, ``PauseBook.held``) and ended the way ``orga resume`` ends it: the store,
then ``release_held``.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, Literal

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from orga.contracts import search_attributes as sa
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.journal import CallPaused, CallResumed, Journal
from orga.contracts.state import LoopState
from orga.contracts.task import TaskState
from orga.desk.releases import release_held
from orga.runtime.pauses import Pause, PauseBook
from orga.scripted.server import Turn
from orga.tools.sdk import Tool, tool
from tests.harness import Harness
from tests.helpers import Hold, eventually, inbox, loop_state, pending, task_state

REASON = "refunds double-paid"


def _refund(ran: list[int], *, requires_approval: bool = True) -> Tool:
    """A refund tool of its own name (a pause is the store's: one tool per test) that counts
    what it paid out in ``ran``."""

    @tool(name=f"refund_{uuid.uuid4().hex[:8]}", requires_approval=requires_approval)
    def refund(amount: int) -> str:
        """Refund an amount.

        Args:
            amount: cents.
        """
        ran.append(amount)
        return f"refunded {amount}"

    return refund


def _book(harness: Harness) -> PauseBook:
    """The pauses the running worker's activities read: a pause made through it is seen at
    once."""
    assert harness.plugin is not None
    return harness.plugin.parts(harness.client).pauses


async def _journal(handle: WorkflowHandle[Any, Any]) -> Journal:
    return await handle.query("journal", result_type=Journal)


async def _listed_paused(client: Client, workflow_id: str) -> bool:
    """Whether visibility lists it ``paused`` (what ``orga list --status paused`` and the
    resume's search for a tool's or an agent's held workflows read)."""
    query = f'WorkflowId = "{workflow_id}" AND {sa.STATUS.name} = "paused"'
    return bool([e async for e in client.list_workflows(query)])


async def _resume(harness: Harness, target: str) -> None:
    """What ``orga resume`` does: the pause leaves the store, then the workflows it held are
    told."""
    assert _book(harness).resume(target) is not None
    assert await release_held(harness.client, target) >= 1


def _paused_once(journal: Journal, call_id: str) -> CallPaused:
    """The call's one ``CallPaused``, followed by its one ``CallResumed``."""
    [paused] = [e for e in journal.entries if isinstance(e, CallPaused)]
    [resumed] = [e for e in journal.entries if isinstance(e, CallResumed)]
    assert (paused.call_id, resumed.call_id) == (call_id, call_id)
    assert paused.tool == resumed.tool and paused.seq < resumed.seq
    return paused


@pytest.mark.parametrize("kind", ["loop", "agent"])
async def test_a_paused_loop_or_agent_holds_a_call_approved_meanwhile_then_runs_it_once(
    harness: Harness, kind: Literal["loop", "agent"]
) -> None:
    """The loop waits for a person's approval of a refund; its loop (or agent) is paused; the
    approval comes: the refund does not run — the loop is ``paused``, the call journaled
    ``CallPaused`` — until the resume, after which it runs once and the loop finishes."""
    ran: list[int] = []
    refund = _refund(ran)
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    model = harness.new_model(
        [Turn(tool_calls=[(refund.name, {"amount": 5})]), Turn(text="refunded 5")]
    )
    async with harness.worker(tools=[refund]):
        handle = await harness.start(
            "refund 5",
            model=model,
            tools=[refund.name],
            agent_id=agent,
            pause_recheck=timedelta(seconds=1),
        )
        [waiting] = (await pending(handle)).pending_approvals
        target = f"loop:{handle.id}" if kind == "loop" else f"agent:{agent}"
        _book(harness).pause(target, "olu", REASON)
        await handle.execute_update(
            "approve", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="pat")
        )

        async def held() -> LoopState | None:
            state = await loop_state(handle)
            journaled = any(isinstance(e, CallPaused) for e in (await _journal(handle)).entries)
            listed = await _listed_paused(harness.client, handle.id)
            return state if journaled and listed and state.status == "paused" else None

        state = await eventually(held, f"the approved refund held by the {kind}'s pause")
        assert ran == []  # approved, and still not run
        assert len(harness.model.requests_for(model)) == 1
        await _resume(harness, target)
        result = await handle.result()
        journal = await _journal(handle)
    assert ran == [5]  # once
    assert result.output == "refunded 5"
    assert len(harness.model.requests_for(model)) == 2
    assert list(state.paused_calls) == [waiting.call_id]
    assert Pause.target_in(state.paused_calls[waiting.call_id]) == target  # its resume command
    paused = _paused_once(journal, waiting.call_id)
    assert paused.tool == refund.name and REASON in paused.reason


async def test_a_call_running_when_its_loop_is_paused_finishes_and_the_next_waits_for_the_resume(
    harness: Harness,
) -> None:
    """Two calls of a serial tool in one turn: the loop is paused while the first runs. The
    first finishes (a running effect is not cut off); the second is held until the resume,
    then runs once."""
    ran: list[str] = []
    hold = Hold()

    @tool(name=f"export_{uuid.uuid4().hex[:8]}", serial=True)
    def export(table: str) -> str:
        """Export a table.

        Args:
            table: which.
        """
        if table == "first":
            hold.wait_here()
        ran.append(table)
        return f"exported {table}"

    calls = [(export.name, {"table": "first"}), (export.name, {"table": "second"})]
    model = harness.new_model([Turn(tool_calls=calls), Turn(text="both exported")])
    async with harness.worker(tools=[export]):
        handle = await harness.start(
            "export both", model=model, tools=[export.name], pause_recheck=timedelta(seconds=1)
        )
        await hold.arrived()
        target = f"loop:{handle.id}"
        _book(harness).pause(target, "olu", "exports stall the database")
        hold.release.set()

        async def second_held() -> CallPaused | None:
            journal = await _journal(handle)
            found = [e for e in journal.entries if isinstance(e, CallPaused)]
            return found[0] if found and await _listed_paused(harness.client, handle.id) else None

        paused = await eventually(second_held, "the second call held by the loop's pause")
        assert ran == ["first"]  # the running call finished; the next did not start
        await _resume(harness, target)
        result = await handle.result()
        journal = await _journal(handle)
    assert ran == ["first", "second"]
    assert result.output == "both exported"
    assert _paused_once(journal, paused.call_id) == paused


@pytest.mark.parametrize("kind", ["task", "agent", "tool"])
async def test_a_paused_task_agent_or_tool_holds_a_step_approved_meanwhile_then_runs_it_once(
    env: WorkflowEnvironment, harness: Harness, kind: Literal["task", "agent", "tool"]
) -> None:
    """A task's step waits for a person's approval; the task (``orga pause ID``), its agent or
    its tool is paused; the approval comes: the step does not run — and does not fail: no
    second attempt, no skip, no compensation — the task is ``paused``, on the desk with the
    command that ends its pause, until the resume; then the step runs once and the task
    completes."""
    ran: list[int] = []
    refund = _refund(ran)
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    async with harness.worker(tools=[refund]):
        handle = await harness.start_task(
            [
                {
                    "id": "refund",
                    "action": {"kind": "tool", "tool": refund.name, "arguments": {"amount": 7}},
                }
            ],
            agent_id=agent,
            pause_recheck=timedelta(seconds=1),
        )

        async def asked() -> TaskState | None:
            state = await task_state(handle)
            return state if state.pending_approvals else None

        await eventually(asked, "the refund step waits for approval")
        target = {"task": f"loop:{handle.id}", "agent": f"agent:{agent}"}.get(
            kind, f"tool:{refund.name}"
        )
        _book(harness).pause(target, "olu", REASON)
        await handle.execute_update(
            "approve", ApprovalDecision(call_id="refund#1", approved=True, approver="pat")
        )

        async def held() -> TaskState | None:
            state = await task_state(handle)
            listed = await _listed_paused(harness.client, handle.id)
            return state if state.paused_calls and listed else None

        state = await eventually(held, f"the approved step held by the {kind}'s pause")
        assert ran == []
        [step] = state.steps
        assert (step.status, step.attempts, step.errors) == ("running", 1, [])
        if kind == "task":  # on the desk, with the command that ends its pause
            [item] = [i for i in await inbox(env, harness, 1) if i["kind"] == "paused"]
            assert (item["workflow_type"], item["item_id"]) == ("Task", "refund")
            assert item["commands"] == [f"orga resume {handle.id}"]
        await _resume(harness, target)
        result = await handle.result()
        journal = await _journal(handle)
    assert ran == [7]  # once
    [step] = result.steps
    assert (step.status, step.attempts, step.errors) == ("completed", 1, [])
    assert result.outcome == "completed"
    assert Pause.target_in(state.paused_calls["refund"]) == target
    paused = _paused_once(journal, "refund")
    assert paused.tool == refund.name and REASON in paused.reason
    assert [r.outcome for r in result.receipts] == ["delivered"]


async def test_orga_say_to_a_paused_thread_says_what_holds_it(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """Issue 65: ``orga say`` to a paused thread waited in silence, even on a terminal. It now
    says what the turn waits for — the pause that holds its model call, once in a log, on the
    status line on a terminal — and answers once the thread is resumed."""
    import asyncio
    import os

    from tests.harness import TEST_STORE
    from tests.helpers import ORGA, on, stderr_until

    model = harness.new_model([Turn(text="first"), Turn(text="second")])
    variables = {**os.environ, **on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    async with harness.worker():
        chat = await harness.start_thread("hello", model=model)
        await chat.turn(1)
        _book(harness).pause(f"loop:{chat.id}", "ops", "incident 42")
        process = await asyncio.create_subprocess_exec(
            ORGA, "say", chat.id, "and now?", env=variables,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        said = await stderr_until(process, "held by a pause")
        await _resume(harness, f"loop:{chat.id}")
        out, _ = await asyncio.wait_for(process.communicate(), 60)
        await chat.close()
    assert "incident 42" in said
    assert process.returncode == 0 and "second" in out.decode()
