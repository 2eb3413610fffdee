"""``orga task start`` and ``orga task state``: multi-step tasks with compensation."""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

from pydantic import ValidationError
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from orga.cli.common import CliError, Verbs, client_for, not_found, print_json, start_workflow
from orga.cli.views import render_task
from orga.contracts.errors import describe_validation_error
from orga.contracts.task import TaskInput, TaskResult, TaskState
from orga.runtime.settings import Settings

__all__ = ["cmd_task_start", "cmd_task_state", "register"]


def _task_input(path: str) -> TaskInput:
    try:
        return TaskInput.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise CliError(f"cannot read {path!r}: {error}", 2) from error
    except ValidationError as error:
        raise CliError(
            f"invalid task in {path!r}: {describe_validation_error(error)}", 2
        ) from error


async def cmd_task_start(args: argparse.Namespace, settings: Settings) -> int:
    task = _task_input(args.file)
    handle = await start_workflow(
        settings,
        "Task",
        task,
        workflow_id=args.id or f"task-{uuid.uuid4().hex[:12]}",
        result_type=TaskResult,
        summary=f"{task.agent_id}: task of {len(task.steps)} step(s)",
    )
    if args.no_wait:
        return 0
    try:
        result = await handle.result()
    except WorkflowFailureError as error:
        cause = error.cause
        report = None
        if isinstance(cause, ApplicationError) and cause.details:
            report = TaskResult.model_validate(cause.details[0])
        if args.json and report is not None:
            print_json(report)
        elif report is not None:
            print(render_task(report.status, report.steps))
        message = cause.message if isinstance(cause, ApplicationError) else str(cause)
        raise CliError(f"the task did not complete: {message}") from error
    if args.json:
        print_json(result)
    else:
        print(render_task(result.status, result.steps))
    return 0


async def cmd_task_state(args: argparse.Namespace, settings: Settings) -> int:
    client = await client_for(settings)
    try:
        state = await client.get_workflow_handle(args.workflow_id).query(
            "state", result_type=TaskState
        )
    except RPCError as error:
        raise not_found(error, args.workflow_id) from error
    if args.json:
        print_json(state)
    else:
        pending = [e.escalation_id for e in state.pending_escalations]
        print(render_task(state.status, state.steps, pending))
    return 0


def register(verbs: Verbs) -> None:
    """Add ``task`` and its own verbs, ``start`` and ``state``, to the top parser's verbs."""
    task = verbs.add_parser("task", help="multi-step tasks with compensation")
    task_verbs = task.add_subparsers(dest="task_verb", required=True, metavar="VERB")
    task_start = task_verbs.add_parser("start", help="start a task from a JSON file of steps")
    task_start.add_argument("file")
    task_start.add_argument("--id", help="workflow id (default: a new one)")
    task_start.add_argument("--no-wait", action="store_true")
    task_start.add_argument("--json", action="store_true")
    task_start.set_defaults(handler=cmd_task_start)
    task_state = task_verbs.add_parser("state", help="a task's steps and their status")
    task_state.add_argument("workflow_id")
    task_state.add_argument("--json", action="store_true")
    task_state.set_defaults(handler=cmd_task_state)
