"""A judge in the approver's seat (issue 67): code that decides held calls before a person does,
signed with its own enrolled key, held to the policies like any approver, and never failing
open — a judge that fails, answers prose or wrong JSON, is unsure or too slow leaves the call to
a person, who sees what it said; a person who decides first wins; in shadow mode it decides
nothing. On the real dev server, with cedarpy and the scripted model over HTTP."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import WorkflowHandle

from orga.cli.journal_text import render_entry
from orga.contracts.approvals import PendingApproval
from orga.contracts.audit import AuditChain
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import ApprovalDecided, Journal, JudgeConsulted
from orga.contracts.messages import AUDIT_QUERY
from orga.core.signatures import proof_problem
from orga.desk.approvals import approve
from orga.desk.inbox import inbox
from orga.runtime.approver_keys import generate_key, public_key_of
from orga.scripted.server import Turn
from orga.worker.agent_registry import AgentRegistry
from tests import sample_judges
from tests.harness import Harness, scripted_settings
from tests.helpers import PEOPLE_DECIDE, decision_policies, eventually, pending
from tests.sample_tools import transfer

ALICE = Ed25519PrivateKey.generate()

JUDGES_DECIDE_SMALL = """
@id("judges-decide-small-transfers")
@reason("judges decide transfers of up to 5000; people decide the rest")
forbid (principal in Group::"judges", action in [Action::"approve", Action::"deny"], resource)
when { context.arguments has amount && context.arguments.amount > 5000 };
"""
"""Judges may decide transfers of up to 5 000 (with ``PEOPLE_DECIDE``)."""

JUDGES = {
    "refunds": "small_refunds",
    "fails": "fails",
    "prose": "prose",
    "wrong": "wrong_json",
    "unsure": "unsure",
    "held": "held",
    "strict": "strict_refunds",
    "cautious": "cautious_refunds",
}


def agents_with_judges(tmp_path: Path, **options: str) -> Path:
    """An agent per judge (named as it), each judge with its own key enrolled in group
    ``judges``, and alice (finance) to decide what they leave to a person. ``options``: more
    lines for a judge's table (``refunds='shadow = true'``)."""
    lines: list[str] = []
    for judge, function in JUDGES.items():
        key = generate_key(tmp_path / f"{judge}.pem")
        lines += [
            f"[agents.{judge}]",
            'tools = ["transfer"]',
            f'judge = "{judge}"',
            f"[judges.{judge}]",
            f'code = "tests.sample_judges:{function}"',
            f'key_file = "{judge}.pem"',
            options.get(judge, ""),
            f"[approvers.{judge}]",
            f'key = "{public_key_of(key)}"',
            'groups = ["judges"]',
        ]
    lines += ["[approvers.alice]", f'key = "{public_key_of(ALICE)}"', 'groups = ["finance"]']
    path = tmp_path / "agents.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def pay(harness: Harness, amount: int) -> str:
    return harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": amount, "to": "eve"})]), Turn(text="sent")]
    )


async def judged(handle: WorkflowHandle[object, object]) -> PendingApproval:
    """The waiting call once the judge's opinion is shown with it."""

    async def probe() -> PendingApproval | None:
        waiting = (await pending(handle)).pending_approvals
        return waiting[0] if waiting and waiting[0].judge is not None else None

    return await eventually(probe, f"the judge's opinion on {handle.id}")


async def by_alice(
    harness: Harness, handle: WorkflowHandle[object, object], approved: bool
) -> None:
    [waiting] = (await pending(handle)).pending_approvals
    await approve(
        harness.client, handle.id, waiting.call_id, approved=approved, reason=None,
        approver="alice", key=ALICE,
    )  # fmt: skip


async def journal_of(handle: WorkflowHandle[object, object]) -> Journal:
    return await handle.query("journal", result_type=Journal)


