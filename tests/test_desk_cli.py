"""The operator's desk from the command line: the inbox, inspecting, deciding, and every way a
decision can fail — each finding of the desk review has a test here (or in the tests named)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from orga.contracts.state import LoopState
from orga.desk.approvals import who_decides
from orga.desk.facts import DeskError
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from tests.harness import Harness
from tests.helpers import ORGA, ask, escalated, eventually, inbox, on, orga, pending, task_escalated
from tests.other_version_loop import OtherVersionLoop
from tests.sample_tools import Flaky, Unreliable, transfer

# ---- findings 1 and 2: one inbox over loops and tasks -------------------------------------


async def test_one_inbox_lists_approvals_and_escalations_of_loops_and_tasks(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    flaky = Flaky(failures=5)
    unreliable = Unreliable(same_error=True)
    approve_model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 7, "to": "ann"})]), Turn(text="sent")]
    )
    escalate_model = harness.new_model([ask("flaky"), Turn(text="unused")])
    async with harness.worker(tools=[transfer, *flaky.tools, unreliable.tool]):
        paying = await harness.start("pay ann", model=approve_model, tools=["transfer"])
        failing = await harness.start(
            "go",
            model=escalate_model,
            tools=["flaky"],
            recovery={"default": {"strategy": "escalate"}},
        )
        task = await harness.start_task(
            [{"id": "flaky-step", "action": {"kind": "tool", "tool": "unreliable"}}],
            policy={"max_reattempts_per_step": 0, "on_limit_reached": "escalate"},
        )
        await pending(paying)
        await escalated(failing)
        items = await inbox(env, harness, 3)
        by_workflow = {i["workflow_id"]: i for i in items}
        approval = by_workflow[paying.id]
        assert approval["kind"] == "approval" and approval["tool"] == "transfer"
        assert approval["reason"] == "tool 'transfer' requires approval"
        assert approval["commands"][0].startswith(f"orga approve {paying.id} {approval['item_id']}")
        escalation = by_workflow[failing.id]
        assert escalation["kind"] == "escalation" and escalation["item_id"].endswith("#1")
        assert "flaky attempt" in escalation["reason"]
        quoted = shlex.quote(escalation["item_id"])  # '#' starts a shell comment
        assert f"orga resolve {failing.id} {quoted} --action retry" in escalation["commands"][0]
        step = by_workflow[task.id]
        assert (step["kind"], step["workflow_type"], step["item_id"]) == (
            "escalation",
            "Task",
            "flaky-step#1",
        )
        assert step["options"] == ["retry", "skip", "abort"]

        code, table, err = await orga("pending", env=on(env, harness))
        assert code == 0, err
        for item in (approval, escalation, step):
            assert item["item_id"] in table
        assert f"{task.id} (task)" in table and f"{paying.id} (loop)" in table

        # Act on each from the command line; the inbox empties.
        code, out, err = await orga(
            "approve", paying.id, approval["item_id"], "--approver", "ann", env=on(env, harness)
        )
        assert code == 0, err
        assert out.startswith(f"approved call {approval['item_id']} (transfer) by ann at ")
        code, _, err = await orga(
            "resolve", failing.id, escalation["item_id"], "--action", "abort",
            "--reason", "not today", "--operator", "olu", env=on(env, harness),
        )  # fmt: skip
        assert code == 0, err
        code, _, err = await orga(
            "resolve", task.id, step["item_id"], "--action", "skip", "--operator", "olu",
            env=on(env, harness),
        )  # fmt: skip
        assert code == 0, err
        assert (await paying.result()).output == "sent"
        assert (await task.result()).status == "completed"


async def test_a_workflow_whose_state_cannot_be_read_does_not_hide_the_others(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 1, "to": "x"})]), Turn(text="ok")]
    )
    odd_queue = f"odd-{uuid.uuid4().hex[:8]}"
    async with (
        harness.worker(tools=[transfer]),
        Worker(env.client, task_queue=odd_queue, workflows=[OtherVersionLoop]),
    ):
        good = await harness.start("pay", model=model, tools=["transfer"])
        odd: WorkflowHandle[Any, Any] = await env.client.start_workflow(
            "ReasoningLoop", id=f"odd-{uuid.uuid4().hex[:8]}", task_queue=odd_queue
        )
        try:
            await pending(good)
            harness.handles.append(odd)
            items = await inbox(env, harness, 2)
            kinds = {i["workflow_id"]: i["kind"] for i in items}
            assert kinds == {good.id: "approval", odd.id: "unreadable"}
            [unreadable] = [i for i in items if i["kind"] == "unreadable"]
            assert "not a ReasoningLoop's" in unreadable["error"]
            code, table, err = await orga("pending", env=on(env, harness))
            assert code == 0, err
            assert "state unreadable" in table and good.id in table
        finally:
            harness.handles.remove(odd)  # not an orga workflow: nothing of ours to replay
            await odd.terminate("test over")
        [waiting] = (await pending(good)).pending_approvals
        await orga("deny", good.id, waiting.call_id, "--reason", "no", "--approver", "t",
                   env=on(env, harness))  # fmt: skip
        assert (await good.result()).output == "ok"


# ---- finding 3: state shows what a loop waits for, and how it failed ---------------------


async def test_state_names_the_waiting_call_and_a_failure_message(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    waiting_model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 9, "to": "bo"})]), Turn(text="ok")]
    )
    failing_model = harness.new_model([Turn(text="", stop="max_tokens")])
    async with harness.worker(tools=[transfer]):
        waiting = await harness.start("pay bo", model=waiting_model, tools=["transfer"])
        [call] = (await pending(waiting)).pending_approvals
        code, out, err = await orga("state", waiting.id, env=on(env, harness))
        assert code == 0, err
        assert f"waiting for   approval of call {call.call_id} (transfer)" in out
        assert f"orga approve {waiting.id} {call.call_id}" in out
        assert '"amount": 9' in out

        failed = await harness.start("fail", model=failing_model)
        with pytest.raises(WorkflowFailureError):
            await failed.result()
        code, out, err = await orga("state", failed.id, env=on(env, harness))
        assert code == 0, err
        assert "ended         UnhandledStopReason: the model stopped with stop_reason" in out
        await orga("deny", waiting.id, call.call_id, "--reason", "n", "--approver", "t",
                   env=on(env, harness))  # fmt: skip
        await waiting.result()
    # With no worker left, state still says how it ended (from what Temporal records).
    code, out, err = await orga("state", failed.id, env=on(env, harness))
    assert code == 0, err
    assert "UnhandledStopReason" in out and "failure" in out


async def test_state_names_a_pending_escalation_of_a_loop_and_of_a_task(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    flaky = Flaky(failures=5)
    unreliable = Unreliable(same_error=True)
    model = harness.new_model([ask("flaky"), Turn(text="unused")])
    async with harness.worker(tools=[*flaky.tools, unreliable.tool]):
        loop = await harness.start(
            "go", model=model, tools=["flaky"], recovery={"default": {"strategy": "escalate"}}
        )
        task = await harness.start_task(
            [{"id": "flaky-step", "action": {"kind": "tool", "tool": "unreliable"}}],
            policy={"max_reattempts_per_step": 0, "on_limit_reached": "escalate"},
        )
        escalation = await escalated(loop)
        code, out, err = await orga("state", loop.id, env=on(env, harness))
        assert code == 0, err
        assert f"waiting for   an operator: escalation {escalation} (flaky)" in out
        assert "error: " in out and "flaky attempt" in out
        assert f"orga resolve {loop.id} {shlex.quote(escalation)} --action {{retry," in out
        step = await task_escalated(task)
        code, out, err = await orga("task", "state", task.id, env=on(env, harness))
        assert code == 0, err
        assert f"waiting for an operator: escalation {step} (unreliable)" in out
        assert f"orga resolve {task.id} {shlex.quote(step)} --action {{retry,skip,abort}}" in out
        for handle, item in ((loop, escalation), (task, step)):
            code, out, err = await orga("resolve", handle.id, item, "--action", "abort",
                                        "--operator", "ops", env=on(env, harness))  # fmt: skip
            assert code == 0, err
            with pytest.raises(WorkflowFailureError):  # aborted: nothing left waiting
                await handle.result()


# ---- findings 4 and 5: no worker, finished workflows -------------------------------------


async def test_deciding_without_a_worker_or_after_the_end_says_so(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    nobody = f"nobody-{uuid.uuid4().hex[:8]}"
    orphan = await env.client.start_workflow(
        "ReasoningLoop",
        {"messages": [{"role": "user", "content": "x"}]},
        id=f"orphan-{uuid.uuid4().hex[:8]}",
        task_queue=nobody,
    )
    try:
        for verb in (
            ["approve", orphan.id, "call_1", "--approver", "a"],
            ["resolve", orphan.id, "e#1", "--action", "skip", "--operator", "a"],
        ):
            code, _, err = await orga(*verb, env=on(env, harness), timeout=30)
            assert code == 1
            assert f"no worker is polling task queue '{nobody}'" in err
            assert "Nothing was recorded" in err
    finally:
        await orphan.terminate("test over")

    model = harness.new_model([Turn(text="done")])
    async with harness.worker():
        finished = await harness.start("hi", model=model)
        await finished.result()
        code, _, err = await orga(
            "approve", finished.id, "call_1", "--approver", "a", env=on(env, harness)
        )
    assert code == 1
    assert f"ReasoningLoop '{finished.id}' already finished (completed" in err
    assert "does not exist" not in err


async def test_a_worker_that_just_stopped_is_seen_as_gone_at_once(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """Approving right after the worker stopped waited 30 s (and still waited minutes later):
    its last poll stays listed for minutes, but its heartbeat said it stopped."""
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 2, "to": "y"})]), Turn(text="ok")]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay", model=model, tools=["transfer"])
        [call] = (await pending(handle)).pending_approvals
    code, _, err = await orga(
        "approve", handle.id, call.call_id, "--approver", "a", "--wait", "30", env=on(env, harness)
    )
    assert code == 1 and f"no worker is polling task queue '{harness.task_queue}'" in err
    assert "no answer from a worker" not in err  # refused before sending, not after waiting
    assert "Nothing was recorded" in err and "uv run worker.py" in err
    code, out, err = await orga("state", handle.id, env=on(env, harness), timeout=30)
    assert code == 0 and "no worker is polling task queue" in out  # at once, from history
    async with harness.worker(tools=[transfer]):
        state = await handle.query("state", result_type=LoopState)
        assert [p.call_id for p in state.pending_approvals] == [call.call_id]  # nothing lost
        code, _, err = await orga(
            "deny", handle.id, call.call_id, "--reason", "late", "--approver", "a",
            env=on(env, harness),
        )  # fmt: skip
        assert code == 0, err
        await handle.result()


# ---- finding 6: every decision names who made it -----------------------------------------


def test_who_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    assert who_decides("  alice ", {"ORGA_APPROVER": "bob"}) == "alice"
    assert who_decides(None, {"ORGA_APPROVER": "bob"}) == "bob"
    monkeypatch.setattr("getpass.getuser", lambda: "carol")
    assert who_decides(None, {}) == "carol"

    def nobody() -> str:
        raise OSError("no user name for uid 4242")

    monkeypatch.setattr("getpass.getuser", nobody)
    with pytest.raises(DeskError, match="pass --approver NAME or set ORGA_APPROVER"):
        who_decides(None, {})


async def test_without_a_name_in_the_environment_the_os_user_decides(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """As in a container: no $USER, $LOGNAME or ORGA_APPROVER. The operating system's name for
    the process is recorded — never nobody (``test_who_decides`` covers a process without one)."""
    import getpass

    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 4, "to": "z"})]), Turn(text="ok")]
    )
    stripped = {
        k: v
        for k, v in os.environ.items()
        if k not in {"USER", "LOGNAME", "LNAME", "USERNAME", "ORGA_APPROVER"}
    }
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay", model=model, tools=["transfer"])
        [call] = (await pending(handle)).pending_approvals
        process = await asyncio.create_subprocess_exec(
            ORGA,
            "approve",
            handle.id,
            call.call_id,
            "--json",
            env={**stripped, **on(env, harness)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err
        record = json.loads(out)
        await handle.result()
    import pwd

    assert record["approver"] == pwd.getpwuid(os.getuid()).pw_name
    assert record["approver"] == getpass.getuser()


# ---- finding 8: the two kinds, listed and told apart -------------------------------------


async def test_list_and_state_tell_loops_and_tasks_apart(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    from tests.sample_tools import Shop

    agent = f"kinds-{uuid.uuid4().hex[:6]}"
    shop = Shop(notify_fails=False)
    model = harness.new_model([Turn(text="done")])
    async with harness.worker(tools=shop.tools):
        loop = await harness.start("hi", model=model, agent_id=agent)
        task = await harness.start_task(
            [
                {
                    "id": "r",
                    "action": {"kind": "tool", "tool": "reserve", "arguments": {"item": "a"}},
                }
            ],
            agent_id=agent,
        )
        await loop.result()
        await task.result()

        async def both() -> list[dict[str, Any]] | None:
            code, out, err = await orga("list", "--agent", agent, "--json", env=on(env, harness))
            assert code == 0, err
            rows = json.loads(out)
            done = [r for r in rows if r["status"] == "completed"]
            return rows if len(done) == 2 else None

        rows = await eventually(both, "both listed as completed")
        assert {r["workflow_id"]: r["kind"] for r in rows} == {loop.id: "loop", task.id: "task"}
        code, out, err = await orga(
            "list", "--agent", agent, "--kind", "task", "--json", env=on(env, harness)
        )
        assert [r["workflow_id"] for r in json.loads(out)] == [task.id]
        code, out, err = await orga("task", "list", "--agent", agent, env=on(env, harness))
        assert code == 0 and task.id in out and loop.id not in out and "KIND" in out

        code, _, err = await orga("state", task.id, env=on(env, harness))
        assert code == 1 and f"is a Task: use `orga task state {task.id}`" in err
        assert "Traceback" not in err and "validation" not in err.lower()
        code, _, err = await orga("task", "state", loop.id, env=on(env, harness))
        assert code == 1 and f"is a loop: use `orga state {loop.id}`" in err
        code, out, err = await orga("task", "state", task.id, env=on(env, harness))
        assert code == 0 and out.startswith(f"task {task.id} ({agent}): completed")


# ---- finding 12: help, pipes, JSON errors ------------------------------------------------


def test_every_verb_documents_every_option_and_gives_an_example() -> None:
    import typer

    from orga.cli.app import app

    root = typer.main.get_command(app)
    context = typer.Context(root)
    seen: list[str] = []

    def walk(group: Any, prefix: str) -> None:  # each verb as it runs (imported when asked)
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            if hasattr(command, "commands"):
                walk(command, f"{prefix}{name} ")
                continue
            seen.append(prefix + name)
            assert command.help, f"{prefix}{name} has no description"
            assert command.epilog and "Example: " in command.epilog, f"{prefix}{name}: example"
            for param in command.params:
                if param.name == "help":
                    continue
                assert getattr(param, "help", None), f"{prefix}{name} {param.name}: no help"

    walk(root, "")
    assert {"run", "state", "pending", "approve", "deny", "resolve", "desk", "task start"} <= set(
        seen
    )


async def test_help_names_the_environment() -> None:
    code, out, _ = await orga("--help")
    assert code == 0
    for variable in ("TEMPORAL_ADDRESS", "ORGA_TASK_QUEUE", "ORGA_APPROVER", "TEMPORAL_API_KEY"):
        assert variable in out


async def test_a_pipe_closed_early_ends_quietly(env: WorkflowEnvironment, harness: Harness) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written (`| head -0`)
    process = await asyncio.create_subprocess_exec(
        ORGA,
        "list",
        "--limit",
        "5",
        stdout=write,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **on(env, harness)},
    )
    os.close(write)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    assert err == b""


async def test_json_errors_are_json_on_stderr(env: WorkflowEnvironment, harness: Harness) -> None:
    code, out, err = await orga("state", "no-such-loop", "--json", env=on(env, harness))
    assert code == 1 and out == ""
    error = json.loads(err)["error"]
    assert error["code"] == 1 and "there is no workflow 'no-such-loop'" in error["message"]
    code, _, err = await orga("run", "x", "--max-iterations", "0", "--json", env=on(env, harness))
    assert code == 2 and json.loads(err)["error"]["code"] == 2


async def test_idle_threads_come_after_decisions_and_pending_filters_by_kind(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """Issue 65: idle threads crowded the inbox (7 of 13 items) ahead of refunds, oldest first,
    and ``orga pending`` had no filter. A thread waiting for its next message now comes after
    what waits for a decision, however long it has waited, and ``--kind`` filters."""
    chat_model = harness.new_model([Turn(text="hi")])
    pay_model = harness.new_model([Turn(tool_calls=[("transfer", {"amount": 5, "to": "ann"})])])
    async with harness.worker(tools=[transfer]):
        chat = await harness.start_thread("hello", model=chat_model)
        await chat.turn(1)  # idle from now: older than the approval below
        paying = await harness.start("pay ann", model=pay_model, tools=["transfer"])
        items = await inbox(env, harness, 2)
        code, out, err = await orga("pending", "--kind", "approval", "--json", env=on(env, harness))
        ours = {h.id for h in harness.handles}
        approvals = [i for i in json.loads(out) if i["workflow_id"] in ours]
        refused = await orga("pending", "--kind", "nope", env=on(env, harness))
        await chat.close()
        await paying.cancel()
    assert [i["kind"] for i in items] == ["approval", "message"]
    assert code == 0, err
    assert [(i["kind"], i["workflow_id"]) for i in approvals] == [("approval", paying.id)]
    assert refused[0] == 2 and "--kind 'nope' is none of approval" in refused[2]


@tool(requires_approval=True)
def refund(cents: int) -> str:
    """Refund (needs a person's approval; calls of it run side by side)."""
    return f"refunded {cents}"


async def test_approve_without_a_call_id_decides_the_one_call_that_waits(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """Issue 65: the README's commands could not be pasted (a fixed call id the reader's loop
    does not have). ``orga approve ID`` decides the one call that waits; where several wait it
    names them and records nothing."""
    one = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 5, "to": "ann"})]), Turn(text="paid")]
    )
    two = harness.new_model(
        [
            Turn(
                tool_calls=[
                    ("refund", {"cents": 5}),
                    ("refund", {"cents": 7}),
                ]
            )
        ]
    )
    async with harness.worker(tools=[transfer, refund]):
        single = await harness.start(
            "pay ann", model=one, tools=["transfer"], workflow_id=f"pay-{uuid.uuid4().hex[:8]}"
        )
        double = await harness.start("refund both", model=two, tools=["refund"])
        await pending(single)
        await eventually(lambda: _waiting_count(double, 2), "two calls wait in the second loop")
        decided = await orga("approve", single.id, "--reason", "ok", env=on(env, harness))
        result = await single.result()
        several = await orga("approve", double.id, "--reason", "ok", env=on(env, harness))
        still = len((await pending(double)).pending_approvals)
        await double.cancel()
    assert decided[0] == 0, decided[2]
    assert "approved call i1_" in decided[1]
    assert result.output == "paid"
    assert several[0] == 1 and "2 calls wait for approval" in several[2], several
    assert still == 2  # nothing was recorded


async def _waiting_count(handle: WorkflowHandle[Any, Any], count: int) -> bool:
    state = await handle.query("state", result_type=LoopState)
    return len(state.pending_approvals) == count
