"""Audit across resets: a Temporal reset starts a new run from a point of an earlier one, and
the earlier run's later records leave the chain the workflow goes on with. ``orga audit`` shows
every run, ``--verify`` names the runs reset away and what they held, and fails when a reset
dropped a decision or an effect unless the verifier accepts it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from orga.cli.audit_chains import run_ids
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.audit import AuditEntry, Effect, ExportedEntry
from orga.contracts.state import LoopResult
from orga.core.audit import AuditLog, RunFacts, reset_away
from orga.scripted.server import Turn
from orga.server.devserver import temporal_binary
from tests.harness import TEST_STORE, Harness
from tests.helpers import ADDS, eventually, on, orga, pending
from tests.sample_tools import transfer

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def chain(*records: tuple[str, str], base: AuditLog | None = None) -> list[AuditEntry]:
    """Entries of ``(kind, label)`` records, after ``base``'s head."""
    log = AuditLog(base.count, base.head) if base else AuditLog()
    for kind, label in records:
        log.add(kind, {"label": label})
    return log.chain().entries


def ran(event_id: int, call: str) -> Effect:
    return Effect(event_id=event_id, kind="tool", name="transfer", ref=call, outcome="completed")


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_what_a_reset_drops_is_what_the_surviving_history_lacks() -> None:
    # Reset to the first workflow task: the surviving run keeps 3 events, nothing after.
    paid = chain(("PolicyEvaluated", "transfer"), ("ApprovalDecided", "ann"))
    redone = chain(("PolicyEvaluated", "respond"))
    runs = [
        RunFacts("B", at(0), effects=(ran(35, "c1"),)),
        RunFacts("R", at(5), reset_from="B", reset_event=4),
    ]
    [away] = reset_away(runs, "R", {"B": paid, "R": redone})
    assert (away.run_id, away.reset_into, away.reset_event) == ("B", "R", 4)
    assert away.entries == paid and away.effects == [ran(35, "c1")] and away.drops_governance
    assert [entry.kind for entry in away.decisions] == ["ApprovalDecided"]

    # Reset to the last workflow task: the approval and the payment are copied into the new
    # run; only the last task's record is redone.
    last = chain(("PolicyEvaluated", "respond-again"), base=_log(paid))
    [away] = reset_away(
        [
            RunFacts("B", at(0), effects=(ran(35, "c1"),)),
            RunFacts("R", at(5), reset_from="B", reset_event=44),
        ],
        "R",
        {"B": [*paid, *chain(("PolicyEvaluated", "respond"), base=_log(paid))], "R": paid + last},
    )
    assert [entry.record["label"] for entry in away.entries] == ["respond"]
    assert away.effects == [] and not away.drops_governance

    # B continued as new into C; B was then reset: C is off the surviving history entirely.
    # R1 was reset from B, then reset again into R2 at an earlier point: B's payment (event
    # 30) is B's to report, R1 reports only its own (event 45), never B's copy of it.
    runs = [
        RunFacts("B", at(0), effects=(ran(5, "early"), ran(30, "c1"))),
        RunFacts("C", at(1), continued_from="B", effects=(ran(7, "c2"),)),
        RunFacts("R1", at(2), reset_from="B", reset_event=40, effects=(ran(30, "c1"),)),
        RunFacts(
            "R2", at(3), reset_from="R1", reset_event=20, reason="again", effects=(ran(5, "e"),)
        ),
        RunFacts("R1b", at(4), continued_from="R1", effects=(ran(45, "late"),)),
    ]
    b, c, r1, r1b = reset_away(runs, "R2", {})
    assert (b.run_id, [e.ref for e in b.effects]) == ("B", ["c1"])  # event 5 survives in R2
    assert (c.run_id, c.reset_into, c.continued_from, c.effects) == ("C", None, "B", [ran(7, "c2")])
    assert (r1.run_id, r1.reset_into, r1.reason, r1.effects) == ("R1", "R2", "again", [])
    assert [e.ref for e in r1b.effects] == ["late"]


def _log(entries: list[AuditEntry]) -> AuditLog:
    return AuditLog(len(entries), entries[-1].hash)


