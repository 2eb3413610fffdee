"""Stopping a loop: ``orga cancel`` reaches the tool in flight and records why; Ctrl-C on
``orga run`` stops only the command, and says how to follow or cancel the loop."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Callable

from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orga.contracts.journal import CallReceipt, Journal, Terminated
from orga.contracts.state import LoopState
from orga.scripted.server import Turn
from tests.harness import TEST_STORE, Harness
from tests.helpers import ORGA, eventually, on, orga, pending, stderr_until
from tests.sample_tools import running, transfer


async def test_orga_cancel_stops_the_running_tool_and_records_why(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    work = running("export_all")
    export_all, started, stopped = work.tool, work.started, work.stopped
    model = harness.new_model([Turn(tool_calls=[("export_all", {"table": "orders"})])])
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    async with harness.worker(tools=[export_all]):
        handle = await harness.start("export", model=model, tools=["export_all"])
        await eventually(started.is_set, "the tool is running")
        code, out, err = await orga("cancel", handle.id, "--reason", "wrong customer", env=cli)
        assert code == 0, err
        assert f"{handle.id} cancelled: wrong customer" in out
        await eventually(stopped.is_set, "the tool was told to stop")
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
        code, listed, _ = await orga("list", "--status", "cancelled", "--json", env=cli)
        assert code == 0 and handle.id in listed
        code, _, err = await orga("cancel", handle.id, env=cli)
    assert code == 1 and "already finished" in err
    assert (state.status, state.termination_reason) == ("cancelled", "cancelled")
    [ended] = [e for e in journal.entries if isinstance(e, Terminated)]
    assert (ended.reason, ended.message) == ("cancelled", "wrong customer")


async def _orga_run_paying(
    env: WorkflowEnvironment, harness: Harness, preexec: Callable[[], None] | None = None
) -> tuple[str, asyncio.subprocess.Process]:
    """``orga run "pay ann" --tool transfer`` in a process of its own, its loop's id chosen:
    the loop's one call waits for a person's approval."""
    model = harness.new_model([Turn(tool_calls=[("transfer", {"amount": 5, "to": "ann"})])])
    variables = {**os.environ, **on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    workflow_id = f"loop-{uuid.uuid4().hex[:12]}"
    process = await asyncio.create_subprocess_exec(
        ORGA, "run", "pay ann", "--tool", "transfer", "--provider", "openai",
        "--model", model, "--id", workflow_id, env=variables,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        preexec_fn=preexec,
    )  # fmt: skip
    return workflow_id, process


def _default_sigint() -> None:
    """In the child before it starts: Ctrl-C as a terminal gives it, however this suite was
    started (a background job, ``nohup``: SIGINT ignored, and inherited)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ignored_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


async def test_ctrl_c_on_orga_run_says_how_to_follow_or_cancel_the_loop(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    async with harness.worker(tools=[transfer]):
        workflow_id, process = await _orga_run_paying(env, harness, _default_sigint)
        handle = harness.client.get_workflow_handle(workflow_id)

        async def begun() -> bool:
            try:
                await handle.describe()
            except RPCError:
                return False
            return True

        await eventually(begun, "orga run started the loop")
        harness.handles.append(handle)
        await pending(handle)  # it waits for a person, and orga run with it
        process.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 130
        assert f"orga cancel {handle.id} --reason" in err.decode()
        assert f"orga journal {handle.id} --follow" in err.decode()
        description = await handle.describe()
        assert description.status is not None and description.status.name == "RUNNING"
        await handle.cancel(reason="test over")


async def test_orga_run_started_where_ctrl_c_is_ignored_says_so(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """``orga run`` started in the background (SIGINT ignored) would never stop on Ctrl-C:
    it says so when it begins to wait, and how to stop it and the loop."""
    async with harness.worker(tools=[transfer]):
        workflow_id, process = await _orga_run_paying(env, harness, _ignored_sigint)
        said = await stderr_until(process, "Ctrl-C does not reach this command")
        handle = harness.client.get_workflow_handle(workflow_id)
        harness.handles.append(handle)
        process.kill()
        await process.wait()
        await handle.cancel(reason="test over")
    assert f"kill {process.pid}" in said
    assert f"orga cancel {workflow_id} --reason" in said


async def test_orga_run_piped_says_when_a_call_waits_for_a_person(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """Issue 65: ``orga run`` on an approval tool printed nothing when piped (the status line
    is a terminal's): it now says, once, which call waits and how to decide it."""
    async with harness.worker(tools=[transfer]):
        workflow_id, process = await _orga_run_paying(env, harness)
        said = await stderr_until(process, "waits for a person's decision")
        handle = harness.client.get_workflow_handle(workflow_id)
        harness.handles.append(handle)
        [waiting] = (await pending(handle)).pending_approvals
        process.kill()
        await process.wait()
        await handle.cancel(reason="test over")
    assert f"call {waiting.call_id} (transfer) waits for a person's decision" in said
    assert f"orga approve {workflow_id} {waiting.call_id}" in said


async def test_a_cancel_reaches_a_running_tool_within_about_a_second(harness: Harness) -> None:
    """The tool's heartbeats, which carry a cancel back, leave the worker every second — not
    at the SDK's 80 % of their 10 s timeout, when a cancel took 8 s to arrive in every run.
    Asserted with room for a loaded machine (it tells 1 s from 8 s); measured, it is printed."""
    work = running("reindex", serial=True)  # it has effects
    reindex, started, stopped = work.tool, work.started, work.stopped
    model = harness.new_model([Turn(tool_calls=[("reindex", {"table": "orders"})])])
    loop = asyncio.get_running_loop()
    async with harness.worker(tools=[reindex]):
        handle = await harness.start("reindex", model=model, tools=["reindex"])
        await eventually(started.is_set, "the tool is running")

        async def beating() -> bool:  # the call's heartbeats are under way: the server has one
            described = await handle.describe()
            pending = described.raw_description.pending_activities
            return bool(pending) and pending[0].HasField("last_heartbeat_time")

        await eventually(beating, "the tool's first heartbeat")
        asked = loop.time()
        await handle.cancel()
        await eventually(stopped.is_set, "the tool was told to stop", timeout=20)
        took = loop.time() - asked

        async def receipts() -> list[CallReceipt]:  # once the loop has taken the cancel in
            journal = await handle.query("journal", result_type=Journal)
            return [e for e in journal.entries if isinstance(e, CallReceipt)]

        found = await eventually(receipts, "the cancelled call's receipt")
    print(f"a cancel reached the running tool {took:.2f} s after it was asked")
    assert took < 3.0, took
    # What the cancel left: a call that may have had its effect, said so on the audit chain.
    [receipt] = found
    assert receipt.outcome == "unknown" and "cancelled while it ran" in receipt.note
