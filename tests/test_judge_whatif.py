"""A judge tried before it is trusted (issue 67): ``orga judge what-if`` runs a judge over the
calls people already decided — read from real histories of the dev server, replayed, no worker
needed — and lists exactly where it disagrees with them; ``orga judge record`` / ``test`` turn
those calls into trials."""

from __future__ import annotations

import gc
import json
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from orga.contracts.judges import JudgeTrial
from orga.scripted.server import RecordedRequest, Turn
from tests.harness import API_KEYS, TEST_STORE, Harness, scripted_settings
from tests.helpers import (
    ESCAPES,
    agents_with_judges,
    assert_shown_safely,
    by_alice,
    crafted,
    on,
    orga,
    pay,
)
from tests.sample_tools import transfer

DECIDED = [
    # (amount, the person approves it)
    (12, True),
    (300, True),
    (5_000, False),
    (999_999, False),
    (20_000, True),
    (40, True),
    (9_999, False),
    (1, True),
    (15_000, False),
    (70, True),
]
"""Ten calls alice decided. ``refunds`` approves under 10 000 and escalates the rest: it would
have approved 5 000 and 9 999, which she denied. ``strict`` approves under 100 and denies the
rest: it would have denied 300 and 20 000, which she approved (and denied 9 999, as she did).
``cautious`` approves under 5 000 and escalates the rest: it never disagrees."""


def agents_file(tmp_path: Path) -> Path:
    """The tests' judges, and agent ``plain`` (transfers, no judge: people decide)."""
    path = agents_with_judges(tmp_path)
    path.write_text(path.read_text() + '[agents.plain]\ntools = ["transfer"]\n')
    return path


async def ten_decided_calls(harness: Harness) -> dict[int, str]:
    """The ten calls of ``DECIDED``, each a loop of agent ``plain`` alice decided: the
    workflow id of each amount."""
    handles = {
        amount: await harness.start("pay eve", model=pay(harness, amount), agent_id="plain")
        for amount, _ in DECIDED
    }
    for amount, approved in DECIDED:
        await by_alice(harness, handles[amount], approved=approved)  # once it waits
    for handle in handles.values():
        await handle.result()
    return {amount: handle.id for amount, handle in handles.items()}


def env_of(env: WorkflowEnvironment, harness: Harness, agents: Path) -> dict[str, str]:
    return {**on(env, harness), "ORGA_AGENTS": str(agents)}


async def what_if(judge: str, environment: dict[str, str]) -> tuple[int, dict[str, Any], str]:
    code, out, err = await orga(
        "judge", "what-if", judge, "--since", "1h",
        "--task-queue", environment["ORGA_TASK_QUEUE"], "--json",
        env=environment,
    )  # fmt: skip
    assert out.startswith("{"), (out[:1500], err[:1500])
    return code, json.loads(out), err


