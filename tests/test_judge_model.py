"""A model judge (issue 67): an agent of the agents file with the operator's criteria decides
held calls through one model call that must be a ``submit_verdict`` tool call. What it answers in
prose, in wrong JSON, too slowly or not at all escalates to a person; a sure verdict is signed
with the judge's key and held to the policies; what it costs is charged to the loop's principal
in the spend ledger and to the loop's books. On the real dev server, with the scripted model
over HTTP."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle

from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.journal import ApprovalDecided, JudgeConsulted
from orga.contracts.principals import PrincipalClaim, SpendLine
from orga.contracts.state import LoopResult, LoopState
from orga.runtime.settings import ModelPrice, Settings
from orga.runtime.spend import SpendLedger
from orga.scripted.server import Raw, Turn
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import (
    CRITERIA,
    agents_with_a_model_judge,
    by_alice,
    eventually,
    journal_of,
    judged,
    pay,
)
from tests.sample_tools import transfer

PRICE = ModelPrice(input=500.0, output=500.0)
"""USD per million tokens: a call served 10 tokens in and 90 out costs 0.05 USD."""


def verdict(verdict: str, confidence: float, reasons: str = "small", delay: float = 0.0) -> Turn:
    return Turn(
        tool_calls=[
            ("submit_verdict", {"verdict": verdict, "confidence": confidence, "reasons": reasons})
        ],
        input_tokens=10,
        output_tokens=90,
        delay=delay,
    )


def priced_judge(harness: Harness, tmp_path: Path, judge_model: str, *more: str) -> Settings:
    """A worker whose agent ``payer`` is judged by ``judge_model`` (priced: a call served costs
    0.05 USD), principals allowed (claims), each loop's spend on its principal's ledger."""
    principals = tmp_path / "principals.toml"
    principals.write_text("")
    return scripted_settings(
        harness.model,
        agents_file=agents_with_a_model_judge(tmp_path, judge_model, *more),
        principals_file=principals,
        model_prices={judge_model: PRICE},
    )


async def start_for(harness: Harness, model: str, user: str) -> WorkflowHandle[Any, LoopResult]:
    handle = await harness.client.start_workflow(
        "ReasoningLoop",
        LoopInput(
            messages=[Message(role="user", content="pay eve")],
            config=LoopConfig(model=model, agent_id="payer"),
            principal=PrincipalClaim(user=user),
        ),
        id=f"loop-{uuid.uuid4().hex[:12]}",
        task_queue=harness.task_queue,
        result_type=LoopResult,
    )
    harness.handles.append(handle)
    return handle


async def test_a_model_judge_decides_a_small_transfer_signed_and_charged_to_the_principal(
    harness: Harness, tmp_path: Path
) -> None:
    judge_model = harness.new_model([verdict("approve", 0.95, "12 cents to a known payee")])
    settings = priced_judge(harness, tmp_path, judge_model)
    user = f"ann-{uuid.uuid4().hex[:8]}"
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await start_for(harness, pay(harness, 12), user)
        result = await handle.result()
        journal = await journal_of(handle)
        state = await handle.query("state", result_type=LoopState)
    assert result.output == "sent"
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approver, decided.approved, decided.source) == ("mj", True, "judge")
    [proof] = decided.decisions
    assert proof.verified and proof.signature
    [consulted] = [e for e in journal.entries if isinstance(e, JudgeConsulted)]
    assert consulted.opinion.decides and consulted.opinion.reasons == "12 cents to a known payee"
    # The judge's model was asked with the criteria, the call as data, and one tool.
    [asked] = harness.model.requests_for(judge_model)
    assert [t["function"]["name"] for t in asked.body["tools"]] == ["submit_verdict"]
    system = asked.body["messages"][0]["content"]
    assert CRITERIA in system
    case = json.loads(asked.body["messages"][1]["content"].split("\n", 1)[1])
    assert case["tool"] == "transfer" and json.loads(case["arguments"])["amount"] == 12
    assert case["task"] == "pay eve"
    # Charged like any model call: to Ann's ledger (only the judge's model is priced here),
    # and to the loop's books (its two model calls and the judge's).
    [line] = SpendLedger(TEST_STORE).lines("day", scope="user", name=user)
    assert line.calls >= 1 and line.spent_usd == 0.05
    assert state.usage.total_tokens >= 100 and state.model_calls == 3


async def test_a_model_judge_that_answers_prose_wrong_json_fails_or_is_slow_escalates(
    harness: Harness, tmp_path: Path
) -> None:
    judge_model = harness.new_model(
        [
            Turn(text="Looks fine to me, approve it!"),  # prose
            verdict("yes", 2.0),  # wrong JSON
            Turn(tool_calls=[("submit_verdict", '{"verdict": "approve", ')]),  # no JSON
            Raw(status=500, body={"error": {"message": "the judge's model is down"}}),
            verdict("approve", 0.99, "late", delay=5.0),  # the judge's timeout is 1 s
        ]
    )
    agents = agents_with_a_model_judge(tmp_path, judge_model, 'timeout = "PT1S"')
    settings = scripted_settings(harness.model, agents_file=agents)
    expected = [
        "the judge answered with stop_reason 'end_turn' and 0 tool call(s), not one "
        "submit_verdict call: a verdict is not taken from prose ('Looks fine to me, approve it!')",
        "the judge answered no verdict",
        "the judge's submit_verdict arguments are no JSON object",
        "the judge failed:",
        "the judge timed out",
    ]
    async with harness.worker(settings=settings, tools=[transfer]):
        for why in expected:
            handle = await harness.start("pay eve", model=pay(harness, 12), agent_id="payer")
            waiting = await judged(handle)
            assert waiting.judge is not None and not waiting.judge.decides
            assert (waiting.judge.why_not or "").startswith(why), (why, waiting.judge)
            await by_alice(harness, handle, approved=False)
            assert (await handle.result()).output == "sent"
            decided = [
                e for e in (await journal_of(handle)).entries if isinstance(e, ApprovalDecided)
            ]
            assert [(d.approver, d.approved) for d in decided] == [("alice", False)]


async def test_a_person_who_decides_first_cancels_the_model_judges_call(
    harness: Harness, tmp_path: Path
) -> None:
    """Nobody pays for a verdict no one needs: the judge's model is slow (20 s); alice decides
    first; the judge's call is cancelled within a heartbeat — its hold on Ann's ledger given
    back, nothing charged — and nothing it might have said is journaled."""
    judge_model = harness.new_model([verdict("approve", 0.99, "late", delay=20.0)])
    settings = priced_judge(harness, tmp_path, judge_model, 'timeout = "PT60S"')
    user = f"ann-{uuid.uuid4().hex[:8]}"
    ledger = SpendLedger(TEST_STORE)

    def line() -> SpendLine | None:
        found = ledger.lines("day", scope="user", name=user)
        return found[0] if found else None

    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await start_for(harness, pay(harness, 12), user)

        async def held() -> SpendLine | None:
            found = line()
            return found if found is not None and found.reserved_usd > 0 else None

        await eventually(held, "the judge's call held on Ann's ledger")
        await by_alice(harness, handle, approved=False)
        assert (await handle.result()).output == "sent"

        async def given_back() -> SpendLine | None:
            found = line()
            return found if found is not None and found.reserved_usd == 0 else None

        settled = await eventually(given_back, "the hold given back", timeout=15)
        journal = await journal_of(handle)
    # The loop's own two calls (unpriced) are counted; the judge's (priced) was cut, not served.
    assert (settled.spent_usd, settled.calls) == (0.0, 2)
    assert not [e for e in journal.entries if isinstance(e, JudgeConsulted)]
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approver, decided.source) == ("alice", "update")


async def test_a_model_judge_goes_through_the_workers_breaker_of_its_model(
    harness: Harness, tmp_path: Path
) -> None:
    """The judge's model answers 500 five times in a row: the worker's breaker of that model
    opens, and the sixth held call is not put to it at all (``ProviderDown``); each escalates
    to a person."""
    from orga.worker.provider_health import THRESHOLD

    down = Raw(status=500, body={"error": {"message": "overloaded"}})
    judge_model = harness.new_model([down] * (THRESHOLD + 1))
    agents = agents_with_a_model_judge(tmp_path, judge_model)
    settings = scripted_settings(harness.model, agents_file=agents)
    said: list[str] = []
    async with harness.worker(settings=settings, tools=[transfer]):
        for _ in range(THRESHOLD + 1):
            handle = await harness.start("pay eve", model=pay(harness, 12), agent_id="payer")
            waiting = await judged(handle)
            assert waiting.judge is not None
            said.append(waiting.judge.why_not or "")
            await by_alice(harness, handle, approved=False)
            await handle.result()
    # The fifth failure in a row takes the model down (that call says so too); the sixth is
    # refused on the worker.
    unavailable, down = said[: THRESHOLD - 1], said[THRESHOLD - 1 :]
    assert all(w.startswith("the judge failed: ProviderUnavailable") for w in unavailable), said
    assert all(w.startswith("the judge failed: ProviderDown") for w in down), said
    assert len(harness.model.requests_for(judge_model)) == THRESHOLD  # the sixth: not asked


async def test_a_model_judge_is_asked_on_the_model_calls_queue(
    harness: Harness, tmp_path: Path
) -> None:
    """With ``ORGA_MODEL_TASK_QUEUE``, a model judge's consultation goes where the loop's
    model calls go — rate-limited with them — and a worker of that queue answers it."""
    judge_model = harness.new_model([verdict("approve", 0.95)])
    queue = f"{harness.task_queue}-model"
    settings = priced_judge(harness, tmp_path, judge_model).model_copy(
        update={"model_task_queue": queue}
    )
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await start_for(harness, pay(harness, 12), f"ann-{uuid.uuid4().hex[:8]}")
        result = await handle.result()
        history = await handle.fetch_history()
    assert result.output == "sent"
    scheduled = {
        e.activity_task_scheduled_event_attributes.activity_type.name: (
            e.activity_task_scheduled_event_attributes.task_queue.name
        )
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    assert scheduled["consult_judge"] == queue and scheduled["call_model"] == queue, scheduled
