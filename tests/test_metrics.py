"""The worker's Prometheus endpoint: the SDK's metrics and orga's, scraped after a few loops."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from orga.contracts.approvals import ApprovalDecision
from orga.contracts.journal import Journal, ObservationsCollected, Started, Terminated
from orga.core.metrics import METRICS, OTHER, KnownLabels, points
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import measured_harness, pending, scrape, total
from tests.sample_tools import transfer


def test_the_journal_decides_what_is_counted() -> None:
    from datetime import UTC, datetime

    stamp = {"seq": 1, "at": datetime(2026, 1, 1, tzinfo=UTC), "agent_id": "a", "iteration": 1}
    assert points(Started(**stamp), workflow="task") == []  # tasks count only how they end
    assert [p.metric for p in points(Terminated(**stamp, reason="end_turn"), workflow="loop")] == [
        "orga_loops_finished"
    ]
    every = {p.metric for p in points(Started(**stamp), workflow="loop")}
    assert every <= set(METRICS)


async def test_a_scrape_after_a_few_loops_counts_them(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    measured, address = await measured_harness(env, harness)
    agents = tmp_path / "agents.toml"  # agent labels name only the agents a file configures
    agents.write_text('[agents.counter]\ntools = ["add"]\n\n[agents.payer]\ntools = ["transfer"]\n')

    def adding() -> str:
        return measured.new_model(
            [
                Turn(tool_calls=[("add", {"a": 1, "b": 2})], input_tokens=100, output_tokens=10),
                Turn(text="3", input_tokens=120, output_tokens=5),
            ]
        )

    paying = measured.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 5, "to": "bo"})]), Turn(text="paid")]
    )
    settings = scripted_settings(measured.model, agents_file=agents)
    async with measured.worker(settings=settings, tools=[transfer]):
        for _ in range(2):
            await (
                await measured.start("1+2?", model=adding(), tools=["add"], agent_id="counter")
            ).result()
        payment = await measured.start(
            "pay bo", model=paying, tools=["transfer"], agent_id="payer", policy="default"
        )
        waiting = (await pending(payment)).pending_approvals[0]
        await payment.execute_update(
            "approve", ApprovalDecision(call_id=waiting.call_id, approved=False, approver="ann")
        )
        await payment.result()
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://{address}/metrics")).text
    harness.handles.extend(measured.handles)  # replayed at teardown, like every test's
    samples = scrape(text)
    loops_started = "orga_loops_started"
    assert total(samples, loops_started, agent="counter") == 2
    assert total(samples, loops_started, agent="payer") == 1
    finished = "orga_loops_finished"
    assert total(samples, finished, agent="counter", reason="end_turn") == 2
    tokens = "orga_tokens"
    assert total(samples, tokens, provider="openai", direction="input") >= 2 * 220
    assert total(samples, tokens, provider="openai", direction="output") >= 2 * 15
    tool_calls = "orga_tool_calls"
    assert total(samples, tool_calls, tool="add", outcome="ok") == 2
    assert total(samples, tool_calls, tool="transfer", outcome="denied") == 1
    decisions = "orga_policy_decisions"
    assert total(samples, decisions, decision="require_approval") == 1
    requested = "orga_approvals_requested"
    decided = "orga_approvals_decided"
    assert total(samples, requested, tool="transfer") == 1
    assert total(samples, decided, tool="transfer", verdict="denied") == 1
    latency = "orga_model_call_latency_count"
    assert total(samples, latency, provider="openai") == 6  # three loops, two calls each
    # The SDK's own runtime metrics come from the same endpoint.
    assert any(name.startswith("temporal_workflow_completed") for name in samples)
    assert not any("workflow_id" in labels for rows in samples.values() for labels, _ in rows)


async def test_a_model_or_a_client_cannot_add_series(
    env: WorkflowEnvironment, harness: Harness, tmp_path: Path
) -> None:
    """A tool name the model made up and the agent id of a refused loop are counted as
    ``other``: labels name only the tools and agents the worker resolved."""
    measured, address = await measured_harness(env, harness)
    agents = tmp_path / "agents.toml"
    agents.write_text('[agents.counter]\ntools = ["add"]\n')
    invented = "exfiltrate_" + "a" * 269  # 280 characters, chosen by the model
    intruder = f"intruder-{uuid.uuid4().hex}-" + "z" * 150  # an agent the worker does not have
    model = measured.new_model(
        [Turn(tool_calls=[(invented, {"x": 1}), ("add", {"a": 1, "b": 2})]), Turn(text="3")]
    )
    settings = scripted_settings(measured.model, agents_file=agents)
    async with measured.worker(settings=settings):
        answered = await measured.start("1+2?", model=model, tools=["add"], agent_id="counter")
        assert (await answered.result()).output == "3"
        refused = await measured.start("hi", model=model, agent_id=intruder)
        with pytest.raises(WorkflowFailureError) as failure:
            await refused.result()
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://{address}/metrics")).text
        journal = await answered.query("journal", result_type=Journal)
    harness.handles.extend(measured.handles)  # replayed at teardown, like every test's
    assert isinstance(failure.value.cause, ApplicationError)
    assert failure.value.cause.type == "InvalidConfig"
    assert f"there is no agent {intruder!r}" in str(failure.value.cause)
    # No series carries either string: both are counted, as "other".
    assert invented not in text and intruder not in text
    samples = scrape(text)
    labels = {v for rows in samples.values() for row, _ in rows for v in row.values()}
    assert not any(len(value) > 100 for value in labels)
    assert total(samples, "orga_tool_calls", tool="other") == 1
    assert total(samples, "orga_tool_calls", tool="add", outcome="ok") == 1
    assert total(samples, "orga_loops_started", agent="counter") == 1
    assert total(samples, "orga_loops_finished", agent="counter", reason="end_turn") == 1
    assert total(samples, "orga_loops_finished", agent="other", reason="InvalidConfig") == 1
    # Nothing is lost: the journal still names what the model called.
    [outcomes] = [e.outcomes for e in journal.entries if isinstance(e, ObservationsCollected)]
    assert [o.tool for o in outcomes] == [invented, "add"]
    assert outcomes[0].is_error


async def test_an_agent_id_no_agents_file_configures_is_other(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """The attack: on a worker without an agents file any ``agent_id`` runs (as the implicit
    agent), and the id the client chose was exported as a label value of
    ``orga_loops_started`` and ``orga_loops_finished``: one new series per id. Now only ids
    an agents file configures are labels; the journal still names the id."""
    measured, address = await measured_harness(env, harness)
    chosen = f"client-chosen-{uuid.uuid4().hex}"
    model = measured.new_model([Turn(text="hi")])
    async with measured.worker():
        handle = await measured.start("hi", model=model, agent_id=chosen)
        assert (await handle.result()).output == "hi"
        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://{address}/metrics")).text
        journal = await handle.query("journal", result_type=Journal)
    harness.handles.extend(measured.handles)  # replayed at teardown, like every test's
    assert chosen not in text
    samples = scrape(text)
    assert total(samples, "orga_loops_started", agent="other") == 1
    assert total(samples, "orga_loops_finished", agent="other", reason="end_turn") == 1
    assert {e.agent_id for e in journal.entries} == {chosen}


def test_known_labels_bound_only_tools_and_agents() -> None:
    known = KnownLabels(tools=frozenset({"add"}), agents=frozenset({"counter"}))
    assert known.bound({"tool": "add", "outcome": "ok"}) == {"tool": "add", "outcome": "ok"}
    assert known.bound({"tool": "x" * 280, "outcome": "denied"}) == {
        "tool": OTHER,
        "outcome": "denied",
    }
    assert known.bound({"agent": "intruder", "reason": "InvalidConfig"}) == {
        "agent": OTHER,
        "reason": "InvalidConfig",
    }
    assert KnownLabels().bound({"agent": "counter"}) == {"agent": OTHER}  # before the setup
