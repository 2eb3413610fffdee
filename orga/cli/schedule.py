"""``orga schedule``: Temporal Schedules that start reasoning loops or tasks on a clock.

A schedule is Temporal's own: the server starts each run, whether or not this command (or any
worker) is running at that moment, and a worker on the task queue picks it up. The schedule's
id is the name given here; every run's workflow id is ``schedule-NAME`` followed by the time it
was scheduled for, which Temporal appends. When a run is still going at the next time, the
overlap policy decides (default ``skip``: that time is dropped).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

import typer
from pydantic import BaseModel
from rich.table import Table
from temporalio.client import (
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionResult,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleListActionStartWorkflow,
    ScheduleListDescription,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode

from orga.cli.common import (
    CliError,
    Json,
    Model,
    Provider,
    Tools,
    client_for,
    console,
    execute,
    loop_input,
    print_json,
    print_table,
    settings,
)
from orga.cli.schedule_spec import iso, render_spec, schedule_spec
from orga.cli.tasks import read_task_input  # the task file, read as `orga task start` reads it
from orga.cli.views import shorten
from orga.contracts.messages import LOOP_WORKFLOW, TASK_WORKFLOW
from orga.contracts.vocabulary import ProviderName

__all__ = ["register"]

Overlap = Literal[
    "skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"
]

SUMMARY_MEMO = "orga_summary"
"""Memo key of the schedule's one-line summary (what each run does), shown by ``list``."""

_T = TypeVar("_T")

schedule_app = typer.Typer(
    help="Temporal Schedules that start a loop (a prompt) or a task (a task file) on a cron "
    "or an interval. Temporal starts each run; a worker on the task queue must be running then.",
    no_args_is_help=True,
)

Name = Annotated[str, typer.Argument(help="The schedule's id (the NAME it was created with).")]
Note = Annotated[str | None, typer.Option(help="Why, shown with the schedule.")]


def register(app: typer.Typer) -> None:
    """Add the ``schedule`` group to ``app``."""
    schedule_app.command(
        "create",
        epilog="Example: orga schedule create morning --cron '0 9 * * 1-5' "
        "'Summarise the open tickets' --agent support",
    )(create)
    schedule_app.command("list", epilog="Example: orga schedule list --json")(list_schedules)
    schedule_app.command(
        "pause", epilog="Example: orga schedule pause morning --note 'holiday week'"
    )(pause)
    schedule_app.command("unpause", epilog="Example: orga schedule unpause morning")(unpause)
    schedule_app.command("trigger", epilog="Example: orga schedule trigger morning")(trigger)
    schedule_app.command("delete", epilog="Example: orga schedule delete morning")(delete)
    app.add_typer(schedule_app, name="schedule")


# ---- create ------------------------------------------------------------------------------


