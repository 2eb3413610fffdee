"""``orga judge``: try a judge on the calls people already decided, before it decides any.

``what-if JUDGE`` reads the calls people decided in the loops and tasks of a period
(``orga.cli.judge_history``: each loop's history replayed with the workflow code; no worker
needed), asks the judge of the agents file (``--agents-file``, default ``ORGA_AGENTS``) about
each exactly as a loop would show it the call — its code called here, or its model asked with
the CLI's provider settings (what that costs is charged to no loop's principal) — and lists
every disagreement: ``would-approve`` (a person denied it), ``would-deny`` (a person approved
it), then a summary with the calls it left to a person. Exit 0: no disagreement; 1: one at
least, or a history could not be read (the answer is incomplete); 2: the judge or the agents
file is invalid. What the policies would let the judge decide is ``orga policy what-if``'s
business: a judge's decision is ``Action::"approve"`` by ``Approver::"<judge>"``.

``record`` writes the same calls as trials (``JudgeTrial``, JSON Lines), each expecting the
person's decision; ``test JUDGE TRIALS`` runs a trials file, one line per failing trial, with
the same exit codes. A trial fails when the judge decides against it (or decides one that
expects ``escalate``); an escalation passes, unless ``--strict``. Everything printed from a
history or a judge is cut short and shown as plain text (``--json`` carries it whole).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Final

import httpx
import typer
from pydantic import ValidationError

from orga.cli.common import CliError, Json, console, execute, print_json, settings
from orga.cli.judge_history import DecidedCall, read_decided
from orga.cli.policy_history import Agent, Since, TaskQueue, WorkflowId, warn, write_lines
from orga.cli.policy_history import shown as _shown
from orga.contracts.errors import describe_validation_error
from orga.contracts.inference import InferenceResponse, Usage
from orga.contracts.judges import JudgeAnswer, JudgeCase, JudgeTrial, Verdict
from orga.runtime.safe_text import one_line

__all__ = ["register"]

judge_app = typer.Typer(
    help="Try a judge before it decides: what it would have said on the calls people decided "
    "(what-if), and a file of trials (record, test).",
    no_args_is_help=True,
)
AgentsFile = Annotated[
    Path | None,
    typer.Option(
        "--agents-file", help="The agents file defining the judge (default: ORGA_AGENTS)."
    ),
]
Judge = Annotated[str, typer.Argument(help="The judge: a [judges.<name>] of the agents file.")]
KINDS: Final = ("would-approve", "would-deny")

Ask = Callable[[JudgeCase], Awaitable[JudgeAnswer]]


def register(app: typer.Typer) -> None:
    """Add the ``judge`` group to ``app``."""
    judge_app.command("what-if", epilog="Example: orga judge what-if small-refunds --since 7d")(
        what_if
    )
    judge_app.command("record", epilog="Example: orga judge record --since 7d --out trials.jsonl")(
        record
    )
    judge_app.command("test", epilog="Example: orga judge test small-refunds trials.jsonl")(
        check_trials
    )
    app.add_typer(judge_app, name="judge")


@asynccontextmanager
async def _judge(name: str, agents_file: Path | None) -> AsyncGenerator[Ask]:
    """How to ask the judge ``name`` of the agents file, here (its key is not needed).

    Raises:
        CliError: no agents file, or no such judge in it (exit 2).
        InvalidConfig: the file or the judge is invalid (exit 2, by ``execute``).
    """
    from orga.activities.judges import ask_judge, prepare_judge
    from orga.core.budget import served
    from orga.core.judging import failed
    from orga.providers.prices import priced
    from orga.worker.agent_registry import AgentRegistry

    found = settings()
    path = agents_file or found.agents_file
    if path is None:
        raise CliError("no agents file: give --agents-file or set ORGA_AGENTS", 2)
    registry = AgentRegistry.load(path, frozenset({"permissive", "default", "cedar", "opa"}))
    spec = next((j for j in registry.judges if j.name == name), None)
    if spec is None:
        raise CliError(
            f"{path} defines no judge {name!r} (its judges: "
            f"{sorted(j.name for j in registry.judges) or 'none'})",
            2,
        )
    agents = {spec.agent: registry.get(spec.agent)} if spec.agent is not None else {}
    loaded = prepare_judge(spec, registry.origin, agents)
    async with httpx.AsyncClient() as http:

        async def direct(
            provider: str,
            model: str,
            estimated: int,
            max_output: int,
            send: Callable[[], Awaitable[InferenceResponse]],
        ) -> tuple[InferenceResponse, Usage]:
            del max_output  # capped by the call itself
            response = await send()
            return response, priced(
                served(response, estimated), provider, model, found.model_prices
            )

        async def ask(case: JudgeCase) -> JudgeAnswer:
            try:
                return await ask_judge(
                    loaded,
                    case,
                    settings=found,
                    http=http,
                    model_call=direct,
                    timeout=spec.timeout.total_seconds(),
                )
            except Exception as error:  # a model judge's call failed: a loop escalates too
                return failed(error)

        yield ask


def said(answer: JudgeAnswer) -> Verdict:
    """What the answer decides: its verdict when clear and sure, else ``escalate``."""
    return answer.verdict if answer.why_not is None else "escalate"


def what_if(
    judge: Judge,
    since: Since = "7d",
    agent: Agent = None,
    workflow: WorkflowId = None,
    task_queue: TaskQueue = None,
    agents_file: AgentsFile = None,
    as_json: Json = False,
) -> None:
    """What the judge would have said of the calls people decided in the period's loops and
    tasks: every disagreement, then a summary (exit 1 when it disagrees with a person, or when
    a history cannot be read)."""

    async def body() -> int:
        async with _judge(judge, agents_file) as ask:
            read = await read_decided(since, agent, workflow, task_queue)
            verdicts = [(call, await ask(call.case)) for call in read.calls]
        rows = [_row(call, answer) for call, answer in verdicts]
        disagreements = [r for r in rows if r["disagreement"] is not None]
        left = sum(r["judge"] == "escalate" for r in rows)
        counts = {k: n for k in KINDS if (n := sum(r["disagreement"] == k for r in rows))}
        summary: dict[str, Any] = {
            "judge": judge,
            "workflows": read.workflows,
            "calls": len(rows),
            "agree": len(rows) - len(disagreements) - left,
            "left_to_a_person": left,
            "disagreements": counts,
            "unreadable": len(read.unreadable),
        }
        failed = 1 if disagreements or read.unreadable else 0
        if as_json:
            print_json(
                {
                    "summary": summary,
                    "disagreements": disagreements,
                    "calls": rows,
                    "unreadable": [u.as_json() for u in read.unreadable],
                }
            )
            return failed
        warn(read.unreadable)
        out = console()
        for row in disagreements:
            out.print(
                f"{row['disagreement']}  {_shown(row['workflow_id'])}  {_shown(row['call_id'])}  "
                f"{_shown(row['tool'])}  {_shown(row['arguments'])}",
                markup=False,
                highlight=False,
            )
            out.print(f"  person  {_shown(row['person_said'])}", markup=False, highlight=False)
            out.print(f"  judge   {_shown(row['judge_said'])}", markup=False, highlight=False)
        where = f"{len(rows)} call(s) people decided in {read.workflows} workflow(s)"
        if read.unreadable:
            where += (
                f", and {len(read.unreadable)} workflow(s) that could not be read (set aside, "
                "listed on stderr): the what-if is incomplete"
            )
        rest = f"; {summary['agree']} agree, {left} left to a person"
        if not disagreements:
            out.print(f"no disagreement: judge {judge} on {where}{rest}", markup=False)
            return failed
        kinds = ", ".join(f"{k} {n}" for k, n in counts.items())
        out.print(
            f"{len(disagreements)} disagreement(s) in {where}: {kinds}{rest}",
            markup=False,
            highlight=False,
        )
        return failed

    execute(body, as_json=as_json)


def record(
    since: Since = "7d",
    agent: Agent = None,
    workflow: WorkflowId = None,
    task_queue: TaskQueue = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="The trials file to write (default: stdout).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Write the calls people decided in the period as judge trials, each expecting the
    person's decision: a what-if that looks right becomes a regression test (`orga judge
    test`)."""

    async def body() -> int:
        read = await read_decided(since, agent, workflow, task_queue)
        lines = [
            JudgeTrial(
                name=f"{call.workflow_id} {call.case.call_id} {call.case.tool}",
                case=call.case,
                expect="approve" if call.approved else "deny",
            ).model_dump_json()
            for call in read.calls
        ]
        return write_lines(lines, out, read.unreadable, "trial(s)", as_json=as_json)

    execute(body, as_json=as_json)


