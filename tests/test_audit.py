"""The audit chain: every governance record hash-chained in workflow state, across
continue-as-new, and ``orga audit --verify`` rebuilding it from history (a worker need not run)
and finding a tampered export."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from orga.cli.audit_chains import run_ids
from orga.cli.audit_runs import read_execution
from orga.cli.audit_verify import chain_problem, verify_chain
from orga.contracts.approvals import ApprovalDecision
from orga.contracts.audit import GENESIS, AuditChain, AuditEntry
from orga.core.audit import AuditLog, entry_hash, first_broken_link, first_difference
from orga.scripted.server import Turn
from tests.harness import TEST_STORE, Harness
from tests.helpers import ADDS, SHOP_STEPS, on, orga, pending
from tests.sample_tools import transfer


def test_a_chain_links_every_entry_to_the_one_before() -> None:
    log = AuditLog()
    log.add("PolicyEvaluated", {"tool": "add", "effect": "allow"})
    log.add("ApprovalDecided", {"approver": "ann", "approved": True})
    first = log.chain()
    assert first.entries[0].prev == GENESIS and first.entries[1].prev == first.entries[0].hash
    assert first_broken_link(first.entries) is None
    following = AuditLog(log.count, log.head)  # the next run, after continue-as-new
    following.add("PolicyEvaluated", {"tool": "add", "effect": "deny"})
    whole = [*first.entries, *following.chain().entries]
    assert [e.index for e in whole] == [0, 1, 2] and first_broken_link(whole) is None
    forged = whole[1].model_copy(update={"record": {"approver": "eve", "approved": True}})
    assert first_broken_link([whole[0], forged, whole[2]]) == (
        "entry 1 (line 2): its hash does not match its content"
    )
    resealed = forged.model_copy(
        update={"hash": entry_hash(forged.prev, 1, forged.kind, forged.record)}
    )
    assert "entry 2 (line 3): its prev does not match" in (
        first_broken_link([whole[0], resealed, whole[2]]) or ""
    )
    assert first_difference(whole, [whole[0], resealed]) == (
        "entry 1 (line 2) differs from the history (record, hash)"
    )
    assert first_difference(whole, whole[:2]) == (
        "the history holds 3 entries, the chain checked holds 2"
    )


def test_a_running_workflows_chain_may_stop_short_of_its_history() -> None:
    """A running workflow's state is read before its history: the history may hold entries
    appended since (``newer``), and the state's chain must be the start of it."""
    log = AuditLog()
    for tool in ("add", "transfer", "add"):
        log.add("PolicyEvaluated", {"tool": tool, "effect": "allow"})
    history = list(log.chain().entries)
    assert chain_problem(history, history[:2], newer=1) is None
    assert chain_problem(history, history[:2], newer=0) is not None  # a closed one may not
    forged = history[1].model_copy(update={"record": {"tool": "transfer", "effect": "deny"}})
    assert chain_problem(history, [history[0], forged], newer=1) is not None


