"""Delegation on a real dev server: child loops of other agents, on a budget carved from the
parent's, charged back when they return; never wider than their parent (its tools, its gate)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowExecutionDescription, WorkflowHandle

from orga.contracts.journal import DelegationFinished, DelegationStarted, Journal, PolicyEvaluated
from orga.contracts.policy import AncestorGate
from orga.contracts.state import LoopResult, LoopState
from orga.gates.cedar import SCHEMA_FILE
from orga.runtime.settings import Settings
from orga.scripted.server import RecordedRequest, Turn
from orga.tools.sdk import Tool, tool
from tests.harness import Harness, scripted_settings
from tests.helpers import POLICY_EXAMPLES, agents_file, eventually, loop_state, started_config


async def run_lead(
    harness: Harness, tmp_path: Path, models: dict[str, str], **config: Any
) -> tuple[WorkflowHandle[Any, LoopResult], LoopResult, LoopState, Journal]:
    settings = scripted_settings(harness.model, agents_file=agents_file(tmp_path, models))
    async with harness.worker(settings=settings):
        handle = await harness.start("Write a short report.", agent_id="lead", **config)
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
    return handle, result, state, journal


async def test_a_parent_delegates_to_two_agents_in_one_turn_and_pays_for_both(
    harness: Harness, tmp_path: Path
) -> None:
    models = {
        "lead": harness.new_model(
            [
                Turn(
                    tool_calls=[
                        ("delegate", {"agent": "research", "task": "Find the figure."}),
                        (
                            "delegate",
                            {"agent": "writer", "task": "Draft an intro.", "max_tokens": 5000},
                        ),
                    ],
                    input_tokens=100,
                    output_tokens=20,
                ),
                Turn(text="report: 42, with an intro", input_tokens=300, output_tokens=30),
            ]
        ),
        "research": harness.new_model(
            [Turn(text="the figure is 42", input_tokens=700, output_tokens=50, delay=0.5)]
        ),
        "writer": harness.new_model(
            [Turn(text="Once upon a report", input_tokens=900, output_tokens=100, delay=0.5)]
        ),
    }
    handle, result, state, journal = await run_lead(harness, tmp_path, models)
    assert result.output == "report: 42, with an intro"
    # Both children's spend is charged: 120 + 330 of its own, 750 + 1000 of theirs.
    assert result.usage.total_tokens == 120 + 330 + 750 + 1000
    by_agent = {d.agent: d for d in state.delegations}
    assert by_agent["research"].status == by_agent["writer"].status == "completed"
    assert by_agent["research"].usage.total_tokens == 750
    assert by_agent["writer"].usage.total_tokens == 1000
    assert by_agent["writer"].max_tokens == 5000  # what it asked for, under what was left
    # research asked for nothing: half of what was left (writer was given 5000 out of it)
    assert by_agent["research"].max_tokens == (100_000 - 120) // 2
    assert by_agent["research"].max_iterations == 23 // 2
    # The model read both answers as the calls' results.
    second = harness.model.requests_for(models["lead"])[1]
    assert sorted(second.tool_result_texts()) == ["Once upon a report", "the figure is 42"]
    # They ran side by side (each took half a second).
    [research_call] = harness.model.requests_for(models["research"])
    [writer_call] = harness.model.requests_for(models["writer"])
    assert abs(research_call.at - writer_call.at) < 0.45
    # The model was told whom it may hand work to.
    first = harness.model.requests_for(models["lead"])[0]
    assert any(
        m["role"] == "system" and "research: Finds facts" in str(m["content"])
        for m in first.body["messages"]
    )
    started = [e for e in journal.entries if isinstance(e, DelegationStarted)]
    finished = [e for e in journal.entries if isinstance(e, DelegationFinished)]
    assert {e.agent for e in started} == {e.agent for e in finished} == {"research", "writer"}
    # The children are child workflows of the parent, each as its own agent.
    child = harness.client.get_workflow_handle(by_agent["research"].workflow_id)
    description = await child.describe()
    assert description.parent_id == handle.id
    assert description.status is not None and description.status.name == "COMPLETED"
    child_config = await started_config(child)
    assert child_config.agent_id == "research"
    assert child_config.delegation_depth == 1
    harness.handles.append(child)


async def test_a_child_is_refused_when_the_parent_has_too_little_left(
    harness: Harness, tmp_path: Path
) -> None:
    models = {
        "lead": harness.new_model(
            [
                Turn(
                    tool_calls=[("delegate", {"agent": "research", "task": "Find it."})],
                    input_tokens=100,
                    output_tokens=700,
                ),
                Turn(text="I will do it myself", input_tokens=100, output_tokens=10),
            ]
        ),
        "research": harness.new_model([Turn(text="never asked")]),
        "writer": harness.new_model([]),
    }
    _, result, state, journal = await run_lead(harness, tmp_path, models, max_total_tokens=1_500)
    assert result.output == "I will do it myself"
    [refusal] = harness.model.requests_for(models["lead"])[1].tool_result_texts()
    assert "was refused" in refusal and "700 token(s)" in refusal
    assert harness.model.requests_for(models["research"]) == []  # no child was started
    [record] = state.delegations
    assert record.status == "refused" and record.usage.total_tokens == 0
    [finished] = [e for e in journal.entries if isinstance(e, DelegationFinished)]
    assert finished.status == "refused"


async def test_a_failed_child_comes_back_as_its_typed_failure_and_is_charged(
    harness: Harness, tmp_path: Path
) -> None:
    models = {
        "lead": harness.new_model(
            [
                Turn(
                    tool_calls=[("delegate", {"agent": "writer", "task": "x", "max_iterations": 1})]
                ),
                Turn(text="the writer failed"),
            ]
        ),
        "research": harness.new_model([]),
        "writer": harness.new_model(
            [Turn(tool_calls=[("add", {"a": 1, "b": 2})], input_tokens=400, output_tokens=40)]
        ),
    }
    _, result, state, _ = await run_lead(harness, tmp_path, models)
    [failure] = harness.model.requests_for(models["lead"])[1].tool_result_texts()
    assert "failed (" in failure  # the writer has no tools and one model call: it cannot go on
    [record] = state.delegations
    assert record.status == "failed" and record.usage.total_tokens == 440
    assert result.usage.total_tokens == 15 + 15 + 440


async def test_cancelling_the_parent_cancels_its_children(harness: Harness, tmp_path: Path) -> None:
    models = {
        "lead": harness.new_model(
            [Turn(tool_calls=[("delegate", {"agent": "writer", "task": "slowly"})])]
        ),
        "research": harness.new_model([]),
        "writer": harness.new_model([Turn(text="late", delay=30)]),
    }
    settings = scripted_settings(harness.model, agents_file=agents_file(tmp_path, models))
    async with harness.worker(settings=settings):
        handle = await harness.start("Go.", agent_id="lead")

        async def delegated() -> LoopState | None:
            state = await loop_state(handle)
            return state if state.delegations else None

        [record] = (await eventually(delegated, "a delegation started")).delegations
        await eventually(lambda: harness.model.requests_for(models["writer"]), "the writer asked")
        await handle.cancel()
        child = harness.client.get_workflow_handle(record.workflow_id)

        async def ended() -> WorkflowExecutionDescription | None:
            description = await child.describe()
            running = description.status is None or description.status.name == "RUNNING"
            return None if running else description

        description = await eventually(ended, "the child loop ended")
    assert description.status is not None and description.status.name == "CANCELED"


# ---- a child is never wider than its parent (issue 35) ---------------------------------------

ATTACK_AGENTS = """
[agents.lead]
description = "Plans and hands out work"
tools = ["plus", "wire_money"]
delegates = ["research"]
model = "{lead}"

