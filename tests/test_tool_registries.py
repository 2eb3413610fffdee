"""Workers of one task queue with different tool registries: a call to a tool the worker that
took it lacks waits for a worker that has it (it is never the model's error, nor the loop's
end), and says so in ``orga state``; an approval given while only such a worker runs is not
lost; a worker starting beside one with other tools says which, and ``orga run`` refuses a tool
no worker registers, saying what was meant (issue 39)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

import orga
from orga.contracts.approvals import PendingApproval
from orga.contracts.state import LoopState
from orga.contracts.task import TaskState
from orga.runtime.presence import publish_tools, registries, tools_of
from orga.scripted.server import Turn
from tests.harness import TEST_STORE, Harness
from tests.helpers import eventually, inbox, on, pending, waits_for_a_worker
from tests.helpers import orga as orga_command

credited: list[tuple[int, str]] = []


@orga.tool(requires_approval=True)
def issue_credit(amount: int, email: str, ctx: orga.ToolContext) -> str:
    """Credit an amount to a customer's account.

    Args:
        amount: cents.
        email: the customer's address.
    """
    credited.append((amount, email))
    return f"credited {amount} cents to {email}"


async def _credit_waiting(
    harness: Harness, amount: int, email: str, answer: str
) -> tuple[WorkflowHandle[Any, Any], PendingApproval]:
    """A loop whose ``issue_credit`` call waits for approval (then it answers ``answer``),
    started on a worker with the tool, which has stopped since."""
    call = ("issue_credit", {"amount": amount, "email": email})
    model = harness.new_model([Turn(tool_calls=[call]), Turn(text=answer)])
    async with harness.worker(tools=[issue_credit]):
        handle = await harness.start(f"credit {email}", model=model, tools=["issue_credit"])
        [waiting] = (await pending(handle)).pending_approvals
    return handle, waiting


async def _waiting_for_a_worker(handle: WorkflowHandle[Any, Any]) -> LoopState:
    """The loop's state once a call of it waits for a worker with its tool."""

    async def probe() -> LoopState | None:
        state = await handle.query("state", result_type=LoopState)
        return state if state.waiting_for_workers else None

    return await eventually(probe, f"{handle.id} waiting for a worker with its tool")


