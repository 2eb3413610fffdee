"""A judge in the approver's seat (issue 67): code that decides held calls before a person does,
signed with its own enrolled key, held to the policies like any approver, and never failing
open — a judge that fails, answers prose or wrong JSON, is unsure or too slow leaves the call to
a person, who sees what it said; a person who decides first wins; in shadow mode it decides
nothing. On the real dev server, with cedarpy and the scripted model over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import CancelledError

from orga.cli.journal_text import render_entry
from orga.contracts.audit import AuditChain
from orga.contracts.errors import InvalidConfig
from orga.contracts.journal import ApprovalDecided, JudgeConsulted
from orga.contracts.messages import AUDIT_QUERY
from orga.core.signatures import proof_problem
from orga.desk.inbox import inbox
from orga.runtime.approver_keys import public_key_of
from orga.scripted.server import Turn
from orga.worker.agent_registry import AgentRegistry
from tests import sample_judges
from tests.harness import Harness, scripted_settings
from tests.helpers import (
    ALICE,
    JUDGES_DECIDE_SMALL,
    PEOPLE_DECIDE,
    agents_with_judges,
    by_alice,
    decision_policies,
    eventually,
    journal_of,
    judged,
    pay,
    pending,
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
    """Alice denies the first transfer while the judge thinks; the model tries another, which
    the judge is asked about too. When the judge answers both, its approval of the first lands
    after alice's decision: journaled, deciding nothing; it decides the second."""
    sample_judges.RELEASE.clear()
    settings = scripted_settings(harness.model, agents_file=agents_with_judges(tmp_path))
    model = harness.new_model(
        [
            Turn(tool_calls=[("transfer", {"amount": 12, "to": "eve"})]),
            Turn(tool_calls=[("transfer", {"amount": 13, "to": "eve"})]),
            Turn(text="sent"),
        ]
    )
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay eve 12", model=model, agent_id="held")
        [first] = (await pending(handle)).pending_approvals
        await by_alice(harness, handle, approved=False)  # the judge has not answered
        await pending(handle, besides=[first.call_id])  # the second call waits
        sample_judges.RELEASE.set()  # the judge answers both
        assert (await handle.result()).output == "sent"
        journal = await journal_of(handle)
    decided = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert [(d.approver, d.approved, d.source) for d in decided] == [
        ("alice", False, "update"),
        ("held", True, "judge"),
    ]
    # (in the order the two answers landed: either may come first)
    said = {e.call_id: e.opinion for e in journal.entries if isinstance(e, JudgeConsulted)}
    late, second = said.pop(first.call_id), said.pop(decided[1].call_id)
    assert not said and late.verdict == "approve" and second.decides
    assert (late.decides, late.why_not) == (False, "a person decided first")


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


async def test_an_answer_that_lands_with_a_persons_decision_is_journaled_and_decides_nothing(
    harness: Harness, tmp_path: Path
) -> None:
    """The judge's answer and alice's decision reach the workflow in one workflow task: while
    the judge (on a worker of activities only) thinks, the workflow worker stops; alice's
    signal arrives and the judge approves; a new workflow worker then sees both at once. Alice
    decides; the judge's approval is journaled and ignored."""
    from temporalio.worker import Worker

    from orga.contracts.approvals import ApprovalDecision
    from orga.contracts.messages import APPROVAL_SIGNAL
    from orga.plugin import OrgaPlugin, http_client
    from orga.runtime.approver_keys import sign_decision
    from tests.harness import TEST_STORE

    sample_judges.RELEASE.clear()
    sample_judges.STARTED.clear()
    settings = scripted_settings(
        harness.model, agents_file=agents_with_judges(tmp_path), sticky_timeout=1.0
    )
    async with http_client() as http:
        plugin = OrgaPlugin(
            tools=[transfer], settings=settings, store=TEST_STORE, http=http, tracing=False
        )

        def workflows() -> Worker:
            return Worker(
                harness.client, task_queue=harness.task_queue, plugins=[plugin],
                no_remote_activities=True,
            )  # fmt: skip

        activities = Worker(
            harness.client,
            task_queue=harness.task_queue,
            activities=plugin.parts(harness.client).activities(),
        )
        async with activities:
            async with workflows():
                handle = await harness.start("pay eve 12", model=pay(harness, 12), agent_id="held")
                harness.handles.append(handle)
                [waiting] = (await pending(handle)).pending_approvals
                await asyncio.wait_for(sample_judges.STARTED.wait(), 30)
            # No workflow worker runs: the decision and the answer wait in history together.
            decision = ApprovalDecision(call_id=waiting.call_id, approved=False, approver="alice")
            signed = sign_decision(decision, workflow_id=handle.id, pending=waiting, key=ALICE)
            await handle.signal(APPROVAL_SIGNAL, signed)
            sample_judges.RELEASE.set()

            async def answered() -> bool | None:
                history = await handle.fetch_history()
                return any(e.HasField("activity_task_completed_event_attributes")
                           for e in history.events) or None  # fmt: skip

            await eventually(answered, "the judge's answer in history")
            async with workflows():
                assert (await handle.result()).output == "sent"
                journal = await journal_of(handle)
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approver, decided.approved, decided.source) == ("alice", False, "signal")
    [consulted] = [e for e in journal.entries if isinstance(e, JudgeConsulted)]
    assert consulted.opinion.verdict == "approve" and not consulted.opinion.decides
    assert consulted.opinion.why_not == "a person decided first"