def check_trials(
    judge: Judge,
    trials: Annotated[Path, typer.Argument(help="The trials file (JSON Lines).")],
    strict: Annotated[
        bool, typer.Option("--strict", help="An escalation fails a trial that expects a verdict.")
    ] = False,
    agents_file: AgentsFile = None,
    as_json: Json = False,
) -> None:
    """Run a file of judge trials: one line per failing trial (exit 1 when any fails, 2 when
    the trials, the agents file or the judge are invalid)."""

    async def body() -> int:
        found = read_trials(trials)
        async with _judge(judge, agents_file) as ask:
            answers = [await ask(trial.case) for trial in found]
        failed = [
            (trial, answer)
            for trial, answer in zip(found, answers, strict=True)
            if not passes(trial.expect, said(answer), strict=strict)
        ]
        if as_json:
            print_json(
                {
                    "trials": len(found),
                    "failed": [
                        {"name": t.name, "expect": t.expect, "got": _judge_said(a)}
                        for t, a in failed
                    ],
                }
            )
            return 1 if failed else 0
        out = console()
        for trial, answer in failed:
            out.print(
                f"FAIL  {_shown(trial.name or trial.case.call_id)}: expected {trial.expect}, "
                f"got {_shown(_judge_said(answer))}",
                markup=False,
                highlight=False,
            )
        out.print(
            f"{len(found) - len(failed)} of {len(found)} trial(s) pass for judge {judge}",
            markup=False,
            highlight=False,
        )
        return 1 if failed else 0

    execute(body, as_json=as_json)


