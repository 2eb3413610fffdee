"""``orga task start``, ``state`` and ``list``: multi-step tasks with compensation."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from orga.cli.common import (
    CliError,
    Json,
    client_for,
    console,
    execute,
    print_json,
    settings,
    start_workflow,
)
from orga.cli.loops import list_workflows
from orga.cli.views import render_task, render_task_result
from orga.cli.waiting import ensure_worker, reporting
from orga.contracts.errors import describe_validation_error
from orga.contracts.messages import TASK_WORKFLOW
from orga.contracts.state import LoopStatus
from orga.contracts.task import TaskInput, TaskResult, TaskState
from orga.desk.facts import of_kind, read_state

__all__ = ["read_task_input", "register"]

task_app = typer.Typer(
    help="Multi-step tasks: steps in order, stuck steps handled by policy, and compensation "
    "of what was done when a task cannot finish. The task file's format is "
    "schemas/task.schema.json (examples/tasks/order.json is a worked one).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``task`` group to ``app``."""
    task_app.command("start", epilog="Example: orga task start examples/tasks/order.json")(start)
    task_app.command("state", epilog="Example: orga task state task-9c1b7d4e3f2a")(state)
    task_app.command("list", epilog="Example: orga task list --status failed")(list_tasks)
    app.add_typer(task_app, name="task")


def read_task_input(path: str) -> TaskInput:
    try:
        return TaskInput.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise CliError(f"cannot read {path!r}: {error}", 2) from error
    except ValidationError as error:
        raise CliError(
            f"invalid task in {path!r}: {describe_validation_error(error)} (the format: "
            "schemas/task.schema.json)",
            2,
        ) from error


def start(
    file: Annotated[str, typer.Argument(help="A JSON file of steps (schemas/task.schema.json).")],
    workflow_id: Annotated[
        str | None, typer.Option("--id", help="Workflow id; default: a new one.")
    ] = None,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Print the workflow id and return at once.")
    ] = False,
    as_json: Json = False,
) -> None:
    """Start a task and print what happened to each step."""

    async def body() -> int:
        task = read_task_input(file)
        found = settings()
        client = await client_for(found)
        await ensure_worker(client, found.task_queue, wait=not no_wait, what="task")
        handle = await start_workflow(
            found,
            TASK_WORKFLOW,
            task,
            workflow_id=workflow_id or f"task-{uuid.uuid4().hex[:12]}",
            result_type=TaskResult,
            summary=f"{task.agent_id}: task of {len(task.steps)} step(s)",
            client=client,
        )
        if no_wait:
            if as_json:
                print_json({"workflow_id": handle.id, "run_id": handle.result_run_id})
            return 0
        try:
            async with reporting(client, handle, found.task_queue, quiet=as_json):
                result = await handle.result()
        except WorkflowFailureError as error:
            cause = error.cause
            report = None
            if isinstance(cause, ApplicationError) and cause.details:
                report = TaskResult.model_validate(cause.details[0])
            if as_json and report is not None:
                print_json(report)
            elif report is not None:
                console().print(render_task_result(report), markup=False)
            message = cause.message if isinstance(cause, ApplicationError) else str(cause)
            raise CliError(f"the task did not complete: {message}") from error
        if as_json:
            print_json(result)
        else:
            console().print(render_task_result(result), markup=False)
        return 0

    execute(body, as_json=as_json)


def state(
    workflow_id: Annotated[str, typer.Argument(help="The task's workflow id.")],
    as_json: Json = False,
) -> None:
    """A task's steps, what waits for an operator, and how it ended."""

    async def body() -> int:
        client = await client_for(settings())
        await of_kind(client, workflow_id, "task")
        task = await read_state(client, workflow_id, TaskState, TASK_WORKFLOW)
        if as_json:
            print_json(task)
        else:
            console().print(render_task(task, workflow_id), markup=False)
        return 0

    execute(body, as_json=as_json)


def list_tasks(
    status: Annotated[LoopStatus | None, typer.Option(help="Only tasks in this status.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only tasks of this agent.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.")] = 20,
    as_json: Json = False,
) -> None:
    """Recent tasks (the same as ``orga list --kind task``)."""
    execute(lambda: list_workflows("task", status, agent, limit, as_json), as_json=as_json)
