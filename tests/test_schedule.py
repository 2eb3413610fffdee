"""``orga schedule``: Temporal Schedules that start loops and tasks, run as a user runs them —
the command as a subprocess, the schedules on the real dev server, the runs on a real worker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import (
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleOverlapPolicy,
)
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from orga.contracts.state import LoopResult
from orga.contracts.task import TaskResult
from orga.scripted.server import Turn
from tests.harness import TEST_STORE, Harness
from tests.helpers import eventually, on, orga

T = TypeVar("T")


def cli(env: WorkflowEnvironment, harness: Harness) -> dict[str, str]:
    """The command's environment: this test's server, task queue and store."""
    return {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}


@contextlib.asynccontextmanager
async def schedule_name(env: WorkflowEnvironment) -> AsyncIterator[str]:
    """A fresh schedule name; the schedule is gone afterwards, whatever the test did."""
    name = f"sched-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        try:
            await env.client.get_schedule_handle(name).delete()
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise


async def describe(env: WorkflowEnvironment, name: str) -> ScheduleDescription:
    return await env.client.get_schedule_handle(name).describe()


async def runs_after(env: WorkflowEnvironment, name: str, seen: int) -> list[str]:
    """The workflow ids of the schedule's recent runs, once it has taken more than ``seen``."""

    async def probe() -> list[str] | None:
        info = (await describe(env, name)).info
        if info.num_actions <= seen:
            return None
        return [
            result.action.workflow_id
            for result in info.recent_actions
            if isinstance(result.action, ScheduleActionExecutionStartWorkflow)
        ]

    return await eventually(probe, f"schedule {name!r} starts run {seen + 1}")


async def finished(harness: Harness, workflow_id: str, result_type: type[T]) -> T:
    """A scheduled run's result; its history is replayed when the test ends."""
    handle = harness.client.get_workflow_handle(workflow_id, result_type=result_type)
    harness.handles.append(handle)
    return await handle.result()


async def listed(env: WorkflowEnvironment, harness: Harness, name: str) -> dict[str, Any]:
    """The schedule's row of ``orga schedule list --json`` (visibility is eventually consistent)."""

    async def probe() -> dict[str, Any] | None:
        code, out, err = await orga("schedule", "list", "--json", env=cli(env, harness))
        assert code == 0, err
        rows = [row for row in json.loads(out) if row["schedule_id"] == name]
        return rows[0] if rows and rows[0]["paused"] else None

    return await eventually(probe, f"{name!r} listed as paused")


