"""``orga policy``: test a policy set (Cedar, or OPA) before it ships.

``what-if POLICY_DIR`` finds the loops and tasks of a period through Temporal's visibility,
reads from each run's history the requests its Cedar gate was asked (each policy decision's
``AskedPolicy``, in the ``evaluate_policy`` results), asks the candidate set the same (a Cedar
directory, or the URL of an OPA decision endpoint serving the candidate: then the requests
OPA gates were asked) (the gate's
own code, ``orga.gates.whatif``) and lists every decision that would flip, then a summary.
Exit 0: nothing flips; 1: something does; 2: the candidate set is invalid. ``record`` writes
the same requests as test cases with the decisions they got; ``test CASES`` runs a cases file
against a policy set, one line per failing case, with the same exit codes.

Histories are read, never replayed, and no worker is needed; a request kept in orga's store
(one over ``ASKED_LIMIT``) is read from the store the settings name.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, cast

import httpx
import typer
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from orga.cli.common import CliError, Json, client_for, console, execute, print_json, settings
from orga.cli.safe_text import json_text, one_line
from orga.cli.schedule_spec import parse_duration
from orga.contracts import search_attributes as sa
from orga.contracts.errors import InvalidConfig, PolicyUnavailable
from orga.contracts.policy import EVALUATE_POLICY, PolicyDecision, PolicyResult
from orga.contracts.verdicts import AskedPolicy
from orga.gates.cedar import CedarGate
from orga.gates.opa import OpaGate
from orga.gates.whatif import (
    FLIP_KINDS,
    Candidate,
    PolicyCase,
    ask_again,
    flip,
    read_cases,
    run_cases,
)

__all__ = ["register"]

policy_app = typer.Typer(
    help="Test a Cedar policy set before it ships: what it would have decided on recorded "
    "loops (what-if), and a file of cases (test, record).",
    no_args_is_help=True,
)
Since = Annotated[
    str, typer.Option("--since", help="How far back: a duration such as 1h, 7d or 1d12h.")
]
Agent = Annotated[str | None, typer.Option("--agent", "-a", help="Only this agent's workflows.")]
WorkflowId = Annotated[str | None, typer.Option("--workflow", help="Only this workflow id.")]
TaskQueue = Annotated[
    str | None, typer.Option("--task-queue", help="Only the workflows of this task queue.")
]


def register(app: typer.Typer) -> None:
    """Add the ``policy`` group to ``app``."""
    policy_app.command(
        "what-if", epilog="Example: orga policy what-if ./candidate-policies --since 7d"
    )(what_if)
    policy_app.command("test", epilog="Example: orga policy test cases.jsonl")(check_cases)
    policy_app.command("record", epilog="Example: orga policy record --since 1d --out cases.jsonl")(
        record
    )
    app.add_typer(policy_app, name="policy")


@dataclass(frozen=True)
class Recorded:
    """One request a Cedar gate was asked, where it was asked."""

    workflow_id: str
    run_id: str
    call_id: str | None
    tool: str | None
    kind: str
    asked: AskedPolicy


@contextlib.asynccontextmanager
async def _candidate(where: str | Path) -> AsyncGenerator[Candidate]:
    """The policy set to ask: an OPA decision endpoint (a URL), else a Cedar directory."""
    if str(where).startswith(("http://", "https://")):
        async with httpx.AsyncClient() as http:
            try:
                yield OpaGate(str(where), http)
            except PolicyUnavailable as error:
                raise CliError(f"the candidate OPA is unavailable: {error.message}", 2) from error
        return
    try:
        gate = CedarGate(Path(where))
    except InvalidConfig as error:
        raise CliError(f"the candidate policies are invalid: {error.message}", 2) from error
    yield gate


def _engine(gate: Candidate) -> str:
    return "cedar" if isinstance(gate, CedarGate) else "opa"


def _name(gate: Candidate) -> str | None:
    return gate.policy_hash if isinstance(gate, CedarGate) else gate.url


def what_if(
    policy_dir: Annotated[
        str,
        typer.Argument(
            help="The candidate: a Cedar policy directory, or an OPA decision endpoint's URL."
        ),
    ],
    since: Since = "7d",
    agent: Agent = None,
    workflow: WorkflowId = None,
    task_queue: TaskQueue = None,
    as_json: Json = False,
) -> None:
    """What a candidate policy set would have decided on the recorded requests of closed and
    running loops and tasks: every flip, then a summary (exit 1 when anything flips)."""

    async def body() -> int:
        async with _candidate(policy_dir) as gate:
            recorded, workflows = await _recorded(since, agent, workflow, task_queue)
            recorded = [r for r in recorded if r.asked.engine == _engine(gate)]
            flips: list[dict[str, Any]] = []
            for each in recorded:
                after = await ask_again(gate, each.asked)
                kind = flip(each.asked.decision, each.asked.arguments, after)
                if kind is not None:
                    flips.append(_flip(each, after, kind))
            name = _name(gate)
        counts = {k: sum(f["flip"] == k for f in flips) for k in FLIP_KINDS}
        by_kind = {k: n for k, n in counts.items() if n}
        summary: dict[str, Any] = {
            "policy_dir": str(policy_dir),
            "policy_hash": name,
            "workflows": workflows,
            "requests": len(recorded),
            "flips": by_kind,
        }
        if as_json:
            print_json({"summary": summary, "flips": flips})
            return 1 if flips else 0
        out = console()
        for each in flips:
            out.print(
                f"{each['flip']}  {each['workflow_id']}  {each['call_id'] or each['kind']}  "
                f"{each['tool'] or ''}  (iteration {each['iteration']})",
                markup=False,
                highlight=False,
            )
            out.print(f"  before  {each['before']}", markup=False, highlight=False)
            out.print(f"  after   {each['after']}", markup=False, highlight=False)
        read = f"{len(recorded)} recorded request(s) of {workflows} workflow(s)"
        if not flips:
            out.print(f"nothing flips: {read} decide the same under {policy_dir}", markup=False)
            return 0
        kinds = ", ".join(f"{k} {n}" for k, n in by_kind.items())
        out.print(f"{len(flips)} flip(s) in {read}: {kinds}", markup=False, highlight=False)
        return 1

    execute(body, as_json=as_json)


def check_cases(
    cases: Annotated[Path, typer.Argument(help="The cases file (JSON Lines).")],
    policy_dir: Annotated[
        str | None,
        typer.Option(
            "--policy-dir",
            help="The Cedar policy set, or an OPA decision endpoint's URL (default: "
            "ORGA_POLICY_DIR).",
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Run a file of policy cases against a policy set: one line per failing case (exit 1
    when any fails, 2 when the cases or the policies are invalid)."""

    async def body() -> int:
        directory = policy_dir or settings().policy_dir
        if directory is None:
            raise CliError("no policy directory: give --policy-dir or set ORGA_POLICY_DIR", 2)
        try:
            found = read_cases(cases)
        except InvalidConfig as error:
            raise CliError(error.message, 2) from error
        async with _candidate(directory) as gate:
            try:
                results = await run_cases(gate, found)
            except InvalidConfig as error:  # a case whose action is not one
                raise CliError(f"{cases.name}: {error.message}", 2) from error
        failed = [r for r in results if not r.passed]
        if as_json:
            print_json(
                {
                    "cases": len(results),
                    "failed": [
                        {"name": r.case.name, "expect": r.case.expect, "got": _said(r.got)}
                        for r in failed
                    ],
                }
            )
            return 1 if failed else 0
        out = console()
        for result in failed:
            out.print(
                f"FAIL  {one_line(result.case.name)}: expected {result.case.expect}"
                + (f" {result.case.arguments}" if result.case.arguments else "")
                + f", got {_said(result.got)}",
                markup=False,
                highlight=False,
            )
        out.print(
            f"{len(results) - len(failed)} of {len(results)} case(s) pass under {directory}",
            markup=False,
            highlight=False,
        )
        return 1 if failed else 0

    execute(body, as_json=as_json)


