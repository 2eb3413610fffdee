"""The ``orga`` command: demo, server, and the everyday verbs on loops.

Every verb talks to Temporal with the same settings as the worker (``TEMPORAL_ADDRESS`` …).
Input is validated before anything starts; an unreachable server, an unknown workflow or bad
input ends with a one-line explanation and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import Callable, Coroutine, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from orga.cli.views import (
    LoopRow,
    render_entry,
    render_result,
    render_rows,
    render_state,
    render_task,
)
from orga.contracts import search_attributes as sa
from orga.contracts.approvals import (
    ApprovalDecision,
    ApprovalRecord,
    EscalationRecord,
    EscalationResolution,
)
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.errors import InvalidConfig, describe_validation_error
from orga.contracts.journal import Journal
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.task import TaskInput, TaskResult, TaskState
from orga.contracts.vocabulary import PROVIDERS
from orga.runtime.connect import connect
from orga.runtime.settings import Settings

__all__ = ["CliError", "main"]


class CliError(Exception):
    """A failure to report in one line, with an exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def ui_base() -> str:
    return os.environ.get("ORGA_UI_URL", "http://localhost:8233").rstrip("/")


def ui_link(settings: Settings, workflow_id: str) -> str:
    return f"{ui_base()}/namespaces/{settings.temporal_namespace}/workflows/{workflow_id}"


def data_dir(explicit: str | None = None) -> Path:
    """Where the embedded server keeps ``temporal.db``: the flag, ``ORGA_DATA_DIR``, or .orga."""
    return Path(os.path.abspath(explicit or os.environ.get("ORGA_DATA_DIR") or ".orga"))


async def client_for(settings: Settings) -> Client:
    try:
        return await connect(settings, timeout=5)
    except RuntimeError as error:
        raise CliError(
            f"cannot reach Temporal at {settings.temporal_address} ({error}). Start the "
            "embedded server with `uv run orga server`, or set TEMPORAL_ADDRESS."
        ) from error


def _not_found(error: RPCError, workflow_id: str) -> CliError:
    if error.status == RPCStatusCode.NOT_FOUND:
        return CliError(f"there is no workflow {workflow_id!r} in this namespace")
    return CliError(f"Temporal refused the request for {workflow_id!r}: {error.message}")


def _print_json(value: BaseModel | Any) -> None:
    if isinstance(value, BaseModel):
        print(value.model_dump_json(indent=2))
    else:
        print(json.dumps(value, indent=2, default=str))


# ---- verbs ---------------------------------------------------------------------------------


async def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from orga.cli.demo import DEMO_PROMPT, run_demo

    print(f"orga demo — task: {DEMO_PROMPT}")
    outcome = await run_demo(settings, args.data_dir, ui_url=ui_base())
    print(f"model:       {outcome.model_label}")
    print(f"answer:      {outcome.result.output}")
    print(
        f"loop:        {outcome.result.iterations} iteration(s), "
        f"{outcome.result.tool_call_count} tool call(s), {outcome.result.usage.total_tokens} tokens"
    )
    print(f"workflow id: {outcome.workflow_id}")
    print(f"web ui:      {outcome.ui_url}")
    if outcome.started_server:
        print(
            f"             (the embedded server has stopped; its history is kept in "
            f"{args.data_dir / 'temporal.db'}: run `uv run orga server` and open the link)"
        )
    return 0


async def cmd_server(args: argparse.Namespace, settings: Settings) -> int:
    from orga.runtime.devserver import DevServer

    host, _, port = settings.temporal_address.rpartition(":")
    server = DevServer(
        args.data_dir,
        ip=host if host not in ("", "localhost") else "127.0.0.1",
        port=int(port),
        ui_port=args.ui_port,
        headless=args.headless,
    )
    try:
        await server.start()
    except (RuntimeError, TimeoutError) as error:
        raise CliError(str(error)) from error
    print(f"Temporal dev server on {server.address} (SQLite: {server.database})")
    if not args.headless:
        print(f"Web UI: {server.ui_url}")
    print("Search attributes: " + ", ".join(k.name for k in sa.ALL) + ". Ctrl-C stops it.")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    waiter = asyncio.ensure_future(server.wait())
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if waiter.done():
        raise CliError(f"the dev server exited unexpectedly (code {waiter.result()})")
    print("stopping…")
    await server.stop()
    print("stopped")
    return 0