async def test_what_if_lists_exactly_the_disagreements_and_trials_replay_them(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    agents = agents_file(tmp_path)
    settings = scripted_settings(harness.model, agents_file=agents)
    async with harness.worker(settings=settings, tools=[transfer]):
        ids = await ten_decided_calls(harness)
    # No worker runs now: the histories are read and replayed here.
    environment = env_of(env, harness, agents)
    code, said, err = await what_if("refunds", environment)
    assert code == 1, err
    assert said["summary"] == {
        "judge": "refunds",
        "workflows": 10,
        "calls": 10,
        "agree": 5,
        "left_to_a_person": 3,
        "disagreements": {"would-approve": 2},
        "unreadable": 0,
    }
    found = {(d["workflow_id"], d["disagreement"], d["person"]) for d in said["disagreements"]}
    assert found == {
        (ids[5_000], "would-approve", "deny"),
        (ids[9_999], "would-approve", "deny"),
    }
    code, said, err = await what_if("strict", environment)
    assert code == 1, err
    found = {(d["workflow_id"], d["disagreement"]) for d in said["disagreements"]}
    assert found == {(ids[300], "would-deny"), (ids[20_000], "would-deny")}
    code, said, err = await what_if("cautious", environment)
    assert code == 0, err
    assert said["summary"]["disagreements"] == {} and said["summary"]["agree"] == 5
    # What a person reads: each disagreement with both sides, then the summary.
    code, out, err = await orga(
        "judge", "what-if", "refunds", "--since", "1h",
        "--task-queue", environment["ORGA_TASK_QUEUE"], env=environment,
    )  # fmt: skip
    assert code == 1, err
    assert f"would-approve  {ids[5_000]}  " in out
    assert "  person  deny by alice" in out
    assert "  judge   approve 0.95: 5000 is small" in out
    assert out.rstrip().endswith(
        "2 disagreement(s) in 10 call(s) people decided in 10 workflow(s): would-approve 2; "
        "5 agree, 3 left to a person"
    )
    # The same calls as trials, each expecting alice's decision.
    trials = tmp_path / "trials.jsonl"
    code, out, err = await orga(
        "judge", "record", "--since", "1h", "--task-queue", environment["ORGA_TASK_QUEUE"],
        "--out", str(trials), env=environment,
    )  # fmt: skip
    assert (code, out.strip()) == (0, f"wrote 10 trial(s) to {trials}"), err
    recorded = [JudgeTrial.model_validate_json(line) for line in trials.read_text().splitlines()]
    assert sorted((json.loads(t.case.arguments)["amount"], t.expect) for t in recorded) == sorted(
        (amount, "approve" if approved else "deny") for amount, approved in DECIDED
    )
    code, out, err = await orga("judge", "test", "refunds", str(trials), env=environment)
    assert code == 1, err
    failing = sorted(line for line in out.splitlines() if line.startswith("FAIL"))
    assert [line.split()[1] for line in failing] == sorted(ids[a] for a in (5_000, 9_999))
    assert all(": expected deny, got approve 0.95: " in line for line in failing), failing
    assert out.rstrip().endswith("8 of 10 trial(s) pass for judge refunds")
    code, out, err = await orga("judge", "test", "cautious", str(trials), env=environment)
    assert (code, out.strip()) == (0, "10 of 10 trial(s) pass for judge cautious"), err
    code, out, err = await orga(
        "judge", "test", "cautious", str(trials), "--strict", env=environment
    )
    assert code == 1 and out.rstrip().endswith("5 of 10 trial(s) pass for judge cautious"), err


async def test_a_model_judge_is_tried_with_the_clis_provider_and_a_bad_judge_is_exit_2(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """A model judge answering by the amount it is shown: sure approve under 10 000, prose
    otherwise (left to a person)."""

    def answer(request: RecordedRequest) -> Turn:
        case = json.loads(request.body["messages"][1]["content"].split("\n", 1)[1])
        amount = json.loads(case["arguments"])["amount"]
        if amount < 10_000:
            reply = {"verdict": "approve", "confidence": 0.9, "reasons": "small"}
            return Turn(tool_calls=[("submit_verdict", reply)])
        return Turn(text="Hmm, that is a lot of money.")

    judge_model = harness.new_model([answer] * len(DECIDED))
    agents = agents_file(tmp_path)
    agents.write_text(
        agents.read_text()
        + f'[agents.judge-agent]\nprovider = "openai"\nmodel = "{judge_model}"\n'
        + '[judges.by-model]\nagent = "judge-agent"\nkey_file = "nowhere.pem"\n'
        + 'criteria = "Approve transfers under 10000."\n'
    )
    (tmp_path / "worker").mkdir()
    async with harness.worker(
        settings=scripted_settings(harness.model, agents_file=agents_file(tmp_path / "worker")),
        tools=[transfer],
    ):
        ids = await ten_decided_calls(harness)
    environment = {
        **env_of(env, harness, agents),
        "OPENAI_BASE_URL": harness.model.openai_base_url,
        "OPENAI_API_KEY": API_KEYS["openai"],
    }
    code, said, err = await what_if("by-model", environment)
    assert code == 1, err
    assert said["summary"]["disagreements"] == {"would-approve": 2}
    assert {d["workflow_id"] for d in said["disagreements"]} == {ids[5_000], ids[9_999]}
    [prose, *_] = [c for c in said["calls"] if c["judge"] == "escalate"]
    assert "a verdict is not taken from prose" in prose["why_not"]
    assert len(harness.model.requests_for(judge_model)) == len(DECIDED)
    # A judge the file does not define, and a trials file that is no trials file: exit 2.
    code, out, err = await orga("judge", "what-if", "nobody", env=environment)
    assert code == 2 and "defines no judge 'nobody'" in err, (out, err)
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"case": 1}\n')
    code, out, err = await orga("judge", "test", "refunds", str(junk), env=environment)
    assert code == 2 and "junk.jsonl:1: not a judge trial" in err, (out, err)


def test_the_example_judges_approve_only_a_whole_refund_within_their_limit() -> None:
    """``examples.judges`` (the docs' candidates): an issue_refund of a whole, positive amount
    within the limit is approved; anything else — over it, another tool, an amount that is a
    bool, a string or missing, arguments that are no JSON object — is left to a person."""
    from examples.judges import up_to_1000, up_to_5000
    from orga.contracts.judges import JudgeCase

    def case(arguments: str, tool: str = "issue_refund") -> JudgeCase:
        return JudgeCase(
            workflow_id="w", agent="shop", task="t", call_id="c", tool=tool,
            arguments=arguments, reason="approval required",
        )  # fmt: skip

    assert up_to_5000(case('{"amount": 5000}')).verdict == "approve"
    assert up_to_1000(case('{"amount": 1000}')).verdict == "approve"
    for left in (
        up_to_1000(case('{"amount": 1500}')),
        up_to_5000(case('{"amount": 5001}')),
        up_to_5000(case('{"amount": 12}', tool="transfer")),
        up_to_5000(case('{"amount": true}')),
        up_to_5000(case('{"amount": "12"}')),
        up_to_5000(case('{"amount": 0}')),
        up_to_5000(case("{}")),
        up_to_5000(case("[1, 2]")),
        up_to_5000(case("not json")),
    ):
        assert left.verdict == "escalate", left


async def test_a_crafted_history_is_set_aside_and_what_a_model_wrote_is_shown_safely(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """A ``ReasoningLoop`` written by a process that answered its workflow task itself does not
    replay: it is set aside and named on stderr, and the what-if goes on (exit 1: incomplete).
    A payee the model wrote with terminal escapes and a bidi override reaches the output as
    visible stand-ins, never obeyed."""
    agents = agents_file(tmp_path)
    settings = scripted_settings(harness.model, agents_file=agents)
    hostile = f"eve{ESCAPES}" * 40
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 12, "to": hostile})]), Turn(text="sent")]
    )
    async with harness.worker(settings=settings, tools=[transfer]):
        handle = await harness.start("pay eve", model=model, agent_id="plain")
        await by_alice(harness, handle, approved=False)
        await handle.result()
    forged = f"loop-forged-{uuid.uuid4().hex[:8]}"
    await crafted(env, harness, [], forged)
    environment = env_of(env, harness, agents)
    code, said, err = await what_if("refunds", environment)
    assert code == 1, err
    assert said["summary"]["calls"] == 1 and said["summary"]["unreadable"] == 1
    [aside] = said["unreadable"]
    assert aside["workflow_id"] == forged
    [disagreement] = said["disagreements"]
    assert json.loads(disagreement["arguments"])["to"] == hostile  # --json: exactly as written
    code, out, err = await orga(
        "judge", "what-if", "refunds", "--since", "1h",
        "--task-queue", environment["ORGA_TASK_QUEUE"], env=environment,
    )  # fmt: skip
    assert code == 1
    assert f"orga: set aside a recorded request of {forged}" in err
    assert "the what-if is incomplete" in out
    assert_shown_safely(out)
    assert_shown_safely(err)
    assert "more characters; --json shows all" in out  # the arguments, cut short


