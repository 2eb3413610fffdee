"""Incident controls (issue 55): ``orga pause --tool`` stops one tool across every loop — a
call of it waits, not run, durably, journaled and on the desk, with who paused it and why
(an approval already granted is kept) and the command that ends that pause — and
``orga resume --tool`` lets each run once."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from orga.contracts.approvals import ApprovalDecision
from orga.contracts.journal import CallPaused, CallResumed, Journal
from orga.contracts.state import LoopState
from orga.runtime.pauses import PauseBook
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from tests.harness import TEST_STORE, Harness
from tests.helpers import eventually, inbox, loop_state, on, orga, pending


async def test_a_paused_tool_holds_its_calls_in_three_loops_and_resume_runs_each_once(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    name = f"refund_{uuid.uuid4().hex[:6]}"  # the pause is the store's: one tool per test
    ran: list[int] = []

    @tool(name=name, requires_approval=False)
    def refund(amount: int) -> str:
        """Refund an amount.

        Args:
            amount: cents.
        """
        ran.append(amount)
        return f"refunded {amount}"

    gated = f"{name}_gated"

    @tool(name=gated, requires_approval=True)
    def refund_gated(amount: int) -> str:
        """Refund an amount (a person approves it).

        Args:
            amount: cents.
        """
        ran.append(amount)
        return f"refunded {amount}"

    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url, "ORGA_APPROVER": "olu"}
    code, out, err = await orga("pause", "--tool", name, "--reason", "double refunds", env=cli)
    assert code == 0, err
    code, out, err = await orga("pause", "--tool", gated, "--reason", "double refunds", env=cli)
    assert code == 0 and "paused by olu" in out, err
    handles = []
    async with harness.worker(tools=[refund, refund_gated]):
        for amount, tool_name in ((1, name), (2, name), (3, gated)):
            model = harness.new_model(
                [Turn(tool_calls=[(tool_name, {"amount": amount})]), Turn(text=f"{amount} done")]
            )
            handles.append(
                await harness.start(
                    f"refund {amount}",
                    model=model,
                    tools=[tool_name],
                    pause_recheck=timedelta(seconds=1),
                )
            )
        [waiting] = (await pending(handles[2])).pending_approvals
        await handles[2].execute_update(  # approved before the pause ends: kept
            "approve", ApprovalDecision(call_id=waiting.call_id, approved=True, approver="pat")
        )

        async def all_paused() -> list[LoopState] | None:
            states = [await loop_state(h) for h in handles]
            return states if all(s.status == "paused" for s in states) else None

        states = await eventually(all_paused, "three loops paused")
        items = [i for i in await inbox(env, harness, 3) if i["kind"] == "paused"]
        code, listed, _ = await orga("list", "--status", "paused", "--json", env=cli)
        assert code == 0 and all(h.id in listed for h in handles)
        assert ran == []  # nothing ran while paused
        for tool_name in (name, gated):
            code, out, err = await orga("resume", "--tool", tool_name, env=cli)
            assert code == 0 and "resumed tool" in out, err
        results = [await h.result() for h in handles]
        journals = [await h.query("journal", result_type=Journal) for h in handles]
    assert sorted(ran) == [1, 2, 3]  # each once
    assert [r.output for r in results] == ["1 done", "2 done", "3 done"]
    for state in states:
        [why] = state.paused_calls.values()
        assert "is paused by olu" in why and "double refunds" in why
    assert {i["workflow_id"] for i in items} == {h.id for h in handles}
    assert sorted(i["commands"][0] for i in items) == sorted(  # the command that ends each
        [f"orga resume --tool {name}"] * 2 + [f"orga resume --tool {gated}"]
    )
    assert {(i["pause"], i["tool"]) for i in items} == {
        (f"tool:{name}", name),
        (f"tool:{gated}", gated),
    }
    for journal in journals:
        [paused] = [e for e in journal.entries if isinstance(e, CallPaused)]
        [resumed] = [e for e in journal.entries if isinstance(e, CallResumed)]
        assert "double refunds" in paused.reason
        assert (resumed.call_id, resumed.tool) == (paused.call_id, paused.tool)
        assert paused.seq < resumed.seq and paused.at < resumed.at
    assert PauseBook(TEST_STORE).of(f"tool:{name}") is None


async def test_a_paused_loop_and_a_paused_agent_wait_before_their_next_model_call(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """``orga pause ID`` holds one loop, ``orga pause --agent`` every loop of an agent: each
    waits before its next model call (status ``paused``, on the desk) and goes on after
    ``orga resume``, asking the model once."""
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url, "ORGA_APPROVER": "olu"}
    loop_id = f"loop-{uuid.uuid4().hex[:12]}"
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    code, out, err = await orga("pause", loop_id, "--reason", "it misbehaves", env=cli)
    assert code == 0 and f"loop {loop_id!r} is paused by olu" in out, err
    code, out, err = await orga("pause", "--agent", agent, "--reason", "all of them", env=cli)
    assert code == 0, err
    one = harness.new_model([Turn(text="one")])
    other = harness.new_model([Turn(text="other")])
    async with harness.worker():
        held = await harness.start(
            "hi", model=one, workflow_id=loop_id, pause_recheck=timedelta(seconds=1)
        )
        of_agent = await harness.start(
            "hi", model=other, agent_id=agent, pause_recheck=timedelta(seconds=1)
        )

        async def both_paused() -> list[LoopState] | None:
            states = [await loop_state(h) for h in (held, of_agent)]
            return states if all(s.status == "paused" for s in states) else None

        states = await eventually(both_paused, "both loops paused")
        items = {i["workflow_id"]: i for i in await inbox(env, harness, 2)}
        assert harness.model.requests_for(one) == [] and harness.model.requests_for(other) == []
        for target in ((loop_id,), ("--agent", agent)):
            code, out, err = await orga("resume", *target, env=cli)
            assert code == 0 and "resumed" in out, err
        results = [await h.result() for h in (held, of_agent)]
        journals = [await h.query("journal", result_type=Journal) for h in (held, of_agent)]
    assert [r.output for r in results] == ["one", "other"]
    for journal in journals:  # the pause's two ends, journaled
        kinds = [e.kind for e in journal.entries if isinstance(e, CallPaused | CallResumed)]
        assert kinds == ["CallPaused", "CallResumed"]
    assert len(harness.model.requests_for(one)) == len(harness.model.requests_for(other)) == 1
    assert "it misbehaves" in next(iter(states[0].paused_calls.values()))
    # On the desk and in `orga pending`, each with the one command that ends its pause.
    assert (items[held.id]["commands"], items[held.id]["pause"]) == (
        [f"orga resume {loop_id}"],
        f"loop:{loop_id}",
    )
    assert items[of_agent.id]["commands"] == [f"orga resume --agent {agent}"]
    assert "all of them" in next(iter(states[1].paused_calls.values()))