async def test_a_loop_cancelled_while_its_judge_thinks_cancels_the_judge(
    harness: Harness, tmp_path: Path
) -> None:
    sample_judges.RELEASE.clear()
    sample_judges.STARTED.clear()
    settings = scripted_settings(harness.model, agents_file=agents_with_judges(tmp_path))
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay eve 12", model=pay(harness, 12), agent_id="held")
        await asyncio.wait_for(sample_judges.STARTED.wait(), 30)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as ended:
            await handle.result()
        history = await handle.fetch_history()
        journal = await journal_of(handle)
        sample_judges.RELEASE.set()  # (the worker's shutdown would wait for it)
    assert isinstance(ended.value.cause, CancelledError)
    assert any(
        e.HasField("activity_task_cancel_requested_event_attributes") for e in history.events
    )
    assert not [e for e in journal.entries if isinstance(e, ApprovalDecided | JudgeConsulted)]


async def test_a_tasks_agent_judges_its_held_steps(harness: Harness, tmp_path: Path) -> None:
    """A task of agent ``refunds``: the judge approves the step that pays 12 (signed), and
    leaves the one that pays 999 999 to alice, who sees why."""
    from orga.contracts.approvals import ApprovalDecision
    from orga.contracts.task import TaskState
    from orga.runtime.approver_keys import sign_decision

    steps = [
        {"id": f"pay-{n}", "action": {"kind": "tool", "tool": "transfer",
                                      "arguments": {"amount": n, "to": "eve"}}}
        for n in (12, 999_999)
    ]  # fmt: skip
    settings = scripted_settings(harness.model, agents_file=agents_with_judges(tmp_path))
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start_task(steps, agent_id="refunds")

        async def escalated() -> TaskState | None:
            state = await handle.query("state", result_type=TaskState)
            waiting = state.pending_approvals
            return state if waiting and waiting[0].judge is not None else None

        [waiting] = (await eventually(escalated, "the judge's opinion")).pending_approvals
        assert waiting.judge is not None and waiting.judge.reasons == "999999 is not small"
        decision = ApprovalDecision(call_id=waiting.call_id, approved=True, approver="alice")
        signed = sign_decision(decision, workflow_id=handle.id, pending=waiting, key=ALICE)
        await handle.execute_update("approve", signed)
        result = await handle.result()
        journal = await journal_of(handle)
    assert result.status == "completed", result
    decided = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert all(e.approved for e in decided) and all(e.decisions[0].verified for e in decided)
    assert sorted((e.approver, e.source) for e in decided) == [
        ("alice", "update"),
        ("refunds", "judge"),
    ]
    consulted = [e.opinion.decides for e in journal.entries if isinstance(e, JudgeConsulted)]
    assert sorted(consulted) == [False, True]


async def test_a_judge_signs_only_its_own_workflows_call_as_it_was_shown_it(
    tmp_path: Path,
) -> None:
    """What another workflow on the task queue can send the ``consult_judge`` activity: a
    request naming a victim's call, or showing the judge 12 while the signature would name
    999 999 (a case and a pending call that differ, or a hash that is not the arguments'). The
    judge signs none of them; an honest request is signed for the workflow that asked."""
    import dataclasses
    from datetime import UTC, datetime

    from temporalio.testing import ActivityEnvironment

    from orga.activities.judges import JudgeActivities, load_judges
    from orga.contracts.approvals import PendingApproval
    from orga.contracts.judges import JudgeCase, JudgeRequest
    from orga.core.signatures import decision_text, sha256_text, signature_holds

    registry = AgentRegistry.load(agents_with_judges(tmp_path), frozenset({"default"}))
    judges = load_judges(registry.judges, registry.approvers, registry.folder, registry.origin)
    activities = JudgeActivities(judges)
    small, big = '{"amount": 12, "to": "eve"}', '{"amount": 999999, "to": "eve"}'

    def request(
        workflow_id: str, shown: str, signed: str, digest: str | None = None
    ) -> JudgeRequest:
        case = JudgeCase(
            workflow_id=workflow_id, agent="refunds", task="pay", call_id="c1",
            tool="transfer", arguments=shown, reason="transfers need a person",
        )  # fmt: skip
        pending = PendingApproval(
            call_id="c1", tool="transfer", arguments=signed, reason="transfers need a person",
            since=datetime.now(UTC), arguments_sha256=digest or sha256_text(signed),
            signatures_required=True,
        )  # fmt: skip
        return JudgeRequest(judge="refunds", case=case, pending=pending)

    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="attacker")
    forged = [
        request("victim", small, small),  # another workflow's call
        request("attacker", small, big),  # shown 12, would sign 999 999
        request("attacker", small, small, digest=sha256_text(big)),  # a hash of other arguments
    ]
    for each in forged:
        answer = await env.run(activities.consult_judge, each)
        assert answer.decision is None and answer.verdict == "escalate", answer
        assert (answer.why_not or "").startswith("the request is refused"), answer
    honest = request("attacker", small, small)
    decision = (await env.run(activities.consult_judge, honest)).decision
    assert decision is not None and decision.approved
    assert decision.signature is not None and decision.signed_at is not None
    signed = decision_text(
        workflow_id="attacker", call_id="c1", approved=True, arguments_sha256=sha256_text(small),
        edited_arguments=None, reason=decision.reason, approver="refunds", via=None,
        signed_at=decision.signed_at,
    )  # fmt: skip
    [enrolled] = [a.public_key for a in registry.approvers if a.name == "refunds"]
    assert signature_holds(enrolled, signed, decision.signature)
