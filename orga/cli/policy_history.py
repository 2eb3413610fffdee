"""What the policy gates were asked, read back from histories for ``orga policy``, record by record.

Each ``evaluate_policy`` result in a loop's or a task's history records what its Cedar or OPA
gate was asked (``AskedPolicy``; one over ``ASKED_LIMIT`` is kept in orga's store and read
from the store the settings name). Histories are read, never replayed, and no worker is needed.

A history is data to check, never state to adopt: any process that can run a worker in the
namespace can write a workflow of type ``ReasoningLoop`` whose markers say anything — facts
nested a hundred thousand levels deep, a result that is no ``PolicyResult``, a reference to
some other entry of the store, an action no gate is ever asked. So each record is read on its
own, and one that cannot be read is set aside as ``Unreadable`` (the workflow, the run, the
event, and why, in one bounded line) without stopping the reading of the others; the verbs
list what they set aside and say their answer is incomplete.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, cast

import typer
from pydantic import ValidationError
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from orga.cli.common import client_for, console, print_json, settings
from orga.cli.schedule_spec import parse_duration
from orga.contracts import search_attributes as sa
from orga.contracts.policy import EVALUATE_POLICY
from orga.contracts.verdicts import AskedPolicy, PolicyResult
from orga.gates.whatif import problems, question
from orga.runtime.safe_text import json_text, one_line

if TYPE_CHECKING:  # opened only for a request kept in the store
    from orga.runtime.store import Store

__all__ = [
    "SHOWN",
    "SHOWN_UNREADABLE",
    "Agent",
    "Histories",
    "Recorded",
    "Since",
    "TaskQueue",
    "Unreadable",
    "WorkflowId",
    "period_query",
    "read_histories",
    "shown",
    "warn",
    "why",
    "write_lines",
]

Since = Annotated[
    str, typer.Option("--since", help="How far back: a duration such as 1h, 7d or 1d12h.")
]
Agent = Annotated[str | None, typer.Option("--agent", "-a", help="Only this agent's workflows.")]
WorkflowId = Annotated[str | None, typer.Option("--workflow", help="Only this workflow id.")]
TaskQueue = Annotated[
    str | None, typer.Option("--task-queue", help="Only the workflows of this task queue.")
]
SHOWN: Final = 300
"""Characters of one field of a flip, a disagreement or a failing case a person is shown
(``--json``: all)."""
SHOWN_UNREADABLE: Final = 20
"""Records set aside that are listed one by one (then how many more)."""
_WHY_LIMIT: Final = 300
"""Characters of the reason a record was set aside."""


@dataclass(frozen=True)
class Recorded:
    """One request a policy gate was asked, where it was asked."""

    workflow_id: str
    run_id: str
    event_id: int
    call_id: str | None
    tool: str | None
    kind: str
    asked: AskedPolicy

    @classmethod
    def of(cls, workflow_id: str, run_id: str, event_id: int, asked: AskedPolicy) -> Recorded:
        call_id, tool = asked.action.get("call_id"), asked.action.get("tool")
        return cls(
            workflow_id,
            run_id,
            event_id,
            call_id if isinstance(call_id, str) else None,
            tool if isinstance(tool, str) else None,
            str(asked.action.get("kind", "")),
            asked,
        )


@dataclass(frozen=True)
class Unreadable:
    """A record set aside: where it is, and why it cannot be read (one bounded line)."""

    workflow_id: str
    run_id: str
    event_id: int
    why: str

    def as_json(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "run_id": self.run_id,
            "event_id": self.event_id,
            "why": self.why,
        }


@dataclass
class Histories:
    """What the period's histories recorded, what was set aside, and how many runs were read."""

    recorded: list[Recorded] = field(default_factory=list[Recorded])
    unreadable: list[Unreadable] = field(default_factory=list[Unreadable])
    workflows: int = 0


def why(error: BaseException) -> str:
    """Why a record cannot be read, in one line of at most ``_WHY_LIMIT`` characters."""
    said = problems(error) if isinstance(error, ValidationError) else str(error)
    text = one_line(f"{type(error).__name__}: {said}")
    return text if len(text) <= _WHY_LIMIT else text[: _WHY_LIMIT - 1] + "…"


async def read_histories(
    since: str, agent: str | None, workflow: str | None, task_queue: str | None
) -> Histories:
    """The requests recorded by the loops and tasks that started in the period."""
    query = period_query(since, agent, workflow, task_queue)
    found = settings()
    client = await client_for(found)
    stores: list[Store] = []

    def store() -> Store:  # opened once, and only for a request kept there
        if not stores:
            stores.append(found.store())
        return stores[0]

    read = Histories()
    async for execution in client.list_workflows(query):
        read.workflows += 1
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        history = await handle.fetch_history()
        for event in history.events:
            where = (execution.id, execution.run_id, event.event_id)
            try:
                asked = await _asked_in(client, event)
            except Exception as error:  # anything a crafted event makes decoding raise
                read.unreadable.append(Unreadable(*where, why(error)))
                continue
            for each in asked:
                try:
                    read.recorded.append(Recorded.of(*where, _loaded(store, each)))
                except Exception as error:  # a reference the store does not hold, or junk
                    read.unreadable.append(Unreadable(*where, why(error)))
    return read