async def test_a_running_loop_verifies_though_its_chain_grew_after_its_history_was_read(
    env: WorkflowEnvironment,
    harness: Harness,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Found by the docs walk: `orga audit --verify` read a running loop's history, then its
    state, which had grown meanwhile, and reported NOT verified."""
    for name, value in {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}.items():
        monkeypatch.setenv(name, value)
    model = harness.new_model(
        [
            Turn(tool_calls=[("transfer", {"amount": 9, "to": "ann"})]),
            Turn(tool_calls=[("transfer", {"amount": 5, "to": "bo"})]),
            Turn(text="paid both"),
        ]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start(
            "pay ann and bo", model=model, tools=["transfer"], policy="default"
        )
        first = (await pending(handle)).pending_approvals[0].call_id
        read_before = await read_execution(harness.client, handle.id)
        await handle.execute_update(
            "approve", ApprovalDecision(call_id=first, approved=True, approver="ann", reason="ok")
        )
        await pending(handle, besides=[first])  # the chain grew: a decision, a policy check
        capsys.readouterr()
        assert await verify_chain(harness.client, read_before, None, None, as_json=True) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["verified"] and report["problem"] is None
        kinds = [e.kind for e in (await handle.query("audit", result_type=AuditChain)).entries]
        assert report["entries"] == len(kinds) and "ApprovalDecided" in kinds
        await handle.terminate("done")


async def test_verified_from_history_and_a_tampered_export_found(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 9, "to": "ann"})])]
        + [Turn(tool_calls=[("add", {"a": i, "b": 1})]) for i in range(ADDS)]
        + [Turn(text="paid ann and counted")]
    )
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    async with harness.worker(tools=[transfer]):
        handle = await harness.start(
            "pay ann, then count",
            model=model,
            tools=["transfer", "add"],
            policy="default",
            max_iterations=ADDS + 5,
            max_history_events=200,
        )
        waiting = (await pending(handle)).pending_approvals[0]
        await handle.execute_update(
            "approve",
            ApprovalDecision(call_id=waiting.call_id, approved=True, approver="ann", reason="ok"),
        )
        result = await handle.result()
        assert result.output == "paid ann and counted"

        code, out, err = await orga("audit", handle.id, "--json", env=cli)
        assert code == 0, err
        held = [AuditEntry.model_validate(e) for e in json.loads(out)]
        code, out, err = await orga("audit", handle.id, env=cli)
        assert code == 0, err
        assert "ApprovalDecided" in out and held[-1].hash[:12] in out
        code, out, err = await orga("audit", handle.id, "--verify", env=cli)
        assert code == 0, err + out
        assert f"verified: the workflow's chain matches the history ({len(held)} entries" in out
        exported = tmp_path / "audit.jsonl"
        code, _, err = await orga("audit", handle.id, "--export", str(exported), env=cli)
        assert code == 0, err

    assert len(await run_ids(harness.client, handle.id)) >= 2, "meant to continue as new"
    kinds = [e.kind for e in held]
    # the payment, each add, and the answer (Action::"respond") passed the gate
    assert kinds.count("PolicyEvaluated") == 1 + ADDS + 1 and kinds.count("ApprovalDecided") == 1
    assert [e.index for e in held] == list(range(len(held)))
    decided = held[kinds.index("ApprovalDecided")]
    assert (decided.record["approver"], decided.record["approved"]) == ("ann", True)

    # No worker runs now: the history alone checks the export.
    code, out, err = await orga("audit", handle.id, "--verify", "--chain", str(exported), env=cli)
    assert code == 0, err + out
    assert "matches the history" in out

    lines = exported.read_text().splitlines()
    at = kinds.index("ApprovalDecided")
    forged: dict[str, Any] = json.loads(lines[at])
    forged["record"]["approver"] = "mallory"
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join([*lines[:at], json.dumps(forged), *lines[at + 1 :]]) + "\n")
    code, out, err = await orga("audit", handle.id, "--verify", "--chain", str(tampered), env=cli)
    assert code == 1, err + out
    assert f"NOT verified: {tampered}: entry {at} (line {at + 1}): its hash does not match" in out

    # A forger who re-seals every hash after the change passes the link check; the history
    # still tells.
    resealed = [AuditEntry.model_validate_json(line) for line in lines]
    prev = resealed[at - 1].hash if at else GENESIS
    for position in range(at, len(resealed)):
        entry = resealed[position]
        record = forged["record"] if position == at else entry.record
        digest = entry_hash(prev, entry.index, entry.kind, record)
        resealed[position] = entry.model_copy(
            update={"record": record, "prev": prev, "hash": digest}
        )
        prev = digest
    assert first_broken_link(resealed) is None
    tampered.write_text("".join(e.model_dump_json() + "\n" for e in resealed))
    code, out, err = await orga("audit", handle.id, "--verify", "--chain", str(tampered), env=cli)
    assert code == 1, err + out
    assert f"entry {at} (line {at + 1}) differs from the history (record, hash)" in out

    code, out, err = await orga("audit", "loop-nonexistent", "--verify", env=cli)
    assert code == 1 and "there is no workflow 'loop-nonexistent'" in err


async def test_a_tasks_compensations_are_on_its_chain(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    from tests.sample_tools import Shop

    shop = Shop()
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
    async with harness.worker(tools=shop.tools):
        handle = await harness.start_task(SHOP_STEPS, policy={"max_reattempts_per_step": 1})
        with contextlib.suppress(WorkflowFailureError):
            await handle.result()
        code, out, err = await orga("audit", handle.id, "--json", env=cli)
        assert code == 0, err
        verified = await orga("audit", handle.id, "--verify", env=cli)
    kinds = [AuditEntry.model_validate(e).kind for e in json.loads(out)]
    assert kinds.count("CompensationSettled") == 2 and "PolicyEvaluated" in kinds
    code, out, err = verified
    assert code == 0 and "verified: the workflow's chain matches the history" in out, err + out