async def test_what_if_reads_the_steps_people_decided_in_tasks(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """A task of agent ``plain`` whose two transfers alice decided: the judge is shown each
    step as a task's judge is (its agent, the task's steps)."""
    from orga.contracts.approvals import ApprovalDecision
    from orga.contracts.task import TaskState
    from orga.runtime.approver_keys import sign_decision
    from tests.helpers import ALICE, eventually

    agents = agents_file(tmp_path)
    steps = [
        {"id": f"pay-{n}", "action": {"kind": "tool", "tool": "transfer",
                                      "arguments": {"amount": n, "to": "eve"}}}
        for n in (12, 999_999)
    ]  # fmt: skip
    async with harness.worker(
        settings=scripted_settings(harness.model, agents_file=agents), tools=[transfer]
    ):
        handle = await harness.start_task(steps, agent_id="plain")
        for approved in (True, False):

            async def waiting() -> TaskState | None:
                state = await handle.query("state", result_type=TaskState)
                return state if state.pending_approvals else None

            [call] = (await eventually(waiting, "a step waits")).pending_approvals
            decision = ApprovalDecision(call_id=call.call_id, approved=approved, approver="alice")
            signed = sign_decision(decision, workflow_id=handle.id, pending=call, key=ALICE)
            await handle.execute_update("approve", signed)
        with pytest.raises(WorkflowFailureError):  # the denied step aborts the task
            await handle.result()
    code, said, err = await what_if("refunds", env_of(env, harness, agents))
    assert code == 0, err
    assert said["summary"]["calls"] == 2 and said["summary"]["agree"] == 1
    assert {(c["agent"], c["task"]) for c in said["calls"]} == {
        ("plain", "a task of 2 step(s): pay-12 (transfer), pay-999999 (transfer)")
    }


async def test_a_history_that_fails_as_it_starts_leaves_nothing_for_python_to_print(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """A crafted loop with no start input fails as its workflow starts and leaves the SDK's
    coroutine never awaited: the verbs' replays (``orga judge what-if``, ``orga audit``)
    collect it before they end, so no "never awaited" warning follows (nor, collected while a
    later replay runs sandboxed code, an "Exception ignored" traceback, as CI once printed);
    what cannot be raised within them is dropped, and Python's hook is back after."""
    from orga.cli.capture import replaying

    forged = f"loop-forged-{uuid.uuid4().hex[:8]}"
    await crafted(env, harness, [], forged)
    history = await env.client.get_workflow_handle(forged).fetch_history()
    hook = sys.unraisablehook
    left: list[str] = []
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        with replaying(TEST_STORE, []) as replay:
            for _ in range(3):
                with pytest.raises(RuntimeError, match="missing 1 required positional argument"):
                    await replay(history)
            sys.unraisablehook(cast(Any, None))  # dropped, not printed
        gc.collect()
        left.extend(str(warning.message) for warning in warned)
    assert left == []
    assert sys.unraisablehook is hook