def create(
    name: Annotated[
        str,
        typer.Argument(
            help="The schedule's id; each run's id is schedule-NAME and its scheduled time."
        ),
    ],
    prompt: Annotated[
        str | None,
        typer.Argument(help="Start a loop with this as the user's first message (or --task)."),
    ] = None,
    cron: Annotated[
        str | None, typer.Option(help="When, as cron (UTC unless CRON_TZ=…): '0 9 * * 1-5'.")
    ] = None,
    every: Annotated[str | None, typer.Option(help="Or how often: 30s, 5m, 1h, 1d, 1h30m.")] = None,
    task: Annotated[
        str | None,
        typer.Option("--task", help="Start this task file (schemas/task.schema.json) instead."),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Who the loop acts as (config.agent_id).")
    ] = None,
    tool: Tools = None,
    provider: Provider = None,
    model: Model = None,
    overlap: Annotated[
        Overlap, typer.Option(help="When a run is still going at the next time.")
    ] = "skip",
    paused: Annotated[
        bool, typer.Option("--paused", help="Create it paused (trigger or unpause it later).")
    ] = False,
    as_json: Json = False,
) -> None:
    """Create a schedule that starts a loop (PROMPT) or a task (--task FILE) on a clock."""

    async def body() -> int:
        spec = schedule_spec(cron, every)
        workflow, payload, summary = _what(prompt, task, agent, tool, provider, model)
        config = settings()
        schedule = Schedule(
            action=ScheduleActionStartWorkflow(
                workflow,
                payload,
                id=f"schedule-{name}",
                task_queue=config.task_queue,
                static_summary=f"{summary} (schedule {name})",
            ),
            spec=spec,
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy[overlap.upper()]),
            state=ScheduleState(paused=paused, note="created paused" if paused else None),
        )
        client = await client_for(config)
        try:
            handle = await client.create_schedule(name, schedule, memo={SUMMARY_MEMO: summary})
        except ScheduleAlreadyRunningError as error:
            raise CliError(
                f"there is already a schedule {name!r}: pick another name, or "
                f"`orga schedule delete {name}` first"
            ) from error
        except RPCError as error:
            if error.status == RPCStatusCode.INVALID_ARGUMENT:
                raise CliError(f"invalid schedule {name!r}: {error.message}", 2) from error
            raise
        next_runs = (await handle.describe()).info.next_action_times
        facts: dict[str, Any] = {
            "schedule_id": name,
            "workflow_type": workflow,
            "workflow_id": f"schedule-{name}",
            "task_queue": config.task_queue,
            "spec": render_spec(spec),
            "overlap": overlap,
            "paused": paused,
            "summary": summary,
            "next_runs": [iso(moment) for moment in next_runs[:3]],
        }
        if as_json:
            print_json(facts)
            return 0
        out = console()
        out.print(
            f"created schedule {name!r}: {facts['spec']}, start a {workflow} — {summary}",
            markup=False,
        )
        out.print(
            f"task queue {config.task_queue}, overlap {overlap}, "
            f"runs named schedule-{name}-<scheduled time>",
            markup=False,
        )
        if paused:
            out.print(
                f"paused: `orga schedule unpause {name}` starts the clock, "
                f"`orga schedule trigger {name}` runs it once now",
                markup=False,
            )
        elif next_runs:
            out.print(f"next run {iso(next_runs[0])}", markup=False)
        return 0

    execute(body, as_json=as_json)


def _what(
    prompt: str | None,
    task: str | None,
    agent: str | None,
    tool: list[str] | None,
    provider: ProviderName | None,
    model: str | None,
) -> tuple[str, BaseModel, str]:
    """The workflow type, its validated input, and a one-line summary of a run."""
    if prompt is not None and task is not None:
        raise CliError("give a PROMPT or --task FILE, not both", 2)
    if task is not None:
        if agent is not None or tool or provider is not None or model is not None:
            raise CliError(
                "--agent, --tool, --provider and --model shape a prompt's loop; a task file "
                "names its own agent_id and steps",
                2,
            )
        steps = read_task_input(task)
        return (
            TASK_WORKFLOW,
            steps,
            f"{steps.agent_id}: task of {len(steps.steps)} step(s) from {task}",
        )
    if prompt is None:
        raise CliError("say what to start: a PROMPT (a loop) or --task FILE (a task)", 2)
    request = loop_input(prompt, tools=tool or [], provider=provider, model=model, agent_id=agent)
    return LOOP_WORKFLOW, request, f"{request.config.agent_id}: {shorten(prompt, 120)}"


# ---- list --------------------------------------------------------------------------------