async def temporal_reset(
    env: WorkflowEnvironment, workflow_id: str, kind: str, run_id: str | None = None
) -> str:
    """``temporal workflow reset --type <kind>`` with the bundled CLI, as an operator (or an
    attacker with the operator's access) would run it. Returns what it printed."""
    process = await asyncio.create_subprocess_exec(
        str(temporal_binary()),
        "workflow",
        "reset",
        "--workflow-id",
        workflow_id,
        *(["--run-id", run_id] if run_id else []),
        "--type",
        kind,
        "--reason",
        "retry from scratch",
        "--address",
        env.client.service_client.config.target_host,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def paid_then_reset(
    env: WorkflowEnvironment,
    harness: Harness,
    kind: str,
    answers: tuple[str, str],
) -> tuple[WorkflowHandle[Any, LoopResult], str, str, str]:
    """A loop whose ``transfer`` of 999 ann approves, and which pays and answers
    ``answers[0]``; then reset (``kind``), its new run answering ``answers[1]`` (the model is
    asked again only if the reset point comes before its answer). Returns the loop's handle, the
    call id, the first run and the reset run (which the harness replays too)."""
    steps = [Turn(tool_calls=[("transfer", {"amount": 999, "to": "mallory"})])]
    model = harness.new_model(steps + [Turn(text=answer) for answer in answers])
    handle = await harness.start("pay", model=model, tools=["transfer"], policy="default")
    waiting = (await pending(handle)).pending_approvals[0]
    await handle.execute_update(
        "approve",
        ApprovalDecision(call_id=waiting.call_id, approved=True, approver="ann", reason="ok"),
    )
    assert (await handle.result()).output == answers[0]
    first_run = handle.result_run_id
    assert first_run is not None
    await temporal_reset(env, handle.id, kind)
    current = harness.client.get_workflow_handle(handle.id, result_type=LoopResult)
    assert (await current.result()).output == answers[1]
    reset_run = (await current.describe()).run_id
    assert reset_run != first_run
    harness.handles.append(harness.client.get_workflow_handle(handle.id, run_id=reset_run))
    return handle, waiting.call_id, first_run, reset_run


async def test_a_reset_cannot_erase_an_approved_refund_from_the_audit(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    exported = tmp_path / "audit.jsonl"
    async with harness.worker(tools=[transfer]):
        # The attacker resets the loop to its first workflow task: the run that approved and
        # paid is no longer the one the workflow goes on with.
        handle, call_id, paid_run, reset_run = await paid_then_reset(
            env, harness, "FirstWorkflowTask", ("paid mallory", "nothing to do")
        )

        code, out, err = await orga("audit", handle.id, "--verify", env=cli)
        assert code == 1, err + out
        assert f"run {paid_run} was reset away (reset into run {reset_run}, which kept its " in out
        assert f"ApprovalDecided        transfer {call_id} approved by ann" in out
        assert f"  effect  tool transfer {call_id}: completed" in out
        assert (
            f"NOT verified: a reset dropped governance from the history the workflow goes on "
            f"with: run {paid_run} held 1 ApprovalDecided and 1 executed effect(s) (transfer "
            f"{call_id})" in out
        )
        assert out.rstrip().endswith(f"--accept-reset {paid_run}")

        code, out, err = await orga("audit", handle.id, "--verify", "--json", env=cli)
        assert code == 1, err
        report = json.loads(out)
        assert report["verified"] is False and report["runs"] == [reset_run]
        [away] = report["reset_away"]
        assert (away["run_id"], away["reset_into"], away["accepted"]) == (
            paid_run,
            reset_run,
            False,
        )
        decided = [e["record"] for e in away["entries"] if e["kind"] == "ApprovalDecided"]
        assert [(d["approver"], d["approved"], d["call_id"]) for d in decided] == [
            ("ann", True, call_id)
        ]
        assert [(e["name"], e["ref"], e["outcome"]) for e in away["effects"]] == [
            ("transfer", call_id, "completed")
        ]

        # Nothing is lost from what orga audit shows and exports: every run, labelled.
        code, out, err = await orga("audit", handle.id, env=cli)
        assert code == 0, err
        assert f"run {reset_run}\n" in out and f"run {paid_run} was reset away" in out
        assert "ApprovalDecided" in out
        code, _, err = await orga("audit", handle.id, "--export", str(exported), env=cli)
        assert code == 0, err
        code, _, err = await orga("audit", handle.id, "--accept-resets", env=cli)
        assert code == 2 and "add --verify" in err

    lines = [ExportedEntry.model_validate_json(line) for line in exported.read_text().splitlines()]
    assert {line.run_id for line in lines if not line.reset_away} == {reset_run}
    away_lines = [line for line in lines if line.reset_away]
    assert {line.run_id for line in away_lines} == {paid_run}
    assert "ApprovalDecided" in [line.kind for line in away_lines]

    # No worker now: the history alone judges the export.
    code, out, err = await orga("audit", handle.id, "--verify", "--chain", str(exported), env=cli)
    assert code == 1 and "NOT verified: a reset dropped governance" in out, err + out
    code, out, err = await orga(
        "audit",
        handle.id,
        "--verify",
        "--chain",
        str(exported),
        "--accept-reset",
        paid_run,
        env=cli,
    )
    assert code == 0, err + out
    assert f"dropped 1 ApprovalDecided and 1 executed effect(s) (transfer {call_id}): " in out
    assert f"accepted what the reset of run {paid_run} dropped" in out
    assert out.splitlines()[-1].startswith(f"verified: {exported} matches the history")
    code, out, err = await orga(
        "audit", handle.id, "--verify", "--chain", str(exported), "--accept-reset", "nope", env=cli
    )
    assert code == 2 and f"--accept-reset 'nope': no run of {handle.id!r}" in err, err

    # An export trimmed of the reset-away run's records does not pass for a full one.
    trimmed = tmp_path / "trimmed.jsonl"
    trimmed.write_text(
        "".join(line.model_dump_json() + "\n" for line in lines if not line.reset_away)
    )
    code, out, err = await orga(
        "audit", handle.id, "--verify", "--chain", str(trimmed), "--accept-resets", env=cli
    )
    assert code == 1, err + out
    assert f"NOT verified: {trimmed}: the history's reset-away runs hold {len(away_lines)} " in out


async def test_a_reset_that_drops_no_decision_or_effect_verifies_and_says_so(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    async with harness.worker(tools=[transfer]):
        # Reset to the last workflow task: the approval and the payment stay in the new run's
        # history; only the last task (the answer) is done again.
        handle, _, first_run, reset_run = await paid_then_reset(
            env, harness, "LastWorkflowTask", ("paid bob", "paid bob")
        )

        code, out, err = await orga("audit", handle.id, "--verify", env=cli)
        assert code == 0, err + out
        assert f"run {first_run} was reset away (reset into run {reset_run}" in out
        assert "it dropped no decision and no effect" in out and "effect  tool" not in out
        last = out.splitlines()[-1]
        assert last.startswith("verified: the workflow's chain matches the history (")
        assert last.endswith("; 1 run(s) reset away without dropping a decision or an effect")

        code, out, err = await orga("audit", handle.id, "--json", env=cli)
        assert code == 0, err
    entries = [ExportedEntry.model_validate(e) for e in json.loads(out)]
    surviving = [e for e in entries if not e.reset_away]
    assert {e.run_id for e in surviving} == {reset_run}
    assert [e.kind for e in surviving].count("ApprovalDecided") == 1
    assert "ApprovalDecided" not in [e.kind for e in entries if e.reset_away]


async def test_resetting_an_earlier_run_reports_the_runs_it_continued_into(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    adds = [Turn(tool_calls=[("add", {"a": i, "b": 1})]) for i in range(ADDS)]
    model = harness.new_model([*adds, Turn(text="counted"), Turn(text="started over")])
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    async with harness.worker():
        handle = await harness.start(
            "count", model=model, tools=["add"], max_iterations=ADDS + 5, max_history_events=200
        )
        assert (await handle.result()).output == "counted"
        first, *continued = await run_ids(harness.client, handle.id)
        assert continued, "meant to continue as new"

        # Reset the first run (not the current one): the runs it continued into are off the
        # history the workflow goes on with too, and only the visibility listing finds them.
        await temporal_reset(env, handle.id, "FirstWorkflowTask", run_id=first)
        current = harness.client.get_workflow_handle(handle.id, result_type=LoopResult)
        assert (await current.result()).output == "started over"
        reset_run = (await current.describe()).run_id
        harness.handles.append(harness.client.get_workflow_handle(handle.id, run_id=reset_run))
        listing = f"WorkflowId = '{handle.id}'"

        async def listed() -> bool:  # visibility catches up with the reset run
            return len([r async for r in harness.client.list_workflows(listing)]) >= 2 + len(
                continued
            )

        await eventually(listed, "the reset run listed")

        code, out, err = await orga("audit", handle.id, "--verify", env=cli)
        assert code == 1, err + out
        assert f"run {first} was reset away (reset into run {reset_run}, " in out
        for run in continued:
            assert f"run {run} was reset away (it continued from run " in out
        flags = [f"--accept-reset {run}" for run in [first, *continued]]
        assert out.rstrip().endswith(" ".join(flags))
        code, out, err = await orga("audit", handle.id, "--verify", "--accept-resets", env=cli)
        assert code == 0, err + out
        assert out.splitlines()[-1].startswith(
            "verified: the workflow's chain matches the history ("
        )