def loop_input(args: argparse.Namespace) -> LoopInput:
    """The loop input the ``run`` flags describe, validated before anything starts."""
    config: dict[str, Any] = {"tools": args.tool or []}
    for flag in (
        "provider",
        "model",
        "agent_id",
        "policy",
        "max_iterations",
        "max_total_tokens",
        "system_prompt",
    ):
        value = getattr(args, flag)
        if value is not None:
            config[flag] = value
    if args.timeout is not None:
        config["timeout"] = timedelta(seconds=args.timeout)
    try:
        return LoopInput(
            messages=[Message(role="user", content=args.prompt)],
            config=LoopConfig.model_validate(config),
        )
    except ValidationError as error:
        raise CliError(f"invalid loop input: {describe_validation_error(error)}", 2) from error


_Model = TypeVar("_Model", bound=BaseModel)


async def _start(
    settings: Settings,
    workflow: str,
    payload: BaseModel,
    *,
    workflow_id: str,
    result_type: type[_Model],
    summary: str,
) -> WorkflowHandle[Any, _Model]:
    """Start a workflow on the worker's task queue and say where to watch it."""
    client = await client_for(settings)
    handle = await client.start_workflow(
        workflow,
        payload,
        id=workflow_id,
        task_queue=settings.task_queue,
        result_type=result_type,
        static_summary=summary,
    )
    print(f"started {workflow_id}", file=sys.stderr)
    print(f"web ui: {ui_link(settings, workflow_id)}", file=sys.stderr)
    return handle


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    request = loop_input(args)
    workflow_id = args.id or f"loop-{uuid.uuid4().hex[:12]}"
    prompt = args.prompt if len(args.prompt) <= 120 else args.prompt[:117] + "…"
    handle = await _start(
        settings,
        "ReasoningLoop",
        request,
        workflow_id=workflow_id,
        result_type=LoopResult,
        summary=f"{request.config.agent_id}: {prompt}",
    )
    if args.no_wait:
        if args.json:
            _print_json({"workflow_id": workflow_id, "run_id": handle.result_run_id})
        return 0
    try:
        result = await handle.result()
    except WorkflowFailureError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError):
            raise CliError(f"the loop failed: {cause.type}: {cause.message}") from error
        raise CliError(f"the loop failed: {cause}") from error
    if args.json:
        _print_json(result)
    else:
        print(render_result(result))
    return 0


async def cmd_state(args: argparse.Namespace, settings: Settings) -> int:
    client = await client_for(settings)
    handle = client.get_workflow_handle(args.workflow_id, result_type=LoopResult)
    try:
        state = await handle.query("state", result_type=LoopState)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise _not_found(error, args.workflow_id) from error
        return await _state_without_worker(handle, args, error)
    if args.json:
        _print_json(state)
    else:
        print(render_state(state))
    return 0


async def _state_without_worker(handle: Any, args: argparse.Namespace, error: RPCError) -> int:
    """No worker can answer the query: show what Temporal itself records of the loop."""
    description = await handle.describe()
    attributes = description.typed_search_attributes
    facts: dict[str, Any] = {
        "workflow_id": description.id,
        "status": attributes.get(sa.STATUS) or description.status.name.lower(),
        "agent_id": attributes.get(sa.AGENT_ID),
        "iteration": attributes.get(sa.ITERATION),
        "total_tokens": attributes.get(sa.TOTAL_TOKENS),
        "task_queue": description.task_queue,
        "started": description.start_time,
        "closed": description.close_time,
    }
    if description.status == WorkflowExecutionStatus.COMPLETED:
        result = await handle.result()
        facts["output"] = result.output
        facts["termination_reason"] = result.termination_reason
    if args.json:
        _print_json(facts)
    else:
        print(f"(no worker answers on task queue {description.task_queue!r}: {error.message};")
        print(" showing what Temporal records — start a worker there for the full state)")
        for key, value in facts.items():
            print(f"{key:<20}{value if value is not None else '-'}")
    return 0