async def test_a_code_judge_approves_a_small_transfer_signed_and_escalates_a_big_one(
    harness: Harness, tmp_path: Path
) -> None:
    settings = scripted_settings(harness.model, agents_file=agents_with_judges(tmp_path))
    async with harness.worker(settings=settings, tools=[transfer]):
        small = await harness.start("pay eve 12", model=pay(harness, 12), agent_id="refunds")
        big = await harness.start("pay eve", model=pay(harness, 999_999), agent_id="refunds")
        assert (await small.result()).output == "sent"
        escalated = await judged(big)
        assert escalated.judge is not None and escalated.judge.verdict == "escalate"
        assert escalated.judge.why_not == "the judge escalated it"
        assert escalated.judge.reasons == "999999 is not small"
        # The person who decides instead sees what the judge said (orga pending, the desk).
        [item] = [i for i in await inbox(harness.client) if i.workflow_id == big.id]
        assert "the judge refunds said escalate (confidence 0.9): 999999 is not small" in (
            item.decided_by or ""
        )
        await by_alice(harness, big, approved=True)
        assert (await big.result()).output == "sent"
        journal, other = await journal_of(small), await journal_of(big)
        chain = await small.query(AUDIT_QUERY, result_type=AuditChain)
    # On the audit chain: what the judge said, then the decision it made.
    kinds = [e.kind for e in chain.entries]
    assert kinds.index("JudgeConsulted") < kinds.index("ApprovalDecided")
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert decided.approved and decided.approver == "refunds" and decided.source == "judge"
    [proof] = decided.decisions
    assert proof.verified and proof.signature and proof.key_fingerprint
    assert proof_problem(small.id, decided.call_id, proof) is None  # what `orga audit` checks
    [consulted] = [e for e in journal.entries if isinstance(e, JudgeConsulted)]
    assert consulted.opinion.decides and consulted.opinion.confidence == 0.95
    [person] = [e for e in other.entries if isinstance(e, ApprovalDecided)]
    assert person.approver == "alice" and person.source == "update"
    [asked] = [e for e in other.entries if isinstance(e, JudgeConsulted)]
    assert not asked.opinion.decides and asked.opinion.verdict == "escalate"
    assert render_entry(asked).endswith(  # orga journal's line
        f"{asked.call_id} transfer: judge refunds said escalate 0.9 (999999 is not small); "
        "left to a person: the judge escalated it"
    )
    assert render_entry(consulted).endswith(
        "judge refunds said approve 0.95 (12 is small); it decided"
    )


async def test_a_judge_that_fails_answers_no_verdict_is_unsure_or_too_slow_escalates(
    harness: Harness, tmp_path: Path
) -> None:
    sample_judges.RELEASE.clear()
    agents = agents_with_judges(tmp_path, held='timeout = "PT1S"')
    settings = scripted_settings(harness.model, agents_file=agents)
    expected = {
        "fails": "the judge failed: RuntimeError: the judge's database is down",
        "prose": "the judge answered str 'Looks fine to me, approve it!', not a verdict",
        "wrong": "the judge answered no verdict",
        "unsure": "the judge is unsure: confidence 0.4 is below the floor 0.8",
        "held": "the judge timed out",
    }
    async with harness.worker(settings=settings, tools=[transfer]):
        handles = {
            judge: await harness.start("pay eve 12", model=pay(harness, 12), agent_id=judge)
            for judge in expected
        }
        for judge, why in expected.items():
            waiting = await judged(handles[judge])
            assert waiting.judge is not None and not waiting.judge.decides
            # What it said: an unsure judge did approve, below the floor; the rest escalated.
            said = "approve" if judge == "unsure" else "escalate"
            assert waiting.judge.verdict == said
            assert (waiting.judge.why_not or "").startswith(why), (judge, waiting.judge)
        for handle in handles.values():  # a person decides each: nothing was decided for them
            await by_alice(harness, handle, approved=False)
            decided = [
                e for e in (await journal_of(handle)).entries if isinstance(e, ApprovalDecided)
            ]
            assert [(d.approver, d.approved) for d in decided] == [("alice", False)]
    sample_judges.RELEASE.set()


async def test_a_person_who_decides_first_wins(harness: Harness, tmp_path: Path) -> None:
    sample_judges.RELEASE.clear()
    settings = scripted_settings(harness.model, agents_file=agents_with_judges(tmp_path))
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay eve 12", model=pay(harness, 12), agent_id="held")
        await by_alice(harness, handle, approved=False)  # the judge has not answered
        assert (await handle.result()).output == "sent"  # the model's answer after the denial
        sample_judges.RELEASE.set()  # the judge would approve now: too late
        journal = await journal_of(handle)
    decided = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert [(d.approver, d.approved, d.source) for d in decided] == [("alice", False, "update")]
    assert not [e for e in journal.entries if isinstance(e, JudgeConsulted) and e.opinion.decides]


async def test_cedar_keeps_the_judge_from_a_call_reserved_for_people(
    harness: Harness, tmp_path: Path
) -> None:
    """The policy lets judges decide transfers up to 5 000; the judge is sure of 8 000 (it
    approves anything under 10 000) and is refused: alice decides."""
    policies = decision_policies(tmp_path / "policies", PEOPLE_DECIDE + JUDGES_DECIDE_SMALL)
    agents = agents_with_judges(tmp_path)
    settings = scripted_settings(harness.model, agents_file=agents, policy_dir=policies)
    async with harness.worker(settings=settings, tools=[transfer]):
        small = await harness.start(
            "pay eve", model=pay(harness, 300), agent_id="refunds", policy="cedar"
        )
        reserved = await harness.start(
            "pay eve", model=pay(harness, 8_000), agent_id="refunds", policy="cedar"
        )
        assert (await small.result()).output == "sent"
        waiting = await judged(reserved)
        assert waiting.judge is not None and waiting.judge.verdict == "approve"
        assert "judges decide transfers of up to 5000" in (waiting.judge.why_not or "")
        await by_alice(harness, reserved, approved=True)
        assert (await reserved.result()).output == "sent"
        journal = await journal_of(reserved)
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert decided.approver == "alice"