def record(
    since: Since = "7d",
    agent: Agent = None,
    workflow: WorkflowId = None,
    task_queue: TaskQueue = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="The cases file to write (default: stdout).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Write the recorded requests of a period as policy cases, each expecting the decision
    it got: a what-if that looks right becomes a regression test (`orga policy test`)."""

    async def body() -> int:
        recorded, _ = await _recorded(since, agent, workflow, task_queue)
        lines = [
            PolicyCase.of(
                each.asked, f"{each.workflow_id} {each.call_id or each.kind} {each.tool or ''}"
            ).model_dump_json(exclude_defaults=True)
            for each in recorded
        ]
        text = "".join(f"{line}\n" for line in lines)
        if out is None:
            # the cases themselves (JSON Lines, with or without --json), safe to show
            sys.stdout.write(json_text(text))
        else:
            out.write_text(text, encoding="utf-8")
            if as_json:
                print_json({"wrote": len(lines), "out": str(out)})
            else:
                console().print(f"wrote {len(lines)} case(s) to {out}", markup=False)
        return 0

    execute(body, as_json=as_json)


# ---- reading what was asked ---------------------------------------------------------------


async def _recorded(
    since: str, agent: str | None, workflow: str | None, task_queue: str | None
) -> tuple[list[Recorded], int]:
    """The Cedar requests recorded by the loops and tasks that started in the period, and how
    many workflow runs were read."""
    start = datetime.now(UTC) - parse_duration(since, "--since")
    query = (
        "WorkflowType IN ('ReasoningLoop', 'Task') "
        f"AND StartTime >= '{start.isoformat(timespec='seconds').replace('+00:00', 'Z')}'"
    )
    if agent is not None:
        query += f" AND {sa.AGENT_ID.name} = {json.dumps(agent)}"
    if workflow is not None:
        query += f" AND WorkflowId = {json.dumps(workflow)}"
    if task_queue is not None:
        query += f" AND TaskQueue = {json.dumps(task_queue)}"
    found = settings()
    client = await client_for(found)
    recorded: list[Recorded] = []
    runs = 0
    async for execution in client.list_workflows(query):
        runs += 1
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        history = await handle.fetch_history()
        for event in history.events:
            recorded += await _asked_in(client, execution.id, execution.run_id, event)
    return [_loaded(found, r) for r in recorded], runs


async def _asked_in(
    client: Client, workflow_id: str, run_id: str, event: HistoryEvent
) -> list[Recorded]:
    """The Cedar requests ``event`` records, if it is an ``evaluate_policy`` result."""
    if not event.HasField("marker_recorded_event_attributes"):
        return []
    details = event.marker_recorded_event_attributes.details
    data, result = details.get("data"), details.get("result")
    if data is None or result is None or not data.payloads or not result.payloads:
        return []
    try:
        facts: Any = json.loads(data.payloads[0].data)
    except ValueError:
        return []
    if not isinstance(facts, dict) or cast(dict[str, Any], facts).get("activity_type") != (
        EVALUATE_POLICY
    ):
        return []
    payload: Payload = result.payloads[0]
    [decided] = await client.data_converter.decode([payload], [PolicyResult])
    assert isinstance(decided, PolicyResult)
    return [
        Recorded(
            workflow_id,
            run_id,
            asked.action.get("call_id"),
            asked.action.get("tool"),
            str(asked.action.get("kind", "")),
            asked,
        )
        for d in decided.decisions
        for asked in ([d.asked] if d.asked is not None else []) + list(d.asked_above)
    ]


def _loaded(found: Any, each: Recorded) -> Recorded:
    """``each`` with a request kept in orga's store read back."""
    if each.asked.ref is None:
        return each
    from orga.worker.blobs import BlobStore

    try:
        text = BlobStore(found.store()).get(each.asked.ref)
    except (LookupError, ValueError) as error:
        raise CliError(
            f"{each.workflow_id}: a recorded request is kept in orga's store under "
            f"{each.asked.ref}, which this store does not hold ({error}); run with the "
            "workers' ORGA_STORE_URL"
        ) from error
    asked = AskedPolicy.model_validate_json(text)
    return Recorded(
        each.workflow_id,
        each.run_id,
        asked.action.get("call_id"),
        asked.action.get("tool"),
        str(asked.action.get("kind", "")),
        asked,
    )


def _flip(each: Recorded, after: PolicyDecision, kind: str) -> dict[str, Any]:
    before = PolicyDecision(
        decision=each.asked.decision, reason=each.asked.reason, arguments=each.asked.arguments
    )
    return {
        "flip": kind,
        "workflow_id": each.workflow_id,
        "run_id": each.run_id,
        "call_id": each.call_id,
        "tool": each.tool,
        "kind": each.kind,
        "iteration": each.asked.iteration,
        "agent_id": each.asked.agent_id,
        "before": _said(before),
        "after": _said(after),
    }


def _said(decision: PolicyDecision) -> str:
    said = decision.decision
    if decision.decision == "modify" and decision.arguments:
        said += f" {decision.arguments}"
    if decision.reason:
        said += f": {decision.reason}"
    return one_line(said)
