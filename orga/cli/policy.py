"""``orga policy``: test a policy set (Cedar, or OPA) before it ships.

``what-if POLICY_DIR`` finds the loops and tasks of a period through Temporal's visibility,
reads from each run's history the requests its Cedar gate was asked (each policy decision's
``AskedPolicy``, in the ``evaluate_policy`` results), asks the candidate set the same (a Cedar
directory, or the URL of an OPA decision endpoint serving the candidate: then the requests
OPA gates were asked) (the gate's
own code, ``orga.gates.whatif``) and lists every decision that would flip, then a summary.
Exit 0: nothing flips; 1: something does, or a record could not be read; 2: the candidate
set is invalid. ``record`` writes
the same requests as test cases with the decisions they got; ``test CASES`` runs a cases file
against a policy set, one line per failing case, with the same exit codes.

Histories are read, never replayed, and no worker is needed (``orga.cli.policy_history``); a
record that cannot be read — a history is data, and any worker of the namespace can write one —
is set aside and listed, and the answer says it is incomplete (exit 1), never a crash. What is
printed is bounded: each field of a flip is cut short (``--json`` carries it whole).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from orga.cli.common import CliError, Json, console, execute, print_json, settings
from orga.cli.policy_history import (
    Agent,
    Recorded,
    Since,
    TaskQueue,
    Unreadable,
    WorkflowId,
    read_histories,
    warn,
    why,
    write_lines,
)
from orga.cli.policy_history import shown as _shown
from orga.contracts.errors import InvalidConfig, PolicyUnavailable
from orga.contracts.policy import PolicyDecision
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
from orga.runtime.safe_text import one_line

__all__ = ["register"]

policy_app = typer.Typer(
    help="Test a Cedar policy set before it ships: what it would have decided on recorded "
    "loops (what-if), and a file of cases (test, record).",
    no_args_is_help=True,
)


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
    running loops and tasks: every flip, then a summary (exit 1 when anything flips, or when a
    recorded request cannot be read)."""

    async def body() -> int:
        async with _candidate(policy_dir) as gate:
            read = await read_histories(since, agent, workflow, task_queue)
            recorded = [r for r in read.recorded if r.asked.engine == _engine(gate)]
            unreadable = read.unreadable
            flips: list[dict[str, Any]] = []
            asked = 0
            for each in recorded:
                try:
                    after = await ask_again(gate, each.asked)
                except InvalidConfig as error:  # a record no gate wrote
                    unreadable.append(_set_aside(each, error))
                    continue
                asked += 1
                kind = flip(each.asked.decision, each.asked.arguments, after)
                if kind is not None:
                    flips.append(_flip(each, after, kind))
            name = _name(gate)
        counts = {k: sum(f["flip"] == k for f in flips) for k in FLIP_KINDS}
        by_kind = {k: n for k, n in counts.items() if n}
        summary: dict[str, Any] = {
            "policy_dir": str(policy_dir),
            "policy_hash": name,
            "workflows": read.workflows,
            "requests": asked,
            "flips": by_kind,
            "unreadable": len(unreadable),
        }
        failed = 1 if flips or unreadable else 0
        if as_json:
            print_json(
                {
                    "summary": summary,
                    "flips": flips,
                    "unreadable": [u.as_json() for u in unreadable],
                }
            )
            return failed
        warn(unreadable)
        out = console()
        for each in flips:
            out.print(
                f"{each['flip']}  {_shown(each['workflow_id'])}  "
                f"{_shown(each['call_id'] or each['kind'])}  {_shown(each['tool'] or '')}  "
                f"(iteration {each['iteration']})",
                markup=False,
                highlight=False,
            )
            out.print(f"  before  {_shown(each['before'])}", markup=False, highlight=False)
            out.print(f"  after   {_shown(each['after'])}", markup=False, highlight=False)
        said = f"{asked} recorded request(s) of {read.workflows} workflow(s)"
        if unreadable:
            said += (
                f", and {len(unreadable)} that could not be read (set aside, listed on stderr): "
                "the what-if is incomplete"
            )
        if not flips:
            out.print(f"nothing flips: {said} decide the same under {policy_dir}", markup=False)
            return failed
        kinds = ", ".join(f"{k} {n}" for k, n in by_kind.items())
        out.print(f"{len(flips)} flip(s) in {said}: {kinds}", markup=False, highlight=False)
        return failed

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
                f"FAIL  {_shown(result.case.name)}: expected {result.case.expect}"
                + (f" {_shown(result.case.arguments)}" if result.case.arguments else "")
                + f", got {_shown(_said(result.got))}",
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
        read = await read_histories(since, agent, workflow, task_queue)
        lines = [
            PolicyCase.of(
                each.asked, f"{each.workflow_id} {each.call_id or each.kind} {each.tool or ''}"
            ).model_dump_json(exclude_defaults=True)
            for each in read.recorded
        ]
        return write_lines(lines, out, read.unreadable, "case(s)", as_json=as_json)

    execute(body, as_json=as_json)


def _set_aside(each: Recorded, error: InvalidConfig) -> Unreadable:
    return Unreadable(each.workflow_id, each.run_id, each.event_id, why(error))


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
