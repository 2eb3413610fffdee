"""Decisions you can prove, tried as an attacker who can reach the namespace: where approvers
are enrolled, only a decision an enrolled approver signed — for this workflow, this call and
these arguments, while the call waits, never twice — is recorded; where none are, every
surface says the decision is unverified. Four eyes: a tool can need two distinct approvers."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from orga.contracts.approvals import ApprovalDecision, ApprovalRecord, PendingApproval
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import ApprovalDecided, Journal, PolicyEvaluated
from orga.desk.approvals import approve, said
from orga.desk.facts import DeskError
from orga.desk.inbox import inbox
from orga.runtime.approver_keys import generate_key, public_key_of, sign_decision
from orga.scripted.server import Turn
from orga.worker import agent_registry
from orga.worker.agent_registry import AgentRegistry, load_approvers
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import PEOPLE_DECIDE, conversation, decision_policies, on, orga, pending
from tests.sample_tools import transfer

ALICE, BOB, MALLORY = (Ed25519PrivateKey.generate() for _ in range(3))


def approvers_file(tmp_path: Path, **people: Ed25519PrivateKey) -> Path:
    path = tmp_path / "approvers.toml"
    path.write_text(
        "".join(
            f'[approvers.{name}]\nkey = "{public_key_of(key)}"\ngroups = ["finance"]\n'
            for name, key in people.items()
        )
    )
    return path


async def refused(
    handle: WorkflowHandle[object, object], decision: ApprovalDecision, *, waits: bool = True
) -> str:
    """The validator's reason for refusing ``decision``; while the loop ``waits`` (does
    nothing else), that nothing was written to its history."""
    before = len((await handle.fetch_history()).events)
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await handle.execute_update("approve", decision)
    if waits:
        assert len((await handle.fetch_history()).events) == before
    return str(failed.value.cause)


def signed(
    workflow_id: str, waiting: PendingApproval, key: Ed25519PrivateKey, **fields: object
) -> ApprovalDecision:
    decision = ApprovalDecision.model_validate(
        {"call_id": waiting.call_id, "approved": True, **fields}
    )
    return sign_decision(decision, workflow_id=workflow_id, pending=waiting, key=key)


async def test_where_approvers_are_enrolled_only_their_signed_decision_is_recorded(
    harness: Harness, tmp_path: Path
) -> None:
    settings = scripted_settings(
        harness.model, approvers_file=approvers_file(tmp_path, alice=ALICE, bob=BOB)
    )
    pay = Turn(tool_calls=[("transfer", {"amount": 999_999, "to": "eve"})])
    first = harness.new_model([pay, Turn(text="sent")])
    second = harness.new_model([pay, Turn(text="sent")])
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay eve", model=first, tools=["transfer"])
        other = await harness.start("pay eve again", model=second, tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
        [elsewhere] = (await pending(other)).pending_approvals
        assert waiting.signatures_required and waiting.approvals_needed == 1
        assert waiting.arguments_sha256 and waiting.arguments_sha256 in repr(waiting)

        # The client that started the loop approves its own call under a name it chose.
        claim = ApprovalDecision(
            call_id=waiting.call_id, approved=True, approver="cfo@example.com (second approver)"
        )
        assert "'cfo@example.com (second approver)' is not an enrolled approver" in (
            await refused(handle, claim)
        )
        # The same, under an enrolled name, unsigned.
        unsigned = claim.model_copy(update={"approver": "alice"})
        assert "an unsigned decision is not recorded" in await refused(handle, unsigned)
        # Signed with a key of its own, under alice's name.
        assert "does not hold for alice's enrolled key" in await refused(
            handle, signed(handle.id, waiting, MALLORY, approver="alice")
        )
        # An answer to orga mcp's form, signed with alice's key (as orga mcp once did with the
        # operator's key, whatever the MCP client app answered): never a person's decision.
        assert "an answer to orga mcp's form is the MCP client app's" in await refused(
            handle, signed(handle.id, waiting, ALICE, approver="alice", via="mcp-elicitation")
        )
        # Alice's real signature, moved: made for a call of that id in another workflow.
        moved = signed(other.id, waiting, ALICE, approver="alice")
        assert "does not hold" in await refused(handle, moved)
        # Alice's signature over other arguments than the call waits with.
        altered = waiting.model_copy(update={"arguments_sha256": "0" * 64})
        assert "does not hold" in await refused(
            handle, signed(handle.id, altered, ALICE, approver="alice")
        )
        # Her signature with the reason changed after she signed.
        genuine = signed(handle.id, waiting, ALICE, approver="alice", reason="checked")
        assert "does not hold" in await refused(
            handle, genuine.model_copy(update={"reason": "checked, and pay twice"})
        )
        # A signature made before the call was waiting (an old one kept for later).
        stale = sign_decision(
            ApprovalDecision(call_id=waiting.call_id, approved=True, approver="alice"),
            workflow_id=handle.id,
            pending=waiting,
            key=ALICE,
            now=waiting.since - timedelta(hours=1),
        )
        assert "a replayed or stale signature is refused" in await refused(handle, stale)
        # The signal path is held to the same rule: an unsigned signal is ignored.
        await handle.signal("approval", unsigned)
        assert (await pending(handle)).pending_approvals[0].call_id == waiting.call_id

        # Alice, through the desk (as `orga approve` does), with her key: recorded, verified.
        record = await approve(
            harness.client,
            handle.id,
            waiting.call_id,
            approved=True,
            reason="checked",
            approver="alice",
            key=ALICE,
        )
        assert record.verified and record.complete and record.approver == "alice"
        [proof] = record.decisions
        assert proof.key_fingerprint and proof.key_fingerprint.startswith("SHA256:")
        assert proof.arguments_sha256 == waiting.arguments_sha256
        assert "verified (alice SHA256:" in said(record)
        # Replaying her recorded decision on the same call: refused.
        assert "already decided" in await refused(handle, genuine, waits=False)
        assert (await handle.result()).output == "sent"
        journal = await handle.query("journal", result_type=Journal)

        # The desk refuses, before sending, a decision it cannot sign.
        with pytest.raises(DeskError, match="must be signed by your enrolled key"):
            await approve(
                harness.client,
                other.id,
                elsewhere.call_id,
                approved=False,
                reason="no",
                approver="bob",
            )
        await approve(
            harness.client,
            other.id,
            elsewhere.call_id,
            approved=False,
            reason="no",
            approver="bob",
            key=BOB,
        )
        await other.result()
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert decided.verified and decided.decisions[0].signature == record.decisions[0].signature


async def test_without_enrolled_approvers_every_surface_says_unverified(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 5, "to": "bob"})]), Turn(text="sent")]
    )
    cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url, "ORGA_APPROVER": "anyone"}
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay bob", model=model, tools=["transfer"])
        [waiting] = (await pending(handle)).pending_approvals
        assert not waiting.signatures_required
        code, out, _ = await orga("pending", env=cli)
        assert code == 0 and "unverified: no approvers are enrolled" in out
        code, out, _ = await orga("state", handle.id, env=cli)
        assert code == 0 and "unverified" in out
        code, out, err = await orga("approve", handle.id, waiting.call_id, env=cli)
        assert code == 0, err
        assert "by anyone" in out and "unverified: no approvers are enrolled" in out
        await handle.result()
        code, out, _ = await orga("journal", handle.id, env=cli)
        assert code == 0 and "(update, unverified)" in out
        code, out, _ = await orga("audit", handle.id, "--verify", env=cli)
        assert code == 0 and "1 decision(s) unverified" in out
        journal = await handle.query("journal", result_type=Journal)
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert not decided.verified and not decided.decisions[0].verified


async def test_four_eyes_needs_two_distinct_approvers_and_any_deny_stops_it(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[agents.pay]\ntools = ["transfer"]\napprovals_needed = { "trans*" = 2 }\n\n'
        f'[approvers.alice]\nkey = "{public_key_of(ALICE)}"\n'
        f'[approvers.bob]\nkey = "{public_key_of(BOB)}"\n'
    )
    settings = scripted_settings(harness.model, agents_file=agents)
    pay = Turn(tool_calls=[("transfer", {"amount": 950_000, "to": "eve"})])
    ran = harness.new_model([pay, Turn(text="sent")])
    stopped = harness.new_model([pay, Turn(text="not sent")])
    key_file = tmp_path / "bob.pem"
    generate_key(key_file)  # a key bob has not enrolled: the CLI's refusal names it
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay", model=ran, tools=["transfer"], agent_id="pay")
        [waiting] = (await pending(handle)).pending_approvals
        assert waiting.approvals_needed == 2
        first = await approve(
            harness.client, handle.id, waiting.call_id, approved=True, reason=None,
            approver="alice", key=ALICE,
        )  # fmt: skip
        assert not first.complete and first.verified
        assert "waits for another approver" in said(first)
        [still] = (await pending(handle)).pending_approvals
        assert still.approved_by == ["alice"]
        [item] = [i for i in await inbox(harness.client) if i.workflow_id == handle.id]
        assert item.decided_by and "1 more of 2 distinct approvers (approved by alice)" in (
            item.decided_by
        )
        # Alice again, freshly signed: she cannot be both pairs of eyes.
        assert "alice already approved" in await refused(
            handle, signed(handle.id, still, ALICE, approver="alice")
        )
        # Bob with a key that is not his enrolled one, through the CLI: refused, nothing ran.
        cli = {**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}
        code, _, err = await orga(
            "approve", handle.id, waiting.call_id, "--approver", "bob",
            env={**cli, "ORGA_APPROVER_KEY": str(key_file)},
        )  # fmt: skip
        assert code == 1 and "does not hold for bob's enrolled key" in err
        second = await approve(
            harness.client, handle.id, waiting.call_id, approved=True, reason="ok",
            approver="bob", key=BOB,
        )  # fmt: skip
        assert second.complete and second.verified and second.approver == "alice, bob"
        assert (await handle.result()).output == "sent"

        other = await harness.start("pay", model=stopped, tools=["transfer"], agent_id="pay")
        [waiting] = (await pending(other)).pending_approvals
        await approve(
            harness.client, other.id, waiting.call_id, approved=True, reason=None,
            approver="alice", key=ALICE,
        )  # fmt: skip
        denied = await approve(
            harness.client, other.id, waiting.call_id, approved=False, reason="not today",
            approver="bob", key=BOB,
        )  # fmt: skip
        assert denied.complete and not denied.approved
        assert (await other.result()).output == "not sent"
        code, out, err = await orga("audit", handle.id, "--verify", env=cli)
        assert code == 0, err
        assert "2 signed decision(s), every signature checked again" in out
        journal = await handle.query("journal", result_type=Journal)
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert [p.approver for p in decided.decisions] == ["alice", "bob"] and decided.verified


def test_one_key_under_two_names_is_refused_by_the_worker(tmp_path: Path) -> None:
    """The attack (issue 50): ``carol`` and ``carol-phone`` enrolled with one public key
    counted as two approvers. Every file that enrolls approvers refuses it."""
    twins = approvers_file(tmp_path, carol=ALICE, **{"carol-phone": ALICE})
    with pytest.raises(InvalidConfig, match="'carol' and 'carol-phone' are enrolled with one key"):
        load_approvers(twins)
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[agents.pay]\ntools = ["transfer"]\n\n'
        f'[approvers.carol]\nkey = "{public_key_of(ALICE)}"\n'
        f'[approvers.carol-phone]\nkey = "{public_key_of(ALICE)}"\n'
    )
    with pytest.raises(InvalidConfig, match="enrolled with one key"):
        AgentRegistry.load(agents, frozenset({"default"}))
    # Across the agents file and the approvers file too.
    agents.write_text(
        f'[agents.pay]\ntools = ["transfer"]\n\n[approvers.carol]\nkey = "{public_key_of(ALICE)}"\n'
    )
    phone = approvers_file(tmp_path, **{"carol-phone": ALICE})
    with pytest.raises(InvalidConfig, match="enrolled with one key"):
        AgentRegistry.load(agents, frozenset({"default"})).with_approvers(phone)


async def test_four_eyes_counts_keys_not_names_even_where_a_worker_enrolled_one_key_twice(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were a worker to enroll one key under two names anyway (an older worker, a file that
    skipped the check), the loop itself refuses the second approval by that key: two
    approvals signed by one key never run a call that needs two."""
    monkeypatch.setattr(agent_registry, "one_key_each", lambda *_: None)
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[agents.pay]\ntools = ["transfer"]\napprovals_needed = { "trans*" = 2 }\n\n'
        f'[approvers.carol]\nkey = "{public_key_of(ALICE)}"\n'
        f'[approvers.carol-phone]\nkey = "{public_key_of(ALICE)}"\n'
        f'[approvers.bob]\nkey = "{public_key_of(BOB)}"\n'
    )
    settings = scripted_settings(harness.model, agents_file=agents)
    pay = Turn(tool_calls=[("transfer", {"amount": 950_000, "to": "eve"})])
    model = harness.new_model([pay, Turn(text="sent")])
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay", model=model, tools=["transfer"], agent_id="pay")
        [waiting] = (await pending(handle)).pending_approvals
        first = await approve(
            harness.client, handle.id, waiting.call_id, approved=True, reason=None,
            approver="carol", key=ALICE,
        )  # fmt: skip
        assert not first.complete
        [still] = (await pending(handle)).pending_approvals
        why = await refused(handle, signed(handle.id, still, ALICE, approver="carol-phone"))
        assert "already approved call" in why and "as 'carol'" in why
        assert "one key is one approver" in why
        [still] = (await pending(handle)).pending_approvals
        assert still.approved_by == ["carol"]  # nothing recorded; the call still waits
        second = await approve(
            harness.client, handle.id, waiting.call_id, approved=True, reason="ok",
            approver="bob", key=BOB,
        )  # fmt: skip
        assert second.complete and second.approver == "carol, bob"
        assert (await handle.result()).output == "sent"


