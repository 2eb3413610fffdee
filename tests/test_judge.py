"""A judge in the approver's seat (issue 67): code that decides held calls before a person does,
signed with its own enrolled key, held to the policies like any approver, and never failing
open — a judge that fails, answers prose or wrong JSON, is unsure or too slow leaves the call to
a person, who sees what it said; a person who decides first wins; in shadow mode it decides
nothing. On the real dev server, with cedarpy and the scripted model over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from orga.cli.journal_text import render_entry
from orga.contracts.audit import AuditChain
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import ApprovalDecided, JudgeConsulted
from orga.contracts.messages import AUDIT_QUERY
from orga.core.signatures import proof_problem
from orga.desk.inbox import inbox
from orga.runtime.approver_keys import public_key_of
from orga.worker.agent_registry import AgentRegistry
from tests import sample_judges
from tests.harness import Harness, scripted_settings
from tests.helpers import (
    JUDGES_DECIDE_SMALL,
    PEOPLE_DECIDE,
    agents_with_judges,
    by_alice,
    decision_policies,
    journal_of,
    judged,
    pay,
)
from tests.sample_tools import transfer


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