async def cmd_journal(args: argparse.Namespace, settings: Settings) -> int:
    client = await client_for(settings)
    handle = client.get_workflow_handle(args.workflow_id)
    shown = 0
    while True:
        try:
            description = await handle.describe()
            journal = await handle.query("journal", result_type=Journal)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise _not_found(error, args.workflow_id) from error
            raise CliError(
                f"no worker answers for {args.workflow_id!r} ({error.message}); the journal "
                "lives in the loop's state: start a worker on its task queue to read it"
            ) from error
        running = description.status == WorkflowExecutionStatus.RUNNING
        fresh = [e for e in journal.entries if e.seq > shown]
        if fresh:
            shown = fresh[-1].seq
        if args.json:
            for entry in fresh:
                print(entry.model_dump_json())
        else:
            if journal.dropped and shown == (fresh[-1].seq if fresh else 0) and not args.follow:
                print(f"({journal.dropped} older entries dropped to keep the journal bounded)")
            for entry in fresh:
                print(render_entry(entry))
        sys.stdout.flush()
        if not args.follow or not running:
            return 0
        await asyncio.sleep(0.5)


async def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    client = await client_for(settings)
    query = "WorkflowType = 'ReasoningLoop'"
    if args.status:
        query += f" AND OrgaStatus = '{args.status}'"
    if args.agent:
        query += f" AND OrgaAgentId = '{args.agent}'"
    rows: list[LoopRow] = []
    try:
        async for execution in client.list_workflows(query, limit=args.limit):
            attributes = execution.typed_search_attributes
            fallback = execution.status.name.lower() if execution.status else "?"
            rows.append(
                LoopRow(
                    workflow_id=execution.id,
                    status=attributes.get(sa.STATUS) or fallback,
                    agent_id=attributes.get(sa.AGENT_ID) or "-",
                    iteration=attributes.get(sa.ITERATION) or 0,
                    tokens=attributes.get(sa.TOTAL_TOKENS) or 0,
                    started=execution.start_time,
                )
            )
    except RPCError as error:
        raise CliError(f"listing loops failed: {error.message}") from error
    if args.json:
        _print_json([row.__dict__ for row in rows])
    else:
        print(render_rows(rows))
    return 0


async def cmd_pending(args: argparse.Namespace, settings: Settings) -> int:
    """The inbox: every loop waiting for a person, and what it waits for."""
    client = await client_for(settings)
    found: list[dict[str, Any]] = []
    query = "OrgaStatus = 'awaiting_approval' AND ExecutionStatus = 'Running'"
    try:
        async for execution in client.list_workflows(query, limit=args.limit):
            handle = client.get_workflow_handle(execution.id)
            try:
                state = await handle.query("state", result_type=LoopState)
            except RPCError as error:
                found.append({"workflow_id": execution.id, "error": error.message})
                continue
            for approval in state.pending_approvals:
                found.append(
                    {
                        "workflow_id": execution.id,
                        "kind": "approval",
                        **approval.model_dump(mode="json"),
                    }
                )
            for escalation in state.pending_escalations:
                found.append(
                    {
                        "workflow_id": execution.id,
                        "kind": "escalation",
                        **escalation.model_dump(mode="json"),
                    }
                )
    except RPCError as error:
        raise CliError(f"listing loops failed: {error.message}") from error
    if args.json:
        _print_json(found)
        return 0
    if not found:
        print("nothing is waiting for a person")
    for item in found:
        if "error" in item:
            print(f"{item['workflow_id']}: (no worker answers: {item['error']})")
        elif item["kind"] == "approval":
            print(
                f"{item['workflow_id']}  approval  call {item['call_id']}  {item['tool']}"
                f"({item['arguments']})  since {item['since']}  — {item['reason']}"
            )
        else:
            print(
                f"{item['workflow_id']}  escalation  {item['escalation_id']}  {item['tool']}  "
                f"since {item['since']}  — {item['error']}"
            )
    return 0