[agents.research]
description = "Finds figures"
tools = ["plus", "wire_money"]
model = "{research}"
"""

NO_WIRE = """
@id("answers")
permit (principal, action == Action::"respond", resource);

@id("tools")
permit (principal, action == Action::"call_tool", resource);

@id("no-wire")
@reason("money is never wired by an agent")
forbid (principal, action == Action::"call_tool", resource == Tool::"wire_money");
"""

WIRE = ("wire_money", {"amount": 950_000, "to": "attacker"})


def money_tools(wired: list[int]) -> list[Tool]:
    @tool
    def plus(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: the first.
            b: the second.
        """
        return a + b

    @tool
    def wire_money(amount: int, to: str) -> str:
        """Wire money to an account.

        Args:
            amount: in cents.
            to: the account.
        """
        wired.append(amount)
        return f"wired {amount} to {to}"

    return [plus, wire_money]


def attack_settings(harness: Harness, tmp_path: Path, models: dict[str, str]) -> Settings:
    """The attacker's worker: ``lead`` and ``research`` may both wire money; the Cedar policy
    forbids it."""
    agents = tmp_path / "agents.toml"
    agents.write_text(ATTACK_AGENTS.format(**models))
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(POLICY_EXAMPLES / SCHEMA_FILE, policies / SCHEMA_FILE)
    (policies / "money.cedar").write_text(NO_WIRE)
    return scripted_settings(harness.model, agents_file=agents, policy_dir=policies)


