"""Workers of one task queue with different tool registries: a call to a tool the worker that
took it lacks waits for a worker that has it (it is never the model's error, nor the loop's
end), and says so in ``orga state``; an approval given while only such a worker runs is not
lost; a worker starting beside one with other tools says which, and ``orga run`` refuses a tool
no worker registers, saying what was meant (issue 39)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

import orga
from orga.contracts.state import LoopState
from orga.runtime.presence import identity_with_tools, registries, tools_of
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import eventually, inbox, on, pending
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


async def test_an_approval_survives_a_swap_to_a_worker_without_the_tool(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model(
        [
            Turn(tool_calls=[("issue_credit", {"amount": 500, "email": "ann@example.com"})]),
            Turn(text="credited"),
        ]
    )
    async with harness.worker(tools=[issue_credit]):
        handle = await harness.start("credit ann", model=model, tools=["issue_credit"])
        [call] = (await pending(handle)).pending_approvals
    async with harness.worker():  # the same queue, without the tool's module
        await orga.loop(harness.client, handle.id).approve(
            call.call_id, approver="pat", reason="fine"
        )

        async def waits_for_a_worker() -> LoopState | None:
            state = await handle.query("state", result_type=LoopState)
            return state if state.waiting_for_workers else None

        state = await eventually(waits_for_a_worker, "the call waits for a worker with the tool")
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
            found = await registries(harness.client, harness.task_queue)
            return (
                found
                if any(t is not None and "issue_credit" in t for t in found.values())
                else None
            )

        first = await eventually(listed, "the first worker's registry is listed")
        # A second process's worker: its own client (one client runs one worker per queue).
        other = await Client.connect(
            harness.client.service_client.config.target_host,
            namespace=harness.client.namespace,
            data_converter=harness.client.data_converter,
        )
        beside = dataclasses.replace(harness, client=other, handles=[])
        with caplog.at_level(logging.WARNING, logger="orga"):
            async with beside.worker():
                pass
    [identity] = first
    assert "orga-tools:" in identity and "issue_credit" in (tools_of(identity) or ())
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


def test_an_identity_names_only_plain_tool_names() -> None:
    """Any process that can poll a task queue picks its own identity: a name with a newline or
    an escape sequence (one meant for a log or a terminal) is not read as a tool."""
    identity = identity_with_tools("1@host", ["add", "issue_credit"])
    assert tools_of(identity) == {"add", "issue_credit"}
    assert tools_of("1@host orga-tools:add,evil\nFAKE LOG LINE,\x1b[2Jx") == {"add"}
    assert tools_of("1@host") is None and tools_of(identity_with_tools("1@h", None)) is None
    long = identity_with_tools("1@host", [f"tool_{i:04d}" for i in range(200)])
    assert len(long) < 1_000 and tools_of(long) is None  # a digest: not listed