async def _send_update(
    settings: Settings, workflow_id: str, update: str, payload: BaseModel, result: type[_Model]
) -> _Model:
    """Send a person's decision as an update; the workflow's validator may refuse it."""
    client = await client_for(settings)
    handle = client.get_workflow_handle(workflow_id)
    try:
        # temporalio's overloads of execute_update mention a bare Callable: "partially unknown".
        return await handle.execute_update(  # pyright: ignore[reportUnknownMemberType]
            update, payload, result_type=result
        )
    except WorkflowUpdateFailedError as error:
        raise CliError(f"not recorded: {error.cause or error}") from error
    except RPCError as error:
        raise _not_found(error, workflow_id) from error


async def _decide(args: argparse.Namespace, settings: Settings, approved: bool) -> int:
    decision = ApprovalDecision(
        call_id=args.call_id,
        approved=approved,
        reason=args.reason,
        approver=args.approver or os.environ.get("USER") or None,
    )
    record = await _send_update(settings, args.workflow_id, "approve", decision, ApprovalRecord)
    if args.json:
        _print_json(record)
    else:
        verdict = "approved" if record.approved else "denied"
        who = f" by {record.approver}" if record.approver else ""
        why = f": {record.reason}" if record.reason else ""
        print(
            f"{verdict} call {record.call_id} ({record.tool}){who} at {record.at.isoformat()}{why}"
        )
    return 0


async def cmd_approve(args: argparse.Namespace, settings: Settings) -> int:
    return await _decide(args, settings, approved=True)


async def cmd_deny(args: argparse.Namespace, settings: Settings) -> int:
    return await _decide(args, settings, approved=False)