def offered(request: RecordedRequest) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


async def test_a_lead_narrowed_to_plus_is_not_offered_delegate(
    harness: Harness, tmp_path: Path
) -> None:
    """The attack: ``lead`` started with ``tools=["plus"]`` and ``policy="cedar"`` calls
    ``delegate`` to have ``research`` wire the money. Before, delegate was offered and the
    child wired it under the ``default`` gate; the same forbid stops ``research`` directly."""
    wired: list[int] = []
    delegating = ("delegate", {"agent": "research", "task": "Wire 950000 to attacker."})
    models = {
        "lead": harness.new_model([Turn(tool_calls=[delegating]), Turn(text="could not")]),
        "research": harness.new_model([Turn(tool_calls=[WIRE]), Turn(text="refused")]),
    }
    async with harness.worker(
        settings=attack_settings(harness, tmp_path, models), tools=money_tools(wired)
    ):
        handle = await harness.start("Pay.", agent_id="lead", tools=["plus"], policy="cedar")
        assert (await handle.result()).output == "could not"
        state = await handle.query("state", result_type=LoopState)
        direct = await harness.start(
            "Pay.", agent_id="research", tools=["wire_money"], policy="cedar"
        )
        await direct.result()
    first, second = harness.model.requests_for(models["lead"])
    assert offered(first) == ["plus"]  # no delegate, and no word of whom it could hand work to
    assert not any("delegate" in str(m["content"]) for m in first.body["messages"])
    [refusal] = second.tool_result_texts()
    assert "'delegate' is not available to this agent (available: plus)" in refusal
    assert state.delegations == []
    # The same forbid stops the call in a loop started as research directly.
    [_, direct_answer] = harness.model.requests_for(models["research"])
    [direct_refusal] = direct_answer.tool_result_texts()
    assert "money is never wired by an agent (policy no-wire)" in direct_refusal
    assert wired == []


async def test_a_child_gets_what_its_parent_may_use_and_passes_its_parent_s_gate(
    harness: Harness, tmp_path: Path
) -> None:
    """Where ``delegate`` is allowed: narrowed to ``plus`` and ``delegate``, the child gets
    ``plus`` alone (asking for ``wire_money`` by name is refused); not narrowed, it gets both
    tools, and its ``wire_money`` call — under research's own ``default`` gate — is refused by
    the parent's Cedar forbid, judged as ``lead``."""
    wired: list[int] = []

    def delegating(**more: Any) -> Turn:
        return Turn(tool_calls=[("delegate", {"agent": "research", "task": "Wire it.", **more})])

    models = {
        "lead": harness.new_model(
            [
                Turn(
                    tool_calls=[
                        ("delegate", {"agent": "research", "task": "x", "tools": ["wire_money"]})
                    ]
                ),
                delegating(),
                Turn(text="narrowed: done"),
                delegating(),
                Turn(text="wide: done"),
            ]
        ),
        "research": harness.new_model([Turn(tool_calls=[WIRE]), Turn(text="refused")] * 2),
    }
    async with harness.worker(
        settings=attack_settings(harness, tmp_path, models), tools=money_tools(wired)
    ):
        narrowed = await harness.start(
            "Pay.", agent_id="lead", tools=["plus", "delegate"], policy="cedar"
        )
        assert (await narrowed.result()).output == "narrowed: done"
        narrow_child = await child_of(harness, narrowed)
        wide = await harness.start("Pay.", agent_id="lead", policy="cedar")
        assert (await wide.result()).output == "wide: done"
        wide_child = await child_of(harness, wide)
        child_journal = await wide_child.query("journal", result_type=Journal)
    lead_calls = harness.model.requests_for(models["lead"])
    [widened] = lead_calls[1].tool_result_texts()
    assert "'research' may not use ['wire_money']; its tools: ['plus']" in widened
    narrow_config, wide_config = (
        await started_config(narrow_child),
        await started_config(wide_child),
    )
    assert narrow_config.tools == ["plus"]
    assert wide_config.tools == ["plus", "wire_money"]
    gates = [AncestorGate(agent_id="lead", policy="cedar")]
    assert narrow_config.ancestor_gates == wide_config.ancestor_gates == gates
    narrow_first, narrow_second, wide_first, wide_second = harness.model.requests_for(
        models["research"]
    )
    assert offered(narrow_first) == ["plus"]
    assert "'wire_money' is not available to this agent" in narrow_second.tool_result_texts()[0]
    assert offered(wide_first) == ["plus", "wire_money"]
    [refused] = wide_second.tool_result_texts()
    assert "money is never wired by an agent (policy no-wire)" in refused
    assert "by the cedar gate of 'lead', up the delegation tree" in refused
    [decision] = [
        d
        for e in child_journal.entries
        if isinstance(e, PolicyEvaluated)
        for d in e.decisions
        if d.tool == "wire_money"
    ]
    assert (decision.decision, decision.policy_ids) == ("deny", ["no-wire"])
    assert wired == []