async def test_a_prompt_schedule_fires_pauses_triggers_lists_and_deletes(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model([Turn(text="good morning")] * 30)  # one answer per run
    async with harness.worker(), schedule_name(env) as name:
        code, out, err = await orga(
            "schedule", "create", name, "Say good morning", "--every", "1s",
            "--provider", "openai", "--model", model, "--agent", "greeter", "--json",
            env=cli(env, harness),
        )  # fmt: skip
        assert code == 0, err
        created = json.loads(out)
        assert created["schedule_id"] == name and created["workflow_id"] == f"schedule-{name}"
        assert (created["workflow_type"], created["spec"], created["overlap"]) == (
            "ReasoningLoop",
            "every 1s",
            "skip",
        )
        assert created["task_queue"] == harness.task_queue and created["next_runs"]
        assert created["summary"] == "greeter: Say good morning"

        await runs_after(env, name, 0)  # it fires on its own
        code, out, err = await orga(
            "schedule", "pause", name, "--note", "enough", env=cli(env, harness)
        )
        assert code == 0, err
        assert out.strip() == f"paused schedule {name!r}"

        async def paused() -> ScheduleDescription | None:
            description = await describe(env, name)
            return description if description.schedule.state.paused else None

        description = await eventually(paused, f"{name!r} paused")
        assert description.schedule.state.note == "enough"
        assert description.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
        action = description.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        assert (action.workflow, action.task_queue) == ("ReasoningLoop", harness.task_queue)

        # Every run it started (one, or a few before the pause took) answers.
        fired = description.info.num_actions
        for workflow_id in await runs_after(env, name, 0):
            assert workflow_id.startswith(f"schedule-{name}-")
            result = await finished(harness, workflow_id, LoopResult)
            assert result.output == "good morning"

        # Paused, it still runs when triggered.
        code, out, err = await orga("schedule", "trigger", name, env=cli(env, harness))
        assert code == 0, err
        assert out.startswith(f"triggered schedule {name!r}")
        triggered = (await runs_after(env, name, fired))[-1]
        result = await finished(harness, triggered, LoopResult)
        assert result.output == "good morning"

        row = await listed(env, harness, name)
        assert (row["workflow_type"], row["spec"], row["note"]) == (
            "ReasoningLoop",
            "every 1s",
            "enough",
        )
        assert row["summary"] == "greeter: Say good morning" and row["next_run"] is None
        code, out, err = await orga("schedule", "list", env=cli(env, harness))
        assert code == 0, err
        [line] = [line for line in out.splitlines() if line.startswith(name)]
        assert line.split()[1:5] == ["ReasoningLoop", "every", "1s", "yes"]

        code, out, err = await orga("schedule", "delete", name, env=cli(env, harness))
        assert code == 0, err
        assert out.strip() == f"deleted schedule {name!r}"
        for verb in ("delete", "pause", "trigger"):
            code, _, err = await orga("schedule", verb, name, env=cli(env, harness))
            assert code == 1 and f"there is no schedule {name!r}" in err, err
            assert "Traceback" not in err


async def test_a_paused_task_schedule_runs_its_task_when_triggered(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    task = tmp_path / "sum.json"
    add = {"kind": "tool", "tool": "add", "arguments": {"a": 2, "b": 3}}
    task.write_text(json.dumps({"agent_id": "nightly", "steps": [{"id": "sum", "action": add}]}))
    async with harness.worker(), schedule_name(env) as name:
        code, out, err = await orga(
            "schedule", "create", name, "--task", str(task), "--cron", "0 0 1 1 *", "--paused",
            env=cli(env, harness),
        )  # fmt: skip
        assert code == 0, err
        assert out.startswith(f"created schedule {name!r}: cron 0 0 1 1 *, start a Task")
        assert f"orga schedule unpause {name}" in out
        assert (await describe(env, name)).schedule.state.paused

        code, _, err = await orga(
            "schedule", "create", name, "--task", str(task), "--every", "1h",
            env=cli(env, harness),
        )  # fmt: skip
        assert code == 1 and f"there is already a schedule {name!r}" in err

        code, _, err = await orga("schedule", "trigger", name, env=cli(env, harness))
        assert code == 0, err
        [workflow_id] = await runs_after(env, name, 0)
        assert workflow_id.startswith(f"schedule-{name}-")
        result = await finished(harness, workflow_id, TaskResult)
        assert result.status == "completed"
        assert [(step.id, step.status) for step in result.steps] == [("sum", "completed")]

        row = await listed(env, harness, name)
        assert (row["workflow_type"], row["spec"]) == ("Task", "cron 0 0 1 1 *")
        assert row["last_workflow_id"] == workflow_id

        code, out, err = await orga("schedule", "unpause", name, "--json", env=cli(env, harness))
        assert code == 0, err
        assert json.loads(out) == {"schedule_id": name, "paused": False}
        description = await describe(env, name)
        assert not description.schedule.state.paused
        assert description.info.next_action_times[0].strftime("%m-%d %H:%M") == "01-01 00:00"


async def test_input_errors_exit_2_with_a_clear_message(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({"steps": [{"id": "x", "action": {"kind": "shell"}}]}))
    cases = {
        ("--cron", "0 9 * * *", "--every", "1m", "hi"): "give one of --cron and --every",
        ("--every", "1m"): "say what to start: a PROMPT (a loop) or --task FILE",
        ("--every", "1m", "hi", "--task", str(invalid)): "give a PROMPT or --task FILE, not both",
        ("hi",): "say when: --cron",
        ("--every", "soon", "hi"): "invalid --every 'soon'",
        ("--every", "1m", "--task", str(invalid)): f"invalid task in {str(invalid)!r}: steps.0",
        ("--every", "1m", "--task", str(tmp_path / "missing.json")): "cannot read",
        ("--cron", "61 * * * *", "hi"): "Minute is not in range",
    }

    async def attempt(args: tuple[str, ...]) -> tuple[int, str, str]:
        name = f"sched-{uuid.uuid4().hex[:10]}"
        return await orga("schedule", "create", name, *args, env=cli(env, harness))

    outcomes = await asyncio.gather(*(attempt(args) for args in cases))
    for (args, message), (code, out, err) in zip(cases.items(), outcomes, strict=True):
        assert (code, out) == (2, ""), (args, err)
        assert message in err and "Traceback" not in err, (args, err)

    code, out, err = await orga("schedule", "create", "x", "hi", "--json", env=cli(env, harness))
    assert (code, out) == (2, "")
    assert json.loads(err) == {
        "error": {"message": "say when: --cron '0 9 * * 1-5' or --every 30m", "code": 2}
    }