def passes(expect: Verdict, got: Verdict, *, strict: bool) -> bool:
    """Whether a judge that says ``got`` passes a trial expecting ``expect``."""
    if got == "escalate":
        return expect == "escalate" or not strict
    return got == expect


def read_trials(path: Path) -> list[JudgeTrial]:
    """The trials of a JSON Lines file (blank lines skipped).

    Raises:
        CliError: it cannot be read, or a line is no trial (exit 2).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CliError(f"{path}: cannot read the trials ({error})", 2) from error
    found: list[JudgeTrial] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            found.append(JudgeTrial.model_validate_json(line))
        except ValidationError as error:
            raise CliError(
                f"{path}:{number}: not a judge trial: {describe_validation_error(error)}", 2
            ) from error
    return found


def _row(call: DecidedCall, answer: JudgeAnswer) -> dict[str, Any]:
    person = "approve" if call.approved else "deny"
    judge = said(answer)
    disagreement = None
    if judge != "escalate" and judge != person:
        disagreement = "would-approve" if judge == "approve" else "would-deny"
    return {
        **call.as_json(),
        "person": person,
        "person_said": one_line(
            f"{person} by {call.approver or 'someone unnamed'}"
            + (f": {call.reason}" if call.reason else "")
        ),
        "judge": judge,
        "judge_said": _judge_said(answer),
        "confidence": answer.confidence,
        "reasons": answer.reasons,
        "why_not": answer.why_not,
        "disagreement": disagreement,
    }


def _judge_said(answer: JudgeAnswer) -> str:
    text = f"{answer.verdict} {answer.confidence:g}"
    if answer.reasons:
        text += f": {answer.reasons}"
    if answer.why_not is not None:
        text += f" (left to a person: {answer.why_not})"
    return one_line(text)