LEAST_PRIVILEGE_AGENTS = """
[agents.lead]
description = "Plans and hands out work: it sums nothing itself"
tools = ["plus"]
delegates = ["worker-b"]
model = "{lead}"

[agents.worker-b]
description = "Sums lists of integers"
tools = ["sum_ints"]
model = "{worker}"
"""


def sum_ints_tool(summed: list[list[int]]) -> Tool:
    @tool
    def sum_ints(values: list[int]) -> int:
        """Sum integers.

        Args:
            values: the integers.
        """
        summed.append(values)
        return sum(values)

    return sum_ints


async def test_an_orchestrator_hands_on_tools_it_does_not_hold_itself(
    harness: Harness, tmp_path: Path
) -> None:
    """Least privilege (issue 50): ``lead`` holds no ``sum_ints``, yet its child of agent
    ``worker-b`` is offered and runs it — a child's tools are its own agent's. A client that
    started ``lead`` naming ``plus`` and ``delegate`` still keeps ``sum_ints`` from the child:
    what the client at the top named bounds the whole tree."""
    summed: list[list[int]] = []
    delegating = Turn(tool_calls=[("delegate", {"agent": "worker-b", "task": "Sum 1, 2, 3."})])
    models = {
        "lead": harness.new_model(
            [delegating, Turn(text="wide: 6"), delegating, Turn(text="narrowed: done")]
        ),
        "worker": harness.new_model(
            [
                Turn(tool_calls=[("sum_ints", {"values": [1, 2, 3]})]),
                Turn(text="6"),
                Turn(tool_calls=[("sum_ints", {"values": [4, 5]})]),
                Turn(text="could not"),
            ]
        ),
    }
    agents = tmp_path / "agents.toml"
    agents.write_text(LEAST_PRIVILEGE_AGENTS.format(**models))
    settings = scripted_settings(harness.model, agents_file=agents)
    plus, _ = money_tools([])
    async with harness.worker(settings=settings, tools=[plus, sum_ints_tool(summed)]):
        wide = await harness.start("Sum 1, 2, 3.", agent_id="lead")
        assert (await wide.result()).output == "wide: 6"
        wide_child = await child_of(harness, wide)
        narrowed = await harness.start("Sum.", agent_id="lead", tools=["plus", "delegate"])
        assert (await narrowed.result()).output == "narrowed: done"
        narrow_child = await child_of(harness, narrowed)
        wide_config = await started_config(wide_child)
        narrow_config = await started_config(narrow_child)
    assert wide_config.tools == ["sum_ints"] and wide_config.client_tools is None
    assert narrow_config.tools == [] and narrow_config.client_tools == ["plus", "delegate"]
    wide_first, wide_second, narrow_first, narrow_second = harness.model.requests_for(
        models["worker"]
    )
    assert offered(wide_first) == ["sum_ints"]
    assert wide_second.tool_result_texts() == ["6"]
    assert offered(narrow_first) == []
    [refused] = narrow_second.tool_result_texts()
    assert "'sum_ints' is not available to this agent" in refused
    assert summed == [[1, 2, 3]]  # the narrowed tree's child never ran it
    # lead itself is never offered sum_ints
    assert all("sum_ints" not in offered(r) for r in harness.model.requests_for(models["lead"]))


async def child_of(harness: Harness, parent: WorkflowHandle[Any, Any]) -> WorkflowHandle[Any, Any]:
    [record] = (await parent.query("state", result_type=LoopState)).delegations
    child = harness.client.get_workflow_handle(record.workflow_id)
    harness.handles.append(child)  # replayed after the test, as the parent is
    return child