async def _row(entry: ScheduleListDescription) -> dict[str, Any]:
    """One schedule as ``list`` shows it (older servers may not say more than its id)."""
    listed, info = entry.schedule, entry.info
    recent: Sequence[ScheduleActionResult] = info.recent_actions if info else ()
    last = recent[-1].action if recent else None
    paused = listed.state.paused if listed else None
    return {
        "schedule_id": entry.id,
        "workflow_type": listed.action.workflow
        if listed and isinstance(listed.action, ScheduleListActionStartWorkflow)
        else None,
        "spec": render_spec(listed.spec) if listed else None,
        "paused": paused,
        "note": listed.state.note if listed else None,
        "summary": await entry.memo_value(SUMMARY_MEMO, None, type_hint=str),
        "next_run": iso(info.next_action_times[0])
        if info and info.next_action_times and not paused
        else None,
        "recent_runs": len(recent),
        "last_workflow_id": last.workflow_id
        if isinstance(last, ScheduleActionExecutionStartWorkflow)
        else None,
    }


def list_schedules(as_json: Json = False) -> None:
    """Every schedule of the namespace: when it fires, whether paused, its next and last run."""

    async def body() -> int:
        client = await client_for(settings())
        rows = [await _row(entry) async for entry in await client.list_schedules()]
        rows.sort(key=lambda row: row["schedule_id"])
        if as_json:
            print_json(rows)
            return 0
        if not rows:
            console().print("no schedules (`orga schedule create --help` makes one)")
            return 0
        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in ("ID", "STARTS", "WHEN", "PAUSED", "NEXT RUN", "RECENT", "LAST RUN"):
            table.add_column(column, no_wrap=column != "WHEN")
        for row in rows:
            table.add_row(
                row["schedule_id"],
                row["workflow_type"] or "-",
                row["spec"] or "-",
                {True: "yes", False: "no", None: "-"}[row["paused"]],
                row["next_run"] or "-",
                str(row["recent_runs"]),
                row["last_workflow_id"] or "-",
            )
        print_table(table)
        return 0

    execute(body, as_json=as_json)


# ---- pause, unpause, trigger, delete -----------------------------------------------------


async def _on_schedule(name: str, act: Callable[[ScheduleHandle], Awaitable[_T]]) -> _T:
    """``act`` on the schedule ``name``; one that does not exist is a one-line error."""
    client = await client_for(settings())
    try:
        return await act(client.get_schedule_handle(name))
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise CliError(
                f"there is no schedule {name!r} (`orga schedule list` shows them)"
            ) from error
        raise


def _done(as_json: bool, message: str, **facts: Any) -> int:
    if as_json:
        print_json(facts)
    else:
        console().print(message, markup=False)
    return 0


def pause(name: Name, note: Note = None, as_json: Json = False) -> None:
    """Pause a schedule: no run starts on its clock until unpaused (trigger still works)."""

    async def body() -> int:
        await _on_schedule(name, lambda handle: handle.pause(note=note or "paused by orga"))
        return _done(as_json, f"paused schedule {name!r}", schedule_id=name, paused=True)

    execute(body, as_json=as_json)


def unpause(name: Name, note: Note = None, as_json: Json = False) -> None:
    """Unpause a schedule: runs start on its clock again."""

    async def body() -> int:
        await _on_schedule(name, lambda handle: handle.unpause(note=note or "unpaused by orga"))
        return _done(as_json, f"unpaused schedule {name!r}", schedule_id=name, paused=False)

    execute(body, as_json=as_json)


def trigger(name: Name, as_json: Json = False) -> None:
    """Start one run of a schedule now, paused or not (its overlap policy still applies)."""

    async def body() -> int:
        await _on_schedule(name, lambda handle: handle.trigger())
        return _done(
            as_json,
            f"triggered schedule {name!r}: a run starts now (`orga schedule list` shows it)",
            schedule_id=name,
            triggered=True,
        )

    execute(body, as_json=as_json)


def delete(name: Name, as_json: Json = False) -> None:
    """Delete a schedule. Runs it already started go on to their end."""

    async def body() -> int:
        await _on_schedule(name, lambda handle: handle.delete())
        return _done(as_json, f"deleted schedule {name!r}", schedule_id=name, deleted=True)

    execute(body, as_json=as_json)