async def test_in_shadow_mode_the_judge_records_its_verdict_and_decides_nothing(
    harness: Harness, tmp_path: Path
) -> None:
    agents = agents_with_judges(tmp_path, refunds="shadow = true")
    settings = scripted_settings(harness.model, agents_file=agents)
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay eve 12", model=pay(harness, 12), agent_id="refunds")
        waiting = await judged(handle)
        assert waiting.judge is not None and waiting.judge.verdict == "approve"
        assert waiting.judge.why_not == "the judge is in shadow mode: a person decides"
        await by_alice(harness, handle, approved=False)
        await handle.result()
        journal = await journal_of(handle)
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approver, decided.approved) == ("alice", False)
    [consulted] = [e for e in journal.entries if isinstance(e, JudgeConsulted)]
    assert consulted.opinion.verdict == "approve" and not consulted.opinion.decides


def test_a_judge_that_cannot_run_or_is_not_enrolled_stops_the_worker(tmp_path: Path) -> None:
    from orga.activities.judges import load_judges

    def loaded(agents: Path) -> None:
        registry = AgentRegistry.load(agents, frozenset({"default"}))
        load_judges(registry.judges, registry.approvers, registry.folder, registry.origin)

    agents = agents_with_judges(tmp_path)
    loaded(agents)  # as written: every judge runs
    text = agents.read_text()
    cases = {
        "tests.sample_judges:nowhere": "is not a callable",
        "tests.no_such_module:judge": "cannot import",
    }
    for code, why in cases.items():
        agents.write_text(text.replace("tests.sample_judges:small_refunds", code))
        with pytest.raises(InvalidConfig, match=why):
            loaded(agents)
    # Its key is not the one enrolled for it.
    other = public_key_of(Ed25519PrivateKey.generate())
    enrolled = text.split("[approvers.refunds]\nkey = ")[1].split("\n")[0]
    agents.write_text(text.replace(enrolled, f'"{other}"'))
    with pytest.raises(InvalidConfig, match="signs with a key not enrolled for it"):
        loaded(agents)
    # Its key file is readable by others.
    agents.write_text(text)
    (tmp_path / "refunds.pem").chmod(0o644)
    with pytest.raises(InvalidConfig, match="others may read this private key"):
        loaded(agents)
    # An agent names a judge the file does not define.
    (tmp_path / "refunds.pem").chmod(0o600)
    agents.write_text(text.replace('judge = "refunds"', 'judge = "nobody"'))
    with pytest.raises(InvalidConfig, match="names the judge 'nobody'"):
        loaded(agents)


async def test_an_ag_ui_client_is_interrupted_only_when_the_judge_leaves_a_call_to_a_person(
    harness: Harness, tmp_path: Path
) -> None:
    """A thread of agent ``refunds`` through the AG-UI endpoint: the judge approves a transfer
    of 12 and the run goes on without an interrupt; it escalates one of 999 999, and the
    interrupt says what it said."""
    from tests.test_agui import _input, _run, _setup

    model = harness.new_model(
        [
            Turn(tool_calls=[("transfer", {"amount": 12, "to": "bo"})]),
            Turn(text="Sent 12."),
            Turn(tool_calls=[("transfer", {"amount": 999_999, "to": "bo"})]),
        ]
    )
    agents = agents_with_judges(tmp_path)
    (app, settings), tokens = _setup(harness, tmp_path, model, agents, agent_id="refunds")
    thread = uuid.uuid4().hex
    async with harness.worker(settings=settings, tools=[transfer]):
        status, first = await _run(app, tokens["ann"], _input(thread, "pay bo 12"))
        assert status == 200 and first[-1]["type"] == "RUN_FINISHED", first
        assert "outcome" not in first[-1] or first[-1]["outcome"]["type"] != "interrupt", first
        assert first[-1]["result"]["output"] == "Sent 12."
        status, second = await _run(app, tokens["ann"], _input(thread, "pay bo 999999"))
        assert status == 200, second
    finished = second[-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    [interrupt] = finished["outcome"]["interrupts"]
    judge = interrupt["metadata"]["orga"]["judge"]
    assert (judge["judge"], judge["verdict"], judge["decides"]) == ("refunds", "escalate", False)
    assert (
        "the judge refunds said escalate (confidence 0.9): 999999 is not small"
        in (interrupt["message"])
    )