def test_an_approvers_file_that_is_wrong_stops_the_worker(tmp_path: Path) -> None:
    bad = tmp_path / "approvers.toml"
    bad.write_text('[approvers.alice]\nkey = "not-a-key"\n')
    with pytest.raises(InvalidConfig, match="not an Ed25519 public key"):
        load_approvers(bad)
    bad.write_text('[approvers.alice]\nkey = "x"\nrole = "cfo"\n')
    with pytest.raises(InvalidConfig, match="unknown keys"):
        load_approvers(bad)
    good = approvers_file(tmp_path, alice=ALICE)
    [alice] = load_approvers(good)
    assert (alice.name, alice.groups) == ("alice", ["finance"])


EDITS_POLICY = (
    PEOPLE_DECIDE
    + """
@id("no-large-transfers")
@reason("transfers over 1000 are never made by an agent")
forbid (principal, action == Action::"call_tool", resource == Tool::"transfer")
when { context.arguments has amount && context.arguments.amount > 1000 };
"""
)


async def test_an_approval_with_edits_runs_the_edited_call_and_the_gate_can_refuse_the_edit(
    harness: Harness, tmp_path: Path
) -> None:
    policies = decision_policies(tmp_path / "policies", EDITS_POLICY)
    settings = scripted_settings(
        harness.model, policy_dir=policies, approvers_file=approvers_file(tmp_path, alice=ALICE)
    )
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 500, "to": "eve"})]), Turn(text="sent")]
    )
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay eve", model=model, tools=["transfer"], policy="cedar")
        [waiting] = (await pending(handle)).pending_approvals

        async def edit(arguments: dict[str, object]) -> ApprovalRecord:
            return await approve(
                harness.client, handle.id, waiting.call_id, approved=True,
                reason="edited", approver="alice", key=ALICE, arguments=arguments,
            )  # fmt: skip

        # The approver raises the amount past what the policy allows: the gate wins.
        with pytest.raises(DeskError, match="over 1000 are never made"):
            await edit({"amount": 5000, "to": "eve"})
        # Arguments the tool's schema refuses.
        with pytest.raises(DeskError, match="the gate refuses the call"):
            await edit({"amount": "lots", "to": "eve"})
        # Alice's signed edit, with the arguments swapped after she signed.
        mine = signed(
            handle.id, waiting, ALICE, approver="alice", arguments='{"amount": 100, "to": "eve"}'
        )
        swapped = mine.model_copy(update={"arguments": '{"amount": 900, "to": "mallory"}'})
        assert "does not hold" in await refused(handle, swapped)
        [still] = (await pending(handle)).pending_approvals
        assert still.call_id == waiting.call_id  # every refusal left the call waiting
        record = await edit({"amount": 100, "to": "eve"})
        assert record.verified and record.arguments == '{"amount": 100, "to": "eve"}'
        assert "runs with edited arguments" in said(record)
        assert (await handle.result()).output == "sent"
        messages = await conversation(handle)
        journal = await handle.query("journal", result_type=Journal)
    [ran] = [r for m in messages if m.role == "tool" for r in m.tool_results]
    assert ran.content == "sent 100 to eve"
    [call] = [c for m in messages if m.role == "assistant" for c in m.tool_calls]
    assert json.loads(call.arguments) == {"amount": 100, "to": "eve"}  # as it ran
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert decided.arguments is not None and '"amount": 500' in decided.arguments
    assert decided.edited_arguments == '{"amount": 100, "to": "eve"}'
    assert decided.decisions[0].approver == "alice" and decided.decisions[0].edited_arguments