async def test_an_approval_survives_a_swap_to_a_worker_without_the_tool(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    handle, call = await _credit_waiting(harness, 500, "ann@example.com", "credited")
    async with harness.worker():  # the same queue, without the tool's module
        await orga.loop(harness.client, handle.id).approve(
            call.call_id, approver="pat", reason="fine"
        )
        state = await _waiting_for_a_worker(handle)
        code, shown, err = await orga_command("state", handle.id, env=on(env, harness))
        [item] = await inbox(env, harness, 1)
        _, listed, _ = await orga_command("pending", env=on(env, harness))
    assert credited == []
    async with harness.worker(tools=[issue_credit]):  # a worker with the tool is back
        result = await handle.result()
        final = await handle.query("state", result_type=LoopState)
    assert state.waiting_for_workers == ["issue_credit"]
    assert state.status == "awaiting_worker" and final.status == "completed"
    assert (item["kind"], item["tool"]) == ("worker", "issue_credit")
    assert "waiting for a worker with `issue_credit`" in item["reason"]
    assert "worker  tool:issue_credit  issue_credit" in listed
    assert code == 0, err
    assert "waiting for   a worker with `issue_credit`" in shown
    assert credited == [(500, "ann@example.com")]  # once
    assert result.output == "credited" and final.waiting_for_workers == []
    [record] = [r for r in final.tool_calls if r.call_id == call.call_id]
    assert record.status == "ok"  # the model never saw an error for it


async def test_a_worker_beside_one_with_other_tools_says_which(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    async with harness.worker(tools=[issue_credit]):

        async def listed() -> dict[str, frozenset[str] | None] | None:
            found = await registries(harness.client, harness.task_queue, TEST_STORE)
            return (
                found
                if any(t is not None and "issue_credit" in t for t in found.values())
                else None
            )

        first = await eventually(listed, "the first worker's registry is listed")
        # A second process's worker.
        beside = await harness.another_process()
        with caplog.at_level(logging.WARNING, logger="orga"):
            async with beside.worker():
                pass
    [identity] = first
    # The identity Temporal writes into the loops' events is its own; the store says the rest.
    assert identity == harness.client.identity
    assert "issue_credit" in (tools_of(identity, TEST_STORE, harness.task_queue) or ())
    [warning] = [
        r.getMessage() for r in caplog.records if "registers other tools" in r.getMessage()
    ]
    assert "it has issue_credit that this one lacks, and lacks none" in warning
    assert "ORGA_TOOL_MODULES" in warning


async def test_orga_run_refuses_a_tool_no_worker_registers_and_says_what_was_meant(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    async with harness.worker():
        code, _, err = await orga_command(
            "run", "What is 2+3?", "--tool", "ad", env=on(env, harness)
        )
        started = [
            w async for w in harness.client.list_workflows(f"TaskQueue = '{harness.task_queue}'")
        ]
    assert code == 2, err
    assert "no worker of task queue" in err and "registers a tool 'ad'; did you mean 'add'" in err
    assert "Nothing was started" in err and started == []


def test_a_registry_names_only_plain_tool_names() -> None:
    """Any process that can poll a task queue (or write the store) says what it likes: a name
    with a newline or an escape sequence (one meant for a log or a terminal) is not read as a
    tool, and one stored name is one name; a stored list that holds one is no worker's, and
    says nothing."""
    store = TEST_STORE
    publish_tools(store, "q", "1@host", ["add", "issue_credit"])
    assert tools_of("1@host", store, "q") == {"add", "issue_credit"}
    assert tools_of("1@host", store, "other-queue") is None  # said for its own queue only
    assert tools_of("9@host", store, "q") is None  # says nothing
    publish_tools(store, "q", "2@host", None)  # a worker with MCP servers
    assert tools_of("2@host", store, "q") is None
    publish_tools(store, "q", "3@host", ["x"])
    store.replace("worker-tools-of:q:3@host", b'["ok", "evil\\u001b[2J", 7, "a,b"]')
    assert tools_of("3@host", store, "q") is None
    store.replace("worker-tools-of:q:3@host", b"not json")
    assert tools_of("3@host", store, "q") is None


def test_a_worker_starting_again_under_its_identity_says_its_tools_again() -> None:
    publish_tools(TEST_STORE, "q", "4@host", ["add"])
    publish_tools(TEST_STORE, "q", "4@host", ["add", "pay"])
    assert tools_of("4@host", TEST_STORE, "q") == {"add", "pay"}


def test_identities_of_earlier_releases_are_still_read() -> None:
    """A worker of an earlier release named its tools in its identity: by a digest of the list
    its store kept, or listed; only plain names count there too."""
    store = TEST_STORE
    store.put("worker-tools:#0123456789ab", b'["add", "issue_credit"]')
    assert tools_of("1@host orga-tools:#0123456789ab", store, "q") == {"add", "issue_credit"}
    assert tools_of("1@host orga-tools:#ba9876543210", store, "q") is None  # not kept
    assert tools_of("1@host orga-tools:#unlisted", store, "q") is None
    assert tools_of("1@host orga-tools:add,evil\nFAKE LOG LINE,\x1b[2Jx", store, "q") == {"add"}


async def test_a_model_call_waits_for_a_worker_with_the_loops_tools(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """Denied while only a worker without the tool runs, the loop's next model call (which
    offers the tool) waits for a worker that has it instead of failing the loop."""
    handle, call = await _credit_waiting(harness, 900, "bo@example.com", "no credit then")
    async with harness.worker():  # the same queue, without the tool's module
        await orga.loop(harness.client, handle.id).deny(call.call_id, approver="pat", reason="no")
        state = await _waiting_for_a_worker(handle)
        await waits_for_a_worker(handle, "issue_credit")  # a durable timer, shown in the UI
    async with harness.worker(tools=[issue_credit]):
        result = await handle.result()
        final = await handle.query("state", result_type=LoopState)
    assert (state.status, state.waiting_for_workers) == ("awaiting_worker", ["issue_credit"])
    assert (result.output, final.status, final.waiting_for_workers) == (
        "no credit then",
        "completed",
        [],
    )


async def test_a_task_step_waits_for_a_worker_with_its_tool(harness: Harness) -> None:
    """Approved while only a worker without the tool runs, a task's step waits for a worker
    that has it: not a failed attempt (which would count towards the step's limit)."""
    credited.clear()
    arguments = {"amount": 300, "email": "cy@example.com"}
    step = {
        "id": "credit",
        "action": {"kind": "tool", "tool": "issue_credit", "arguments": arguments},
    }
    async with harness.worker(tools=[issue_credit]):
        handle = await harness.start_task([step], policy={"max_reattempts_per_step": 0})

        async def approval() -> TaskState | None:
            state = await handle.query("state", result_type=TaskState)
            return state if state.pending_approvals else None

        [call] = (await eventually(approval, "the step waits for approval")).pending_approvals
    async with harness.worker():  # the same queue, without the tool's module
        await orga.loop(harness.client, handle.id).approve(call.call_id, approver="pat")
        await waits_for_a_worker(handle, "issue_credit")  # not a failed attempt: a wait
    assert credited == []
    async with harness.worker(tools=[issue_credit]):
        result = await handle.result()
    assert result.status == "completed" and credited == [(300, "cy@example.com")]
    [report] = result.steps
    assert (report.status, report.attempts) == ("completed", 1)