async def cmd_resolve(args: argparse.Namespace, settings: Settings) -> int:
    result: Any = None
    if args.result is not None:
        try:
            result = json.loads(args.result)
        except json.JSONDecodeError:
            result = args.result
    resolution = EscalationResolution(
        escalation_id=args.escalation_id,
        action=args.action,
        result=result,
        reason=args.reason,
        operator=args.operator or os.environ.get("USER") or None,
    )
    record = await _send_update(
        settings, args.workflow_id, "resolve_escalation", resolution, EscalationRecord
    )
    if args.json:
        _print_json(record)
    else:
        print(f"escalation {record.escalation_id}: {record.action} at {record.at.isoformat()}")
    return 0


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
    handle = await _start(
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
            _print_json(report)
        elif report is not None:
            print(render_task(report.status, report.steps))
        message = cause.message if isinstance(cause, ApplicationError) else str(cause)
        raise CliError(f"the task did not complete: {message}") from error
    if args.json:
        _print_json(result)
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
        raise _not_found(error, args.workflow_id) from error
    if args.json:
        _print_json(state)
    else:
        pending = [e.escalation_id for e in state.pending_escalations]
        print(render_task(state.status, state.steps, pending))
    return 0


# ---- parsing -------------------------------------------------------------------------------

Handler = Callable[[argparse.Namespace, Settings], Coroutine[Any, Any, int]]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="orga", description="Durable, governed agent reasoning loops on Temporal."
    )
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    demo = verbs.add_parser("demo", help="run a demo loop end to end on the embedded server")
    data_help = "where temporal.db lives (default: ORGA_DATA_DIR or .orga)"
    demo.add_argument("--data-dir", help=data_help)
    demo.set_defaults(handler=cmd_demo)

    server = verbs.add_parser("server", help="run the embedded Temporal dev server (SQLite)")
    server.add_argument(
        "--data-dir", help="where temporal.db lives (default: ORGA_DATA_DIR or .orga)"
    )
    server.add_argument("--ui-port", type=int, default=8233)
    server.add_argument("--headless", action="store_true", help="no Web UI")
    server.set_defaults(handler=cmd_server)

    run = verbs.add_parser("run", help="start a loop and print its answer")
    run.add_argument("prompt")
    run.add_argument("--tool", action="append", help="advertise a tool (repeatable)")
    run.add_argument("--provider", choices=PROVIDERS)
    run.add_argument("--model")
    run.add_argument("--agent-id")
    run.add_argument("--policy", choices=["permissive", "default", "cedar", "opa"])
    run.add_argument("--system-prompt")
    run.add_argument("--max-iterations", type=int)
    run.add_argument("--max-total-tokens", type=int)
    run.add_argument("--timeout", type=float, help="seconds")
    run.add_argument("--id", help="workflow id (default: a new one)")
    run.add_argument("--no-wait", action="store_true", help="print the id and return")
    run.add_argument("--json", action="store_true")
    run.set_defaults(handler=cmd_run)

    state = verbs.add_parser("state", help="a loop's state")
    state.add_argument("workflow_id")
    state.add_argument("--json", action="store_true")
    state.set_defaults(handler=cmd_state)

    journal = verbs.add_parser("journal", help="a loop's journal")
    journal.add_argument("workflow_id")
    journal.add_argument("--follow", "-f", action="store_true", help="keep printing until it ends")
    journal.add_argument("--json", action="store_true", help="one JSON object per line")
    journal.set_defaults(handler=cmd_journal)

    listing = verbs.add_parser("list", help="recent loops, from Temporal's visibility")
    listing.add_argument(
        "--status", choices=["running", "awaiting_approval", "completed", "failed"]
    )
    listing.add_argument("--agent")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_list)

    inbox = verbs.add_parser("pending", help="loops waiting for a person, across workflows")
    inbox.add_argument("--limit", type=int, default=100)
    inbox.add_argument("--json", action="store_true")
    inbox.set_defaults(handler=cmd_pending)

    for verb, handler in (("approve", cmd_approve), ("deny", cmd_deny)):
        decide = verbs.add_parser(verb, help=f"{verb} a call that waits for approval")
        decide.add_argument("workflow_id")
        decide.add_argument("call_id")
        decide.add_argument("--reason", required=verb == "deny")
        decide.add_argument("--approver", help="who decides (default: $USER)")
        decide.add_argument("--json", action="store_true")
        decide.set_defaults(handler=handler)

    resolve = verbs.add_parser("resolve", help="resolve an escalated step")
    resolve.add_argument("workflow_id")
    resolve.add_argument("escalation_id")
    resolve.add_argument("--action", required=True, choices=["retry", "skip", "result", "abort"])
    resolve.add_argument("--result", help="for --action result: what the model sees (JSON or text)")
    resolve.add_argument("--reason")
    resolve.add_argument("--operator", help="who resolves (default: $USER)")
    resolve.add_argument("--json", action="store_true")
    resolve.set_defaults(handler=cmd_resolve)

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
    return top


def _fail(message: str, code: int) -> NoReturn:
    print(f"orga: {message}", file=sys.stderr)
    sys.stdout.flush()
    os._exit(code)  # temporalio can crash the interpreter at exit (sdk-python#300)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(args, "data_dir"):
        args.data_dir = data_dir(args.data_dir)
    handler: Handler = args.handler
    try:
        settings = Settings.from_env()
        code = asyncio.run(handler(args, settings))
    except CliError as error:
        _fail(str(error), error.code)
    except InvalidConfig as error:
        _fail(error.message, 2)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as error:
        if os.environ.get("ORGA_DEBUG"):
            raise
        _fail(f"unexpected error: {type(error).__name__}: {error} (ORGA_DEBUG=1 shows more)", 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