async def test_a_policy_says_who_may_approve_what(harness: Harness, tmp_path: Path) -> None:
    """Four eyes by policy: transfers over 100 000 need an approver in finance."""
    policies = decision_policies(tmp_path / "policies")
    roll = tmp_path / "approvers.toml"
    roll.write_text(
        f'[approvers.alice]\nkey = "{public_key_of(ALICE)}"\ngroups = ["finance"]\n'
        f'[approvers.bob]\nkey = "{public_key_of(BOB)}"\n'
    )
    settings = scripted_settings(harness.model, policy_dir=policies, approvers_file=roll)
    big = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 950_000, "to": "eve"})]), Turn(text="sent")]
    )
    small = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 500, "to": "ann"})]), Turn(text="sent")]
    )
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay eve", model=big, tools=["transfer"], policy="cedar")
        other = await harness.start("pay ann", model=small, tools=["transfer"], policy="cedar")
        [waiting] = (await pending(handle)).pending_approvals
        [modest] = (await pending(other)).pending_approvals

        async def decide(workflow_id: str, call_id: str, who: str, key: Ed25519PrivateKey) -> str:
            record = await approve(
                harness.client, workflow_id, call_id, approved=True, reason=None,
                approver=who, key=key,
            )  # fmt: skip
            return record.approver or ""

        with pytest.raises(DeskError, match="need an approver in finance"):
            await decide(handle.id, waiting.call_id, "bob", BOB)
        # The signal path cannot answer a refusal, so it is refused outright.
        await handle.signal("approval", signed(handle.id, waiting, BOB, approver="bob"))
        [still] = (await pending(handle)).pending_approvals
        assert still.call_id == waiting.call_id
        assert await decide(other.id, modest.call_id, "bob", BOB) == "bob"  # a small one
        assert await decide(handle.id, waiting.call_id, "alice", ALICE) == "alice"
        assert (await handle.result()).output == "sent"
        assert (await other.result()).output == "sent"
        journal = await handle.query("journal", result_type=Journal)
    judged = [e for e in journal.entries if isinstance(e, PolicyEvaluated)]
    assert any("people-decide" in d.policy_ids for e in judged for d in e.decisions)