def period_query(
    since: str,
    agent: str | None,
    workflow: str | None,
    task_queue: str | None,
    types: tuple[str, ...] = ("ReasoningLoop", "Task"),
) -> str:
    """The visibility query of the workflows of ``types`` that started in the period (and are
    of that agent, that id, that task queue).

    Raises:
        CliError: ``since`` is no duration.
    """
    start = datetime.now(UTC) - parse_duration(since, "--since")
    query = (
        f"WorkflowType IN ({', '.join(repr(t) for t in types)}) "
        f"AND StartTime >= '{start.isoformat(timespec='seconds').replace('+00:00', 'Z')}'"
    )
    if agent is not None:
        query += f" AND {sa.AGENT_ID.name} = {json.dumps(agent)}"
    if workflow is not None:
        query += f" AND WorkflowId = {json.dumps(workflow)}"
    if task_queue is not None:
        query += f" AND TaskQueue = {json.dumps(task_queue)}"
    return query


async def _asked_in(client: Client, event: HistoryEvent) -> list[AskedPolicy]:
    """The requests ``event`` records, if it is an ``evaluate_policy`` result.

    Raises:
        Exception: whatever reading a crafted one raises (set aside by the caller).
    """
    if not event.HasField("marker_recorded_event_attributes"):
        return []
    details = event.marker_recorded_event_attributes.details
    data, result = details.get("data"), details.get("result")
    if data is None or result is None or not data.payloads or not result.payloads:
        return []
    try:
        facts: Any = json.loads(data.payloads[0].data)
    except (ValueError, RecursionError):  # not a local activity's facts: not orga's marker
        return []
    if not isinstance(facts, dict) or cast(dict[str, Any], facts).get("activity_type") != (
        EVALUATE_POLICY
    ):
        return []
    [decided] = await client.data_converter.decode([result.payloads[0]], [PolicyResult])
    if not isinstance(decided, PolicyResult):
        raise TypeError(f"the policy result is a {type(decided).__name__}")
    return [
        asked
        for d in decided.decisions
        for asked in ([d.asked] if d.asked is not None else []) + list(d.asked_above)
    ]


def _loaded(store: Callable[[], Store], asked: AskedPolicy) -> AskedPolicy:
    """``asked``, with a request kept in orga's store read back, and its action checked.

    Raises:
        LookupError: the store does not hold it (run with the workers' ``ORGA_STORE_URL``).
        ValueError: what is recorded or kept is not a request a gate was asked.
    """
    if asked.ref is not None:
        from orga.worker.blobs import BlobStore

        try:
            text = BlobStore(store()).get(asked.ref)
        except LookupError as error:
            raise LookupError(f"{error}: run with the workers' ORGA_STORE_URL") from None
        asked = AskedPolicy.model_validate_json(text)
    question(asked.action)
    return asked


def shown(text: str) -> str:
    """``text`` on one line, cut to ``SHOWN`` characters saying how many more there are."""
    line = one_line(text)
    if len(line) <= SHOWN:
        return line
    return f"{line[:SHOWN]}… ({len(line) - SHOWN} more characters; --json shows all)"


def warn(unreadable: list[Unreadable]) -> None:
    """Say on stderr which records were set aside, each in one line (the first
    ``SHOWN_UNREADABLE``, then how many more)."""
    for each in unreadable[:SHOWN_UNREADABLE]:
        sys.stderr.write(
            one_line(
                f"orga: set aside a recorded request of {each.workflow_id[:120]} (run "
                f"{each.run_id}, event {each.event_id}): {each.why}"
            )
            + "\n"
        )
    if len(unreadable) > SHOWN_UNREADABLE:
        more = len(unreadable) - SHOWN_UNREADABLE
        sys.stderr.write(one_line(f"orga: … and {more} more set aside (--json lists all)") + "\n")


def write_lines(
    lines: list[str], out: Path | None, unreadable: list[Unreadable], what: str, *, as_json: bool
) -> int:
    """Write JSON Lines (``orga policy record``'s cases, ``orga judge record``'s trials) to
    ``out``, or to stdout; say what was set aside on stderr. Exit 1 when something was."""
    text = "".join(f"{line}\n" for line in lines)
    warn(unreadable)  # on stderr: stdout may be the lines
    if out is None:
        sys.stdout.write(json_text(text))  # the lines themselves, safe to show
    else:
        out.write_text(text, encoding="utf-8")
        if as_json:
            print_json({"wrote": len(lines), "out": str(out), "unreadable": len(unreadable)})
        else:
            console().print(f"wrote {len(lines)} {what} to {out}", markup=False)
    return 1 if unreadable else 0
